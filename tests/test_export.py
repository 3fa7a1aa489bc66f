"""`zoo export` on the committed quickstart records, read back with each tracker's own reader."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from zoo.cli import main
from zoo.experiment import load_experiment
from zoo.export import finished_cells

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "experiments" / "quickstart.toml"
RECORDS = ROOT / "reports" / "quickstart" / "records"


def _record(variant: str, seed: int) -> dict:
    return json.loads((RECORDS / variant / "copy" / f"seed-{seed}.json").read_text())


def test_tensorboard_runs_hold_the_records_curves_and_hparams(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    assert main(["export", str(QUICKSTART), "--out", str(ROOT / "reports" / "quickstart"), "--to", "tensorboard",
                 str(tmp_path)]) == 0
    cells = finished_cells(load_experiment(QUICKSTART), RECORDS)
    assert {p.relative_to(tmp_path).as_posix() for p in tmp_path.glob("*/copy/seed-*")} == {c.name for c in cells}
    record = _record("post-norm", 2)
    run = EventAccumulator(str(tmp_path / "post-norm" / "copy" / "seed-2"))
    run.Reload()
    logged = [(e.step, e.value) for e in run.Scalars("eval/exact_match")]
    expected = list(zip(record["curves"]["eval"]["step"], record["curves"]["eval"]["exact_match"]))
    assert [s for s, _ in logged] == [s for s, _ in expected]
    assert all(math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-6) for (_, a), (_, b) in zip(logged, expected))
    start = plugin_data_pb2.HParamsPluginData.FromString(
        run.PluginTagToContent("hparams")["_hparams_/session_start_info"]).session_start_info
    assert start.hparams["variant"].string_value == "post-norm" and start.hparams["seed"].number_value == 2
    assert start.hparams["spec.residual.kind"].string_value == "post-norm"  # differs from the baseline, pre-norm
    assert run.Scalars("hparam/test_exact_match")[0].value == pytest.approx(record["test"]["exact_match"])

    mean = EventAccumulator(str(tmp_path / "pre-norm" / "copy" / "mean"))
    mean.Reload()
    finals = [_record("pre-norm", s)["curves"]["eval"]["exact_match"][-1] for s in range(5)]
    assert mean.Scalars("eval/exact_match/mean")[-1].value == pytest.approx(sum(finals) / 5, rel=1e-6)
    low, high = mean.Scalars("eval/exact_match/low")[-1].value, mean.Scalars("eval/exact_match/high")[-1].value
    assert low <= sum(finals) / 5 <= high


def test_mlflow_runs_hold_params_metrics_tags_and_artifacts(tmp_path):
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    store = tmp_path / "mlruns"
    assert main(["export", str(QUICKSTART), "--out", str(ROOT / "reports" / "quickstart"), "--to", "mlflow",
                 str(store)]) == 0
    client = MlflowClient(store.as_uri())
    experiment = client.get_experiment_by_name("quickstart")
    runs = {r.info.run_name: r for r in client.search_runs([experiment.experiment_id], max_results=100)}
    parent = runs.pop("quickstart")
    assert {a.path for a in client.list_artifacts(parent.info.run_id)} >= {"report.md", "results.csv", "plots"}
    assert set(runs) == {c.name for c in finished_cells(load_experiment(QUICKSTART), RECORDS)}
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
    assert "pip install 'transformer-zoo[mlflow]'" in err and len(err.strip().splitlines()) == 1


def test_zoo_run_log_to_tensorboard_writes_each_cells_curves_while_training(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    smoke = ROOT / "experiments" / "smoke.toml"
    out, logs = tmp_path / "out", tmp_path / "tb"
    assert main(["run", str(smoke), "--out", str(out), "--runs", str(tmp_path / "runs"), "--no-live",
                 "--log-to", "tensorboard", str(logs)]) == 0
    record = json.loads((out / "records" / "pre-norm" / "copy" / "seed-1.json").read_text())
    run = EventAccumulator(str(logs / "pre-norm" / "copy" / "seed-1"))
    run.Reload()
    assert [e.step for e in run.Scalars("train/loss")] == record["curves"]["train"]["step"]
    assert [e.value for e in run.Scalars("eval/exact_match")] == pytest.approx(record["curves"]["eval"]["exact_match"])
    assert main(["run", str(smoke), "--out", str(out), "--log-to", "wandb", "x"]) == 2
