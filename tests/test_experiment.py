"""Experiments: validation before anything trains, the grid, failure isolation, kill and resume, Ray."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from zoo.experiment import ExperimentError, load_experiment
from zoo.experiment.runner import cells, run_grid, status

ROOT = Path(__file__).resolve().parent.parent
SMOKE = ROOT / "experiments" / "smoke.toml"
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def write(tmp_path, text):
    path = tmp_path / "exp.toml"
    path.write_text(text)
    return path


BASE = """
name = "t"
[[variants]]
label = "a"
base = "paper-base"
{variant}
[[tasks]]
name = "copy"
{task}
[train]
steps = 5
{train}
"""


@pytest.mark.parametrize("variant, task, train, field", [
    ('[[variants]]\nlabel = "b"\nbase = "no-such-preset"', "", "", "unknown preset"),
    ('[[variants]]\nlabel = "b"\nbase = "paper-base"\nset = {"ffn.knd" = "conv1d"}', "", "", "ffn.knd"),
    ('[[variants]]\nlabel = "b"\nbase = "paper-base"\nset = {"d_model" = 100}', "", "", "d_model"),
    ('[[variants]]\nlabel = "a"\nbase = "paper-base"', "", "", "unique"),
    ("", 'options = {symbls = 3}', "", "symbols"),
    ("", "", "stesp = 3", "did you mean 'steps'"),
])
def test_invalid_files_are_rejected_naming_the_field(tmp_path, variant, task, train, field):
    with pytest.raises(ExperimentError, match=field):
        load_experiment(write(tmp_path, BASE.format(variant=variant, task=task, train=train)))


def test_empty_grid_and_bad_baseline_are_rejected(tmp_path):
    with pytest.raises(ExperimentError, match="variants"):
        load_experiment(write(tmp_path, 'name = "t"\nvariants = []\n[[tasks]]\nname = "copy"\n'))
    with pytest.raises(ExperimentError, match="baseline"):
        text = BASE.format(variant="", task="", train="").replace('name = "t"', 'name = "t"\nbaseline = "zzz"')
        load_experiment(write(tmp_path, text))


@pytest.mark.parametrize("finding, field", [
    ('variant = "zzz"', "findings\\[0\\].variant: 'zzz'"),
    ('variant = "a"\nagainst = "zzz"', "findings\\[0\\].against: 'zzz'"),
])
def test_findings_must_name_variants(tmp_path, finding, field):
    text = BASE.format(variant="", task="", train="") + f'[[findings]]\n{finding}\nexpect = "better"\nclaim = "c"\nsource = "s"\n'
    with pytest.raises(ExperimentError, match=field):
        load_experiment(write(tmp_path, text))


def test_shipped_experiments_validate():
    for path in sorted((ROOT / "experiments").glob("*.toml")):
        experiment = load_experiment(path)
        assert experiment.grid(), path


def test_grid_layout(tmp_path):
    experiment = load_experiment(SMOKE)
    grid = cells(experiment, tmp_path)
    assert len(grid) == 4
    assert {Path(c.out).relative_to(tmp_path).as_posix() for c in grid} == {
        "post-norm/copy/seed-0", "post-norm/copy/seed-1", "pre-norm/copy/seed-0", "pre-norm/copy/seed-1"}


@pytest.mark.slow
def test_a_failing_run_is_recorded_and_the_grid_goes_on(tmp_path, monkeypatch):
    import zoo.train

    real = zoo.train.Trainer

    class Exploding(real):
        def run(self):
            if self.spec.residual.kind == "pre-norm":
                raise RuntimeError("boom in pre-norm")
            return super().run()

    monkeypatch.setattr(zoo.train, "Trainer", Exploding)
    result = run_grid(load_experiment(SMOKE), tmp_path, live=False)
    assert result == {"post-norm/copy/seed-0": "complete", "post-norm/copy/seed-1": "complete",
                      "pre-norm/copy/seed-0": "failed", "pre-norm/copy/seed-1": "failed"}
    failure = json.loads((tmp_path / "pre-norm/copy/seed-0/failed.json").read_text())
    assert "boom in pre-norm" in failure["reason"]
    monkeypatch.setattr(zoo.train, "Trainer", real)  # the next `zoo run` retries failed cells only
    assert set(run_grid(load_experiment(SMOKE), tmp_path, live=False).values()) == {"complete"}


@pytest.mark.slow
def test_zoo_run_survives_kill_minus_nine_and_resumes_to_identical_results(tmp_path):
    def zoo_run(runs):
        return [sys.executable, "-m", "zoo", "run", str(SMOKE), "--runs", str(runs), "--no-live"]

    clean = subprocess.run(zoo_run(tmp_path / "clean"), env=ENV, capture_output=True, text=True)
    assert clean.returncode == 0, clean.stderr

    killed_root = tmp_path / "killed"
    for kill_after in (1.0, 3.0):  # two kills at different moments
        process = subprocess.Popen(zoo_run(killed_root), env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(kill_after)
        process.send_signal(signal.SIGKILL)
        process.wait()
    resumed = subprocess.run(zoo_run(killed_root), env=ENV, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    for cell in cells(load_experiment(SMOKE), tmp_path / "clean"):
        relative = Path(cell.out).relative_to(tmp_path / "clean")
        a, b = tmp_path / "clean" / relative, killed_root / relative
        assert status(b) == "complete"
        assert json.loads((a / "test.json").read_text()) == json.loads((b / "test.json").read_text())
        strip = lambda p: [{k: v for k, v in json.loads(l).items() if k not in ("tok_per_s", "seconds")}  # noqa: E731
                           for l in (p / "metrics.jsonl").read_text().splitlines()]
        assert strip(a) == strip(b)


@pytest.mark.slow
def test_ray_executor_runs_the_grid_on_a_local_ray_instance(tmp_path):
    ray = pytest.importorskip("ray", reason="the Ray executor needs the ray extra (./setup.sh dev installs it)")
    try:
        result = run_grid(load_experiment(SMOKE), tmp_path, executor="ray", threads=1, live=False)
    finally:
        ray.shutdown()
    assert set(result.values()) == {"complete"}
    assert all((Path(c.out) / "test.json").exists() for c in cells(load_experiment(SMOKE), tmp_path))


def test_tied_embeddings_with_separate_tokenizers_are_rejected_before_training(tmp_path):
    text = BASE.format(variant="", task="", train="").replace(
        'name = "copy"', 'name = "multi30k:de-en"\noptions = {joint = false}')
    with pytest.raises(ExperimentError, match="joint"):
        load_experiment(write(tmp_path, text))  # paper-base ties all embeddings
