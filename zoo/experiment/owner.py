"""Which experiment a store belongs to: a records folder (reports/<experiment>/records) or a runs root
(runs/<experiment>) holds one experiment's cells, and nothing else writes into it.

Without this, `zoo run other.toml --out reports/fx` (or a copy of fx's experiment file whose `name` was left
as it was) would find fx's records "of another definition", move them to .stale/ and train over them. So a
store names its owner in `.experiment.json`: the experiment's name and its file, as a path relative to the
store (the two move together, into a fresh clone or onto a GPU machine). A run of another experiment, or of
another file with the same name while the owner's file still exists, is refused before anything moves.
A store written before owners were named is claimed by the experiment its records name; a store whose
owner's file is gone (the experiment file was moved or renamed) is claimed by the file that runs into it.

A runs root holds no records, and its run directories do not name their experiment; their definitions say
what they are. So a runs root without `.experiment.json` is claimed only when every run directory in it that
holds a checkpoint and its definition is this experiment's: of the definition it gives that cell now, or of
the record at the same place in its records folder. One that is neither is another experiment's checkpoint (or
this one's of an earlier definition with no record left, which only its user can tell): refused, nothing
moved. A runs root none of whose run directories holds both is claimed freely: none trained as far as a
checkpoint (moving it aside loses nothing), or a zoo too old to write definitions wrote them.

Every writer into a store goes through `check` / `claim` here: `zoo run` (both stores), `zoo report` and
the trivial floors (floors.py; the records folder).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from zoo import rundir
from zoo.atomic import write_text_atomic
from zoo.experiment.store import StoreError, changes, definition, digest, record_digest, record_files

OWNER = ".experiment.json"
_SEED = re.compile(r"seed-(\d+)")  # a run directory's last part
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


def strangers(experiment, runs_root: Path, records_root: Path) -> list[str]:
    """The run directories under `runs_root` (<variant>/<task>/seed-<n>, as paths relative to it) with a checkpoint
    whose recorded definition is neither the one `experiment` gives that cell now nor that of the record at the
    same place in `records_root`. Run directories without a checkpoint or a readable definition.json are not among
    them: they hold nothing trained, or nothing that names whose it is."""
    from zoo.train.checkpoint import FILE, LEGACY_FILE

    tasks = {task.key: task for task in experiment.config.tasks}
    found = []
    for path in sorted(Path(runs_root).glob(f"*/*/seed-*/{rundir.DEFINITION}")):
        variant, task, seed = path.parts[-4:-1]
        number = _SEED.fullmatch(seed)
        if variant.startswith(".") or number is None:  # .stale/ and .locks/ hold no cell of their own
            continue
        if not any((path.parent / name).is_file() for name in (FILE, LEGACY_FILE)):
            continue
        try:
            recorded = rundir.read_table(path)
        except rundir.RunError:
            continue
        if not isinstance(recorded.get("definition"), dict):
            continue
        if variant in experiment.specs and task in tasks:
            current = definition(experiment, variant, tasks[task], int(number.group(1)))
            if recorded.get("digest") == digest(current) or not changes(recorded["definition"], current):
                continue
        record = Path(records_root) / variant / task / f"{seed}.json"
        if recorded.get("digest") and record_digest(record) == recorded["digest"]:
            continue
        found.append(f"{variant}/{task}/{seed}")
    return found


def check_runs(experiment, runs_root: Path, records_root: Path) -> None:
    """`check` the runs root; where no owner file names its experiment, StoreError (one line) when any of its run
    directories is a stranger's (`strangers`): a runs root is claimed only when every checkpoint in it is its own."""
    check(runs_root, experiment.name, experiment.path, "--runs")
    if (Path(runs_root) / OWNER).is_file():
        return
    found = strangers(experiment, runs_root, records_root)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise StoreError(f"{runs_root}: no {OWNER} names its experiment, and its run directory {found[0]}{more} holds "
                         f"a checkpoint of a definition that is no cell of '{experiment.name}' and no record in "
                         f"{records_root}: another experiment's checkpoints; nothing was moved; give "
                         f"'{experiment.name}' a runs folder of its own (--runs another folder), or, if they are its "
                         f"own of an earlier definition, move them out of {runs_root} first")


def check_grid(experiment, runs_root: Path, records_root: Path) -> None:
    """`check` both stores of `experiment`'s grid (the runs root by `check_runs`): before floors, records or run
    directories are touched."""
    check(records_root, experiment.name, experiment.path, "--out")
    check_runs(experiment, runs_root, records_root)


def claim_grid(experiment, runs_root: Path, records_root: Path) -> None:
    """`claim` both stores of `experiment`'s grid for it, once both are checked."""
    check_grid(experiment, runs_root, records_root)
    for root, flag in stores(runs_root, records_root):
        claim(root, experiment.name, experiment.path, flag)
