"""How a report names files: relative to the repository that holds the experiment file, whatever folder
`zoo report` ran in. Named relative to the working folder, the same records made another report.md from
another folder (`## Experiment file ../work/main/experiments/quickstart.toml`), and the command it quotes
could not be typed again where the report lives.
"""

from __future__ import annotations

from pathlib import Path

MARKERS = ("pyproject.toml", ".git")  # what a repository's root holds


def repository(experiment_file: Path) -> Path | None:
    """The root of the repository that holds `experiment_file`: the nearest folder above it holding a
    pyproject.toml or a .git; None for a file outside any repository."""
    folder = Path(experiment_file).resolve().parent
    return next((above for above in (folder, *folder.parents) if any((above / m).exists() for m in MARKERS)), None)


def home(experiment_file: Path) -> Path:
    """Where a report names files from: the experiment's `repository`, else the file's own folder."""
    return repository(experiment_file) or Path(experiment_file).resolve().parent


def shown(experiment_file: Path, path: Path | str | None = None) -> str:
    """`path` (default: the experiment file) as a report writes it: relative to the experiment's repository
    (`home`), or absolute where it lies outside it."""
    full, root = Path(experiment_file if path is None else path).resolve(), home(experiment_file)
    return full.relative_to(root).as_posix() if full.is_relative_to(root) else full.as_posix()
