"""Reading an experiment's records into tables: one row per grid cell, the learning curves, and the
per-sentence statistics the seed-aware tests resample.

Records are written by `zoo run` (zoo/experiment/record.py) into reports/<experiment>/records/ and
committed beside the report. Nothing here trains, decodes or reads a run directory, so a report is a
pure function of the records and the experiment file, and can be rebuilt anywhere.

Columns of `collect`'s table (and of results.csv):

    variant, task, seed, status, reason      status: complete | stalled | diverged | failed | stale | refused |
                                             missing, as the report counts it (zoo/experiment/outcome.py):
                                             stalled = trained to the end below the task's floor
    parameters, steps, tokens, train_seconds from the record's summary (parameters: trainable ones)
    tok_per_s                                tokens / train_seconds: mean training throughput
    valid_loss, valid_nll, valid_ppl         the last evaluation row (validation set)
    valid_metric                             the task's primary metric on the last validation decode
    bleu, bleu_lowercase, chrf,              test-set metrics, one column per registered metric
    exact_match, token_accuracy, ...         (zoo/metrics.py, plugins' after zoo's own); NaN where the
                                             task is not scored by it
    test_nll, test_ppl                       teacher-forced test loss per token, perplexity
    device, concurrent_runs                  where the run trained, and how many runs shared the machine
    record                                   the record file, relative to the records folder

A record whose definition differs from the experiment file as it is now (other steps, another spec,
other data) is *stale*: listed, never counted. A record that `read` refuses (not a record, numbers that disagree
with each other, content changed since it was written: zoo/experiment/record.py) is *refused*: listed with the
reason, never counted; the report is made from the others.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from zoo import metrics
from zoo.errors import RunError, ZooError
from zoo.experiment import Experiment, executed, store
from zoo.experiment import record as record_file
from zoo.experiment.floors import current_floor
from zoo.experiment.outcome import outcome
from zoo.experiment.record import Record, Summary
from zoo.experiment.schema import TaskEntry

KEYS = ("variant", "task", "seed", "status", "reason")
RUN_COLUMNS = ("parameters", "steps", "tokens", "train_seconds", "tok_per_s", "valid_loss", "valid_nll", "valid_ppl",
               "valid_metric")
AFTER = ("test_nll", "test_ppl", "device", "concurrent_runs", "record")


def metric_columns(experiment: Experiment) -> list[str]:
    """zoo's own metrics, then those of a plugin that a task of the experiment is scored by: a plugin loaded for
    another experiment (installed, or in $ZOO_PLUGINS) adds no column to this one's results.csv."""
    used = {name for task in experiment.config.tasks for name in task.task_class.metrics}
    return [name for name in metrics.names() if name in used or metrics.is_builtin(name)]


def columns(experiment: Experiment) -> tuple[str, ...]:
    """results.csv's columns: the cell, how it ran, the metrics (metric_columns), then the rest."""
    return (*KEYS, *RUN_COLUMNS, *metric_columns(experiment), *AFTER)
STATUSES = ("complete", "stalled", "diverged", "failed", "stale", "refused", "missing")


class ReportError(ZooError):
    """Records or an experiment's findings cannot be read into a report; the message names the file."""


def record_path(records_root: Path, variant: str, task: str, seed: int) -> Path:
    part = store.cell_part(variant, task, seed)
    return Path(records_root) / part.with_name(part.name + ".json")


def _number(value: Any) -> float:
    """JSON numbers as floats; None, strings ('nan', 'inf' from a diverged loss) and the rest as NaN."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return math.nan
    return float(value)


@dataclass
class Records:
    """The records of an experiment's grid, keyed by (variant, task, seed); stale and refused ones kept apart."""

    root: Path
    by_cell: dict[tuple[str, str, int], Record] = field(default_factory=dict)
    stale: dict[tuple[str, str, int], list[str]] = field(default_factory=dict)  # cell -> what changed
    unchecked_data: set[str] = field(default_factory=set)  # tasks whose data could not be fingerprinted here
    refused: dict[tuple[str, str, int], str] = field(default_factory=dict)  # cell -> why `read` refused its record

    def get(self, variant: str, task: str, seed: int) -> Record | None:
        return self.by_cell.get((variant, task, seed))


def load_records(experiment: Experiment, records_root: str | Path) -> Records:
    """Every grid cell's record, checked against the cell's definition as the experiment file now gives it; a
    record `read` refuses is kept apart with its reason (the file's name left out: it is the cell's)."""
    result = Records(Path(records_root))
    definitions: dict[tuple[str, str, int], dict[str, Any]] = {}
    for variant, task, seed in experiment.grid():
        path = record_path(result.root, variant, task.key, seed)
        if not path.exists():
            continue
        try:
            record = record_file.read(path)
        except RunError as err:
            result.refused[(variant, task.key, seed)] = str(err).removeprefix(f"{path}: ")
            continue
        current = definitions.setdefault((variant, task.key, seed), store.definition(experiment, variant, task, seed))
        if current["data"] is None:
            result.unchecked_data.add(task.key)
        changed = executed.what_changed(record, current) if record.status != "failed" else []
        if changed:
            result.stale[(variant, task.key, seed)] = changed
        else:
            result.by_cell[(variant, task.key, seed)] = record
    return result


def current_floors(experiment: Experiment, records_root: Path) -> dict[str, dict]:
    """Task key -> its current trivial-floor file beside the records (zoo/experiment/floors.py), None where there is
    none; a damaged one is a ReportError naming it."""
    floors = {}
    for task in experiment.config.tasks:
        try:
            floors[task.key] = current_floor(experiment, records_root, task)
        except RunError as err:
            raise ReportError(str(err)) from None
    return floors


def read_row(record: Record | None, task: TaskEntry, stale: list[str] | None,
             metric_names: list[str], refused: str = "") -> dict[str, Any]:
    """One row of the results table from a cell's record (which may be missing, stale or refused: `refused` says
    why)."""
    row: dict[str, Any] = {column: math.nan for column in (*RUN_COLUMNS, *metric_names, *AFTER)}
    row.update(status="missing", reason="no record: not run yet (zoo run)", device="", record="")
    if refused:
        return {**row, "status": "refused", "reason": refused}
    if stale:
        return {**row, "status": "stale", "reason": "recorded under another definition: " + "; ".join(stale[:3])}
    if record is None:
        return row
    if record.status == "failed":
        return {**row, "status": "failed", "reason": " ".join(record.reason.split()) or "failed"}
    summary, final = record.summary or Summary(), record.final or {}
    tokens, seconds = _number(summary.tokens), _number(summary.train_seconds)
    status, reason = outcome(record, task)
    row.update(status=status, reason=reason, parameters=_number(summary.parameters),
               steps=_number(summary.steps), tokens=tokens, train_seconds=seconds,
               tok_per_s=tokens / seconds if seconds > 0 else math.nan, device=str(summary.device or ""),
               concurrent_runs=_number(record.provenance.get("concurrent_runs")),
               valid_loss=_number(final.get("valid_loss")), valid_nll=_number(final.get("valid_nll")),
               valid_ppl=_number(final.get("valid_ppl")), valid_metric=_number(final.get(task.primary_metric)))
    test = record.test
    if test:
        row.update({name: _number(test.get(name)) for name in metric_names})
        row.update(test_nll=_number(test.get("nll")), test_ppl=_number(test.get("ppl")))
    return row


def collect(experiment: Experiment, records: Records) -> pd.DataFrame:
    """One row per grid cell (variant x task x seed), in grid order; see the module docstring."""
    rows, metric_names = [], metric_columns(experiment)
    for variant, task, seed in experiment.grid():
        key = (variant, task.key, seed)
        row = read_row(records.get(*key), task, records.stale.get(key), metric_names, records.refused.get(key, ""))
        if row["status"] != "missing":
            row["record"] = record_path(Path("."), *key).as_posix()
        rows.append({"variant": variant, "task": task.key, "seed": seed, **row})
    return pd.DataFrame(rows, columns=list(columns(experiment)))


def curves(records: Records, task: str | None = None, only: tuple[str, ...] | None = None) -> pd.DataFrame:
    """Long table of the recorded curves (of `task`'s cells, or of all): variant, task, seed, step, kind
    ('train'|'eval'), and the logged values (loss and nll for training rows; valid_* and metrics for evaluation
    rows), or only the columns `only` names beside step. Built column by column, one DataFrame in all (a frame
    per record and kind cost seconds on the ablations' 280 records), from each record's packed columns as
    arrays (as Python numbers they were 45 MB of the report's peak); `only` keeps a plot's table small (all
    columns of 70 Multi30k records' 4000 training rows added 150 MB to a report)."""
    parts: dict[str, list[np.ndarray]] = {}
    labels: dict[str, list] = {"variant": [], "task": [], "seed": [], "kind": []}
    rows = 0
    for (variant, key, seed), record in records.by_cell.items():
        if task is not None and key != task:
            continue
        for kind in ("train", "eval"):
            logged = getattr(record.curves, kind) if record.curves is not None else {}
            length = len(logged.get("step") or [])
            if not length:
                continue
            for name, values in logged.items():
                if only is None or name == "step" or name in only:
                    parts.setdefault(name, [np.full(rows, np.nan)] if rows else []).append(_column(values))
            for name, columns in parts.items():
                if name not in logged:
                    columns.append(np.full(length, np.nan))  # a column this record's rows did not log
            for name, value in zip(labels, (variant, key, seed, kind)):
                labels[name].extend([value] * length)
            rows += length
    if not rows:
        return pd.DataFrame(columns=["variant", "task", "seed", "step", "kind", "loss", "nll"])
    numbers = {name: pd.Series(np.concatenate(columns)) for name, columns in parts.items()}
    return pd.DataFrame({**numbers, **labels})


def _column(values) -> np.ndarray:
    """A logged column as numbers: a packed one (array('d'), array('q')) as they are, a list as pd.to_numeric
    reads it (None and text such as a diverged run's 'nan' as NaN; integers stay integers unless the column
    holds a float or a gap, as when the whole column was read at once)."""
    if isinstance(values, array):
        return np.frombuffer(values, dtype=np.float64 if values.typecode == "d" else np.int64)
    return pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy()


def sentence_stats(records: Records, variant: str, task: str, seed: int, metric: str) -> np.ndarray | None:
    """(N, k) per-sentence statistics of a complete cell's test set for `metric`, as the metric reads its
    recorded ones (zoo/metrics.py), or None when the record has none."""
    record = records.get(variant, task, seed)
    rows = (record.sentences or {}).get(metric) if record is not None else None
    return None if rows is None else metrics.get(metric).as_array(rows)
