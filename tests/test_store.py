"""The run store: stale definitions, locks, safe paths, fault isolation, kills at random moments."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from zoo import rundir
from zoo.atomic import TEMP_SUFFIX
from zoo.experiment import ExperimentError, load_experiment, store
from zoo.experiment import record as records
from zoo.experiment.cell import execute
from zoo.experiment.grid import cells
from zoo.experiment.runner import run_grid

ROOT = Path(__file__).resolve().parent.parent
SMOKE = (ROOT / "experiments" / "smoke.toml").read_text()
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
TIMINGS = {"tok_per_s", "seconds", "train_seconds", "finished"}


def experiment_file(folder: Path, text: str = SMOKE, **replace: str) -> Path:
    for old, new in replace.items():
        assert old in text
        text = text.replace(old, new)
    path = folder / "smoke.toml"
    path.write_text(text)
    return path


def run(path: Path, root: Path) -> dict:
    return run_grid(load_experiment(path), root / "runs", root / "records", live=False)


def comparable(value):
    """A record without what legitimately differs between two runs of it: timings and provenance."""
    if isinstance(value, dict):
        return {k: comparable(v) for k, v in value.items() if k not in TIMINGS and k != "provenance"}
    if isinstance(value, list):
        return [comparable(v) for v in value]
    return value


def all_records(root: Path) -> dict[str, dict]:
    return {p.relative_to(root).as_posix(): comparable(json.loads(p.read_text()))
            for p in sorted(root.rglob("seed-*.json")) if store.STALE not in p.parts}


# -- definitions and stale cells ------------------------------------------------------------------
def test_definition_names_what_decides_the_numbers(tmp_path):
    experiment = load_experiment(experiment_file(tmp_path))
    variant, task, seed = experiment.grid()[0]
    defined = store.definition(experiment, variant, task, seed)
    assert set(defined) == {"spec", "task", "data", "train", "decode"}
    assert defined["train"]["steps"] == 40 and defined["train"]["seed"] == seed and defined["data"] == {}
    other = load_experiment(experiment_file(tmp_path, **{"steps = 40": "steps = 80"}))
    changed = store.changes(defined, store.definition(other, variant, task, seed))
    assert changed == ["train.steps: 40 -> 80"]


def test_provenance_names_what_decides_the_floats_besides_the_definition():
    made_on = records.provenance(concurrent=2)
    assert made_on["torch"] == torch.__version__ and made_on["concurrent_runs"] == 2
    assert made_on["cpu_capability"] == torch.backends.cpu.get_cpu_capability()  # e.g. AVX2, AVX512


def test_records_name_the_commit_their_grid_started_from(tmp_path, monkeypatch):
    """Workers load the code once: a commit made while a grid runs is not what it runs."""
    commits = iter(["c0ffee000001", "c0ffee000002"])
    monkeypatch.setattr(records, "zoo_commit", lambda: next(commits))
    run(experiment_file(tmp_path), tmp_path)
    made = {json.loads(p.read_text())["provenance"]["commit"] for p in (tmp_path / "records").rglob("seed-*.json")}
    assert made == {"c0ffee000001"}


@pytest.mark.slow
def test_changed_steps_retrain_every_cell_and_move_the_old_ones_aside(tmp_path):
    assert {s for s, _ in run(experiment_file(tmp_path), tmp_path).values()} == {"complete"}
    before = all_records(tmp_path / "records")
    run(experiment_file(tmp_path, **{"steps = 40": "steps = 60"}), tmp_path)
    after = all_records(tmp_path / "records")
    assert set(after) == set(before)
    assert all(r["summary"]["steps"] == 60 for r in after.values())  # nothing 40-step survives as current
    assert len(list((tmp_path / "records" / store.STALE).rglob("seed-*.json"))) == 4  # moved, not deleted
    assert len(list((tmp_path / "runs" / store.STALE).rglob("summary.json"))) == 4


@pytest.mark.slow
def test_added_seed_with_changed_steps_never_pools_two_definitions(tmp_path):
    run(experiment_file(tmp_path), tmp_path)
    path = experiment_file(tmp_path, **{"seeds = [0, 1]": "seeds = [0, 1, 2]", "steps = 40": "steps = 50"})
    run(path, tmp_path)
    steps = {r["summary"]["steps"] for r in all_records(tmp_path / "records").values()}
    assert steps == {50}


@pytest.mark.slow
def test_changed_variant_overrides_are_stale_and_an_interrupted_cell_restarts_cleanly(tmp_path):
    path = experiment_file(tmp_path)
    experiment = load_experiment(path)
    cell = cells(experiment, tmp_path / "runs", tmp_path / "records")[0]
    # an interrupted cell: definition written, training started, no record
    rundir.write_json(cell.out / rundir.DEFINITION, {"definition": {"train": {"steps": 1}}, "digest": "x"})
    (cell.out / rundir.SPEC).write_text("{}")
    changed = path.read_text().replace('set = {"residual.kind" = "pre-norm"}',
                                       'set = {"residual.kind" = "pre-norm", dropout = 0.2}')
    path.write_text(changed)
    result = run(path, tmp_path)
    assert {s for s, _ in result.values()} == {"complete"}, result
    found = records.read(cell.record)
    assert found.definition["train"]["steps"] == 40
    assert all(r["definition"]["spec"]["dropout"] == 0.2 for name, r in all_records(tmp_path / "records").items()
               if name.startswith("pre-norm"))


# -- records of other experiments ------------------------------------------------------------------
@pytest.mark.slow
def test_a_cell_another_experiment_recorded_is_copied_not_trained(tmp_path):
    """`--reuse-from`: cells of the same definition take the other experiment's record, named in their
    provenance; a cell whose definition differs in anything (here: its seed's training) is trained."""
    from zoo.report.sections.provenance import provenance
    from zoo.report.study import analyse

    pilot = tmp_path / "pilot"
    pilot.mkdir()
    run_grid(load_experiment(experiment_file(pilot)), pilot / "runs", pilot / "report" / "records", live=False)
    study = tmp_path / "study"
    study.mkdir()
    path = experiment_file(study, **{'name = "smoke"': 'name = "study"', "seeds = [0, 1]": "seeds = [0, 1, 2]"})
    results = run_grid(load_experiment(path), study / "runs", study / "report" / "records", live=False,
                       reuse_from=[pilot / "report"])
    assert {status for status, _ in results.values()} == {"complete"}
    copied, trained = [], []
    for cell in cells(load_experiment(path), study / "runs", study / "report" / "records"):
        record = records.read(cell.record)
        (copied if "copied_from" in record.provenance else trained).append(cell.name)
        assert record.cell.model_dump() == {"experiment": "study", "variant": cell.variant, "task": cell.task,
                                            "seed": cell.seed}
    assert sorted(copied) == ["post-norm/copy/seed-0", "post-norm/copy/seed-1", "pre-norm/copy/seed-0",
                              "pre-norm/copy/seed-1"]
    assert sorted(trained) == ["post-norm/copy/seed-2", "pre-norm/copy/seed-2"]
    assert not (study / "runs" / "post-norm" / "copy" / "seed-0").exists()  # nothing trained for a copy
    original = pilot / "report" / "records" / "pre-norm" / "copy" / "seed-1.json"
    copy = study / "report" / "records" / "pre-norm" / "copy" / "seed-1.json"
    assert comparable({**json.loads(copy.read_text()), "cell": None}) == \
        comparable({**json.loads(original.read_text()), "cell": None})
    assert json.loads(copy.read_text())["provenance"]["copied_from"] == "smoke/pre-norm/copy/seed-1"
    lines = provenance(analyse(load_experiment(path), study / "report" / "records"))
    assert any(line.startswith("- 4 records copied from another experiment's records") and "smoke (4 runs)" in line
               for line in lines)


@pytest.mark.slow
def test_a_stale_record_is_moved_aside_and_replaced_by_a_copy_of_the_current_definition(tmp_path):
    pilot, study = tmp_path / "pilot", tmp_path / "study"
    pilot.mkdir(), study.mkdir()
    run_grid(load_experiment(experiment_file(pilot)), pilot / "runs", pilot / "report" / "records", live=False)
    records_root = study / "report" / "records"
    short = experiment_file(study, **{'name = "smoke"': 'name = "study"', "steps = 40": "steps = 20"})
    run_grid(load_experiment(short), study / "runs", records_root, live=False)
    path = experiment_file(study, **{'name = "smoke"': 'name = "study"'})  # back to the pilot's 40 steps
    run_grid(load_experiment(path), study / "runs", records_root, live=False, reuse_from=[pilot / "report"])
    current = all_records(records_root)
    assert len(current) == 4 and all(r["summary"]["steps"] == 40 for r in current.values())
    assert all("copied_from" in records.read(records_root / name).provenance for name in current)
    assert len(list((records_root / store.STALE).rglob("seed-*.json"))) == 4  # the 20-step ones, kept


def test_reuse_from_a_folder_without_records_is_a_clear_error(tmp_path):
    experiment = load_experiment(experiment_file(tmp_path))
    with pytest.raises(store.StoreError, match="--reuse-from: .*holds no records/ folder"):
        run_grid(experiment, tmp_path / "runs", tmp_path / "records", live=False, reuse_from=[tmp_path / "nothing"])


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
    command = [sys.executable, "-m", "zoo", "run", str(path), "--runs", str(tmp_path / "runs"), "--out",
               str(tmp_path / "out"), "--no-live"]
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
    command = [sys.executable, "-m", "zoo", "run", str(path), "--runs", str(tmp_path / "runs"), "--out",
               str(tmp_path / "out"), "--no-live", "--workers", "2"]
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
    command = [sys.executable, "-m", "zoo", "run", str(path), "--runs", str(tmp_path / "runs"), "--out",
               str(tmp_path / "out"), "--no-live", "--workers", workers]
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


# -- paths ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("replace, field", [
    ({'name = "smoke"': 'name = "../../x"'}, "name"),
    ({'name = "smoke"': 'name = "/tmp/x"'}, "name"),
    ({'name = "smoke"': 'name = ""'}, "name"),
    ({'name = "copy"': 'name = "copy"\nlabel = ".."'}, "label"),
    ({'name = "copy"': 'name = "copy"\nlabel = "a/b"'}, "label"),
    ({'label = "pre-norm"': 'label = "pre/norm"'}, "label"),
])
def test_names_that_become_paths_are_validated(tmp_path, replace, field):
    with pytest.raises(ExperimentError, match=field):
        load_experiment(experiment_file(tmp_path, **replace))


def test_paths_stay_under_their_root(tmp_path):
    assert store.inside(tmp_path, tmp_path / "a" / "b") == tmp_path / "a" / "b"
    with pytest.raises(store.StoreError, match="outside"):
        store.inside(tmp_path / "a", tmp_path / "a" / ".." / "b")


# -- faults stay in their cell --------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("garbage", ["{}", "not json", "[1, 2]"])
def test_a_corrupt_summary_fails_its_cell_and_the_grid_goes_on(tmp_path, garbage):
    path = experiment_file(tmp_path)
    run(path, tmp_path)
    cell = cells(load_experiment(path), tmp_path / "runs", tmp_path / "records")[0]
    cell.record.unlink()  # as if the cell had stopped just before its record was written
    (cell.out / rundir.SUMMARY).write_text(garbage)
    result = run(path, tmp_path)
    assert result[cell.name][0] == "failed"
    reason = records.read(cell.record).reason
    assert "summary.json" in reason and "\n" not in reason
    assert [s for name, (s, _) in result.items() if name != cell.name] == ["complete"] * 3


def test_a_store_that_cannot_be_written_at_all_is_reported_not_a_traceback(tmp_path, monkeypatch):
    experiment = load_experiment(experiment_file(tmp_path))
    grid = cells(experiment, tmp_path / "runs", tmp_path / "records")

    def read_only(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(rundir, "write_json", read_only)
    monkeypatch.setattr(records, "write", read_only)
    outcomes = [execute(cell) for cell in grid]
    assert {status for status, _ in outcomes} == {"failed"}
    assert all("Permission denied" in reason and "could not be recorded" in reason for _, reason in outcomes)


def test_an_unwritable_record_becomes_failed_json_in_the_run_directory(tmp_path, monkeypatch):
    experiment = load_experiment(experiment_file(tmp_path))
    cell = cells(experiment, tmp_path / "runs", tmp_path / "records")[0]

    def no_space(path, record):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(records, "write", no_space)
    status, reason = execute(cell)
    assert status == "failed" and "No space left" in reason
    assert "No space left" in rundir.read_table(cell.out / rundir.FAILED)["reason"]


def test_a_garbage_metrics_line_is_named_not_silently_truncated(tmp_path):
    path = tmp_path / rundir.METRICS
    path.write_text('{"step": 1, "loss": 2.0}\nGARBAGE\n{"step": 2, "loss": 1.0}\n')
    with pytest.raises(rundir.RunError, match=r"metrics.jsonl:2"):
        rundir.read_metrics(path)
    path.write_text('{"step": 1, "loss": 2.0}\n{"step": 2, "lo')  # cut short by a kill: dropped
    assert [r["step"] for r in rundir.read_metrics(path)] == [1]


def test_temporary_files_of_killed_writes_are_removed_on_the_next_start(tmp_path):
    leftover = tmp_path / "run" / f".checkpoint.pt.abc123{TEMP_SUFFIX}"
    leftover.parent.mkdir()
    leftover.write_bytes(b"half")
    (tmp_path / "run" / "keep.json").write_text("{}")
    assert rundir.clean_temporaries(tmp_path / "run") == [leftover]
    assert not leftover.exists() and (tmp_path / "run" / "keep.json").exists()


# -- kills at random moments ----------------------------------------------------------------------
@pytest.mark.slow
def test_kills_at_random_moments_end_with_the_records_of_an_uninterrupted_grid(tmp_path):
    path = experiment_file(tmp_path)

    def command(root: Path) -> list[str]:
        return [sys.executable, "-m", "zoo", "run", str(path), "--runs", str(root / "runs"), "--out", str(root),
                "--no-live"]

    clean = subprocess.run(command(tmp_path / "clean"), env=ENV, capture_output=True, text=True)
    assert clean.returncode == 0, clean.stderr
    killer = random.Random(2026)
    for attempt in range(3):
        root = tmp_path / f"killed-{attempt}"
        for _ in range(3):
            process = subprocess.Popen(command(root), env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(killer.uniform(0.5, 6.0))
            process.send_signal(signal.SIGKILL)
            process.wait()
        resumed = subprocess.run(command(root), env=ENV, capture_output=True, text=True)
        assert resumed.returncode == 0, resumed.stderr
        assert all_records(root / "records") == all_records(tmp_path / "clean" / "records")
        assert not [p for p in (root / "runs").rglob(f"*{TEMP_SUFFIX}") if store.STALE not in p.parts]


def test_a_changed_report_does_not_make_the_code_dirty():
    """Writing a report into a checkout (tracked reports/ files change) must not mark its code '+dirty'."""
    from zoo.experiment.record import zoo_commit

    before = zoo_commit()
    if before == "unknown" or before.endswith("+dirty"):
        pytest.skip("needs zoo running from a git checkout whose code is committed")
    report = ROOT / "reports" / "quickstart" / "report.md"
    original = report.read_bytes()
    try:
        report.write_bytes(original + b"\n")
        assert zoo_commit() == before
    finally:
        report.write_bytes(original)


def test_code_copied_without_its_git_folder_records_the_commit_it_declares(monkeypatch):
    from zoo.experiment import record

    monkeypatch.setenv(record.COMMIT_ENV, "0123456789ab")
    assert record.zoo_commit() == "0123456789ab"
    assert record.provenance(concurrent=3)["commit"] == "0123456789ab"
    monkeypatch.setenv(record.COMMIT_ENV, "")  # set but empty: looked up as usual
    assert record.zoo_commit() != ""


def test_a_complete_record_survives_an_experiment_file_broken_while_the_grid_runs(tmp_path, monkeypatch):
    """The probe's data loss: seed 1 recorded, a grid of seeds [0, 1] started, and while seed 0 trains an
    editor half-saves the TOML (`steps = `). Seed 1 then cannot reload the experiment and fails; its complete
    record must stay as it was, not be replaced by a failed one."""
    from zoo.experiment import cell as cell_module

    path = experiment_file(tmp_path, **{"seeds = [0, 1]": "seeds = [1]"})
    assert run(path, tmp_path)["post-norm/copy/seed-1"][0] == "complete"
    record = tmp_path / "records" / "post-norm" / "copy" / "seed-1.json"
    before = record.read_bytes()
    path.write_text(path.read_text().replace("seeds = [1]", "seeds = [0, 1]"))
    experiment = load_experiment(path)
    real = cell_module._run_cell

    def run_then_break_the_file(cell, threads):
        status = real(cell, threads)
        if cell.seed == 0:
            path.write_text(path.read_text() + "\nsteps = \n")  # a half-saved line
        return status

    monkeypatch.setattr(cell_module, "_run_cell", run_then_break_the_file)
    results = run_grid(experiment, tmp_path / "runs", tmp_path / "records", live=False)
    assert results["post-norm/copy/seed-1"][0] == "failed"  # it could not be checked, and says why
    assert record.read_bytes() == before
    assert records.read(record).status == "complete"


@pytest.mark.parametrize("plant", ["lock", "task-folder"])
def test_the_store_never_writes_through_a_planted_link(tmp_path, plant):
    """A lock file linked to any file got that file truncated and overwritten with a pid; a run directory's task/
    linked to a folder got task.json written there. Both are refused with one line, and the targets are intact."""
    path = experiment_file(tmp_path, **{"seeds = [0, 1]": "seeds = [0]"})
    (cell,) = [c for c in cells(load_experiment(path), tmp_path / "runs", tmp_path / "records")
               if c.variant == "post-norm"]
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("keep me")
    if plant == "lock":
        cell.lock.path.parent.mkdir(parents=True)
        cell.lock.path.symlink_to(victim / "precious.txt")
    else:
        cell.out.mkdir(parents=True)
        (cell.out / "task").symlink_to(victim, target_is_directory=True)
    status, reason = execute(cell)
    assert status == "failed" and "a symbolic link" in reason and "\n" not in reason
    assert (victim / "precious.txt").read_text() == "keep me" and sorted(os.listdir(victim)) == ["precious.txt"]


def test_a_records_temporary_file_left_by_a_kill_is_removed_when_the_cell_is_next_opened(tmp_path):
    path = experiment_file(tmp_path, **{"seeds = [0, 1]": "seeds = [0]"})
    grid = cells(load_experiment(path), tmp_path / "runs", tmp_path / "records")
    left = grid[0].record.parent / f".{grid[0].record.name}.x1y2z3{TEMP_SUFFIX}"  # killed just before the rename
    other = grid[0].record.parent / f".seed-7.json.abc{TEMP_SUFFIX}"  # another cell's: not this cell's to remove
    left.parent.mkdir(parents=True)
    left.write_text("{")
    other.write_text("{")
    assert execute(grid[0])[0] == "complete"
    assert not left.exists() and other.exists()
