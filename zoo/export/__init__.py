"""`zoo export`: an experiment's records into the trackers researchers already use. Nothing trains, and
nothing is read but the records and the experiment file, through the report's own analysis (zoo/report), so
a run's outcome and every verdict are the ones report.md gives, and exports of committed reports match them.
Exporting again updates what the last export wrote; it never adds a second copy.

TensorBoard (`--to tensorboard DIR`, extra `tensorboard`; zoo/export/tensorboard.py):
    DIR/                             the export's one HParams experiment summary (every column below, so the
                                     parallel-coordinates view shows them all) and the Custom Scalars layout
    DIR/<variant>/<task>/seed-<n>/   one run per cell: every logged curve (train/<column>, eval/<column>, by
                                     step) and its HParams row: experiment, variant, task, seed, status (the
                                     report's outcome: complete, stalled, diverged), the settings a reader filters
                                     on across experiments (d_model, layers, lr, steps), every spec field and
                                     training setting any variant changes, and the final test metrics
                                     (hparam/test_<metric>)
    DIR/<variant>/<task>/mean/       per variant and task, the mean over seeds of every evaluation curve with its
                                     band (mean ± one seed sd, clipped to the metric's range), drawn as a margin
                                     chart in Custom Scalars
MLflow (`--to mlflow [URI]`, extra `mlflow`; zoo/export/mlflow.py, which says which URIs and the default):
    one parent run per experiment with report.md, results.csv and plots/ as artifacts and each variant's verdict
    and effect on each task, and a nested run per cell: params = the record's definition with the spec as
    trained, metrics = the curves with their steps and the test metrics, tags = definition digest, zoo commit
    and status (the report's outcome).

Here: what both read from the records. Every point carries the time the record places it at, never the
export's clock, so two exports of one record are the same points.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from zoo.errors import ExportError
from zoo.experiment.record import Record
from zoo.model.spec import ModelSpec
from zoo.model.summary import flatten

TIMING = {"seconds", "tok_per_s", "tokens", "decoded_sentences"}  # not a curve a reader compares
FINISHED = ("complete", "diverged")  # the record statuses a cell is exported with (a failed run logged nothing)


@dataclass(frozen=True)
class Cell:
    variant: str
    task: str
    seed: int
    record: Record
    outcome: str  # the report's (zoo/stats/outcomes.py): complete, stalled (trained without learning), diverged

    @property
    def name(self) -> str:
        return f"{self.variant}/{self.task}/seed-{self.seed}"


@dataclass(frozen=True)
class Point:
    step: int
    value: float
    time: float  # seconds since the epoch, where the record places the row (see `row_times`)


def analysed(experiment, records_root: Path):
    """(the report's analysis of the records, the cells to export): ExportError when no cell has finished."""
    from zoo.report import analyse

    report = analyse(experiment, Path(records_root))
    cells = finished_cells(report)
    if not cells:
        raise ExportError(f"{experiment.name}: no finished records in {records_root} to export")
    return report, cells


def finished_cells(report) -> list[Cell]:
    """The grid's current records that trained to the end or diverged, in grid order, each with the outcome the
    report gives it; failed, stale and missing cells are left out."""
    outcomes = {analysis.task.key: analysis.outcomes for analysis in report.tasks}
    cells = []
    for variant, task, seed in report.experiment.grid():
        record = report.analyst.records.get(variant, task.key, seed)
        if record is not None and record.status in FINISHED:
            cells.append(Cell(variant, task.key, seed, record, outcomes[task.key][variant][seed]))
    return cells


def finished_at(record: Record) -> float:
    """When the record was written (its provenance), in seconds since the epoch; the epoch itself for a record
    that does not say (the export's clock would move the points at every export)."""
    try:
        return datetime.fromisoformat(str(record.provenance["finished"])).timestamp()
    except (KeyError, ValueError):
        return 0.0


def started_at(record: Record) -> float:
    """When training started: the record's finish time less its training seconds."""
    seconds = record.summary.train_seconds if record.summary is not None else None
    return finished_at(record) - float(seconds or 0)


def row_times(record: Record, part: str) -> list[float]:
    """When each logged row of `part` ('train' or 'eval') happened. Rows hold no clock time, only the training
    seconds elapsed (`seconds`), so a row is placed that long after the start (`started_at`). The record is
    written after the test set is decoded, so every time is late by that decode (the same for every row)."""
    columns = (record.curves.train if part == "train" else record.curves.eval) if record.curves else {}
    start, end = started_at(record), finished_at(record)
    elapsed = columns.get("seconds") or [None] * len(columns.get("step") or [])
    return [start + s if _finite(s) else end for s in elapsed]


def curves(record: Record) -> dict[str, list[Point]]:
    """'eval/bleu', 'train/loss', ... -> their points, finite numbers only (evaluation first, as in the file)."""
    out = {}
    for part, columns in sorted(dict(record.curves or {}).items()):
        steps, times = columns.get("step") or [], row_times(record, part)
        for column, values in columns.items():
            if column in ("step", "epoch") or column in TIMING:
                continue
            points = [Point(int(s), float(v), t) for s, v, t in zip(steps, values, times) if _finite(v)]
            if points:
                out[f"{part}/{column}"] = points
    return out


def test_metrics(record: Record) -> dict[str, float]:
    return {k: float(v) for k, v in (record.test or {}).items()
            if _finite(v) and k not in ("beam", "alpha", "sentences", "tokens")}


def spec_fields(record: Record) -> dict[str, Any]:
    """The spec as trained, flattened ('ffn.kind', 'src_vocab', ...): the record's, whose vocabulary was fitted
    to the task, not the preset's declared size that the experiment's specs carry."""
    return flatten(ModelSpec.model_validate(record.spec or {}))


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
