"""The run store: where each cell of a grid lives, what defines it, and who may work on it now.

    runs/<experiment>/<variant>/<task>/seed-<n>/            the run directory (zoo/rundir.py); not committed
    runs/<experiment>/.locks/<variant>/<task>/seed-<n>.lock  held by the process working on the cell
    reports/<experiment>/records/<variant>/<task>/seed-<n>.json   the cell's compact record (record.py);
                                                                   committed beside the report
    <root>/.stale/<UTC time>/<variant>/<task>/seed-<n>[...]  run directories and records of an older definition

A cell's *definition* is everything that decides its numbers: the model spec, the task's settings
and a fingerprint of its data files, the training config (seed included) and the decode settings.
Its digest is written into the run directory before training starts and into the record, so a run
or record made under another definition is recognised, moved aside (never deleted) and retrained;
numbers from two definitions can never meet in one statistic.

Locks are `fcntl.flock` locks on files outside the run directories (moving a run aside must not move
its lock). The kernel releases them when the holding process dies, `kill -9` included, so a lock
can never be left stuck. Every path the store writes is checked to stay under its root.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from zoo.errors import ZooError

# A name that becomes one path component: no separators, no '..', not hidden, not empty.
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+:=-]{0,99}")  # fullmatch: `$` let "x\n" through
STALE = ".stale"
LOCKS = ".locks"
RECORDS = "records"  # reports/<experiment>/records/


class StoreError(ZooError):
    """A path would leave its root, or a store file cannot be used; the message names it."""


def check_name(value: str, what: str) -> str:
    """`value` if it can name a folder safely; ValueError naming `what` otherwise."""
    if not isinstance(value, str) or not SAFE_NAME.fullmatch(value) or ".." in value:
        raise ValueError(f"{what}: {value!r} must start with a letter or digit and hold only letters, digits and "
                         "_ . + : = - (at most 100 characters, no '..'): it names a folder")
    return value


def inside(root: Path, path: Path) -> Path:
    """`path`, after checking that it resolves to a place under `root`."""
    resolved_root, resolved = Path(root).resolve(), Path(path).resolve()
    if resolved != resolved_root and resolved_root not in resolved.parents:
        raise StoreError(f"{path}: outside {root}; refusing to write there")
    return Path(path)


def refuse_links(root: Path, path: Path) -> None:
    """StoreError when a symbolic link lies between `root` and `path`, is `path`, or (for a folder) lies
    anywhere below it: a link planted under the store would make it write somewhere else."""
    root, path = Path(root), Path(path)
    candidates = [root / part for part in _prefixes(path.relative_to(root))] if path.is_relative_to(root) else [path]
    if path.is_dir() and not path.is_symlink():
        candidates += list(path.rglob("*"))
    for candidate in candidates:
        if candidate.is_symlink():
            raise StoreError(f"{candidate}: a symbolic link under {root}; zoo does not write through links "
                             "(remove it, or give --runs/--out a folder without links)")


def _prefixes(relative: Path) -> list[Path]:
    parts = relative.parts
    return [Path(*parts[: i + 1]) for i in range(len(parts))]


def cell_part(variant: str, task: str, seed: int) -> Path:
    """The relative path of a cell under a runs or records root."""
    return Path(variant) / task / f"seed-{seed}"


# -- definitions ------------------------------------------------------------------------------------
_FINGERPRINTS: dict[tuple[str, int, int], str] = {}


def file_fingerprint(path: Path) -> str:
    """sha256 of a file's bytes (first 16 hex digits), cached by path, size and modification time."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _FINGERPRINTS:
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        _FINGERPRINTS[key] = digest.hexdigest()[:16]
    return _FINGERPRINTS[key]


def data_fingerprint(task_config) -> dict[str, str] | None:
    """{'train.de': sha, ...} for a text task's files; {} for a synthetic task (its settings define
    it); None when the corpus cannot be found here (a report made on a machine without the data)."""
    from zoo.data.corpus import corpus_files, resolve_data_dir

    name = task_config.parsed
    if name.kind != "text":
        return {}
    try:
        folder = resolve_data_dir(task_config.data_dir) / name.corpus
        return {file: file_fingerprint(folder / file)
                for file in corpus_files(name.src, name.tgt, task_config.test_sets)}
    except (ZooError, OSError):
        return None


def definition(experiment, variant: str, task, seed: int) -> dict[str, Any]:
    """What decides the numbers of cell (variant, task, seed); see the module docstring. The data
    folder's location is not part of it (the same files elsewhere are the same data)."""
    from zoo.model.spec import SLOTS
    from zoo.plugins import sources_of

    task_config = experiment.task_config(task)
    spec = experiment.specs[variant]
    defined = {
        "spec": spec.model_dump(mode="json", exclude={"name", "description", "notes"}),
        "task": task_definition(task_config),
        "data": data_fingerprint(task_config),
        "train": train_definition(experiment.train_config(task, seed, variant)),
        "decode": experiment.config.decode.model_dump(mode="json"),
    }
    plugins = sources_of([spec.impl(slot) for slot in SLOTS] + task_classes(task_config))
    if plugins:  # only then: a cell of zoo's own components, task and metrics keeps the definition it always had
        defined["plugins"] = plugins
    return defined


def task_definition(config) -> dict[str, Any]:
    """A TaskConfig as a definition holds it: without where its data lies (the same files elsewhere are the same
    data), and without `test_sets` where it is the one set every task had before tasks could name more, so that
    every record made before then keeps its definition and digest."""
    from zoo.data.task import DEFAULT_TEST_SETS

    default = config.test_sets == DEFAULT_TEST_SETS
    return config.model_dump(mode="json", exclude={"data_dir", "test_sets"} if default else {"data_dir"})


def train_definition(config) -> dict[str, Any]:
    """A TrainConfig as a definition holds it. The reference kernels are left out, as they were before the
    fast path existed: every record made before it keeps its definition and its digest (which --reuse-from
    matches); a cell trained on the fast path says so, and is another definition."""
    return config.model_dump(mode="json", exclude={"kernels"} if config.kernels == "reference" else None)


def task_classes(task_config) -> list[type]:
    """A task's class and the classes of the metrics it is scored by: a plugin's task or metric, or a built-in one
    a plugin changed, whose plugin's sources then join the definitions that use them."""
    from zoo import metrics

    task = task_config.task_class
    return [task, *(type(metrics.get(name)) for name in task.metrics)]


def digest(value: dict[str, Any]) -> str:
    """16 hex digits of sha256 over the canonical JSON, without the data fingerprint when it is unknown."""
    payload = {k: v for k, v in value.items() if not (k == "data" and v is None)}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, sub in value.items():
            out.update(_flat(sub, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): value}


def normalise(recorded: dict[str, Any]) -> dict[str, Any]:
    """A recorded definition read by today's code: fields added to zoo since it was written take their
    defaults, which are what the record was made with (a new option's default keeps the old behaviour);
    a part that today's code rejects is left as it is, and will differ."""
    from zoo.data import TaskConfig
    from zoo.model.decode import DecodeSettings
    from zoo.model.spec import validate_spec
    from zoo.train import TrainConfig

    readers = {
        "spec": lambda v: validate_spec(v).model_dump(mode="json", exclude={"name", "description", "notes"}),
        "task": lambda v: task_definition(TaskConfig(**v)),
        "train": lambda v: train_definition(TrainConfig.model_validate(v)),
        "decode": lambda v: DecodeSettings.model_validate(v).model_dump(mode="json"),
    }
    out = dict(recorded)
    for key, read in readers.items():
        if isinstance(recorded.get(key), dict):
            try:
                out[key] = read(recorded[key])
            except (ZooError, ValueError):
                pass
    return out


def changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """'train.steps: 40 -> 80' for every field whose value differs between a recorded definition (read
    by today's code, see `normalise`) and the current one; an unknown data fingerprint on either side
    is not a change (it could not be checked)."""
    old = normalise(old)
    if old.get("data") is None or new.get("data") is None:
        old, new = {k: v for k, v in old.items() if k != "data"}, {k: v for k, v in new.items() if k != "data"}
    a, b = _flat(old), _flat(new)
    missing = "(absent)"
    return [f"{key}: {a.get(key, missing)} -> {b.get(key, missing)}" for key in sorted(set(a) | set(b))
            if a.get(key, missing) != b.get(key, missing)]


# -- records of other experiments -------------------------------------------------------------------
_DIGEST_FIELD = re.compile(r'"definition_digest":"([0-9a-f]{16})"')


def record_files(records_root: Path) -> list[Path]:
    """The current records under a records folder (<variant>/<task>/seed-<n>.json), sorted; records
    moved to .stale/ lie deeper and are not among them."""
    return sorted(Path(records_root).glob("*/*/seed-*.json"))


def record_digest(path: Path) -> str | None:
    """The definition digest a record carries, read from its text; None where there is no record there (or it
    names none). What tells a run directory whose `.experiment.json` is gone from another experiment's (owner.py)."""
    try:
        match = _DIGEST_FIELD.search(Path(path).read_text(errors="replace"))
    except OSError:
        return None
    return match.group(1) if match else None


def records_by_digest(report_folders: list[Path], exclude: Path) -> dict[str, Path]:
    """{definition digest: record path} over the records of other experiments' report folders
    (<folder>/records/<variant>/<task>/seed-<n>.json), leaving out `exclude` (the grid's own records)
    and stale ones. A record's definition decides its numbers, so a cell whose definition such a
    record has needs no training: the runner copies that record. The digest is read from the
    record's text (records are written with sorted keys, so the top-level field is found without
    parsing megabytes of JSON); the copy checks the whole definition."""
    by_digest: dict[str, Path] = {}
    skip = Path(exclude).resolve()
    for folder in report_folders:
        if not (Path(folder) / RECORDS).is_dir():
            raise StoreError(f"--reuse-from: {folder} holds no {RECORDS}/ folder (give a report folder, such as "
                             "reports/budget-pilot)")
        for path in record_files(Path(folder) / RECORDS):
            if path.resolve().is_relative_to(skip):
                continue
            match = _DIGEST_FIELD.search(path.read_text(errors="replace"))
            if match:
                by_digest.setdefault(match.group(1), path)
    return by_digest


# -- moving aside -----------------------------------------------------------------------------------
def stamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")


def move_aside(path: Path, root: Path, when: str) -> Path:
    """Move `path` (under `root`) to root/.stale/<when>/<same relative path>; returns where it went."""
    relative = inside(root, path).resolve().relative_to(Path(root).resolve())
    target = inside(root, Path(root) / STALE / when / relative)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(path), str(target))
    return target


# -- locks ------------------------------------------------------------------------------------------
_run_pid: int | None = None  # in a worker process: the `zoo run` it works for


def work_for(run_pid: int) -> None:
    """In a worker process of a `zoo run`: the locks it takes name that run, so the run's view shows the cells
    its own workers train as its own, and another run names the `zoo run` to wait for, not a worker of it."""
    global _run_pid
    _run_pid = run_pid


class CellLock:
    """An exclusive flock on runs/<experiment>/.locks/<cell>.lock; the pid of the `zoo run` holding it (itself,
    or the run whose worker holds it) is written into it so another runner can say who holds it. Released on
    `release()`, on exit, or when the process dies."""

    def __init__(self, path: Path):
        self.path, self.fd = Path(path), None

    def acquire(self, blocking: bool = False) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise StoreError(f"{self.path}: a symbolic link; zoo does not write through links") from None
            raise
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"{_run_pid or os.getpid()}\n".encode())
        self.fd = fd
        return True

    def release(self) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None

    def holder(self) -> int | None:
        """The pid of the `zoo run` holding the lock now, or None if nobody (other than us) holds it."""
        if self.fd is not None or not self.path.exists():
            return None
        fd = os.open(self.path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.read(fd, 32).decode(errors="replace").strip()
            return int(text) if text.isdigit() else -1
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    def __enter__(self) -> CellLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
