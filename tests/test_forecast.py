"""`zoo run --dry-run`: what a grid would do and what its training would cost, with nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from zoo.cli import dry_run as cli_dry_run
from zoo.cli.dry_run import Left, dry_run_summary, progress_bar
from zoo.experiment import forecast as forecasts
from zoo.experiment import load_experiment, store
from zoo.experiment import record as record_file
from zoo.experiment.forecast import forecast
from zoo.experiment.grid import cells, definitions, reusable
from zoo.experiment.runner import run_grid

ROOT = Path(__file__).resolve().parent.parent
SMOKE = (ROOT / "experiments" / "smoke.toml").read_text()


def write(folder: Path, text: str) -> Path:
    path = folder / "smoke.toml"
    path.write_text(text)
    return path


def test_a_grid_never_run_has_every_cell_new_and_no_rate(tmp_path):
    experiment = load_experiment(write(tmp_path, SMOKE))
    [row] = forecast(experiment, cells(experiment, tmp_path / "runs", tmp_path / "out" / "records"))
    assert (row.task, row.cells, row.recorded, row.new, row.stale, row.copied) == ("copy", 4, 0, 4, 0, 0)
    assert row.steps == 4 * 40 and row.seconds_per_step is None and row.run_seconds is None


@pytest.mark.slow
def test_the_estimate_counts_stale_and_new_cells_at_the_recorded_seconds_per_step(tmp_path):
    records = tmp_path / "out" / "records"
    run_grid(load_experiment(write(tmp_path, SMOKE)), tmp_path / "runs", records, live=False)
    rates = sorted(r["summary"]["train_seconds"] / r["summary"]["steps"]
                   for r in (json.loads(p.read_text()) for p in records.rglob("seed-*.json")))
    changed = load_experiment(write(tmp_path, SMOKE.replace("seeds = [0, 1]", "seeds = [0, 1, 2]")
                                    .replace("steps = 40", "steps = 60")))
    [row] = forecast(changed, cells(changed, tmp_path / "runs", records))
    assert (row.cells, row.recorded, row.stale, row.new) == (6, 0, 4, 2)
    assert row.seconds_per_step == pytest.approx((rates[1] + rates[2]) / 2)  # the median of the 4 records
    assert row.run_seconds == pytest.approx(row.seconds_per_step * 6 * 60)
    # a second experiment that can copy them: nothing of the old definition is left to run
    same = load_experiment(write(tmp_path, SMOKE.replace('name = "smoke"', 'name = "other"')))
    grid = reusable(same, cells(same, tmp_path / "runs-other", tmp_path / "other" / "records"), [tmp_path / "out"])
    [row] = forecast(same, grid, [tmp_path / "out"])
    assert (row.copied, row.new, row.run_seconds) == (4, 0, 0.0)
    if torch.cuda.is_available():
        return
    # records trained on a GPU give no rate for runs that will train on this CPU
    for path in records.rglob("seed-*.json"):
        record = json.loads(path.read_text())
        record["summary"]["device"] = "cuda (NVIDIA H200)"
        record_file.write(path, record_file.Record.model_validate(record))  # as written: its digest agrees
    [row] = forecast(changed, cells(changed, tmp_path / "runs", records))
    assert row.seconds_per_step is None and row.run_seconds is None


def test_dry_run_writes_nothing_and_prints_the_table(tmp_path):
    path = write(tmp_path, SMOKE)
    done = subprocess.run([sys.executable, "-m", "zoo", "run", str(path), "--dry-run", "--runs", str(tmp_path / "runs"),
                           "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "nothing is trained, moved or written" in done.stdout
    summary = " ".join(done.stdout.split())  # rich wraps the line to the terminal
    assert "training time left unknown for" in summary and "about 0.0" not in summary  # no record gives a rate
    assert sorted(p.name for p in tmp_path.iterdir()) == ["smoke.toml"]


def test_a_grid_run_into_a_new_folder_is_timed_by_the_committed_records(tmp_path):
    """A newcomer's `zoo run experiments/quickstart.toml --out my-quickstart --dry-run` said 'unknown' hours, with
    quickstart's own records committed in reports/quickstart: they time the runs, and nothing of theirs is copied."""
    done = subprocess.run([sys.executable, "-m", "zoo", "run", "experiments/quickstart.toml", "--dry-run", "--runs",
                           str(tmp_path / "runs"), "--out", str(tmp_path / "mine")], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    summary = " ".join(done.stdout.split())
    assert "unknown" not in summary and "about 0." in summary and "hours of training left" in summary
    assert "│ copy │ 15 │ 0 │ 0 │ 0 │ 15 │" in summary  # all new: the committed records time, they are not copied
    assert not (tmp_path / "mine").exists()


def test_a_finished_grid_says_nothing_is_left_not_zero_hours():
    summary = dry_run_summary(Left(), [], 2, to_run=0)
    assert summary.startswith("nothing left to train") and "0.0" not in summary
    row = forecasts.TaskForecast("copy", new=3, steps=3 * 1200, seconds_per_step=2.0, threads=1)
    left = Left()
    left.add(row, workers=2, cores=2)
    assert dry_run_summary(left, [], 2, to_run=3).startswith(
        "about 2.0 hours of training left, one run after another (2.0 CPU core-hours); with 2 workers about 1.0 hours")


@pytest.mark.parametrize("device, threads, workers, cores, wall, core, gpu", [
    ("cpu", 1, 2, 2, 5.0, 10.0, 0.0),  # the ablations: two 1-thread runs at once on 2 cores
    ("cpu", 2, 1, 2, 10.0, 20.0, 0.0),  # the scale study: one 2-thread run at a time
    ("cpu", 2, 2, 2, 10.0, 20.0, 0.0),  # a second worker only shares the same 2 cores
    ("cpu", 2, 4, 8, 2.5, 20.0, 0.0),  # four 2-thread runs fit on 8 cores
    ("cpu", None, 2, 8, 5.0, 40.0, 0.0),  # no threads set: each of 2 workers' runs gets 4 of the 8 cores
    ("cuda", None, 4, 2, 2.5, 0.0, 10.0),  # runs share the GPU: the CPU's cores do not bound them
])
def test_hours_left_count_the_cores_each_run_keeps_busy(device, threads, workers, cores, wall, core, gpu):
    """10 hours of runs, one after another: what the workers make of them, and what they cost in core-hours."""
    row = forecasts.TaskForecast("t", new=10, steps=10 * 3600, seconds_per_step=1.0, device=device, threads=threads)
    left = Left()
    left.add(row, workers, cores)
    assert (left.run / 3600, left.wall / 3600, left.core / 3600, left.gpu / 3600) == (10.0, wall, core, gpu)


def test_the_forecast_reads_the_threads_and_device_the_runs_are_defined_with(tmp_path):
    experiment = load_experiment(write(tmp_path, SMOKE.replace("threads = 1", "threads = 3")))
    [row] = forecast(experiment, cells(experiment, tmp_path / "runs", tmp_path / "out" / "records"))
    assert (row.threads, row.device) == (3, "cpu")


def test_a_grid_declared_for_a_gpu_is_forecast_on_a_machine_without_one(tmp_path):
    experiment = load_experiment(write(tmp_path, SMOKE.replace('device = "cpu"', 'device = "cuda"')))
    [row] = forecast(experiment, cells(experiment, tmp_path / "runs", tmp_path / "out" / "records"))
    assert row.new == 4 and row.seconds_per_step is None


def test_definitions_built_once_per_variant_and_task_are_the_stores_own(tmp_path):
    """`grid.definitions` builds one definition per variant and task and varies the seed: exactly what
    `store.definition` says for every cell, also of a variant with its own training settings."""
    own = '"residual.kind" = "pre-norm"}'
    experiment = load_experiment(write(tmp_path, SMOKE.replace("seeds = [0, 1]", "seeds = [3, 0, 7]")
                                       .replace(own, own + "\ntrain = {lr = 1e-3, warmup = 5}")))
    define = definitions(experiment)
    for variant, task, seed in experiment.grid():
        assert define(variant, task, seed) == store.definition(experiment, variant, task, seed)


def test_a_grid_of_many_seeds_is_forecast_from_one_definition_per_variant_and_task(tmp_path, monkeypatch):
    """`zoo run --dry-run` of 10^5 cells took minutes: each cell built its definition and looked at its files.
    Now a cell with nothing on disk is new at once, and definitions are built per variant and task."""
    seeds = ", ".join(map(str, range(500)))
    experiment = load_experiment(write(tmp_path, SMOKE.replace("seeds = [0, 1]", f"seeds = [{seeds}]")))
    built, looked = [], []
    monkeypatch.setattr(store, "definition", lambda *args, real=store.definition: built.append(args) or real(*args))
    monkeypatch.setattr(forecasts, "cell_state", lambda cell, *args, real=forecasts.cell_state:
                        looked.append(cell.name) or real(cell, *args))
    grid = cells(experiment, tmp_path / "runs", tmp_path / "out" / "records")
    (grid[7].out / "sub").mkdir(parents=True)  # a run directory with nothing in it yet: still new
    done = []
    [row] = forecast(experiment, grid, progress=lambda n, total: done.append((n, total)))
    assert (row.cells, row.new, row.steps) == (1000, 1000, 1000 * 40)
    assert len(built) == 2 and looked == [grid[7].name]
    assert done[-1] == (1000, 1000) and len(done) == 1000


def test_the_progress_bar_shows_only_for_slow_work(monkeypatch):
    from io import StringIO

    from rich.console import Console

    for after, terminal, shown in ((60.0, True, False), (60.0, False, False), (0.0, True, True)):
        screen = StringIO()
        monkeypatch.setattr(cli_dry_run, "errors", Console(file=screen, force_terminal=terminal, width=100))
        with progress_bar("comparing definitions", after=after) as progress:
            for done in range(1, 11):
                progress(done, 10)
        assert ("comparing definitions" in screen.getvalue()) == shown
        assert shown or screen.getvalue() == ""  # not even an empty line, on a terminal or in a log


def test_a_dry_run_prices_a_grid_whose_corpus_is_not_here_and_says_how_to_get_it(tmp_path):
    """A fresh clone has no ../shared/data: the dry run still prices the grid (the committed ablations' records
    time it), and names what works for `zoo run`: zoo data get, $ZOO_DATA_DIR, the file's data_dir (not only
    `zoo train --data-dir`)."""
    env = {k: v for k, v in os.environ.items() if k != "ZOO_DATA_DIR"}
    done = subprocess.run([sys.executable, "-m", "zoo", "run", str(ROOT / "experiments" / "ablations.toml"),
                           "--dry-run", "--tasks", "multi30k-de-en", "--runs", str(tmp_path / "runs"), "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**env, "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stdout.split())
    assert "data_dir: not set" in said and "zoo data get CORPUS" in said and "$ZOO_DATA_DIR=data" in said
    assert "`data_dir` in the experiment file" in said and "The grid is priced all the same" in said
    assert "hours of training left" in said  # priced from the committed records
    assert not (tmp_path / "out").exists() and not (tmp_path / "runs").exists()
