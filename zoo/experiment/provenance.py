"""Where a record was made: the zoo commit that made it (or the one a copy of the code declares), torch, Python,
the CPU and its kernels' instruction set, the runs that shared the machine, and the plugins imported. A record's
"provenance" field (zoo/experiment/record.py); the report's provenance section reads it back."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

COMMIT_ENV = "ZOO_COMMIT"


def zoo_commit() -> str:
    """The git commit of the zoo source in use, or 'unknown'. '+dirty' when the code itself (zoo/,
    registry/, pyproject.toml) has uncommitted changes; records and reports being written beside it
    do not count, or every report made in a checkout would call its own code dirty. Code copied without
    its git folder (a container, a rented GPU machine) has no commit to look up: $ZOO_COMMIT declares it.
    A plain (non-editable) install runs from site-packages, which is no checkout: the clone pip installed it
    from (its direct_url.json) is then asked, marked '+installed' since the clone may have moved on since."""
    declared = os.environ.get(COMMIT_ENV, "").strip()
    if declared:
        return declared
    here = _git_commit(Path(__file__).resolve().parents[2])
    if here is not None:
        return here
    installed_from = _installed_from()
    found = _git_commit(installed_from) if installed_from is not None else None
    return found + "+installed" if found is not None else "unknown"


def _git_commit(source: Path) -> str | None:
    """`source`'s commit (with '+dirty', zoo_commit's docstring), or None where it is no git checkout."""
    try:
        commit = subprocess.run(["git", "-C", str(source), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                                text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(source), "status", "--porcelain", "--untracked-files=no", "--",
                                "zoo", "registry", "pyproject.toml"], capture_output=True, text=True,
                               timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+dirty" if dirty else "") if commit else None


def _installed_from() -> Path | None:
    """The local folder pip installed zoo from (PEP 610 direct_url.json), or None."""
    from importlib import metadata

    from zoo.errors import DISTRIBUTION

    try:
        url = json.loads(metadata.distribution(DISTRIBUTION).read_text("direct_url.json") or "{}").get("url", "")
    except (metadata.PackageNotFoundError, ValueError):
        return None
    return Path(url.removeprefix("file://")) if url.startswith("file://") else None


def provenance(concurrent: int, commit: str = "", plugins: dict[str, str] | None = None) -> dict[str, Any]:
    """Where a record was made. `commit`: the code's commit when its grid started (a worker loads the
    code once; commits made while a grid runs are not what it runs); looked up now when not given.
    `plugins`: the definition's plugins ({name: sha256}), recorded with their versions."""
    import torch

    from zoo.machine import cpu_capability, cpu_model
    from zoo.plugins import loaded
    from zoo.version import __version__

    where = {"zoo": __version__, "commit": commit or zoo_commit(), "torch": torch.__version__,
             "python": platform.python_version(), "cpu": cpu_model(),
             # the instruction set PyTorch's CPU kernels use: with the CPU model and torch, what decides the floats
             "cpu_capability": cpu_capability(), "concurrent_runs": concurrent,
             "finished": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    if plugins:
        where["plugins"] = [{"name": p.label, "version": p.version, "sha256": p.sha256} for p in loaded()
                            if p.label in plugins]
    return where
