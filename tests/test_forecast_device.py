"""`zoo run --dry-run --device cuda`: a grid priced for a kind of device this machine may lack, and, where no record of
its task settings gives a rate, priced from other experiments' records scaled by parameters x tokens a step
(zoo/experiment/forecast.py), with known answers."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from smoke_runs import SMOKE, experiment_file

from zoo.cli import main
from zoo.data import load_task
from zoo.experiment import load_experiment
from zoo.experiment import record as records
from zoo.experiment.forecast import Measured, cell_parameters, forecast, scale
from zoo.experiment.grid import cells

ROOT = Path(__file__).resolve().parent.parent
SCALE = ROOT / "reports" / "scale" / "records"


def measured(rate: float, parameters: int, tokens: int = 2048, hardware: str = "cuda (NVIDIA H200)",
             kernels: str = "reference", precision: str = "fp32", source: str = "a") -> Measured:
    return Measured(rate, parameters, tokens, hardware, kernels, precision, source)


def test_the_nearest_records_in_work_price_a_cell_scaled_by_its_work_over_theirs():
    near, far = measured(0.02, 1_000_000), measured(0.04, 4_000_000, tokens=4096)
    rate, chosen, factors = scale(2_000_000, 2048, "reference", "fp32", None, [far, near])
    assert chosen == (near,) and factors == (2.0, 2.0) and rate == pytest.approx(0.04)  # 2x the work of `near`
    # a record of the cell's kernels and precision comes first, however far: 2M x 2048 over 8M x 4096 = 1/8
    fast = measured(0.1, 8_000_000, tokens=4096, kernels="fast")
    rate, chosen, factors = scale(2_000_000, 2048, "fast", "fp32", None, [near, far, fast])
    assert chosen == (fast,) and factors == (0.125, 0.125) and rate == pytest.approx(0.0125)
    # records of the very hardware here come first; with none of it, every record of the kind
    h100 = measured(0.5, 2_000_000, hardware="cuda (NVIDIA H100)")
    assert scale(2_000_000, 2048, "reference", "fp32", "cuda (NVIDIA H100)", [near, h100])[1] == (h100,)
    assert scale(2_000_000, 2048, "reference", "fp32", "cuda (NVIDIA A100)", [near, h100])[1] == (h100,)
    # records within 5% of the nearest one's work are as near: the median of their scaled rates
    twins = [measured(0.02, 1_000_000), measured(0.03, 1_040_000), measured(0.05, 1_000_000)]
    rate, chosen, factors = scale(1_000_000, 2048, "reference", "fp32", None, twins)
    assert len(chosen) == 3 and rate == pytest.approx(statistics.median([0.02, 0.03 / 1.04, 0.05]))
    assert scale(1_000_000, 2048, "reference", "fp32", None, []) is None


def test_a_cells_parameters_are_counted_before_its_data_with_the_vocabulary_its_task_gives():
    """Known answers: the resolved study's records counted its 14 arms' parameters when they trained (d_model 64,
    joint BPE 4000: untied embeddings, learned positions and the ScaleNorm stack among them)."""
    resolved = load_experiment(ROOT / "experiments" / "resolved.toml")
    task = resolved.task_config(resolved.config.tasks[0])
    for variant in resolved.specs:
        recorded = records.read(ROOT / "reports" / "resolved" / "records" / variant / "multi30k-de-en" / "seed-0.json")
        assert cell_parameters(resolved.specs[variant], task) == recorded.summary.parameters, variant
    # a synthetic task's vocabulary is its symbols and 4 special ids, as the task itself builds it: copy over 8
    # symbols at d_model 16, 1+1 layers: 12 x 16 embeddings, 2,224 in the encoder layer, 3,344 in the decoder's
    smoke = load_experiment(ROOT / "experiments" / "smoke.toml")
    copy = smoke.task_config(smoke.config.tasks[0])
    assert load_task(copy).src_vocab == load_task(copy).tgt_vocab == 12
    assert cell_parameters(smoke.specs["post-norm"], copy) == 12 * 16 + 2_224 + 3_344 == 5_760


def _fake(folder: Path, name: str, parameters: int, seconds_per_step: float, device: str | None = None) -> None:
    """A copy of one of the scale study's H200 records (batch_tokens 4096) in folder/records, as if it had
    `parameters` and trained at `seconds_per_step` (on `device`, where given)."""
    record = json.loads((SCALE / "baseline" / "multi30k-de-en" / "seed-1.json").read_text())
    record["summary"]["parameters"] = parameters
    record["summary"]["train_seconds"] = seconds_per_step * record["summary"]["steps"]
    if device:
        record["summary"]["device"] = device
    path = folder / "records" / name / "multi30k-de-en" / "seed-1.json"
    path.parent.mkdir(parents=True)
    records.write(path, records.Record.model_validate(record))  # as written: its digest agrees


def test_a_grid_no_record_of_its_task_prices_is_priced_from_other_experiments_gpu_records(tmp_path):
    """The smoke grid (copy, batch 256, CPU-defined) priced for a GPU: of two H200 records, the one nearest in work
    prices it, its 0.8 s a step times 256 / 4096 and the cell's parameters over its own; a CPU record of the cell's
    very work, and a far H200 one, price nothing."""
    experiment = load_experiment(experiment_file(tmp_path))
    task = experiment.task_config(experiment.config.tasks[0])
    post, pre = (cell_parameters(experiment.specs[v], task) for v in ("post-norm", "pre-norm"))
    others = tmp_path / "reports" / "other"
    _fake(others, "near", post, 0.8)
    _fake(others, "far", 1000 * post, 0.01)
    _fake(others, "cpu", post * 16, 9.9, device="cpu")  # the cell's work exactly (256 v 4096 tokens), on a CPU
    grid = cells(experiment, tmp_path / "runs", tmp_path / "out" / "records")
    [row] = forecast(experiment, grid, device="cuda", others=[others])
    rates = (0.8 / 16, 0.8 / 16 * pre / post)  # post-norm's, and pre-norm's (a final norm more)
    assert row.device == "cuda" and row.new == 4 and row.steps == 4 * 40
    assert row.seconds_per_step == pytest.approx(statistics.mean(rates))
    assert row.run_seconds == pytest.approx(2 * 40 * sum(rates))
    assert [m.parameters for m in row.scaled.records] == [post] and row.scaled.device == "cuda"
    assert row.scaled.factors == pytest.approx((1 / 16, pre / post / 16))
    assert row.scaled.sources() == [f"scale/ (1 record: {post:,} parameters, 4,096 tokens a step, median 0.8000 s "
                                    "a step)"]  # named by the experiment that trained it
    # no other experiment's records given: as before, no rate
    [row] = forecast(experiment, grid, device="cuda")
    assert row.seconds_per_step is None and row.scaled is None
    # the grid's own task settings' records come first: a CPU grid is priced from the CPU record alone
    [row] = forecast(experiment, grid, device="cpu", others=[others])
    assert row.device == "cpu" and [m.parameters for m in row.scaled.records] == [post * 16]


def test_device_is_a_dry_run_option(tmp_path, capsys):
    path = experiment_file(tmp_path, SMOKE)
    assert main(["run", str(path), "--device", "cuda", "--runs", str(tmp_path / "runs"), "--out",
                 str(tmp_path / "out")]) == 2
    assert "--device prices a dry run (--dry-run)" in " ".join(capsys.readouterr().err.split())
    assert not (tmp_path / "out").exists() and not (tmp_path / "runs").exists()


def _scale_records() -> list[dict]:
    return [json.loads(path.read_text()) for path in sorted(SCALE.glob("*/*/seed-*.json"))]


def test_the_width_study_priced_on_a_gpu_from_the_scale_studys_h200_records():
    """Known answer: each d_model 256 arm of experiments/width.toml (2,048 tokens a step) is priced from the scale
    study's 28 H200 records of 7.57M-7.58M parameters (4,096 tokens a step), the nearest in work: the median of
    each one's seconds a step x (the arm's parameters x 2048) / (its parameters x 4096)."""
    width = load_experiment(ROOT / "experiments" / "width.toml")
    entry = width.config.tasks[0]
    grid = cells(width, ROOT / "runs" / "width-never-here", ROOT / "reports" / "width-never-here" / "records")
    [row] = forecast(width, grid, device="cuda", others=[SCALE.parent])
    near = [r for r in _scale_records() if r["summary"]["device"].startswith("cuda")
            and r["summary"]["parameters"] < 8_000_000]
    assert len(near) == 28 and len(row.scaled.records) == 28
    expected = []
    for variant in width.specs:
        parameters = cell_parameters(width.specs[variant], width.task_config(entry))
        expected.append(statistics.median(r["summary"]["train_seconds"] / r["summary"]["steps"] * parameters * 2048
                                          / (r["summary"]["parameters"] * 4096) for r in near))
    assert row.new == 30 and row.steps == 30 * 4000 and row.device == "cuda"
    assert row.seconds_per_step == pytest.approx(statistics.mean(expected))
    assert row.run_seconds == pytest.approx(5 * 4000 * sum(expected))
    assert f"{row.seconds_per_step:.3f}" == "0.010" and f"{row.run_seconds / 3600:.2f}" == "0.33"


def test_zoo_run_dry_run_device_cuda_names_what_it_priced_from():
    command = ["run", "experiments/width.toml", "--dry-run", "--device", "cuda", "--workers", "10"]
    done = subprocess.run([sys.executable, "-m", "zoo", *command], capture_output=True, text=True, timeout=300,
                          cwd=ROOT, env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stdout.split())
    assert "│ multi30k-de-en │ 30 │ 0 │ 0 │ 0 │ 30 │ 0.010 │ 0.33 │" in said
    assert "about 0.33 hours of training left, one run after another (0.33 GPU run-hours); with 10 workers" in said
    assert ("multi30k-de-en: no record of its task settings in this grid's folders trained on cuda, so its s/step is "
            "scaled from the committed records of other experiments nearest in parameters x tokens a step, made on "
            "cuda (NVIDIA H200): scale/ (28 records: 7.57M-7.58M parameters, 4,096 tokens a step") in said
    assert "x0.31 to x0.45" in said and "so a rate scaled far from its records is rough" in said
    assert "at most 180 (every arm to the cap)" in said


def test_the_width_studys_d_model_256_is_counted_as_by_hand():
    """2+2 layers at d_model 256, d_ff 1024, 4 heads, joint BPE 4000: 4000 x 256 embeddings, 789,760 in an encoder
    layer (attention 4 x (256^2 + 256), the FFN 2 x 256 x 1024 + 1024 + 256, two norms) and 1,053,440 in a decoder
    layer (two attentions, the FFN, three norms); untied embeddings add two tables of 4000 x 256."""
    width = load_experiment(ROOT / "experiments" / "width.toml")
    task = width.task_config(width.config.tasks[0])
    assert 4 * (256 * 256 + 256) + (2 * 256 * 1024 + 1024 + 256) + 2 * 512 == 789_760
    assert 2 * 4 * (256 * 256 + 256) + (2 * 256 * 1024 + 1024 + 256) + 3 * 512 == 1_053_440
    assert cell_parameters(width.specs["baseline"], task) == 4000 * 256 + 2 * 789_760 + 2 * 1_053_440 == 4_710_400
    assert cell_parameters(width.specs["sharing-none"], task) == 4_710_400 + 2 * 4000 * 256
