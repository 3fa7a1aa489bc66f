"""Nothing writes into another experiment's store (issue 56, part 4), the floors and a runs root without its owner
file included. Before, `zoo floors other.toml --out reports/fx` exited 0 and replaced fx's `.floors/copy.json` (fx's
report then said "Trivial floors: none recorded"), and a runs root whose `.experiment.json` was deleted was claimed
by the next experiment, which moved the first's checkpoints to .stale/ and trained over their places."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import test_store_owner as owned
from grid_files import tiny_experiment
from smoke_runs import TRAINED
from test_store_owner import refused, snapshot, write

from zoo.cli import main
from zoo.experiment import load_experiment, owner
from zoo.experiment.floors import floor_path, write_floors
from zoo.experiment.runner import run_grid
from zoo.experiment.store import LOCKS, STALE, StoreError

store_of_fx = owned.store_of_fx  # fx's experiment file and a store with its one recorded cell


def stamps(folder: Path) -> dict[str, tuple[str, int]]:
    """Every file under `folder` with its sha256 and modification time: written again with the same bytes is a
    change too."""
    hashes = snapshot(folder)
    return {name: (sha, (folder / name).stat().st_mtime_ns) for name, sha in hashes.items()}


@pytest.fixture
def floors_of_fx(store_of_fx, capsys):
    """fx's store with its trivial floor written by `zoo floors`."""
    fx, out, runs = store_of_fx
    assert main(["floors", str(fx), "--out", str(out)]) == 0
    capsys.readouterr()
    assert floor_path(out / "records", "copy").is_file()
    return fx, out, runs


def other_task(tmp_path: Path, name: str = "other", path: Path | None = None) -> Path:
    """An experiment file (at `path`, else experiments/<name>.toml) whose copy task has other settings than fx's:
    its floor would replace fx's."""
    path = path or tmp_path / "experiments" / f"{name}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(tiny_experiment(name, train_size=200))
    return path


def trained_on(out: Path) -> int:
    """The copy task's train_size that made the floor in `out`."""
    return json.loads(floor_path(out / "records", "copy").read_text())["definition"]["task"]["train_size"]


# -- the floors ------------------------------------------------------------------------------------
def test_zoo_floors_of_another_experiment_is_refused_and_fxs_floor_stays(floors_of_fx, tmp_path, capsys):
    fx, out, _ = floors_of_fx
    other = other_task(tmp_path)
    before = stamps(out)
    err = refused(capsys, "floors", str(other), "--out", str(out))
    assert "holds experiment 'fx', not 'other'" in err and "--out another folder" in err
    assert stamps(out) == before
    assert trained_on(out) == 100  # fx's floor, not other's


def test_every_writer_of_floors_checks_the_owner(floors_of_fx, tmp_path):
    """The library's writer too (what `zoo run` and `study.floors()` call), not only the command."""
    _, out, _ = floors_of_fx
    before = stamps(out)
    with pytest.raises(StoreError, match="holds experiment 'fx', not 'other'"):
        write_floors(load_experiment(other_task(tmp_path)), out / "records")
    assert stamps(out) == before


def test_floors_claim_a_fresh_records_folder_for_their_experiment(tmp_path, capsys):
    fx = write(tmp_path / "experiments" / "fx.toml")
    out = tmp_path / "reports" / "fresh"
    assert main(["floors", str(fx), "--out", str(out)]) == 0
    capsys.readouterr()
    assert owner.recorded_owner(out / "records") == {"experiment": "fx", "file": "../../../experiments/fx.toml"}
    before = stamps(out)
    err = refused(capsys, "floors", str(other_task(tmp_path)), "--out", str(out))
    assert "holds experiment 'fx', not 'other'" in err
    assert stamps(out) == before


def test_the_owner_writes_its_floors_again_when_its_task_changes(floors_of_fx, capsys):
    fx, out, _ = floors_of_fx
    other_task(fx.parent, "fx", fx)  # fx's own file, its copy task changed
    assert main(["floors", str(fx), "--out", str(out)]) == 0
    assert trained_on(out) == 200


# -- a runs root without its owner file ------------------------------------------------------------
@pytest.mark.parametrize("dry_run", [False, True], ids=["run", "dry-run"])
def test_a_runs_root_whose_owner_file_was_deleted_is_not_claimed_by_another_experiment(store_of_fx, tmp_path, capsys,
                                                                                     dry_run):
    fx, out, runs = store_of_fx
    (runs / owner.OWNER).unlink()
    other = write(tmp_path / "experiments" / "other.toml", name="other", steps=6)  # the same cell, trained longer
    before = stamps(runs)
    err = refused(capsys, "run", str(other), "--out", str(tmp_path / "reports" / "other"), "--runs", str(runs),
                  "--no-live", *(["--dry-run"] if dry_run else []))
    assert "no .experiment.json names its experiment" in err and "post-norm/copy/seed-0" in err
    assert "no cell of 'other'" in err and "nothing was moved" in err and "--runs another folder" in err
    assert stamps(runs) == before  # fx's checkpoint where it was, unwritten; no owner file, no .stale/
    assert not (tmp_path / "reports" / "other").exists()  # refused before the floors


@pytest.mark.parametrize("recorded", [True, False], ids=["recorded", "killed-before-its-record"])
def test_a_runs_root_whose_owner_file_was_deleted_is_claimed_back_by_its_experiment(store_of_fx, recorded):
    """Its run directory holds the definition fx gives the cell now: fx's, with or without a record of it."""
    fx, out, runs = store_of_fx
    (runs / owner.OWNER).unlink()
    if not recorded:
        (out / "records" / "post-norm" / "copy" / "seed-0.json").unlink()
    before = stamps(runs)
    results = run_grid(load_experiment(fx), runs, out / "records", live=False)
    assert {status for status, _ in results.values()} == {TRAINED}
    assert owner.recorded_owner(runs) == {"experiment": "fx", "file": "../../experiments/fx.toml"}
    assert not (runs / STALE).exists()
    checkpoint = "post-norm/copy/seed-0/checkpoint.safetensors"
    assert stamps(runs)[checkpoint] == before[checkpoint]  # resumed where it was: nothing retrained
    if recorded:
        kept = {name: stamp for name, stamp in stamps(runs).items() if name != owner.OWNER and LOCKS not in name}
        assert kept == {name: stamp for name, stamp in before.items() if LOCKS not in name}  # its lock is taken


def test_its_own_runs_of_an_earlier_definition_are_known_by_its_records(store_of_fx):
    """fx's file changed since: its run directory is no cell of fx now, but fx's record of it names the same
    definition, so the runs root is fx's and the cell is retrained as any stale cell of fx's own."""
    fx, out, runs = store_of_fx
    (runs / owner.OWNER).unlink()
    write(fx, name="fx", steps=6)
    owner.check_grid(load_experiment(fx), runs, out / "records")
    results = run_grid(load_experiment(fx), runs, out / "records", live=False)
    assert {status for status, _ in results.values()} == {TRAINED}
    assert owner.recorded_owner(runs)["experiment"] == "fx"
    assert (runs / STALE).is_dir()  # fx's own old checkpoint, moved aside as before


def test_without_a_record_the_earlier_definition_is_refused_with_the_way_out(store_of_fx):
    fx, out, runs = store_of_fx
    (runs / owner.OWNER).unlink()
    write(fx, name="fx", steps=6)
    (out / "records" / "post-norm" / "copy" / "seed-0.json").unlink()
    with pytest.raises(StoreError, match="if they are its own of an earlier definition, move them out of"):
        owner.claim_grid(load_experiment(fx), runs, out / "records")
    assert not (runs / owner.OWNER).exists()


def test_a_runs_root_with_no_defined_checkpoint_is_claimed_freely(tmp_path):
    """Nothing in it says whose it is, or nothing in it was trained: moving its run directories aside (as a stale
    cell's) loses nothing."""
    fx = load_experiment(write(tmp_path / "experiments" / "fx.toml"))
    empty, older, started = (tmp_path / "runs" / name for name in ("empty", "older", "started"))
    empty.mkdir(parents=True)
    for root in (older, started):
        (root / "post-norm" / "copy" / "seed-0").mkdir(parents=True)
        (root / "post-norm" / "copy" / "seed-0" / "spec.json").write_text("{}")
    (older / "post-norm" / "copy" / "seed-0" / "checkpoint.pt").write_text("")  # a zoo too old to write definitions
    (started / "post-norm" / "copy" / "seed-0" / "definition.json").write_text(  # stopped before its first checkpoint
        json.dumps({"definition": {"train": {"steps": 1}}, "digest": "0" * 16}))
    for root in (empty, older, started, tmp_path / "runs" / "new"):
        owner.claim_grid(fx, root, tmp_path / "reports" / root.name / "records")
        assert owner.recorded_owner(root)["experiment"] == "fx"


def test_hidden_folders_of_a_runs_root_are_no_run_directories(store_of_fx):
    """Folders such as .stale/ and .locks/ lie beside the run directories; a copy of a run directory kept in one does
    not make the runs root a stranger's."""
    fx, out, runs = store_of_fx
    shutil.copytree(runs / "post-norm", runs / ".kept")
    (runs / owner.OWNER).unlink()
    owner.claim_grid(load_experiment(fx), runs, out / "records")
    assert owner.recorded_owner(runs)["experiment"] == "fx"
