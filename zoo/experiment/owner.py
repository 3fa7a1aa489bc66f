"""Which experiment a store belongs to: a records folder (reports/<experiment>/records) or a runs root
(runs/<experiment>) holds one experiment's cells, and nothing else writes into it.

Without this, `zoo run other.toml --out reports/fx` (or a copy of fx's experiment file whose `name` was left
as it was) would find fx's records "of another definition", move them to .stale/ and train over them. So a
store names its owner in `.experiment.json`: the experiment's name and its file, as a path relative to the
store (the two move together, into a fresh clone or onto a GPU machine). A run of another experiment, or of
another file with the same name while the owner's file still exists, is refused before anything moves.
A store written before owners were named is claimed by the experiment its records name; a store whose
owner's file is gone (the experiment file was moved or renamed) is claimed by the file that runs into it.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from zoo.atomic import write_text_atomic
from zoo.experiment.store import StoreError, record_files

OWNER = ".experiment.json"
_EXPERIMENT_FIELD = re.compile(r'"cell":\{"experiment":"((?:[^"\\]|\\.)*)"')  # records are written with sorted keys


def _relative(path: Path, root: Path) -> str:
    return Path(os.path.relpath(Path(path).resolve(), Path(root).resolve())).as_posix()


def recorded_owner(root: Path) -> dict[str, str] | None:
    """{'experiment': name, 'file': path relative to `root`} from the owner file, else the name the first
    record under `root` carries (a store written before owners were named), else None (an empty store)."""
    owner_file = Path(root) / OWNER
    if owner_file.is_file():
        try:
            owner = json.loads(owner_file.read_text())
            if isinstance(owner, dict) and isinstance(owner.get("experiment"), str):
                return {"experiment": owner["experiment"], "file": str(owner.get("file") or "")}
        except (OSError, ValueError):
            pass
        raise StoreError(f"{owner_file}: not a store's owner file (it names the experiment the store belongs to); "
                         "remove it only if you know which experiment's records are here")
    for path in record_files(root):
        match = _EXPERIMENT_FIELD.search(path.read_text(errors="replace")[:4096])
        if match:
            return {"experiment": json.loads(f'"{match.group(1)}"'), "file": ""}
    return None


def check(root: Path, name: str, experiment_file: Path, what: str) -> None:
    """StoreError (one line naming the owner) when the store at `root` belongs to another experiment than
    `name` of `experiment_file`; nothing is written. `what` says which store it is (--out, --runs)."""
    owner = recorded_owner(root)
    if owner is None:
        return
    if owner["experiment"] != name:
        raise StoreError(f"{root}: this store holds experiment '{owner['experiment']}', not '{name}'; nothing was "
                         f"moved; give '{name}' a store of its own ({what} another folder)")
    if owner["file"]:
        theirs = (Path(root) / owner["file"]).resolve()
        if theirs != Path(experiment_file).resolve() and theirs.is_file():
            raise StoreError(f"{root}: this store belongs to experiment '{name}' of {theirs}; {experiment_file} is "
                             f"another file with the same name, so nothing was moved; give it a name of its own "
                             f"or {what} another folder")


def claim(root: Path, name: str, experiment_file: Path, what: str) -> None:
    """`check`, then name this experiment as the store's owner (the folder is created if needed)."""
    check(root, name, experiment_file, what)
    owner = {"experiment": name, "file": _relative(experiment_file, root)}
    owner_file = Path(root) / OWNER
    if owner_file.is_file() and recorded_owner(root) == owner:
        return
    Path(root).mkdir(parents=True, exist_ok=True)
    write_text_atomic(owner_file, json.dumps(owner, sort_keys=True, indent=2) + "\n")


def stores(runs_root: Path, records_root: Path) -> list[tuple[Path, str]]:
    """The two stores of a grid, each with the flag that names it."""
    return [(Path(records_root), "--out"), (Path(runs_root), "--runs")]


def check_grid(experiment, runs_root: Path, records_root: Path) -> None:
    """`check` both stores of `experiment`'s grid: before floors, records or run directories are touched."""
    for root, flag in stores(runs_root, records_root):
        check(root, experiment.name, experiment.path, flag)


def claim_grid(experiment, runs_root: Path, records_root: Path) -> None:
    """`claim` both stores of `experiment`'s grid for it."""
    for root, flag in stores(runs_root, records_root):
        claim(root, experiment.name, experiment.path, flag)
