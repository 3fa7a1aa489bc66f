"""Running one cell of the grid, under its lock, into its run directory and its record.

For each cell (see zoo/experiment/grid.py for its states): a recorded cell is skipped; a stale one's record
and run directory are moved aside; a cell marked to reuse another experiment's record of the same definition
gets a copy, with `provenance.copied_from` naming the original; otherwise it trains (resuming from the run
directory's last checkpoint where that is this cell's, intact: zoo/train/loop.py), decodes the test set, and
writes the record, last: the record's presence marks the cell done. The modules a plugin imported as its code ran
go into the record's provenance (zoo/experiment/executed.py).

Any exception while running or recording a cell, I/O errors included, becomes that cell's failed
record (or, where that cannot be written, its failed.json, or at least a line in the final summary);
the grid goes on, and the next `zoo run` retries the cell. `execute` is what every executor calls, in this
process, in a worker process or on a Ray node.
"""

from __future__ import annotations

import traceback
from functools import partial
from pathlib import Path

from zoo import rundir
from zoo.atomic import TEMP_SUFFIX
from zoo.experiment import executed, store
from zoo.experiment import record as records
from zoo.experiment.grid import Cell, cell_state, read_record
from zoo.plugins import load_all


def _move_aside(path: Path, root: Path) -> None:
    if path.exists():
        store.move_aside(path, root, store.stamp())


def _run_cell(cell: Cell, threads: int | None) -> str:
    """Train, evaluate and record one cell; the caller holds its lock."""
    import torch

    from zoo.experiment.config import load_experiment

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
        return records.read(cell.record).status
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
    summary = _train_and_test(cell, experiment, entry, digest)
    head = records.base(_cell_fields(cell), current, digest, cell.concurrent, cell.commit)
    imported = executed.imported(current)
    if imported:  # only then: a record of zoo's own code reads as it always did
        head.provenance[executed.FIELD] = imported
    records.write(cell.record, records.from_run(out, head))  # last: the record marks the cell done
    return summary["status"]


def _train_and_test(cell: Cell, experiment, entry, digest: str) -> dict:
    """Train the cell into its run directory (resuming it), then decode and score its test set once it is complete
    and not scored yet; returns the training summary."""
    from zoo.data import load_task
    from zoo.model.decode import DecodeConfig
    from zoo.train import Trainer, fit_to_task, load_run, save_evaluation
    from zoo.train.evaluate import evaluate

    out = cell.out
    spec = experiment.specs[cell.variant]
    log_to = Path(cell.log_to) / cell.variant / cell.task / f"seed-{cell.seed}" if cell.log_to else None
    # a checkpoint that is not this cell's, intact, goes where stale cells go: runs/<experiment>/.stale/<time>/<cell>/
    set_aside = partial(store.move_aside, root=Path(cell.runs_root), when=store.stamp())
    with executed.watching():  # the modules a plugin imports as its code runs are recorded with the cell
        task = load_task(experiment.task_config(entry), pad_id=spec.pad_id)
        summary = Trainer(fit_to_task(spec, task), task, experiment.train_config(entry, cell.seed, cell.variant), out,
                          resume=True, progress=False, log_to=log_to, definition=digest, set_aside=set_aside).run()
        if summary["status"] == "complete" and not (out / f"{rundir.TEST}.json").exists():
            model, task, _ = load_run(out)
            settings = experiment.config.decode
            metrics, hypotheses = evaluate(model, task, "test", DecodeConfig(
                beam=settings.beam, alpha=settings.alpha, max_ratio=settings.max_ratio, max_extra=settings.max_extra))
            save_evaluation(out, rundir.TEST, metrics, hypotheses)
    return summary


def _copy_record(cell: Cell, current: dict) -> str:
    """Write `cell.reuse` (another experiment's record) as this cell's record when its definition is
    `current` and it holds a result; returns its status, or '' when it cannot stand for this cell."""
    source = Path(cell.reuse)
    try:
        original = records.read(source)
    except rundir.RunError:
        return ""
    if original.status not in ("complete", "diverged") or executed.what_changed(original, current):
        return ""
    origin, made = original.cell, original.provenance
    # a copy of a copy names the record that was trained
    copied_from = made.get("copied_from") or f"{origin.experiment}/{origin.variant}/{origin.task}/seed-{origin.seed}"
    copy = original.model_copy(update={"cell": records.Cell(**_cell_fields(cell)),
                                       "provenance": {**made, "copied_from": copied_from}})
    records.write(cell.record, copy)
    return original.status


def _cell_fields(cell: Cell) -> dict:
    return {"experiment": cell.experiment_name, "variant": cell.variant, "task": cell.task, "seed": cell.seed}


def _why(err: BaseException) -> str:
    """One line saying what ended a cell: the exception, or the exit a cell's code asked for."""
    if isinstance(err, SystemExit):
        return f"the cell's code called sys.exit({err.code!r})"
    return " ".join(f"{type(err).__name__}: {err}".split())


def _record_failure(cell: Cell, reason: str, trace: str) -> str:
    """Write the failure where it can be written: the record, else failed.json; returns the reason.
    A result already recorded (complete or diverged) is never replaced by a failure: the failure may
    come before the cell could even be checked (an experiment file made unreadable while the grid runs),
    so the record is left as it is and the failure goes to failed.json."""
    record = read_record(cell.record)
    kept = record is not None and record.status in ("complete", "diverged")
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


def record_death(cell: Cell, reason: str) -> tuple[str, str]:
    """The outcome of a cell whose worker process died under it (`kill -9`, the OOM killer, `os._exit` in a
    plugin), written by the process that ran the worker: the dead worker's lock went with it, so the cell is
    locked again for the write; if another `zoo run` took it meanwhile, that run owns the cell now."""
    lock = cell.lock
    try:
        if not lock.acquire():
            return "failed", f"{reason} (another zoo run (pid {lock.holder()}) has taken the cell since)"
        return "failed", _record_failure(cell, reason, "")
    except Exception as err:  # noqa: BLE001 - the death is reported either way
        return "failed", f"{reason} (and it could not be recorded: {_why(err)})"
    finally:
        lock.release()


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
    except KeyboardInterrupt:  # Ctrl-C is the user's, and ends the run
        raise
    except BaseException as err:  # noqa: BLE001 - sys.exit() in a plugin's forward too: recorded, the grid goes on
        return "failed", _record_failure(cell, _why(err), traceback.format_exc())
    finally:
        lock.release()
