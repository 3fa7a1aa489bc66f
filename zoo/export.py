"""`zoo export`: an experiment's records into the trackers researchers already use. Nothing trains, and
nothing is read but the records (and the experiment file), so exports of committed reports match them.

TensorBoard (`--to tensorboard DIR`, extra `tensorboard`):
    DIR/<variant>/<task>/seed-<n>/   one run per cell: every logged curve (train/<column>, eval/<column>,
                                     by step) and the HParams plugin's row: variant, task, seed, the spec
                                     fields and training settings that differ from the baseline, and the
                                     final test metrics (hparam/test_<metric>), for its parallel-coordinates view
    DIR/<variant>/<task>/mean/       per variant and task, the mean over seeds of every evaluation curve with
                                     its band (mean ± one seed sd), drawn as a margin chart in Custom Scalars
MLflow (`--to mlflow [URI]`, extra `mlflow`; default URI: a local ./mlruns file store):
    one parent run per experiment, with report.md, results.csv and plots/ as artifacts, and a nested run
    per cell: params = the flattened spec and training config, metrics = the curves with their steps and
    the test metrics, tags = definition digest, zoo commit and status.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from zoo.errors import ExportError, install_hint
from zoo.experiment.record import Record
from zoo.summary import diff, flatten

TIMING = {"seconds", "tok_per_s", "tokens", "decoded_sentences"}  # not a curve a reader compares


@dataclass(frozen=True)
class Cell:
    variant: str
    task: str
    seed: int
    record: Record

    @property
    def name(self) -> str:
        return f"{self.variant}/{self.task}/seed-{self.seed}"


def finished_cells(experiment, records_root: Path) -> list[Cell]:
    """The grid's current records (complete or diverged), in grid order; failed and stale ones are left out."""
    from zoo.report.collect import load_records

    records = load_records(experiment, records_root)
    cells = []
    for variant, task, seed in experiment.grid():
        record = records.get(variant, task.key, seed)
        if record is not None and record.status in ("complete", "diverged"):
            cells.append(Cell(variant, task.key, seed, record))
    return cells


def hyperparameters(experiment, cell: Cell) -> dict[str, Any]:
    """variant, task, seed, and what differs from the baseline: spec fields and training settings."""
    baseline = experiment.config.baseline_label
    values: dict[str, Any] = {"variant": cell.variant, "task": cell.task, "seed": cell.seed}
    for field, _, value in diff(experiment.specs[baseline], experiment.specs[cell.variant]):
        values[f"spec.{field}"] = value
    task = next(t for t in experiment.config.tasks if t.key == cell.task)
    own = experiment.train_config(task, cell.seed, baseline).model_dump()
    for key, value in experiment.train_config(task, cell.seed, cell.variant).model_dump().items():
        if value != own[key]:
            values[f"train.{key}"] = value
    return {k: (v if isinstance(v, (int, float, str, bool)) else str(v)) for k, v in values.items()}


def curves(record: Record) -> dict[str, tuple[list[int], list[float]]]:
    """'eval/bleu', 'train/loss', ... -> (steps, values), finite numbers only (evaluation first, as in the file)."""
    out = {}
    for part, columns in sorted(dict(record.curves or {}).items()):
        steps = columns.get("step") or []
        for column, values in columns.items():
            if column in ("step", "epoch") or column in TIMING:
                continue
            pairs = [(int(s), float(v)) for s, v in zip(steps, values) if isinstance(v, (int, float))
                     and not isinstance(v, bool) and math.isfinite(v)]
            if pairs:
                out[f"{part}/{column}"] = ([s for s, _ in pairs], [v for _, v in pairs])
    return out


def test_metrics(record: Record) -> dict[str, float]:
    return {k: float(v) for k, v in (record.test or {}).items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and k not in ("beam", "alpha", "sentences",
                                                                                    "tokens")}


def seed_bands(cells: list[Cell]) -> dict[str, dict[int, tuple[float, float, float]]]:
    """Per evaluation curve, at every step all seeds logged: (mean, mean - sd, mean + sd) over the seeds."""
    by_step: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for cell in cells:
        for tag, (steps, values) in curves(cell.record).items():
            if tag.startswith("eval/"):
                for step, value in zip(steps, values):
                    by_step[tag][step].append(value)
    bands = {}
    for tag, steps in by_step.items():
        bands[tag] = {}
        for step, values in sorted(steps.items()):
            if len(values) == len(cells):
                mean, sd = float(np.mean(values)), float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
                bands[tag][step] = (mean, mean - sd, mean + sd)
    return bands


def to_tensorboard(experiment, records_root: Path, out: Path) -> list[Path]:
    """Write the runs described in the module docstring; returns the run folders."""
    try:
        from torch.utils.tensorboard import SummaryWriter
        from torch.utils.tensorboard.summary import hparams as hparams_summary
    except ImportError:
        raise ExportError("--to tensorboard needs the tensorboard extra: " + install_hint("tensorboard")) from None
    cells = finished_cells(experiment, records_root)
    if not cells:
        raise ExportError(f"{experiment.name}: no finished records in {records_root} to export")
    written = []
    for cell in cells:
        folder = Path(out) / cell.variant / cell.task / f"seed-{cell.seed}"
        with SummaryWriter(str(folder)) as writer:
            for tag, (steps, values) in curves(cell.record).items():
                for step, value in zip(steps, values):
                    writer.add_scalar(tag, value, step)
            metrics = {f"hparam/test_{k}": v for k, v in test_metrics(cell.record).items()}
            for summary in hparams_summary(hyperparameters(experiment, cell), metrics):
                writer.file_writer.add_summary(summary)
            for tag, value in metrics.items():
                writer.add_scalar(tag, value, int(cell.record.summary.steps or 0))
        written.append(folder)
    groups: dict[tuple[str, str], list[Cell]] = defaultdict(list)
    for cell in cells:
        groups[(cell.variant, cell.task)].append(cell)
    layout: dict[str, dict[str, list]] = defaultdict(dict)
    for (variant, task), members in groups.items():
        folder = Path(out) / variant / task / "mean"
        with SummaryWriter(str(folder)) as writer:
            for tag, points in seed_bands(members).items():
                for step, (mean, low, high) in points.items():
                    writer.add_scalar(f"{tag}/mean", mean, step)
                    writer.add_scalar(f"{tag}/low", low, step)
                    writer.add_scalar(f"{tag}/high", high, step)
                layout[f"{task}: mean over seeds ± sd"][tag] = ["Margin", [f"{tag}/mean", f"{tag}/low", f"{tag}/high"]]
        written.append(folder)
    with SummaryWriter(str(out)) as writer:
        writer.add_custom_scalars(dict(layout))
    return written


def _flat_params(experiment, cell: Cell) -> dict[str, str]:
    """The cell's spec (flattened) and training config, as MLflow params (strings)."""
    task = next(t for t in experiment.config.tasks if t.key == cell.task)
    params = {f"spec.{k}": v for k, v in flatten(experiment.specs[cell.variant]).items()}
    train = experiment.train_config(task, cell.seed, cell.variant).model_dump()
    params.update({f"train.{k}": v for k, v in train.items()})
    params.update(variant=cell.variant, task=cell.task, seed=cell.seed)
    return {k: str(v)[:6000] for k, v in params.items()}


def default_mlflow_uri() -> str:
    return (Path.cwd() / "mlruns").as_uri()


def to_mlflow(experiment, records_root: Path, report_dir: Path, uri: str | None = None) -> tuple[str, str]:
    """Write the runs described in the module docstring; returns (tracking URI, parent run id)."""
    import os
    import time

    try:
        from mlflow.entities import Metric, Param, RunTag
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise ExportError("--to mlflow needs the mlflow extra: " + install_hint("mlflow")) from None
    uri = uri or default_mlflow_uri()
    if uri.startswith("file:") or "://" not in uri:
        # MLflow 3 keeps its file store only on request; a local folder is what a reader without a server wants
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        uri = uri if uri.startswith("file:") else Path(uri).resolve().as_uri()
    cells = finished_cells(experiment, records_root)
    if not cells:
        raise ExportError(f"{experiment.name}: no finished records in {records_root} to export")
    client = MlflowClient(uri)
    existing = client.get_experiment_by_name(experiment.name)
    experiment_id = existing.experiment_id if existing else client.create_experiment(experiment.name)
    now = int(time.time() * 1000)
    parent = client.create_run(experiment_id, run_name=experiment.name,
                               tags={"zoo.experiment_file": str(experiment.path)}).info.run_id
    for name in ("report.md", "results.csv"):
        if (Path(report_dir) / name).is_file():
            client.log_artifact(parent, str(Path(report_dir) / name))
    if (Path(report_dir) / "plots").is_dir():
        client.log_artifacts(parent, str(Path(report_dir) / "plots"), "plots")
    client.set_terminated(parent)
    for cell in cells:
        tags = {"mlflow.parentRunId": parent, "zoo.definition_digest": cell.record.definition_digest,
                "zoo.commit": str(cell.record.provenance.get("commit", "unknown")), "zoo.status": cell.record.status}
        run = client.create_run(experiment_id, run_name=cell.name, tags=tags).info.run_id
        metrics = [Metric(tag, value, now, step) for tag, (steps, values) in curves(cell.record).items()
                   for step, value in zip(steps, values)]
        metrics += [Metric(f"test/{k}", v, now, 0) for k, v in test_metrics(cell.record).items()]
        params = [Param(k, v) for k, v in _flat_params(experiment, cell).items()]
        client.log_batch(run, tags=[RunTag(k, v) for k, v in tags.items()])
        for start in range(0, len(params), 100):  # MLflow takes at most 100 params and 1000 metrics a batch
            client.log_batch(run, params=params[start:start + 100])
        for start in range(0, len(metrics), 1000):
            client.log_batch(run, metrics=metrics[start:start + 1000])
        client.set_terminated(run, status="FINISHED" if cell.record.status == "complete" else "FAILED")
    return uri, parent
