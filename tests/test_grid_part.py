"""`zoo run --variants/--tasks/--seeds`: part of a grid, the same cells and records as the whole grid's."""

from __future__ import annotations

import pytest
from smoke_runs import all_records, experiment_file

from zoo.cli import main


def zoo_run(path, root, *part: str) -> int:
    return main(["run", str(path), "--runs", str(root / "runs"), "--out", str(root / "out"), "--no-live", *part])


def test_a_part_trains_its_cells_alone_and_the_whole_grid_then_only_the_rest(tmp_path, capsys):
    """Seed 1 of pre-norm first (as a second machine would), then the whole grid: the part's record is kept,
    not trained again, and every record equals the one an uninterrupted whole grid writes."""
    path = experiment_file(tmp_path)
    split, whole = tmp_path / "split", tmp_path / "whole"
    assert zoo_run(path, split, "--variants", "pre-norm", "--seeds", "1", "--tasks", "copy") == 0
    said = " ".join(capsys.readouterr().err.split())  # the smoke budget learns nothing: stalled, as the report says
    assert "smoke: 1 stalled -> records in" in said and "stalled = trained to the end below its task's floor" in said
    assert "pre-norm/copy/seed-1: stalled: trained to the end, but its validation exact match % ended at 0" in said
    part_record = split / "out" / "records" / "pre-norm" / "copy" / "seed-1.json"
    assert sorted(p.relative_to(split / "out" / "records").as_posix()
                  for p in (split / "out" / "records").rglob("seed-*.json")) == ["pre-norm/copy/seed-1.json"]
    assert (split / "out" / "records" / ".floors" / "copy.json").is_file()  # the part's tasks get their floors
    written = part_record.read_bytes()
    assert zoo_run(path, split) == 0
    assert part_record.read_bytes() == written  # recorded, so skipped
    assert zoo_run(path, whole) == 0
    assert all_records(split / "out" / "records") == all_records(whole / "out" / "records")
    assert len(all_records(whole / "out" / "records")) == 4


@pytest.mark.parametrize("part, message", [
    (["--variants", "post-norm,rmsnorm"], "--variants: smoke has no rmsnorm (it has post-norm, pre-norm)"),
    (["--tasks", "copy:x"], "--tasks: smoke has no copy:x (it has copy)"),
    (["--seeds", "1,5"], "--seeds: smoke has no 5 (it has 0, 1)"),
    (["--tasks", ""], "--tasks: empty selection; give at least one task (smoke has copy)"),  # `--tasks "$UNSET"`
    (["--seeds", ",,"], "--seeds: empty selection; give at least one seed (smoke has 0, 1)"),
    (["--variants", " "], "--variants: empty selection; give at least one variant (smoke has post-norm, pre-norm)"),
    (["--seeds", "", "--dry-run"], "--seeds: empty selection"),
])
def test_a_part_naming_what_the_experiment_lacks_is_refused_with_what_it_has(tmp_path, capsys, part, message):
    assert zoo_run(experiment_file(tmp_path), tmp_path, *part) == 2
    assert message in " ".join(capsys.readouterr().err.split())
    assert not (tmp_path / "out").exists() and not (tmp_path / "runs").exists()  # nothing written


def test_seeds_that_are_not_numbers_are_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        zoo_run(experiment_file(tmp_path), tmp_path, "--seeds", "3,x")
    assert exit_.value.code == 2
    assert "seeds are whole numbers separated by commas, e.g. 3,4 (got '3,x')" in capsys.readouterr().err


def test_the_dry_run_of_a_part_counts_its_cells_alone(tmp_path, capsys):
    path = experiment_file(tmp_path, **{"[train]": """[[tasks]]
name = "reverse"
options = {symbols = 8, min_len = 3, max_len = 6, train_size = 300, valid_size = 30, test_size = 30}

[train]"""})
    assert zoo_run(path, tmp_path, "--tasks", "reverse", "--seeds", "0", "--dry-run") == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("│")]
    assert [row.split("│")[1:3] for row in rows] == [[" reverse ", "     2 "]]
    assert not (tmp_path / "out").exists()


def test_a_part_needs_only_its_own_tasks_data(tmp_path, monkeypatch, capsys):
    """A machine given the synthetic part of a grid need not hold the corpora of its translation tasks."""
    monkeypatch.setenv("ZOO_DATA_DIR", str(tmp_path / "no-corpora-here"))
    path = experiment_file(tmp_path, **{"[train]": """[[tasks]]
name = "multi30k:de-en"

[train]"""})
    assert zoo_run(path, tmp_path) == 2  # the whole grid needs them: refused before anything trains
    assert "tasks[1] (multi30k:de-en)" in capsys.readouterr().err and not (tmp_path / "out").exists()
    assert zoo_run(path, tmp_path, "--dry-run") == 0  # a dry run prices it all the same, and says what is missing
    assert "tasks[1] (multi30k:de-en)" in " ".join(capsys.readouterr().out.split())
    assert zoo_run(path, tmp_path, "--tasks", "copy", "--dry-run") == 0
    assert "multi30k" not in capsys.readouterr().out
