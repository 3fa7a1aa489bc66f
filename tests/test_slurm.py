"""The slurm executor on submitit's LocalExecutor (cluster=local: each job a process on this machine, with
submitit's signals and requeues; no cluster needed): a grid runs as jobs to the local executor's records; a job
signalled mid-run (as Slurm signals one before a preemption or its time limit) is requeued and resumes from its
checkpoint; a job killed mid-run fails its cell, and the next `zoo run` resumes it; a bad option, no Slurm, or no
submitit is one line before anything is written."""

from __future__ import annotations

import re
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest
from grid_files import TRAINING, ffn_plugin, tiny_experiment
from smoke_runs import TRAINED, all_records, experiment_file, run

from zoo.cli import main
from zoo.experiment import load_experiment
from zoo.experiment import record as records
from zoo.experiment.executors import ExecutorError, create
from zoo.experiment.runner import run_grid
from zoo.experiment.slurm import Slurm

LOCAL = ["--executor", "slurm", "--executor-option", "cluster=local"]

# An FFN that, while a cell trains (called from the training loop), notes its process in ZOO_TEST_DIR/forwards and,
# the first time a checkpoint is there, sends its own process ZOO_TEST_SIGNAL: USR2, submitit's requeue signal (what
# Slurm sends before a preemption or the time limit), or KILL (scancel, a lost node, the out-of-memory killer).
STOPPING_FFN = ffn_plugin("slurm-stopping", prelude=TRAINING + '''
import glob



def _note_and_stop_once():
    here = os.environ.get("ZOO_TEST_DIR")
    if not here:
        return
    with open(os.path.join(here, "forwards"), "a") as forwards:
        forwards.write(f"{os.getpid()}\\n")
    stopped = os.path.join(here, "stopped")
    if os.path.exists(stopped) or not glob.glob(os.path.join(here, "runs", "**", "checkpoint.safetensors"),
                                                recursive=True):
        return
    open(stopped, "w").close()
    os.kill(os.getpid(), getattr(signal, "SIG" + os.environ["ZOO_TEST_SIGNAL"]))
''', forward="""
if _training():
    _note_and_stop_once()
return self.w(x)
""")


@pytest.fixture(scope="module")
def stopping(tmp_path_factory):
    """The one-cell experiment of the stopping FFN (its plugin loaded once in this process), and what the local
    executor makes of it uninterrupted: its records and how many FFN calls its training made."""
    folder = tmp_path_factory.mktemp("stopping")
    (folder / "stopping_ffn.py").write_text(textwrap.dedent(STOPPING_FFN))
    path = folder / "exp.toml"
    path.write_text(tiny_experiment("stopping", plugin="stopping_ffn.py", ffn="slurm-stopping", steps=8))
    (folder / "stopped").touch()  # the reference is not stopped
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ZOO_TEST_DIR", str(folder))
        results = run_grid(load_experiment(path), folder / "runs", folder / "out" / "records", live=False)
    assert {status for status, _ in results.values()} == {TRAINED}
    calls = sum(Counter((folder / "forwards").read_text().split()).values())
    return path, _numbers(folder / "out" / "records"), calls


def _numbers(root: Path) -> dict[str, dict]:
    """The records under `root` without what differs between two runs of a cell (smoke_runs.comparable), nor their
    digest, which covers what differs."""
    return {path: {key: value for key, value in record.items() if key != "digest"}
            for path, record in all_records(root).items()}


def _stopped_run(root: Path, path: Path, signal_name: str, monkeypatch) -> list[str]:
    """The `zoo run` command line of the stopping experiment with the slurm executor, its runs in root/runs and its
    records in root/out/records, its cell stopped by `signal_name` the first time it has a checkpoint."""
    monkeypatch.setenv("ZOO_TEST_DIR", str(root))
    monkeypatch.setenv("ZOO_TEST_SIGNAL", signal_name)
    return ["run", str(path), "--runs", str(root / "runs"), "--out", str(root / "out"), "--no-live", *LOCAL]


def _calls(root: Path) -> list[int]:
    """How many FFN calls each process that trained the cell made, in the order they trained."""
    return list(Counter((root / "forwards").read_text().split()).values())


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_grid_runs_as_slurm_jobs_to_the_local_executors_records(tmp_path, capsys):
    path = experiment_file(tmp_path)
    assert main(["run", str(path), "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--no-live",
                 *LOCAL]) == 0, capsys.readouterr().err
    assert f"4 {TRAINED}" in capsys.readouterr().err
    run(path, tmp_path / "local")
    assert _numbers(tmp_path / "out" / "records") == _numbers(tmp_path / "local" / "records")
    logs = sorted((tmp_path / "runs" / ".slurm").glob("*_0_log.out"))  # one job a cell, each log naming its cell
    assert len(logs) == 4 and {log.read_text().split("zoo: smoke ")[1].split()[0] for log in logs} == {
        "post-norm/copy/seed-0", "pre-norm/copy/seed-0", "post-norm/copy/seed-1", "pre-norm/copy/seed-1"}


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_job_signalled_mid_run_is_requeued_and_resumes_from_its_checkpoint(tmp_path, stopping, monkeypatch, capsys):
    path, expected, uninterrupted = stopping
    assert main(_stopped_run(tmp_path, path, "USR2", monkeypatch)) == 0, capsys.readouterr().err
    assert (tmp_path / "stopped").exists()  # it was signalled
    assert _numbers(tmp_path / "out" / "records") == expected
    signalled, requeued = _calls(tmp_path)  # two processes: the job, then the same job requeued
    assert requeued < uninterrupted < signalled + requeued  # from the checkpoint, not from step 0
    log = next((tmp_path / "runs" / ".slurm").glob("*_0_log.out")).read_text()  # one job, run twice
    assert "Requeued job" in log and log.count("zoo: stopping slurm-stopping/copy/seed-0\n") == 2


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_job_killed_mid_run_fails_its_cell_and_the_next_run_resumes_it(tmp_path, stopping, monkeypatch, capsys):
    path, expected, uninterrupted = stopping
    command = _stopped_run(tmp_path, path, "KILL", monkeypatch)
    assert main(command) == 1
    record = records.read(tmp_path / "out" / "records" / "slurm-stopping" / "copy" / "seed-0.json")
    assert record.status == "failed"
    assert re.fullmatch(r"Slurm job \d+ ended without a result \(state \w+\); killed\?; its log: .*_0_log\.err",
                        record.reason), record.reason
    assert record.reason.replace(" ", "") in "".join(capsys.readouterr().err.split())  # in the summary, wrapped
    assert main(command) == 0, capsys.readouterr().err  # nothing stops it now
    assert _numbers(tmp_path / "out" / "records") == expected
    killed, resumed = _calls(tmp_path)
    assert resumed < uninterrupted < killed + resumed  # from the checkpoint, not from step 0


@pytest.mark.parametrize("options, message", [
    ({"partiton": "gpu"}, "executor slurm: partiton: unknown key; did you mean 'partition'?"),
    ({"cluster": "lcoal"}, "executor slurm: cluster: Input should be 'slurm', 'local' or 'debug'"),
    ({"gpus_per_job": -1}, "executor slurm: gpus_per_job: Input should be greater than or equal to 0"),
    ({"extra": {"partition": "gpu"}}, "executor slurm: extra: 'partition' is set by an option of its own (partition)"),
    ({"cluster": "local", "extra": {"exlude": "node7"}},
     "executor slurm: extra: 'exlude' is not a parameter of submitit's Slurm executor; did you mean 'exclude'?"),
])
def test_options_are_validated(options, message):
    with pytest.raises(ExecutorError, match=re.escape(message)):
        create("slurm", **options)


def test_the_options_reach_submitit(tmp_path):
    import submitit

    executor = create("slurm", cluster="local", partition="gpu", timeout_min=90, gpus_per_job=2, mem_gb=16,
                      extra={"exclude": "node7"})
    assert isinstance(executor, Slurm) and executor.concurrent == 1
    seen = {}

    class Recording(submitit.AutoExecutor):
        def update_parameters(self, **parameters):
            seen.update(parameters)
            super().update_parameters(**parameters)

        def submit(self, *args, **kwargs):
            raise AssertionError("not submitted")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(submitit, "AutoExecutor", Recording)
        with pytest.raises(AssertionError, match="not submitted"):
            executor._submit([_cell(tmp_path)])
    assert {key: seen[key] for key in ("slurm_partition", "timeout_min", "gpus_per_node", "mem_gb", "slurm_exclude",
                                       "cpus_per_task", "name")} == {
        "slurm_partition": "gpu", "timeout_min": 90, "gpus_per_node": 2, "mem_gb": 16, "slurm_exclude": "node7",
        "cpus_per_task": 1, "name": "zoo-smoke"}
    assert (tmp_path / "runs" / ".slurm").is_dir()  # beside the run directories


def _cell(root: Path):
    from zoo.experiment.grid import Cell

    return Cell(str(root / "smoke.toml"), "smoke", "post-norm", "copy", 0, str(root / "runs"), str(root / "records"))


@pytest.mark.parametrize("flags, said", [
    (["--executor-option", "partiton=gpu"], "executor slurm: partiton: unknown key; did you mean 'partition'?"),
    ([], "executor slurm: no Slurm here (sbatch is not on PATH)"),
    (["--executor-option", "cluster=local", "--threads", "2"],
     "--threads: executor slurm takes no threads (its options: cluster, folder,"),
])
def test_a_bad_option_or_no_slurm_is_one_line_before_anything_is_written(tmp_path, capsys, monkeypatch, flags, said):
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch here, wherever the tests run
    path = experiment_file(tmp_path)
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--runs", str(tmp_path / "runs"),
                 "--executor", "slurm", *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0], err
    assert not (tmp_path / "out").exists() and not (tmp_path / "runs").exists()


def test_without_submitit_it_is_one_line_naming_the_extra(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "submitit", None)  # `import submitit` fails, as where it is not installed
    path = experiment_file(tmp_path)
    assert main(["run", str(path), "--out", str(tmp_path / "out"), *LOCAL]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "executor: 'slurm' needs the slurm extra: pip install" in err[0], err
    assert "[slurm]" in err[0] and not (tmp_path / "out").exists()
    assert main(["list", "executor.*"]) == 0  # zoo itself works without it, and lists the executor
    assert "slurm" in capsys.readouterr().out
