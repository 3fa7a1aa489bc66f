"""`zoo export --to tensorboard DIR`: the runs described in zoo/export/__init__.py.

The HParams plugin reads one experiment summary per log directory, and picks an arbitrary one when runs each
carry their own (which is what `SummaryWriter.add_hparams` writes), so columns that only some runs declare
vanish. Here the export writes one summary at DIR with every column, and each run only its session (its row).

Exporting into DIR again replaces the event files of the runs it writes (TensorBoard reads every file in a
run's folder, so writing beside the old ones would draw every point twice); its other folders are left alone.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from zoo.errors import ExportError, install_hint
from zoo.export import Cell, analysed, curves, finished_at, spec_fields, started_at, test_metrics
from zoo.model.summary import diff
from zoo.report.analysis import bounds

# What a reader filters on across experiments, so every export has these columns whatever its variants change
FILTERED = ("spec.d_model", "spec.encoder_layers", "spec.decoder_layers", "train.lr", "train.steps")


def changed_fields(experiment) -> list[str]:
    """Every spec field and training setting that some variant sets differently from the baseline (on any task
    and seed), as 'spec.<field>' and 'train.<setting>'."""
    baseline = experiment.config.baseline_label
    labels = [v.label for v in experiment.config.variants]
    fields = {f"spec.{field}": None for variant in labels
              for field, _, _ in diff(experiment.specs[baseline], experiment.specs[variant])}
    for task in experiment.config.tasks:
        for seed in experiment.seeds_of(baseline, task.key):
            own = experiment.train_config(task, seed, baseline).model_dump()
            for variant in labels:
                fields.update({f"train.{key}": None for key, value in
                               experiment.train_config(task, seed, variant).model_dump().items() if value != own[key]})
    return list(fields)


def hparam_rows(experiment, cells: list[Cell]) -> list[dict[str, Any]]:
    """One HParams row per cell, all with the same columns: which run it is (experiment, variant, task, seed,
    status), FILTERED, and `changed_fields`. Values come from the cell's record, so a variant that leaves a field
    alone shows the baseline's value, and a fitted vocabulary shows the size that trained. A column holds
    numbers where every cell has a number, text otherwise (the plugin filters a column by one type)."""
    names = [*FILTERED, *(name for name in changed_fields(experiment) if name not in FILTERED)]
    rows = []
    for cell in cells:
        known = {**{f"spec.{k}": v for k, v in spec_fields(cell.record).items()},
                 **{f"train.{k}": v for k, v in cell.record.definition.get("train", {}).items()}}
        rows.append({"experiment": experiment.name, "variant": cell.variant, "task": cell.task, "seed": cell.seed,
                     "status": cell.outcome, **{name: known.get(name) for name in names}})
    for name in rows[0]:
        numbers = all(isinstance(row[name], (int, float)) and not isinstance(row[name], bool) for row in rows)
        for row in rows:
            row[name] = float(row[name]) if numbers else str(row[name])
    return rows


def seed_bands(cells: list[Cell]) -> dict[str, dict[int, tuple[float, float, float, float]]]:
    """Per evaluation curve, at every step all seeds logged: (mean, low, high, time), the band being mean ± one
    seed sd clipped to the metric's range (an accuracy band never crosses 100), the time the last seed's."""
    by_step: dict[str, dict[int, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    for cell in cells:
        for tag, points in curves(cell.record).items():
            if tag.startswith("eval/"):
                for point in points:
                    by_step[tag][point.step].append((point.value, point.time))
    bands = {}
    for tag, steps in by_step.items():
        low_end, high_end = bounds(tag.split("/", 1)[1])
        bands[tag] = {}
        for step, logged in sorted(steps.items()):
            if len(logged) == len(cells):
                values = [value for value, _ in logged]
                mean, sd = float(np.mean(values)), float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
                bands[tag][step] = (mean, max(mean - sd, low_end), min(mean + sd, high_end),
                                    max(time for _, time in logged))
    return bands


def to_tensorboard(experiment, records_root: Path, out: Path) -> list[Path]:
    """Write the runs described in zoo/export/__init__.py; returns the run folders."""
    try:
        from torch.utils.tensorboard import SummaryWriter
        from torch.utils.tensorboard.summary import custom_scalars
        from torch.utils.tensorboard.summary import hparams as hparams_summary
    except ImportError:
        raise ExportError("--to tensorboard needs the tensorboard extra: " + install_hint("tensorboard")) from None

    def writer(folder: Path) -> SummaryWriter:
        for old in Path(folder).glob("events.out.tfevents.*"):
            old.unlink()
        return SummaryWriter(str(folder))

    _, cells = analysed(experiment, records_root)
    rows = hparam_rows(experiment, cells)
    written, metrics = _write_cells(writer, hparams_summary, cells, rows, Path(out))
    means, layout = _write_means(writer, cells, Path(out))
    written += means
    domains = {name: sorted({row[name] for row in rows}) for name in rows[0]}
    summary, _, _ = hparams_summary(rows[0], metrics, domains)
    last = max(finished_at(cell.record) for cell in cells)
    with writer(Path(out)) as root:
        root.file_writer.add_summary(summary, walltime=last)
        root.file_writer.add_summary(custom_scalars(dict(layout)), walltime=last)
    return written


def _write_cells(writer: Callable, hparams_summary: Callable, cells: list[Cell], rows: list[dict], out: Path
                 ) -> tuple[list[Path], dict[str, float]]:
    """A run per cell: its curves, its HParams row and its test metrics. Returns the run folders and every test
    metric's tag."""
    written, metrics = [], {}
    for cell, row in zip(cells, rows):
        folder = Path(out) / cell.variant / cell.task / f"seed-{cell.seed}"
        finished = finished_at(cell.record)
        with writer(folder) as run:
            for tag, points in curves(cell.record).items():
                for point in points:
                    run.add_scalar(tag, point.value, point.step, walltime=point.time)
            tests = {f"hparam/test_{k}": v for k, v in test_metrics(cell.record).items()}
            _, start, end = hparams_summary(row, tests)
            run.file_writer.add_summary(start, walltime=started_at(cell.record))
            run.file_writer.add_summary(end, walltime=finished)
            for tag, value in tests.items():
                run.add_scalar(tag, value, int(cell.record.summary.steps or 0), walltime=finished)
            metrics.update(tests)
        written.append(folder)
    return written, metrics


def _write_means(writer: Callable, cells: list[Cell], out: Path) -> tuple[list[Path], dict[str, dict[str, list]]]:
    """A run per variant and task: the mean curve over its seeds with a band of one sd. Returns the run folders and
    the custom-scalars layout that draws the bands."""
    written = []
    groups: dict[tuple[str, str], list[Cell]] = defaultdict(list)
    for cell in cells:
        groups[(cell.variant, cell.task)].append(cell)
    layout: dict[str, dict[str, list]] = defaultdict(dict)
    for (variant, task), members in groups.items():
        folder = Path(out) / variant / task / "mean"
        with writer(folder) as run:
            for tag, points in seed_bands(members).items():
                for step, (mean, low, high, time) in points.items():
                    for name, value in (("mean", mean), ("low", low), ("high", high)):
                        run.add_scalar(f"{tag}/{name}", value, step, walltime=time)
                layout[f"{task}: mean over seeds ± sd"][tag] = ["Margin", [f"{tag}/mean", f"{tag}/low", f"{tag}/high"]]
        written.append(folder)
    return written, layout
