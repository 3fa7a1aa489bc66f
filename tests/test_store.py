"""The run store: stale definitions, safe paths, fault isolation, the commit a record names, planted links."""

from __future__ import annotations

import json
import os

import pytest
import torch
from smoke_runs import ROOT, TRAINED, all_records, comparable, experiment_file, run

from zoo import rundir
from zoo.atomic import TEMP_SUFFIX
from zoo.experiment import ExperimentError, load_experiment, runner, store
from zoo.experiment import provenance as made_where
from zoo.experiment import record as records
from zoo.experiment.cell import execute
from zoo.experiment.grid import cells
from zoo.experiment.runner import run_grid


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
    made_on = made_where.provenance(concurrent=2)
    assert made_on["torch"] == torch.__version__ and made_on["concurrent_runs"] == 2
    assert made_on["cpu_capability"] == torch.backends.cpu.get_cpu_capability()  # e.g. AVX2, AVX512


def test_records_name_the_commit_their_grid_started_from(tmp_path, monkeypatch):
    """Workers load the code once: a commit made while a grid runs is not what it runs."""
    commits = iter(["c0ffee000001", "c0ffee000002"])
    monkeypatch.setattr(runner, "zoo_commit", lambda: next(commits))
    run(experiment_file(tmp_path), tmp_path)
    made = {json.loads(p.read_text())["provenance"]["commit"] for p in (tmp_path / "records").rglob("seed-*.json")}
    assert made == {"c0ffee000001"}


@pytest.mark.slow
def test_changed_steps_retrain_every_cell_and_move_the_old_ones_aside(tmp_path):
    assert {s for s, _ in run(experiment_file(tmp_path), tmp_path).values()} == {TRAINED}
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
    assert {s for s, _ in result.values()} == {TRAINED}, result
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
    assert {status for status, _ in results.values()} == {TRAINED}
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
    assert [s for name, (s, _) in result.items() if name != cell.name] == [TRAINED] * 3


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


def test_a_changed_report_does_not_make_the_code_dirty():
    """Writing a report into a checkout (tracked reports/ files change) must not mark its code '+dirty'."""
    from zoo.experiment.provenance import zoo_commit

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
    monkeypatch.setenv(made_where.COMMIT_ENV, "0123456789ab")
    assert made_where.zoo_commit() == "0123456789ab"
    assert made_where.provenance(concurrent=3)["commit"] == "0123456789ab"
    monkeypatch.setenv(made_where.COMMIT_ENV, "")  # set but empty: looked up as usual
    assert made_where.zoo_commit() != ""


def test_a_complete_record_survives_an_experiment_file_broken_while_the_grid_runs(tmp_path, monkeypatch):
    """The probe's data loss: seed 1 recorded, a grid of seeds [0, 1] started, and while seed 0 trains an
    editor half-saves the TOML (`steps = `). Seed 1's complete record must stay as it was, not be replaced by a
    failed one. It was current when the grid started, so it is its result, read before any cell trained (the
    executor gets only what has to train), and nothing reloads the broken file for it."""
    from zoo.experiment import cell as cell_module

    path = experiment_file(tmp_path, **{"seeds = [0, 1]": "seeds = [1]"})
    assert run(path, tmp_path)["post-norm/copy/seed-1"][0] == TRAINED
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
    assert results["post-norm/copy/seed-1"][0] == TRAINED
    assert record.read_bytes() == before
    assert records.read(record).status == "complete"


def test_a_cell_that_cannot_reload_its_broken_experiment_file_fails_and_keeps_its_complete_record(tmp_path):
    """The executor's side of the test above: a cell handed to `execute` (by another zoo run's grid, or one whose
    record became current while it waited for the lock) reloads the experiment file; half-saved, it cannot, and the
    cell fails saying why, its complete record untouched."""
    path = experiment_file(tmp_path, **{"seeds = [0, 1]": "seeds = [1]"})
    assert run(path, tmp_path)["post-norm/copy/seed-1"][0] == TRAINED
    record = tmp_path / "records" / "post-norm" / "copy" / "seed-1.json"
    before = record.read_bytes()
    (cell,) = [c for c in cells(load_experiment(path), tmp_path / "runs", tmp_path / "records")
               if c.name == "post-norm/copy/seed-1"]
    path.write_text(path.read_text() + "\nsteps = \n")  # a half-saved line
    status, reason = execute(cell)
    assert status == "failed" and reason
    assert record.read_bytes() == before and records.read(record).status == "complete"


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
