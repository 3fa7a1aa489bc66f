"""`zoo export --to mlflow [URI]`: the runs described in zoo/export/__init__.py.

Where they go. URI is a tracking server (http:// or https://), a database (sqlite:///FILE.db, which MLflow
recommends now that its file store is in maintenance mode, or postgresql://, mysql://, mssql://), or a path:
a path ending in .db is a sqlite store, any other a folder in MLflow's file store (which MLflow 3 opens only
with MLFLOW_ALLOW_FILE_STORE=true; the closing hint says so). The default, ./mlflow.db, is MLflow's own
default store, so `mlflow ui` started in the same folder opens it. A sqlite store keeps its artifacts in
mlartifacts/<experiment>/ beside the database file.

A store that cannot be used is one line (ExportError naming the URI), said before anything is written where it
can be: a scheme MLflow cannot track to, a database without the extra's SQLAlchemy, a server that does not
answer within PROBE_SECONDS (MLflow's own retries would wait minutes), a store that cannot be written.

Exporting again updates in place. The parent is the experiment's run tagged zoo.role=experiment; a cell's run
is the one named for its cell (variant/task/seed) and tagged with its definition digest, so two variants of one
definition (a `set` that repeats the baseline's values) keep a run each. Points and params already there are
not logged again. A cell's run holding another training of the same definition (its zoo.finished differs) or
params written differently (by an earlier zoo) is deleted and written anew, since MLflow can neither change a
param nor remove a point.
"""

from __future__ import annotations

import importlib.metadata
import logging
import math
import os
import re
import shlex
from contextlib import contextmanager
from pathlib import Path

from zoo.errors import ExportError, install_hint
from zoo.export import Cell, analysed, curves, finished_at, spec_fields, started_at, test_metrics

DEFAULT_STORE = "mlflow.db"
DATABASES = ("sqlite", "postgresql", "mysql", "mssql")
SCHEMES = ("http", "https", "file", "databricks", *DATABASES)
PROBE_SECONDS = 10
PARENT, CELL = "experiment", "cell"  # zoo.role of the runs an export writes


def tracking_uri(where: str | None) -> str:
    """The tracking URI that `--to mlflow [WHERE]` means (module docstring): ExportError for a scheme MLflow does
    not track to, a database the installed extras cannot open, or a file given as the file store's folder."""
    where = where or DEFAULT_STORE
    if "://" not in where and not where.startswith("file:"):
        path = Path(where).resolve()
        if path.suffix == ".db":
            return f"sqlite:///{path}"
        if path.exists() and not path.is_dir():
            raise ExportError(f"--to mlflow {where}: is a file, not a folder")
        return path.as_uri()
    scheme = where.split(":", 1)[0].split("+", 1)[0].lower()
    if scheme not in SCHEMES:
        raise ExportError(f"--to mlflow {where}: MLflow does not track to {scheme}:// stores; give a server "
                          "(http:// or https://), a database (sqlite:///FILE.db, postgresql://...) or a folder")
    if scheme in DATABASES:
        try:
            import alembic  # noqa: F401  (what MLflow needs for a database store; mlflow-skinny lacks both)
            import sqlalchemy  # noqa: F401
        except ImportError:
            raise ExportError(f"--to mlflow {where}: a database store needs the mlflow extra: "
                              + install_hint("mlflow")) from None
    return where


def ui_command(uri: str) -> str:
    """The command that opens the exported runs (the closing hint). `mlflow ui` is MLflow's full package: the
    mlflow-skinny of the extra writes stores but does not serve them."""
    if uri.startswith(("http://", "https://")):
        return f"open {uri} in a browser"
    allow = "MLFLOW_ALLOW_FILE_STORE=true " if uri.startswith("file:") else ""
    try:
        importlib.metadata.distribution("mlflow")
        needs = ""
    except importlib.metadata.PackageNotFoundError:
        needs = " (after pip install mlflow: the extra's mlflow-skinny has no UI)"
    return f"{allow}mlflow ui --backend-store-uri {shlex.quote(uri)}{needs}"


def artifact_root(uri: str, experiment: str) -> str | None:
    """Where a new MLflow experiment keeps its artifacts: beside a sqlite database (MLflow would use the current
    folder); elsewhere the store's own default (None)."""
    if not uri.startswith("sqlite:///"):
        return None
    database = uri[len("sqlite:///"):].split("?", 1)[0].removeprefix("file:")
    return (Path(database).resolve().parent / "mlartifacts" / experiment).as_uri() if database else None


@contextmanager
def _store(uri: str):
    """What an export to `uri` runs inside: MLflow's file store allowed where it is the one asked for, MLflow's
    informational logging quiet, and the errors of MLflow, the database and the network one line naming `uri`."""
    from mlflow.exceptions import MlflowException

    failures: tuple[type[BaseException], ...] = (MlflowException, OSError, ImportError)
    try:
        from sqlalchemy.exc import SQLAlchemyError

        failures += (SQLAlchemyError,)
    except ImportError:
        pass
    logger = logging.getLogger("mlflow")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        with _environment({"MLFLOW_ALLOW_FILE_STORE": "true"} if uri.startswith("file:") else {}):
            yield
    except failures as err:
        lines = str(err).strip().splitlines() or [type(err).__name__]
        raise ExportError(f"--to mlflow {uri}: {lines[0][:300]}") from None
    finally:
        logger.setLevel(level)


@contextmanager
def _environment(values: dict[str, str]):
    """`values` set in the environment (where MLflow reads its settings) while the block runs, then restored."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _probe(client, uri: str) -> None:
    """One request without retries, at most PROBE_SECONDS: a store that does not answer fails here, in seconds,
    with why in a few words ('Connection refused'), not MLflow's paragraph."""
    from mlflow.exceptions import MlflowException

    with _environment({"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": str(PROBE_SECONDS)}):
        try:
            client.search_experiments(max_results=1)
        except MlflowException as err:
            if not uri.startswith(("http://", "https://")):
                raise
            text = str(err)
            cause = re.search(r"\[Errno -?\d+\] ([^'\"()]+)", text)
            why = cause.group(1).strip() if cause else (f"no answer within {PROBE_SECONDS} s" if "timed out" in text
                                                        else text.strip().splitlines()[0][:200])
            raise ExportError(f"--to mlflow {uri}: no MLflow server answers there ({why})") from None


def params(cell: Cell) -> dict[str, str]:
    """The record's definition (training, decoding, the task's settings, ...) with the spec as trained in place
    of the declared one, flattened, as MLflow's string params."""
    values: dict[str, object] = {f"spec.{k}": v for k, v in spec_fields(cell.record).items()}
    for section, settings in cell.record.definition.items():
        if section == "task" and isinstance(settings, dict):
            settings = _task_used(settings)
        if section != "spec":
            values.update({f"{section}.{k}": v for k, v in settings.items()} if isinstance(settings, dict)
                          else {section: settings})
    values.update(variant=cell.variant, task=cell.task, seed=cell.seed)
    return {k: str(v)[:6000] for k, v in values.items()}


def _task_used(settings: dict) -> dict:
    """A definition's task settings as the task read them (TaskConfig.used): a copy task logs no vocab_size. A
    task this installation cannot build (a plugin's, not loaded) keeps every field it recorded."""
    from zoo.data.config import TaskConfig
    from zoo.errors import DataError

    try:
        return TaskConfig(**settings).used()
    except (DataError, TypeError):
        return settings


def verdicts(report) -> tuple[dict[str, str], dict[str, float]]:
    """The parent run's tags and metrics, per task and variant, in report.md's own words: the verdict on the
    primary metric against the baseline (verdict/<task>/<variant>), the instability verdict of its outcomes table
    (instability/...), and the effect, variant − baseline, with its 95% interval as a tag and alone as a metric
    (effect/...). A task whose baseline does not clear its trivial floor gets that reason instead (verdict/<task>)."""
    from zoo.report.tables import fmt_effect, label, outcome_rows, verdict_text

    experiment = report.experiment
    tags, effects = {}, {}
    for analysis in report.tasks:
        task = analysis.task.key
        header, rows = outcome_rows(experiment, analysis)
        for variant, row in zip((v.label for v in experiment.config.variants), rows):
            if variant != experiment.config.baseline_label:
                tags[f"instability/{task}/{variant}"] = row[header.index("verdict")].strip("*")
        if analysis.below_floor:
            tags[f"verdict/{task}"] = f"no verdicts: {analysis.below_floor}"
        tags.update({f"verdict/{task}/{variant}": f"≡ {same} (the same numbers)"
                     for variant, same in analysis.collapsed.items()})
        for variant, comparison in analysis.comparisons.items():
            result = comparison.result
            tags[f"verdict/{task}/{variant}"] = verdict_text(comparison, experiment.config.analysis.min_seeds,
                                                             short=True)
            if math.isfinite(result.difference):
                tags[f"effect/{task}/{variant}"] = (fmt_effect(result.difference, result.ci_low, result.ci_high,
                                                               comparison.metric) + f" {label(comparison.metric)}")
                effects[f"effect/{task}/{variant}"] = result.difference
    return tags, effects


def to_mlflow(experiment, records_root: Path, report_dir: Path, where: str | None = None) -> tuple[str, str]:
    """Write the runs described in zoo/export/__init__.py; returns (tracking URI, parent run id)."""
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise ExportError("--to mlflow needs the mlflow extra: " + install_hint("mlflow")) from None
    uri = tracking_uri(where)
    with _store(uri):
        client = MlflowClient(uri)
        _probe(client, uri)  # first: a store that cannot be used is said in seconds
        report, cells = analysed(experiment, records_root)
        found = client.get_experiment_by_name(experiment.name)
        if found is None:
            experiment_id = client.create_experiment(experiment.name, artifact_root(uri, experiment.name))
        else:
            experiment_id = found.experiment_id
            if found.lifecycle_stage == "deleted":
                client.restore_experiment(experiment_id)
        parent = _parent(client, experiment_id, experiment, report, Path(report_dir), cells)
        runs = {(run.info.run_name, run.data.tags.get("zoo.definition_digest")): run
                for run in _runs(client, experiment_id, CELL)}
        for cell in cells:
            _cell(client, experiment_id, parent, cell, runs.get((cell.name, cell.record.definition_digest)))
    return uri, parent


def _ms(seconds: float) -> int:
    return int(round(seconds * 1000))


def _runs(client, experiment_id: str, role: str) -> list:
    """The experiment's live runs an export wrote as `role`."""
    found, token = [], None
    while True:
        page = client.search_runs([experiment_id], f"tags.`zoo.role` = '{role}'", page_token=token)
        found.extend(page)
        token = page.token
        if not token:
            return found


def _log(client, run_id: str, existing, metrics: list, params: dict[str, str] | None = None,
         tags: dict[str, str] | None = None) -> None:
    """Log to a run what it does not hold yet (`existing`: the run as found, None for a fresh one), in the batch
    sizes MLflow takes."""
    from mlflow.entities import Param, RunTag

    params = params or {}
    if existing is not None:
        held = {key: {(m.step, m.timestamp, m.value) for m in client.get_metric_history(run_id, key)}
                for key in {m.key for m in metrics}}
        metrics = [m for m in metrics if (m.step, m.timestamp, m.value) not in held[m.key]]
        params = {k: v for k, v in params.items() if k not in existing.data.params}
    client.log_batch(run_id, tags=[RunTag(k, v) for k, v in (tags or {}).items()])
    listed = [Param(k, v) for k, v in params.items()]
    for start in range(0, len(listed), 100):
        client.log_batch(run_id, params=listed[start:start + 100])
    for start in range(0, len(metrics), 1000):
        client.log_batch(run_id, metrics=metrics[start:start + 1000])


def _parent(client, experiment_id: str, experiment, report, report_dir: Path, cells: list[Cell]) -> str:
    """The experiment's parent run, made or updated: the report's files and the verdicts."""
    from mlflow.entities import Metric

    start = min(started_at(cell.record) for cell in cells)
    end = max(finished_at(cell.record) for cell in cells)
    run = next(iter(_runs(client, experiment_id, PARENT)), None)
    run_id = run.info.run_id if run is not None else client.create_run(
        experiment_id, _ms(start), {"zoo.role": PARENT}, run_name=experiment.name).info.run_id
    tags, effects = verdicts(report)
    tags["zoo.experiment_file"] = str(experiment.path)
    _log(client, run_id, run, [Metric(k, v, _ms(end), 0) for k, v in effects.items()], tags=tags)
    for name in ("report.md", "results.csv"):
        if (report_dir / name).is_file():
            client.log_artifact(run_id, str(report_dir / name))
    if (report_dir / "plots").is_dir():
        client.log_artifacts(run_id, str(report_dir / "plots"), "plots")
    client.set_terminated(run_id, end_time=_ms(end))
    return run_id


def _cell(client, experiment_id: str, parent: str, cell: Cell, run) -> None:
    """A cell's run, made, updated or replaced (module docstring)."""
    from mlflow.entities import Metric

    record, wanted = cell.record, params(cell)
    finished = str(record.provenance.get("finished", ""))
    tags = {"mlflow.parentRunId": parent, "zoo.role": CELL, "zoo.definition_digest": record.definition_digest,
            "zoo.commit": str(record.provenance.get("commit", "unknown")), "zoo.status": cell.outcome,
            "zoo.finished": finished}
    if run is not None and (run.data.tags.get("zoo.finished") != finished
                            or any(run.data.params.get(k, v) != v for k, v in wanted.items())):
        client.delete_run(run.info.run_id)
        run = None
    run_id = run.info.run_id if run is not None else client.create_run(
        experiment_id, _ms(started_at(record)), tags, run_name=cell.name).info.run_id
    metrics = [Metric(tag, p.value, _ms(p.time), p.step) for tag, points in curves(record).items() for p in points]
    metrics += [Metric(f"test/{k}", v, _ms(finished_at(record)), 0) for k, v in test_metrics(record).items()]
    _log(client, run_id, run, metrics, wanted, tags)
    client.set_terminated(run_id, "FAILED" if cell.outcome == "diverged" else "FINISHED", _ms(finished_at(record)))
