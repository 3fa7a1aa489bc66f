"""Experiments: validation before anything trains, the grid, failure isolation, kill and resume, Ray."""

import os
from pathlib import Path

import pytest

from zoo.experiment import ExperimentError, load_experiment
from zoo.experiment import record as records
from zoo.experiment.grid import cells
from zoo.experiment.runner import run_grid

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
    # a bad training value is named where it was written: [train], the task's train, the variant's train
    ("", "", "lr = -1", r"exp.toml: \[train\]: lr: Input should be greater than 0"),
    ("", 'train = {schedule = "nope"}', "", r"exp.toml: tasks\[0\] \(copy\): train: schedule: Input should be"),
    ('[[variants]]\nlabel = "b"\nbase = "paper-base"\ntrain = {warmup = -2}', "", "",
     r"exp.toml: variants\[1\] \(b\): train: warmup: Input should be greater than or equal to 0"),
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
    text = BASE.format(variant="", task="", train="") + (
        f'[[findings]]\nkind = "direction"\n{finding}\nexpect = "better"\nclaim = "c"\nsource = "s"\n')
    with pytest.raises(ExperimentError, match=field):
        load_experiment(write(tmp_path, text))


@pytest.mark.parametrize("tasks", ['["copy", "zzz"]', '["copy", "copy"]', '["copy"]'])
def test_transfers_must_name_two_different_tasks(tmp_path, tasks):
    text = BASE.format(variant="", task="", train="") + f"[[transfers]]\ntasks = {tasks}\n"
    with pytest.raises(ExperimentError, match="transfers"):
        load_experiment(write(tmp_path, text))


def test_shipped_experiments_validate():
    for path in sorted((ROOT / "experiments").glob("*.toml")):
        experiment = load_experiment(path)
        assert experiment.grid(), path


def test_grid_layout(tmp_path):
    experiment = load_experiment(SMOKE)
    grid = cells(experiment, tmp_path / "runs", tmp_path / "records")
    assert len(grid) == 4
    assert {c.out.relative_to(tmp_path / "runs").as_posix() for c in grid} == {
        "post-norm/copy/seed-0", "post-norm/copy/seed-1", "pre-norm/copy/seed-0", "pre-norm/copy/seed-1"}
    assert {c.record.relative_to(tmp_path / "records").as_posix() for c in grid} == {
        "post-norm/copy/seed-0.json", "post-norm/copy/seed-1.json", "pre-norm/copy/seed-0.json",
        "pre-norm/copy/seed-1.json"}


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
    result = run_grid(load_experiment(SMOKE), tmp_path / "runs", tmp_path / "records", live=False)
    assert {k: s for k, (s, _) in result.items()} == {
        "post-norm/copy/seed-0": "stalled", "post-norm/copy/seed-1": "stalled",  # the smoke budget learns nothing
        "pre-norm/copy/seed-0": "failed", "pre-norm/copy/seed-1": "failed"}
    failure = records.read(tmp_path / "records" / "pre-norm/copy/seed-0.json")
    assert failure.status == "failed" and "boom in pre-norm" in failure.reason
    monkeypatch.setattr(zoo.train, "Trainer", real)  # the next `zoo run` retries failed cells only
    again = run_grid(load_experiment(SMOKE), tmp_path / "runs", tmp_path / "records", live=False)
    assert {s for s, _ in again.values()} == {"stalled"}


@pytest.mark.slow
def test_ray_executor_runs_the_grid_on_a_local_ray_instance(tmp_path):
    ray = pytest.importorskip("ray", reason="the Ray executor needs the ray extra (./setup.sh dev installs it)")
    try:
        result = run_grid(load_experiment(SMOKE), tmp_path / "runs", tmp_path / "records", executor="ray", threads=1,
                          live=False)
    finally:
        ray.shutdown()
    assert {s for s, _ in result.values()} == {"stalled"}  # trained to the end, below the smoke task's floor
    assert all(c.record.exists() for c in cells(load_experiment(SMOKE), tmp_path / "runs", tmp_path / "records"))


def test_tied_embeddings_with_separate_tokenizers_are_rejected_before_training(tmp_path):
    text = BASE.format(variant="", task="", train="").replace(
        'name = "copy"', 'name = "multi30k:de-en"\noptions = {joint = false}')
    with pytest.raises(ExperimentError, match="joint"):
        load_experiment(write(tmp_path, text))  # paper-base ties all embeddings


def test_the_live_grid_prints_a_failure_reason_as_written(tmp_path, monkeypatch):
    """A reason quotes user input; read as markup, '[/]' raised a MarkupError inside `zoo run`'s live display."""
    from rich.console import Console

    from zoo.experiment import view as runner

    experiment = load_experiment(SMOKE)
    grid = cells(experiment, tmp_path / "runs", tmp_path / "records")
    monkeypatch.setattr(runner, "view_state", lambda cell, task, stale=None: "failed")
    monkeypatch.setattr(runner, "read_record", lambda path: None)
    reason = "d_model: Input should be a valid integer (got '[/]'), not '[bold]x'"
    console = Console(record=True, width=400)
    tasks = {task.key: task for task in experiment.config.tasks}
    console.print(runner.GridView("t", grid, tasks, notes={cell.name: reason for cell in grid}))
    assert reason in console.export_text()
