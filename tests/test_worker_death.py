"""Workers can die: a worker process killed under its cell (kill -9, the out-of-memory killer) or a cell's code
that exits (`sys.exit()`, `os._exit()`) gives that cell a failed record saying how it died; the other cells go
on, and `zoo run` ends with exit 1 and its summary. Before, `multiprocessing.Pool.starmap` waited forever for a
killed worker's task, and a `sys.exit()` in a forward ended a one-worker run with exit 0 and no record."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from grid_files import TRAINING, ffn_plugin, tiny_experiment
from smoke_runs import TRAINED

# An FFN whose forward ends its process the first time it trains (not while `zoo run` checks the plugin's
# components before the grid starts): the marker file makes it once per grid.
DYING_FFN = ffn_plugin("dying", prelude=TRAINING + """
MARKER = os.environ["ZOO_TEST_MARKER"]
HOW = os.environ["ZOO_TEST_HOW"]


def _die_once():
    try:
        os.close(os.open(MARKER, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return
    if HOW == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif HOW == "os_exit":
        os._exit(7)
    else:
        sys.exit(0)
""", forward="""
if _training():
    _die_once()
return self.w(x)
""")

EXPERIMENT = tiny_experiment("dying", seeds=(0, 1, 2), plugin="dying_ffn.py", ffn="dying")


def _run(tmp_path: Path, how: str, *flags: str) -> tuple[subprocess.CompletedProcess, Path]:
    (tmp_path / "dying_ffn.py").write_text(textwrap.dedent(DYING_FFN))
    (tmp_path / "exp.toml").write_text(EXPERIMENT)
    env = {**os.environ, "ZOO_TEST_MARKER": str(tmp_path / "died"), "ZOO_TEST_HOW": how}
    done = subprocess.run([sys.executable, "-m", "zoo", "run", str(tmp_path / "exp.toml"), "--out",
                           str(tmp_path / "out"), "--runs", str(tmp_path / "runs"), "--no-live", *flags],
                          capture_output=True, text=True, timeout=240, env=env, cwd=tmp_path)
    return done, tmp_path / "out" / "records" / "dying" / "copy"


def _statuses(records: Path) -> dict[int, tuple[str, str]]:
    found = {}
    for seed in range(3):
        record = json.loads((records / f"seed-{seed}.json").read_text())
        found[seed] = (record["status"], record["reason"])
    return found


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("how", "said"), [("kill", "worker killed by signal 9 (SIGKILL); out of memory?"),
                                           ("os_exit", "worker exited with code 7")])
def test_a_worker_that_dies_under_its_cell_fails_that_cell_and_the_grid_goes_on(tmp_path, how, said):
    done, records = _run(tmp_path, how, "--workers", "2")
    assert done.returncode == 1, done.stderr
    statuses = _statuses(records)
    failed = [seed for seed, (status, _) in statuses.items() if status == "failed"]
    assert len(failed) == 1 and said in statuses[failed[0]][1]
    assert sorted(status for status, _ in statuses.values()) == ["complete", "complete", "failed"]
    assert "Traceback" not in done.stderr and f"1 failed, 2 {TRAINED}" in done.stderr
    assert said in done.stderr


@pytest.mark.timeout(300)
@pytest.mark.parametrize("flags", [(), ("--workers", "2")], ids=["one-worker", "two-workers"])
def test_sys_exit_in_a_forward_is_a_failed_record_not_a_silent_exit_0(tmp_path, flags):
    done, records = _run(tmp_path, "sys_exit", *flags)
    assert done.returncode == 1, done.stderr
    statuses = _statuses(records)
    failed = [reason for status, reason in statuses.values() if status == "failed"]
    assert failed == ["the cell's code called sys.exit(0)"]
    assert "Traceback" not in done.stderr


@pytest.mark.timeout(300)
def test_a_killed_grid_resumes_the_dead_cell_on_the_next_run(tmp_path):
    _run(tmp_path, "kill", "--workers", "2")
    again, records = _run(tmp_path, "kill", "--workers", "2")  # the marker is there: nobody dies now
    assert again.returncode == 0, again.stderr
    assert {status for status, _ in _statuses(records).values()} == {"complete"}


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_killed_ray_worker_fails_its_cell_and_the_grid_goes_on(tmp_path):
    pytest.importorskip("ray", reason="the Ray executor needs the ray extra (./setup.sh dev installs it)")
    done, records = _run(tmp_path, "kill", "--executor", "ray", "--threads", "1")
    assert done.returncode == 1, done.stderr
    statuses = _statuses(records)
    failed = [reason for status, reason in statuses.values() if status == "failed"]
    assert len(failed) == 1 and failed[0].startswith("Ray worker died"), failed
    assert sorted(status for status, _ in statuses.values()) == ["complete", "complete", "failed"]
