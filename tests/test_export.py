"""`zoo export` on the committed quickstart records, read back with each tracker's own reader (TensorBoard's
EventAccumulator and the HParams plugin's protos, MlflowClient), as a user's tools would. Each tracker is
exported to twice, as a user re-exporting after a new run would: what is read back must hold once."""

from __future__ import annotations

import io
import json
import math
import sqlite3
import sys
import time
import tomllib
from contextlib import redirect_stdout
from datetime import datetime
from pathlib import Path

import pytest

from zoo.cli import main
from zoo.experiment import load_experiment
from zoo.export import finished_cells
from zoo.report import analyse

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "experiments" / "quickstart.toml"
REPORT = ROOT / "reports" / "quickstart"
RECORDS = REPORT / "records"
EXPORT = ["export", str(QUICKSTART), "--out", str(REPORT), "--to"]


def _record(variant: str, seed: int) -> dict:
    return json.loads((RECORDS / variant / "copy" / f"seed-{seed}.json").read_text())


def _times(record: dict, part: str) -> list[float]:
    """When each row of `part` was logged, computed here from the record: its finish time less the training
    seconds, plus the row's elapsed seconds."""
    finished = datetime.fromisoformat(record["provenance"]["finished"]).timestamp()
    start = finished - record["summary"]["train_seconds"]
    return [start + s for s in record["curves"][part]["seconds"]]


def _cell_names() -> set[str]:
    return {c.name for c in finished_cells(analyse(load_experiment(QUICKSTART), RECORDS))}


@pytest.fixture(scope="module")
def tensorboard(tmp_path_factory):
    pytest.importorskip("tensorboard")
    out = tmp_path_factory.mktemp("tb")
    for _ in range(2):
        assert main([*EXPORT, "tensorboard", str(out)]) == 0
    return out


def _run(folder: Path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = EventAccumulator(str(folder))
    run.Reload()
    return run


def _hparams(folder: Path) -> dict[str, bytes]:
    """The HParams plugin's summaries in a run, by tag ({} in a run without any)."""
    try:
        return _run(folder).PluginTagToContent("hparams")
    except KeyError:
        return {}


def test_tensorboard_runs_hold_the_records_curves_and_hparams(tensorboard):
    from tensorboard.plugins.hparams import metadata

    assert {p.relative_to(tensorboard).as_posix() for p in tensorboard.glob("*/copy/seed-*")} == _cell_names()
    record = _record("post-norm", 2)
    run_folder = tensorboard / "post-norm" / "copy" / "seed-2"
    run = _run(run_folder)
    logged = [(e.step, e.value) for e in run.Scalars("eval/exact_match")]
    expected = list(zip(record["curves"]["eval"]["step"], record["curves"]["eval"]["exact_match"]))
    assert [s for s, _ in logged] == [s for s, _ in expected]
    assert all(math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-6) for (_, a), (_, b) in zip(logged, expected))
    start = metadata.parse_session_start_info_plugin_data(_hparams(run_folder)["_hparams_/session_start_info"])
    assert start.hparams["variant"].string_value == "post-norm" and start.hparams["seed"].number_value == 2
    assert start.hparams["spec.residual.kind"].string_value == "post-norm"  # differs from the baseline, pre-norm
    assert start.hparams["status"].string_value == "stalled"  # the report's outcome, not the record's 'complete'
    assert run.Scalars("hparam/test_exact_match")[0].value == pytest.approx(record["test"]["exact_match"])

    mean = _run(tensorboard / "pre-norm" / "copy" / "mean")
    finals = [_record("pre-norm", s)["curves"]["eval"]["exact_match"][-1] for s in range(5)]
    assert mean.Scalars("eval/exact_match/mean")[-1].value == pytest.approx(sum(finals) / 5, rel=1e-6)
    low, high = mean.Scalars("eval/exact_match/low")[-1].value, mean.Scalars("eval/exact_match/high")[-1].value
    assert low <= sum(finals) / 5 <= high


def test_tensorboard_has_one_hparams_experiment_with_every_column_and_clipped_bands(tensorboard):
    """One experiment summary, at the export's root, naming every column: the fields any arm changes (the
    Conv1d arm's ffn.kind included) and the settings a reader filters on; every run has a value in each, the
    baseline's where its arm changes nothing. A seed band never leaves the metric's range."""
    from tensorboard.plugins.hparams import metadata

    holders = [folder for folder in [tensorboard, *tensorboard.glob("*/copy/*")]
               if "_hparams_/experiment" in _hparams(folder)]
    assert holders == [tensorboard]
    summary = metadata.parse_experiment_plugin_data(_hparams(tensorboard)["_hparams_/experiment"])
    columns = {info.name for info in summary.hparam_infos}
    assert columns >= {"experiment", "variant", "task", "seed", "status", "spec.d_model", "spec.encoder_layers",
                       "spec.decoder_layers", "train.lr", "train.steps", "spec.ffn.kind", "spec.residual.kind"}
    assert {m.name.tag for m in summary.metric_infos} >= {"hparam/test_exact_match"}
    for folder in tensorboard.glob("*/copy/seed-*"):
        start = metadata.parse_session_start_info_plugin_data(_hparams(folder)["_hparams_/session_start_info"])
        assert set(start.hparams) == columns, folder
        expected = "conv1d" if folder.parent.parent.name == "pre-norm-conv1d" else "linear"
        assert start.hparams["spec.ffn.kind"].string_value == expected
        assert start.hparams["train.lr"].number_value == 0.01 and start.hparams["train.steps"].number_value == 500

    for folder in tensorboard.glob("*/copy/mean"):
        run = _run(folder)
        assert all(e.value >= 0 for e in run.Scalars("eval/exact_match/low")), folder
        assert all(e.value <= 100 for e in run.Scalars("eval/exact_match/high")), folder
    # pre-norm's five seeds at step 100: mean 1.3, sd 2.4; the band's low end is 0, not -1.09
    assert _run(tensorboard / "pre-norm" / "copy" / "mean").Scalars("eval/exact_match/low")[0].value == 0


def test_a_second_tensorboard_export_replaces_the_first_and_keeps_the_records_times(tensorboard):
    for folder in [tensorboard, *tensorboard.glob("*/copy/*")]:
        assert len(list(folder.glob("events.out.tfevents.*"))) == 1, folder
    record = _record("pre-norm-conv1d", 3)
    run = _run(tensorboard / "pre-norm-conv1d" / "copy" / "seed-3")
    assert [e.step for e in run.Scalars("train/loss")] == record["curves"]["train"]["step"]
    assert [e.wall_time for e in run.Scalars("eval/exact_match")] == pytest.approx(_times(record, "eval"), abs=1e-3)


@pytest.fixture(scope="module")
def mlflow_store(tmp_path_factory):
    """Exported twice into one store: first to the default (in the current folder), then to the same database
    named as a sqlite URI; the lines the command printed."""
    pytest.importorskip("mlflow")
    pytest.importorskip("sqlalchemy")
    folder = tmp_path_factory.mktemp("mlflow")
    printed = []
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        patch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
        for where in ([], [f"sqlite:///{folder / 'mlflow.db'}"]):
            with redirect_stdout(io.StringIO()) as out:
                assert main([*EXPORT, "mlflow", *where]) == 0
            printed.append(out.getvalue())
    return folder, printed


def _client(folder: Path):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("quickstart")
    return client, client.search_runs([experiment.experiment_id], max_results=1000)


def test_mlflow_runs_hold_params_metrics_tags_and_artifacts(mlflow_store):
    client, found = _client(mlflow_store[0])
    runs = {r.info.run_name: r for r in found}
    parent = runs.pop("quickstart")
    assert {a.path for a in client.list_artifacts(parent.info.run_id)} >= {"report.md", "results.csv", "plots"}
    assert set(runs) == _cell_names()
    run = runs["pre-norm-conv1d/copy/seed-3"]
    record = _record("pre-norm-conv1d", 3)
    assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
    assert run.data.tags["zoo.definition_digest"] == record["definition_digest"]
    assert run.data.tags["zoo.status"] == "complete"
    assert run.data.params["spec.ffn.kind"] == "conv1d" and run.data.params["train.lr"] == "0.01"
    assert run.data.metrics["test/exact_match"] == pytest.approx(record["test"]["exact_match"])
    history = client.get_metric_history(run.info.run_id, "train/loss")
    assert [m.step for m in history] == [s for s, v in zip(record["curves"]["train"]["step"],
                                                            record["curves"]["train"]["loss"]) if v is not None]


def test_mlflow_params_describe_the_model_that_trained(mlflow_store):
    """The record's spec (vocabulary fitted to the task: 14 symbols), not the preset's declared 37000."""
    _, found = _client(mlflow_store[0])
    run = next(r for r in found if r.info.run_name == "post-norm/copy/seed-2")
    record = _record("post-norm", 2)
    assert record["spec"]["src_vocab"] == 14 != record["definition"]["spec"]["src_vocab"]
    assert run.data.params["spec.src_vocab"] == "14" and run.data.params["spec.tgt_vocab"] == "14"
    assert run.data.params["task.symbols"] == "10" and run.data.params["decode.beam"] == "1"
    # what the copy task read, not TaskConfig's unread text defaults (its vocab_size 8000 was logged once)
    assert "vocab_size" in record["definition"]["task"] and "task.vocab_size" not in run.data.params
    assert not {k for k in run.data.params if k.split(".")[-1] in ("tokenizer", "joint", "test_sets")}


def test_a_second_mlflow_export_updates_the_runs_in_place(mlflow_store):
    folder, printed = mlflow_store
    client, found = _client(folder)
    parents = [r for r in found if r.info.run_name == "quickstart"]
    assert len(parents) == 1 and len(found) == 1 + len(_cell_names())
    assert all(f"parent run {parents[0].info.run_id}," in line for line in printed)
    record = _record("post-norm", 2)
    run = next(r for r in found if r.info.run_name == "post-norm/copy/seed-2")
    history = client.get_metric_history(run.info.run_id, "eval/exact_match")
    assert [m.step for m in history] == record["curves"]["eval"]["step"]
    assert [m.timestamp for m in history] == [round(t * 1000) for t in _times(record, "eval")]
    assert run.data.tags["zoo.status"] == "stalled" and run.info.status == "FINISHED"

    verdicts = parents[0].data.tags
    comparison = analyse(load_experiment(QUICKSTART), RECORDS).tasks[0].comparisons["pre-norm-conv1d"]
    assert verdicts["verdict/copy/pre-norm-conv1d"] == "equivalent ±5"
    assert verdicts["verdict/copy/post-norm"] == "no verdict (0 v 5 trained seeds)"
    assert verdicts["instability/copy/post-norm"] == "more unstable"
    assert parents[0].data.metrics["effect/copy/pre-norm-conv1d"] == pytest.approx(comparison.result.difference)


def test_the_default_mlflow_store_opens_without_the_file_store_flag(mlflow_store):
    folder, printed = mlflow_store
    assert (folder / "mlflow.db").is_file() and not (folder / "mlruns").exists()
    assert (folder / "mlartifacts" / "quickstart").is_dir()  # beside the database, not in the current folder
    assert f"mlflow ui --backend-store-uri sqlite:///{folder / 'mlflow.db'}" in printed[0]


def test_the_mlflow_extra_installs_what_a_sqlite_store_needs():
    """mlflow-skinny alone has no database store: `--to mlflow sqlite:///...` needs SQLAlchemy and alembic."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra in ("mlflow", "dev"):
        named = {requirement.split("[")[0].split(">")[0].split("<")[0].split("!")[0].split("=")[0].strip().lower()
                 for requirement in extras[extra]}
        assert {"mlflow-skinny", "sqlalchemy", "alembic"} <= named, extra


def _unusable(tmp_path: Path) -> list[str]:
    read_only = tmp_path / "read-only.db"
    sqlite3.connect(read_only).execute("CREATE TABLE other (x)").connection.commit()
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    return ["http://127.0.0.1:1", "ftp://example.com/runs", "s3://bucket/runs", "bogus://x",
            f"sqlite:///file:{read_only}?mode=ro&uri=true", f"sqlite:///{blocker}/under/mlflow.db"]


def test_an_unusable_mlflow_store_is_one_line_in_seconds(tmp_path, capsys, monkeypatch):
    pytest.importorskip("mlflow")
    pytest.importorskip("sqlalchemy")
    monkeypatch.chdir(tmp_path)  # MLflow makes the read-only URI's folder as a relative 'file:/...' path
    said = {}
    for uri in _unusable(tmp_path):
        began = time.monotonic()
        assert main([*EXPORT, "mlflow", uri]) == 2, uri
        said[uri] = capsys.readouterr().err.strip()
        assert said[uri].startswith(f"zoo: error: --to mlflow {uri}: ") and len(said[uri].splitlines()) == 1
        assert time.monotonic() - began < 30, uri
    assert said["http://127.0.0.1:1"].endswith("no MLflow server answers there (Connection refused)")
    assert "readonly database" in said[f"sqlite:///file:{tmp_path / 'read-only.db'}?mode=ro&uri=true"]


def test_a_missing_extra_or_a_bad_destination_is_one_line(tmp_path, capsys, monkeypatch):
    assert main(["export", str(QUICKSTART), "--to", "tensorboard"]) == 2
    assert "give 'tensorboard DIR' or 'mlflow [URI]'" in capsys.readouterr().err
    import builtins

    real = builtins.__import__

    def no_mlflow(name, *args, **kwargs):
        if name.startswith("mlflow"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_mlflow)
    assert main(["export", str(QUICKSTART), "--to", "mlflow", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "pip install 'mlflow-skinny" in err and "'.[mlflow]' in zoo's clone" in err  # the extra's packages
    assert len(err.strip().splitlines()) == 1


def test_a_database_store_without_sqlalchemy_names_the_extra(capsys, monkeypatch):
    pytest.importorskip("mlflow")
    monkeypatch.setitem(sys.modules, "sqlalchemy", None)  # an import of it raises ImportError
    assert main([*EXPORT, "mlflow", "sqlite:////tmp/never-written.db"]) == 2
    err = capsys.readouterr().err.strip()
    assert "a database store needs the mlflow extra" in err and "'sqlalchemy" in err and "'.[mlflow]'" in err
    assert len(err.splitlines()) == 1


def test_zoo_run_log_to_tensorboard_writes_each_cells_curves_while_training(tmp_path):
    pytest.importorskip("tensorboard")
    smoke = ROOT / "experiments" / "smoke.toml"
    out, logs = tmp_path / "out", tmp_path / "tb"
    assert main(["run", str(smoke), "--out", str(out), "--runs", str(tmp_path / "runs"), "--no-live",
                 "--log-to", "tensorboard", str(logs)]) == 0
    record = json.loads((out / "records" / "pre-norm" / "copy" / "seed-1.json").read_text())
    run = _run(logs / "pre-norm" / "copy" / "seed-1")
    assert [e.step for e in run.Scalars("train/loss")] == record["curves"]["train"]["step"]
    assert [e.value for e in run.Scalars("eval/exact_match")] == pytest.approx(record["curves"]["eval"]["exact_match"])
    assert main(["run", str(smoke), "--out", str(out), "--log-to", "wandb", "x"]) == 2


def test_two_variants_of_one_definition_keep_a_run_each(tmp_path, monkeypatch):
    """A variant whose `set` repeats the baseline's values has the baseline's definition digest, cell for cell.
    Each cell still gets its own run, named for it, and exporting again adds none and moves none."""
    pytest.importorskip("mlflow")
    pytest.importorskip("sqlalchemy")
    twin = tmp_path / "twins.toml"
    twin.write_text(QUICKSTART.read_text().replace('[[variants]]\nlabel = "post-norm"', (
        '[[variants]]\nlabel = "pre-norm-again"\nbase = "paper-base"\nset = {"residual.kind" = "pre-norm"}\n\n'
        '[[variants]]\nlabel = "post-norm"'), 1).replace('name = "quickstart"', 'name = "twins"'))
    records = tmp_path / "reports" / "records"
    for variant in ("pre-norm", "pre-norm-conv1d", "post-norm"):
        for path in (RECORDS / variant / "copy").glob("seed-*.json"):
            for label in (variant, "pre-norm-again") if variant == "pre-norm" else (variant,):
                record = json.loads(path.read_text())
                record["cell"].update(experiment="twins", variant=label)
                (records / label / "copy").mkdir(parents=True, exist_ok=True)
                (records / label / "copy" / path.name).write_text(json.dumps(record))
    monkeypatch.chdir(tmp_path)
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    for _ in range(2):
        with redirect_stdout(io.StringIO()):
            assert main(["export", str(twin), "--out", str(records.parent), "--to", "mlflow", store]) == 0
    from mlflow.tracking import MlflowClient

    client = MlflowClient(store)
    found = client.search_runs([client.get_experiment_by_name("twins").experiment_id], max_results=1000)
    names = sorted(run.info.run_name for run in found)
    assert len(names) == 1 + 20 and len(set(names)) == len(names)
    again = {r.info.run_name: r for r in found}["pre-norm-again/copy/seed-0"]
    assert again.data.params["variant"] == "pre-norm-again"
    assert again.data.tags["zoo.definition_digest"] == _record("pre-norm", 0)["definition_digest"]
