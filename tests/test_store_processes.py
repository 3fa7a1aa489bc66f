"""The run store under concurrency and kills: cell locks, two `zoo run`s at once, workers that outlive or lose
their parent, Ctrl-C, and SIGKILL at random moments, each ending with the records of an uninterrupted grid."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time

import pytest
from smoke_runs import ENV, all_records, experiment_file, zoo_run

from zoo import rundir
from zoo.atomic import TEMP_SUFFIX
from zoo.experiment import load_experiment, store
from zoo.experiment import record as records
from zoo.experiment.cell import execute
from zoo.experiment.grid import cells


# -- locks ----------------------------------------------------------------------------------------
def test_a_locked_cell_is_left_to_its_holder_then_waited_for(tmp_path):
    experiment = load_experiment(experiment_file(tmp_path))
    cell = cells(experiment, tmp_path / "runs", tmp_path / "records")[0]
    other = cell.lock
    assert other.acquire()
    try:
        status, reason = execute(cell)
        assert status == "locked" and str(os.getpid()) in reason
        assert not cell.out.exists()  # nothing written while another process holds it
    finally:
        other.release()
    assert cell.lock.holder() is None


def test_a_workers_lock_names_the_zoo_run_it_works_for(tmp_path, monkeypatch):
    monkeypatch.setattr(store, "_run_pid", 4242)  # what a local executor's worker is told at start
    lock = store.CellLock(tmp_path / "cell.lock")
    assert lock.acquire()
    try:
        assert store.CellLock(tmp_path / "cell.lock").holder() == 4242
    finally:
        lock.release()


@pytest.mark.slow
def test_waiting_runner_skips_what_the_holder_recorded(tmp_path):
    experiment = load_experiment(experiment_file(tmp_path))
    cell = cells(experiment, tmp_path / "runs", tmp_path / "records")[0]
    holder = cell.lock
    assert holder.acquire()
    outcome: dict = {}
    waiter = threading.Thread(target=lambda: outcome.update(result=execute(cell, wait=True)))
    waiter.start()
    time.sleep(0.5)
    assert waiter.is_alive()  # blocked on the lock
    holder.release()
    waiter.join(timeout=120)
    assert outcome["result"][0] == "complete"


@pytest.mark.slow
def test_two_concurrent_zoo_runs_train_each_cell_once(tmp_path):
    path = experiment_file(tmp_path)
    command = zoo_run(path, tmp_path)
    first = subprocess.Popen(command, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    second = subprocess.Popen(command, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for process in (first, second):
        _, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
    for cell in cells(load_experiment(path), tmp_path / "runs", tmp_path / "out" / "records"):
        steps = [row["step"] for row in rundir.read_metrics(cell.out / rundir.METRICS) if "event" not in row]
        assert steps == sorted(set(steps)) and steps[-1] == 40, cell.name  # one rising sequence: trained once
        assert records.read(cell.record).status == "complete"
    assert (tmp_path / "out" / "records" / ".floors" / "copy.json").is_file()  # zoo run scores the floors too


@pytest.mark.slow
def test_workers_die_with_their_parent(tmp_path):
    path = experiment_file(tmp_path, **{"steps = 40": "steps = 400"})
    command = zoo_run(path, tmp_path, "--workers", "2")
    process = subprocess.Popen(command, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    grid = cells(load_experiment(path), tmp_path / "runs", tmp_path / "out" / "records")
    deadline = time.time() + 120
    while time.time() < deadline and not any(rundir.read_metrics(c.out / rundir.METRICS) for c in grid):
        time.sleep(0.2)
    process.send_signal(signal.SIGKILL)
    process.wait()
    time.sleep(3)
    assert all(cell.lock.holder() is None for cell in grid)  # the workers are gone, and so are their locks
    sizes = [(c.out / rundir.METRICS).stat().st_size if (c.out / rundir.METRICS).exists() else 0 for c in grid]
    time.sleep(2)
    assert sizes == [(c.out / rundir.METRICS).stat().st_size if (c.out / rundir.METRICS).exists() else 0
                     for c in grid]  # nobody writes any more


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["1", "2"])
def test_ctrl_c_stops_a_grid_with_one_line_and_no_traceback(tmp_path, workers):
    """A terminal's Ctrl-C signals the whole process group, so the workers too; with one worker the cell
    trains in a thread of `zoo run` itself, which must not abort the interpreter on its way out. The child
    starts with SIGINT at its default, as from a terminal: a test suite run as a background job (`cmd &`
    without job control) inherits SIGINT ignored, and `zoo run` rightly keeps ignoring it there."""
    path = experiment_file(tmp_path, **{"steps = 40": "steps = 4000"})
    command = zoo_run(path, tmp_path, "--workers", workers)
    process = subprocess.Popen(command, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    grid = cells(load_experiment(path), tmp_path / "runs", tmp_path / "out" / "records")
    deadline = time.time() + 120
    while time.time() < deadline and not any(rundir.read_metrics(c.out / rundir.METRICS) for c in grid):
        time.sleep(0.2)
    os.killpg(process.pid, signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert "zoo: interrupted" in err and "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "terminate called" not in err, err
    time.sleep(1)
    assert all(cell.lock.holder() is None for cell in grid)  # the workers are gone, and so are their locks


# -- kills at random moments ----------------------------------------------------------------------
@pytest.mark.slow
def test_kills_at_random_moments_end_with_the_records_of_an_uninterrupted_grid(tmp_path):
    path = experiment_file(tmp_path)
    clean = subprocess.run(zoo_run(path, tmp_path / "clean"), env=ENV, capture_output=True, text=True)
    assert clean.returncode == 0, clean.stderr
    killer = random.Random(2026)
    for attempt in range(3):
        root = tmp_path / f"killed-{attempt}"
        for _ in range(3):
            process = subprocess.Popen(zoo_run(path, root), env=ENV, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)
            time.sleep(killer.uniform(0.5, 6.0))
            process.send_signal(signal.SIGKILL)
            process.wait()
        resumed = subprocess.run(zoo_run(path, root), env=ENV, capture_output=True, text=True)
        assert resumed.returncode == 0, resumed.stderr
        assert all_records(root / "out" / "records") == all_records(tmp_path / "clean" / "out" / "records")
        assert not [p for p in (root / "runs").rglob(f"*{TEMP_SUFFIX}") if store.STALE not in p.parts]
