"""Executors: an open registry behind one protocol; options typed; a bad name or option is one line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from smoke_runs import TRAINED

from zoo.cli import main
from zoo.errors import RegistryError, ZooError
from zoo.experiment import load_experiment
from zoo.experiment import record as records
from zoo.experiment.cell import execute
from zoo.experiment.executors import (
    EXECUTORS,
    Executor,
    ExecutorError,
    ExecutorOptions,
    Local,
    Ray,
    create,
    register_executor,
)
from zoo.experiment.grid import cells
from zoo.experiment.runner import run_grid

SMOKE = Path(__file__).resolve().parent.parent / "experiments" / "smoke.toml"

PLUGIN = '''
from zoo.experiment.executors import Executor, ExecutorOptions, register_executor


class QueueOptions(ExecutorOptions):
    queue: str = "short"


@register_executor("queue-test")
class Queue(Executor):
    """Sends cells to a queue (a test's)."""

    Options = QueueOptions

    def run(self, grid, results):
        for cell in grid:
            results[cell.name] = ("failed", f"queued on {self.options.queue}")
'''


class InlineOptions(ExecutorOptions):
    seeds: list[int] | None = None  # run only these seeds; the others are left out of the results


@pytest.fixture
def inline():
    """A test-registered executor running the cells in this process, one by one; unregistered afterwards."""

    @register_executor("inline-test")
    class Inline(Executor):
        """Runs the cells here, one by one (a test's)."""

        Options = InlineOptions
        seen: list[str] = []

        def run(self, grid, results):
            for cell in grid:
                if self.options.seeds is None or cell.seed in self.options.seeds:
                    Inline.seen.append(cell.name)
                    results[cell.name] = execute(cell)

    yield Inline
    EXECUTORS.unregister("inline-test")


def test_the_registry_lists_local_and_ray():
    assert EXECUTORS.names()[:2] == ["local", "ray"]
    assert EXECUTORS.get("local") is Local and EXECUTORS.get("ray") is Ray
    assert isinstance(create("local"), Local) and create("local").name == "local"


def test_a_registered_executor_runs_the_grid_through_run_grid(tmp_path, inline):
    experiment = load_experiment(SMOKE)
    results = run_grid(experiment, tmp_path / "runs", tmp_path / "records", executor="inline-test", seeds=[1],
                       live=False)
    ran = {"post-norm/copy/seed-1", "pre-norm/copy/seed-1"}
    assert set(inline.seen) == ran
    assert {name: status for name, (status, _) in results.items()} == {
        **{name: TRAINED for name in ran}, "post-norm/copy/seed-0": "failed", "pre-norm/copy/seed-0": "failed"}
    assert results["post-norm/copy/seed-0"][1] == "not run"  # a cell the executor left out is said to be
    assert records.read(tmp_path / "records" / "pre-norm" / "copy" / "seed-1.json").status == "complete"


def test_an_unknown_executor_names_the_valid_ones(tmp_path, capsys):
    with pytest.raises(RegistryError, match=r"unknown executor 'pbs' \(valid: local, ray, slurm; a name from a plugin"):
        run_grid(load_experiment(SMOKE), tmp_path / "runs", tmp_path / "records", executor="pbs", live=False)
    assert main(["run", str(SMOKE), "--executor", "pbs", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "valid: local, ray, slurm" in err
    assert not (tmp_path / "out").exists()  # refused before anything was written


@pytest.mark.parametrize("name, options, message", [
    ("local", {"workers": 0}, "executor local: workers: Input should be greater than or equal to 1"),
    ("local", {"workers": "2"}, "executor local: workers: Input should be a valid integer"),
    ("local", {"address": "x"}, "executor local: address: unknown key (valid keys: workers)"),
    ("ray", {"threds": 2}, "executor ray: threds: unknown key; did you mean 'threads'?"),
    ("ray", {"threads": 0}, "executor ray: threads: Input should be greater than or equal to 1"),
])
def test_options_are_validated(name, options, message):
    with pytest.raises(ExecutorError, match=re.escape(message)) as raised:
        create(name, **options)
    assert isinstance(raised.value, ZooError)


def test_the_command_line_passes_the_flags_an_executor_declares(tmp_path, capsys):
    assert main(["run", str(SMOKE), "--executor", "ray", "--threads", "0", "--dry-run"]) == 2
    assert "executor ray: threads" in capsys.readouterr().err
    assert main(["run", str(SMOKE), "--executor", "local", "--executor-option", "threads=2", "--dry-run"]) == 2
    assert "executor local: threads: unknown key" in capsys.readouterr().err  # --threads is ray's, not local's
    assert main(["run", str(SMOKE), "--executor-option", "workers", "--dry-run"]) == 2
    assert "--executor-option 'workers': expected KEY=VALUE" in capsys.readouterr().err


def test_a_plugin_executor_is_listed_and_runs_with_its_own_options(tmp_path, capsys):
    plugin = tmp_path / "queue_executor.py"
    plugin.write_text(PLUGIN)
    try:
        assert main(["list", "executor.*", "--plugin", str(plugin)]) == 0
        out = capsys.readouterr().out
        assert "queue-test" in out and "queue='short'" in out and "local" in out and "ray" in out
        code = main(["run", str(SMOKE), "--plugin", str(plugin), "--executor", "queue-test", "--executor-option",
                     "queue=long", "--no-live", "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out")])
        assert code == 1  # every cell 'failed'
        assert "queued on long" in capsys.readouterr().err
    finally:
        EXECUTORS.unregister("queue-test")


def test_a_flag_of_another_executor_is_one_line(capsys):
    """--workers with the ray executor (or --threads with local) would be ignored; it is refused instead."""
    assert main(["run", str(SMOKE), "--executor", "local", "--threads", "2", "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["zoo: error: --threads: executor local takes no threads (its options: workers)"]


ENDED = r"( after \d+ s)? \(trained to the end, but .*\)"  # a stalled cell's line: when, and why it stalled


def test_in_a_log_file_the_grid_prints_a_line_per_change_and_ends_its_lines(tmp_path):
    """rich redraws nothing in a file, so `zoo run > log 2>&1 &` logged nothing until the end, and then ran the
    final table's last line ('... elapsed 658 s') into the next line printed. With 2 workers the cells they
    trained showed as another run's ('locked', 'started elsewhere'): a worker's lock now names its run."""
    import io

    from rich.console import Console

    log = io.StringIO()
    run_grid(load_experiment(SMOKE), tmp_path / "runs", tmp_path / "records", workers=2,
             console=Console(file=log, width=200))
    text = log.getvalue()
    stamped = [line.split(" ", 1)[1] for line in text.splitlines() if re.match(r"\d\d:\d\d:\d\d ", line)]
    assert stamped[0] == "4 cells: 4 pending"  # counted before anything ran
    for cell in ("post-norm/copy/seed-0", "pre-norm/copy/seed-0", "post-norm/copy/seed-1", "pre-norm/copy/seed-1"):
        assert sum(re.fullmatch(rf"{cell}: {TRAINED}{ENDED}", line) is not None for line in stamped) == 1
    assert not [line for line in stamped if "elsewhere" in line or "locked" in line]
    assert text.index("zoo run smoke: 4 runs") > text.index(stamped[-1])  # then the final table
    assert re.search(r"elapsed \d+ s\n$", text)


def test_a_log_shows_cells_of_another_definition_as_stale_until_they_run_again(tmp_path):
    """Their old records and run directories stay until each cell's turn: the log counted them as complete (or
    started), and a cell first seen complete was never read again, so its new run logged nothing."""
    import io

    from rich.console import Console

    experiment = tmp_path / "smoke.toml"
    experiment.write_text(SMOKE.read_text())
    run_grid(load_experiment(experiment), tmp_path / "runs", tmp_path / "records", console=Console(file=io.StringIO()))
    experiment.write_text(SMOKE.read_text().replace("steps = 40", "steps = 30"))
    log = io.StringIO()
    run_grid(load_experiment(experiment), tmp_path / "runs", tmp_path / "records", console=Console(file=log, width=200))
    stamped = [line.split(" ", 1)[1] for line in log.getvalue().splitlines() if re.match(r"\d\d:\d\d:\d\d ", line)]
    assert stamped[0] == "4 cells: 4 stale"
    for cell in ("post-norm/copy/seed-0", "pre-norm/copy/seed-0", "post-norm/copy/seed-1", "pre-norm/copy/seed-1"):
        assert sum(re.fullmatch(rf"{cell}: {TRAINED}{ENDED}", line) is not None for line in stamped) == 1
        assert records.read(tmp_path / "records" / f"{cell}.json").definition["train"]["steps"] == 30


@pytest.mark.parametrize("workers, threads, cores, device, warned", [
    (2, 2, 2, "cpu", True),  # the scale study's 2-thread runs, two at once on the 2-core machine
    (1, 2, 2, "cpu", False),  # one at a time: as declared
    (2, 1, 2, "cpu", False),  # the ablations: 1-thread runs, two at once
    (2, 2, 4, "cpu", False),
    (4, 2, 4, "cpu", True),
    (2, None, 2, "cpu", False),  # threads not set: the local executor gives each worker cores // workers
    (2, 2, 2, "cuda", False),  # GPU runs (the scale study's seeds on an H200): their threads feed the GPU
])
def test_workers_whose_runs_want_more_threads_than_cores_are_warned(tmp_path, workers, threads, cores, device,
                                                                     warned):
    text = SMOKE.read_text().replace("threads = 1", "" if threads is None else f"threads = {threads}")
    text = text.replace('device = "cpu"', f'device = "{device}"')
    (tmp_path / "smoke.toml").write_text(text)
    experiment = load_experiment(tmp_path / "smoke.toml")

    grid = cells(experiment, tmp_path / "runs", tmp_path / "records")
    message = Local(Local.Options(workers=workers)).oversubscribed(experiment, grid, cores=cores)
    assert (message is not None) == warned
    if warned:
        fit = max(1, cores // threads)
        assert f"want {workers * threads} CPU threads on {cores} cores" in message and f"--workers {fit}" in message
