"""`zoo run`: expand an experiment's grid and run each cell into its run directory and its record.

Where things live, what defines a cell and how cells are locked: zoo/experiment/store.py. For each
cell, under its lock:

1. a record of the same definition is there (committed, or from an earlier run): skip the cell;
2. a record or run directory of another definition is there: move it aside (runs/.stale, records/.stale)
   and start again; the grid's first lines name such cells and what changed;
3. the records of another experiment named with `--reuse-from` hold one of the same definition: copy
   it, with `provenance.copied_from` naming the original (the definition decides the numbers, and
   training is deterministic on one machine, so training it again would repeat that record);
4. otherwise train (resuming from the run directory's last checkpoint), decode the test set, and
   write the record, last: the record's presence marks the cell done.

Any exception while running or recording a cell, I/O errors included, becomes that cell's failed
record (or, where that cannot be written, its failed.json, or at least a line in the final summary);
the grid goes on, and the next `zoo run` retries the cell. A cell locked by another `zoo run` is
left to it at first, then waited for at the end. Worker processes exit when their parent dies.
Executors: `local` (in this process, or N worker processes splitting the CPU threads) and `ray`
(each cell a Ray task; run directories and records on a filesystem every node shares). The live
display reads only the store, so it works the same for every executor.
"""

from __future__ import annotations

import os
import threading
import time
import traceback
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from zoo import rundir
from zoo.atomic import TEMP_SUFFIX
from zoo.errors import ZooError
from zoo.experiment import record as records
from zoo.experiment import store
from zoo.plugins import PluginError, load_all
from zoo.plugins import loaded as loaded_plugins


@dataclass(frozen=True)
class Cell:
    """One (variant, task, seed) of the grid; plain data so it can travel to a worker or a Ray node."""

    experiment: str  # path of the experiment file
    experiment_name: str
    variant: str
    task: str  # TaskEntry.key
    seed: int
    runs_root: str
    records_root: str
    concurrent: int = 1  # runs sharing the machine with this one (recorded as provenance)
    commit: str = ""  # the code's commit when the grid started (recorded as provenance)
    reuse: str = ""  # another experiment's record of the same definition, copied instead of training
    plugins: tuple[str, ...] = ()  # the plugins the parent loaded (zoo/plugins.py), loaded again by a worker
    log_to: str = ""  # a TensorBoard folder the cell's curves are also written to while it trains

    @property
    def name(self) -> str:
        return f"{self.variant}/{self.task}/seed-{self.seed}"

    @property
    def out(self) -> Path:
        return store.inside(Path(self.runs_root), Path(self.runs_root) / store.cell_part(self.variant, self.task,
                                                                                          self.seed))

    @property
    def record(self) -> Path:
        part = store.cell_part(self.variant, self.task, self.seed)
        return store.inside(Path(self.records_root), Path(self.records_root) / part.with_name(part.name + ".json"))

    @property
    def lock(self) -> store.CellLock:
        part = store.cell_part(self.variant, self.task, self.seed)
        return store.CellLock(Path(self.runs_root) / store.LOCKS / part.with_name(part.name + ".lock"))


def cells(experiment, runs_root: Path, records_root: Path, concurrent: int = 1, commit: str = "") -> list[Cell]:
    """The grid in run order: task by task, and within a task seed by seed across all variants, so a
    grid stopped part-way (a session's end) leaves every variant with the same seeds, ready to compare."""
    runs, kept = str(Path(runs_root).resolve()), str(Path(records_root).resolve())
    seeds = {seed: i for i, seed in enumerate(experiment.config.seeds)}
    tasks = {task.key: i for i, task in enumerate(experiment.config.tasks)}
    ordered = sorted(experiment.grid(), key=lambda cell: (tasks[cell[1].key], seeds[cell[2]]))  # stable: variants
    plugins = tuple(plugin.where for plugin in loaded_plugins())
    return [Cell(str(experiment.path.resolve()), experiment.name, variant, task.key, seed, runs, kept, concurrent,
                 commit, plugins=plugins) for variant, task, seed in ordered]


def read_record(path: Path) -> dict | None:
    """The record at `path`, or None when there is none or it is unreadable (then it is moved aside)."""
    if not path.exists():
        return None
    try:
        return records.read(path)
    except rundir.RunError:
        return {"status": "corrupt", "definition": {}}


def cell_state(cell: Cell, current: dict) -> tuple[str, list[str]]:
    """('recorded' | 'stale' | 'todo', what changed) for a cell whose definition is now `current`.
    A failed record is no result: the cell is run again (and its record replaced)."""
    found = read_record(cell.record)
    if found is not None and found["status"] == "corrupt":
        return "stale", [f"{cell.record} cannot be read"]
    if found is not None and found["status"] != "failed":
        changed = store.changes(found["definition"], current)
        return ("stale", changed) if changed else ("recorded", [])
    defined = cell.out / rundir.DEFINITION
    if defined.exists():
        try:
            changed = store.changes(rundir.read_table(defined).get("definition", {}), current)
        except rundir.RunError:
            changed = [f"{defined} cannot be read"]
        return ("stale" if changed else "todo"), changed
    if (cell.out / rundir.SPEC).exists():
        return "stale", ["a run directory without definition.json (written by an older zoo)"]
    return "todo", []


def _move_aside(path: Path, root: Path) -> None:
    if path.exists():
        store.move_aside(path, root, store.stamp())


def _run_cell(cell: Cell, threads: int | None) -> str:
    """Train, evaluate and record one cell; the caller holds its lock."""
    import torch

    from zoo.data import load_task
    from zoo.decode import DecodeConfig
    from zoo.evaluate import evaluate
    from zoo.experiment.config import load_experiment
    from zoo.train import Trainer, fit_to_task, load_run, save_evaluation

    if threads:
        torch.set_num_threads(threads)
    store.refuse_links(Path(cell.runs_root), cell.out)  # before anything is written there
    store.refuse_links(Path(cell.records_root), cell.record)
    rundir.clean_temporaries(cell.record.parent, f".{cell.record.name}.*{TEMP_SUFFIX}")  # a kill before its rename
    experiment = load_experiment(cell.experiment)
    entry = next(t for t in experiment.config.tasks if t.key == cell.task)
    current = store.definition(experiment, cell.variant, entry, cell.seed)
    digest = store.digest(current)
    state, _ = cell_state(cell, current)
    if state == "recorded":
        return records.read(cell.record)["status"]
    if state == "stale":
        _move_aside(cell.record, Path(cell.records_root))
        _move_aside(cell.out, Path(cell.runs_root))
    if cell.reuse:
        copied = _copy_record(cell, current)
        if copied:
            return copied
    out = cell.out
    rundir.clean_temporaries(out)
    (out / rundir.FAILED).unlink(missing_ok=True)
    if not (out / rundir.DEFINITION).exists():
        rundir.write_json(out / rundir.DEFINITION, {"definition": current, "digest": digest})
    spec = experiment.specs[cell.variant]
    task = load_task(experiment.task_config(entry), pad_id=spec.pad_id)
    log_to = Path(cell.log_to) / cell.variant / cell.task / f"seed-{cell.seed}" if cell.log_to else None
    summary = Trainer(fit_to_task(spec, task), task, experiment.train_config(entry, cell.seed, cell.variant), out,
                      resume=True, progress=False, log_to=log_to).run()
    if summary["status"] == "complete" and not (out / f"{rundir.TEST}.json").exists():
        model, task, _ = load_run(out)
        settings = experiment.config.decode
        metrics, hypotheses = evaluate(model, task, "test", DecodeConfig(
            beam=settings.beam, alpha=settings.alpha, max_ratio=settings.max_ratio, max_extra=settings.max_extra))
        save_evaluation(out, rundir.TEST, metrics, hypotheses)
    head = records.base(_cell_fields(cell), current, digest, cell.concurrent, cell.commit)
    records.write(cell.record, records.from_run(out, head))  # last: the record marks the cell done
    return summary["status"]


def _copy_record(cell: Cell, current: dict) -> str:
    """Write `cell.reuse` (another experiment's record) as this cell's record when its definition is
    `current` and it holds a result; returns its status, or '' when it cannot stand for this cell."""
    source = Path(cell.reuse)
    try:
        found = records.read(source)
    except rundir.RunError:
        return ""
    if found["status"] not in ("complete", "diverged") or store.changes(found["definition"], current):
        return ""
    origin, made = found["cell"], found.get("provenance", {})
    # a copy of a copy names the record that was trained
    copied_from = made.get("copied_from") or f"{origin['experiment']}/{origin['variant']}/{origin['task']}/" \
                                             f"seed-{origin['seed']}"
    copy = {**found, "cell": _cell_fields(cell), "provenance": {**made, "copied_from": copied_from}}
    records.write(cell.record, copy)
    return found["status"]


def _cell_fields(cell: Cell) -> dict:
    return {"experiment": cell.experiment_name, "variant": cell.variant, "task": cell.task, "seed": cell.seed}


def _record_failure(cell: Cell, err: BaseException) -> str:
    """Write the failure where it can be written: the record, else failed.json; returns the reason.
    A result already recorded (complete or diverged) is never replaced by a failure: the failure may
    come before the cell could even be checked (an experiment file made unreadable while the grid runs),
    so the record is left as it is and the failure goes to failed.json."""
    reason = " ".join(f"{type(err).__name__}: {err}".split())
    trace = traceback.format_exc()
    kept = (read_record(cell.record) or {}).get("status") in ("complete", "diverged")
    places = [] if kept else [lambda: records.write(cell.record, records.failed(
        records.base(_cell_fields(cell), {}, "", cell.concurrent, cell.commit), reason, trace))]
    places.append(lambda: rundir.write_json(cell.out / rundir.FAILED, {"reason": reason, "traceback": trace}))
    if kept:
        reason += " (its recorded result is kept)"
    for write in places:
        try:
            write()
            return reason
        except Exception:  # noqa: BLE001,S112 - try the next place; the reason is returned either way
            continue
    return reason + " (and it could not be recorded: the store is not writable)"


def execute(cell: Cell, threads: int | None = None, wait: bool = False) -> tuple[str, str]:
    """Run one cell to the end; never raises. Returns (status, reason): status is complete | diverged |
    failed | locked (another process holds the cell and `wait` is False)."""
    lock = cell.lock
    try:
        load_all(cell.plugins, environment=False)  # a worker process starts without the parent's plugins
        store.refuse_links(Path(cell.runs_root), lock.path)
        if not lock.acquire(blocking=wait):
            return "locked", f"held by another zoo run (pid {lock.holder()})"
        return _run_cell(cell, threads), ""
    except Exception as err:  # noqa: BLE001 - a failing cell is recorded, and the grid goes on
        return "failed", _record_failure(cell, err)
    finally:
        lock.release()


# -- the live view ---------------------------------------------------------------------------------
def view_state(cell: Cell) -> str:
    if cell.record.exists():
        found = read_record(cell.record)
        return found["status"] if found and found["status"] != "corrupt" else "failed"
    state = rundir.status(cell.out)
    if state in ("pending", "started", "evaluating") and cell.lock.holder() not in (None, os.getpid()):
        return f"{state} elsewhere" if state != "pending" else "locked"
    return state


def _progress(out: Path) -> tuple[str, float | None]:
    """A short line on a started cell (step, loss, tokens/s) and its fraction done, from its files."""
    try:
        rows = [r for r in rundir.read_metrics(out / rundir.METRICS) if "event" not in r]
        config = rundir.read_table(out / rundir.TRAIN)
    except rundir.RunError:
        return "", None
    if not rows:
        return "", None
    last = rows[-1]
    parts = [last["step"] / config["steps"] if config.get("steps") else 0.0,
             last.get("epoch", 0) / config["epochs"] if config.get("epochs") else 0.0,
             last.get("seconds", 0) / (60 * config["minutes"]) if config.get("minutes") else 0.0]
    line = f"step {last['step']}  loss {last.get('loss', float('nan')):.3f}  {last.get('tok_per_s', 0):,.0f} tok/s"
    return line, min(1.0, max(parts))


STYLE = {"complete": "green", "diverged": "yellow", "failed": "red", "started": "cyan", "evaluating": "cyan",
         "pending": "dim", "locked": "magenta", "started elsewhere": "magenta", "evaluating elsewhere": "magenta"}


class GridView:
    """Rich renderable of the grid, re-read from the store on every refresh."""

    def __init__(self, title: str, grid: list[Cell], notes: dict[str, str] | None = None):
        self.title, self.grid, self.started = title, grid, time.time()
        self.first_seen: dict[str, float] = {}
        self.notes = notes if notes is not None else {}  # cell name -> failure reason from this process

    def __rich__(self):
        states = {cell.name: view_state(cell) for cell in self.grid}
        table = Table(title=self.title, title_justify="left", expand=False)
        for column in ("variant", "task", "seed", "status", "progress"):
            table.add_column(column)
        for cell in self.grid:
            state = states[cell.name]
            detail = ""
            if state in ("started", "evaluating", "started elsewhere"):
                line, fraction = _progress(cell.out)
                seen = self.first_seen.setdefault(cell.name, time.time())
                eta = ""
                if fraction and fraction > 0.02 and state == "started":
                    eta = f"  ETA {max(0.0, (time.time() - seen) * (1 - fraction) / fraction):.0f} s"
                detail = line + (f"  {fraction:.0%}" if fraction is not None else "") + eta
            elif state in ("failed", "diverged"):
                found = read_record(cell.record)
                detail = (found or {}).get("reason") or self.notes.get(cell.name, "")
            elif state in ("locked", "evaluating elsewhere"):
                detail = f"another zoo run (pid {cell.lock.holder()}) works on it; waiting"
            table.add_row(cell.variant, cell.task, str(cell.seed), f"[{STYLE.get(state, 'white')}]{state}[/]",
                          escape(detail[:100]))  # a reason quotes user input: never markup
        counts: dict[str, int] = {}
        for state in states.values():
            counts[state] = counts.get(state, 0) + 1
        summary = "  ".join(f"{k}: {v}" for k, v in counts.items())
        return Group(table, f"{summary}   elapsed {time.time() - self.started:.0f} s")


# -- executors -------------------------------------------------------------------------------------
def _watch_parent(parent: int) -> None:
    """In a worker: exit as soon as the parent is gone (a kill -9 of `zoo run` must not leave workers
    training into the store; their locks are released by the kernel when they exit)."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def _local(grid: list[Cell], workers: int, results: dict[str, tuple[str, str]]) -> None:
    def phase(todo: list[Cell], wait: bool) -> None:
        if workers <= 1 or len(todo) <= 1:
            for cell in todo:
                results[cell.name] = execute(cell, None, wait)
            return
        import multiprocessing

        threads = max(1, (os.cpu_count() or 1) // workers)
        context = multiprocessing.get_context("spawn")
        with context.Pool(min(workers, len(todo)), initializer=_watch_parent, initargs=(os.getpid(),)) as pool:
            jobs = [(cell, threads, wait) for cell in todo]  # chunksize 1: cells start in grid order
            for cell, outcome in zip(todo, pool.starmap(execute, jobs, chunksize=1)):
                results[cell.name] = outcome

    phase(grid, wait=False)
    phase([cell for cell in grid if results[cell.name][0] == "locked"], wait=True)  # left to another run: wait


def _ray(grid: list[Cell], address: str | None, threads: int, results: dict[str, tuple[str, str]]) -> None:
    try:
        import ray
    except ImportError:
        raise ZooError("executor: 'ray' needs the ray extra: pip install '.[ray]'") from None
    ray.init(address=address, ignore_reinit_error=True, include_dashboard=False, log_to_driver=False)
    plugins = grid[0].plugins if grid else ()
    problem = ray.get(ray.remote(num_cpus=threads)(_load_plugins).remote(plugins)) if plugins else ""
    if problem:  # before any cell starts: nothing trains with a plugin missing
        raise PluginError(f"on a Ray worker: {problem}")
    remote = ray.remote(num_cpus=threads)(execute)
    for cell, outcome in zip(grid, ray.get([remote.remote(cell, threads, True) for cell in grid])):
        results[cell.name] = outcome


def _load_plugins(plugins: tuple[str, ...]) -> str:
    """Load the plugins in a worker; the reason they cannot be loaded there, or ''."""
    try:
        load_all(plugins, environment=False)
    except PluginError as err:
        return str(err)
    return ""


def plan(experiment, grid: list[Cell]) -> dict[str, list[str]]:
    """{cell name: what changed} for the cells whose record or run directory is of another definition."""
    stale = {}
    for cell in grid:
        entry = next(t for t in experiment.config.tasks if t.key == cell.task)
        state, changed = cell_state(cell, store.definition(experiment, cell.variant, entry, cell.seed))
        if state == "stale":
            stale[cell.name] = changed
    return stale


def reusable(experiment, grid: list[Cell], report_folders: list[Path]) -> list[Cell]:
    """The grid with `reuse` set on every cell not recorded under its current definition (no record,
    or a stale one) while the records of `report_folders` (other experiments') hold one of the same
    definition digest."""
    if not grid or not report_folders:
        return grid
    found = store.records_by_digest(report_folders, exclude=Path(grid[0].records_root))
    out = []
    for cell in grid:
        entry = next(t for t in experiment.config.tasks if t.key == cell.task)
        current = store.definition(experiment, cell.variant, entry, cell.seed)
        source = found.get(store.digest(current))
        out.append(replace(cell, reuse=str(source)) if source and cell_state(cell, current)[0] != "recorded"
                   else cell)
    return out


def run_grid(experiment, runs_root: Path, records_root: Path, *, executor: str = "local", workers: int = 1,
             address: str | None = None, threads: int = 1, console: Console | None = None,
             live: bool = True, reuse_from: list[Path] = (), log_to: Path | None = None) -> dict[str, tuple[str, str]]:
    """Run every cell; returns {cell name: (final status, reason)}. `reuse_from`: other experiments'
    report folders whose records of a cell's very definition are copied instead of training it again."""
    concurrent = workers if executor == "local" else 0
    grid = cells(experiment, runs_root, records_root, concurrent=max(concurrent, 1), commit=records.zoo_commit())
    if log_to is not None:
        grid = [replace(cell, log_to=str(Path(log_to).resolve())) for cell in grid]
    console = console or Console(stderr=True)
    stale = plan(experiment, grid)
    if stale:
        console.print(f"[yellow]{len(stale)} cells were run under another definition; their old records and run "
                      f"directories go to {store.STALE}/ and they are run again:[/]")
        for name, changed in stale.items():
            console.print(escape(f"  {name}: " + "; ".join(changed[:4]) + (" ..." if len(changed) > 4 else "")),
                          soft_wrap=True)
    grid = reusable(experiment, grid, list(reuse_from))
    copies = [cell for cell in grid if cell.reuse]
    if copies:
        console.print(f"{len(copies)} cells have a record of the same definition in another experiment's records; "
                      "it is copied instead of training them again:")
        for cell in copies:
            console.print(f"  {cell.name} <- {cell.reuse}", soft_wrap=True)
    results: dict[str, tuple[str, str]] = {}
    runner: Callable[[], None]
    if executor == "local":
        runner = lambda: _local(grid, workers, results)  # noqa: E731
    elif executor == "ray":
        runner = lambda: _ray(grid, address, threads, results)  # noqa: E731
    else:
        raise ZooError(f"executor: {executor!r} is not one of local, ray")
    errors: list[BaseException] = []

    def guarded() -> None:
        try:
            runner()
        except BaseException as err:  # noqa: BLE001 - re-raised in the main thread
            errors.append(err)

    worker = threading.Thread(target=guarded, daemon=True)
    notes = {name: reason for name, (_, reason) in results.items()}
    view = GridView(f"zoo run {experiment.name}: {len(grid)} runs -> {runs_root}", grid, notes)
    with Live(view, console=console, refresh_per_second=2, transient=False) if live else _Quiet():
        worker.start()
        while worker.is_alive():
            worker.join(timeout=0.5)
            notes.update({name: reason for name, (_, reason) in results.items()})
    if errors:
        raise errors[0]
    return {cell.name: results.get(cell.name, ("failed", "not run")) for cell in grid}


class _Quiet:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
