"""A store belongs to one experiment: another experiment, or another file of the same name, is refused with one
line naming the owner before anything moves. Before, `zoo run other.toml --out reports/fx` moved fx's current
records to .stale/ and trained over them, silently."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from grid_files import tiny_experiment
from smoke_runs import TRAINED

from zoo.cli import main
from zoo.experiment import load_experiment, owner
from zoo.experiment.runner import run_grid
from zoo.experiment.store import STALE, StoreError

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "reports" / "quickstart" / "records"


def write(path: Path, name: str = "fx", steps: int = 4) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(tiny_experiment(name, steps=steps))
    return path


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under `folder` and its sha256: what a refused run must leave exactly as it was."""
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def store_of_fx(tmp_path):
    """fx's experiment file and a store with its one recorded cell."""
    fx = write(tmp_path / "experiments" / "fx.toml")
    out, runs = tmp_path / "reports" / "fx", tmp_path / "runs" / "fx"
    run_grid(load_experiment(fx), runs, out / "records", live=False)
    return fx, out, runs


def refused(capsys, *argv: str) -> str:
    assert main(list(argv)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_a_store_names_its_owner_relative_to_itself(store_of_fx):
    fx, out, runs = store_of_fx
    assert json.loads((out / "records" / owner.OWNER).read_text()) == {"experiment": "fx",
                                                                     "file": "../../../experiments/fx.toml"}
    assert json.loads((runs / owner.OWNER).read_text())["file"] == "../../experiments/fx.toml"


@pytest.mark.parametrize("dry_run", [False, True], ids=["run", "dry-run"])
def test_another_experiment_is_refused_naming_the_owner_and_nothing_moves(store_of_fx, tmp_path, capsys, dry_run):
    fx, out, runs = store_of_fx
    other = write(tmp_path / "experiments" / "other.toml", name="other", steps=6)
    before = snapshot(tmp_path / "reports"), snapshot(tmp_path / "runs")
    err = refused(capsys, "run", str(other), "--out", str(out), "--runs", str(runs), "--no-live",
                  *(["--dry-run"] if dry_run else []))
    assert "holds experiment 'fx', not 'other'" in err and "nothing was moved" in err
    assert (snapshot(tmp_path / "reports"), snapshot(tmp_path / "runs")) == before
    assert not (out / "records" / STALE).exists()


def test_zoo_report_too_refuses_another_experiments_store_and_writes_nothing(store_of_fx, tmp_path, capsys):
    """`zoo report other.toml --out reports/fx` wrote other's report over fx's and deleted fx's plots."""
    fx, out, _ = store_of_fx
    assert main(["report", str(fx), "--out", str(out)]) == 0
    capsys.readouterr()
    other = write(tmp_path / "experiments" / "other.toml", name="other")
    before = snapshot(out)
    err = refused(capsys, "report", str(other), "--out", str(out))
    assert "holds experiment 'fx', not 'other'" in err
    assert snapshot(out) == before


def test_a_copied_file_with_the_same_name_is_refused_while_the_owners_file_exists(store_of_fx, tmp_path, capsys):
    fx, out, runs = store_of_fx
    copy = write(tmp_path / "mine" / "fx-copy.toml", name="fx", steps=6)  # a changed copy, its name left as it was
    before = snapshot(tmp_path / "reports")
    err = refused(capsys, "run", str(copy), "--out", str(out), "--runs", str(tmp_path / "runs-copy"), "--no-live")
    assert f"belongs to experiment 'fx' of {fx.resolve()}" in err and "fx-copy.toml" in err
    assert snapshot(tmp_path / "reports") == before


def test_a_moved_experiment_file_takes_its_store_along(store_of_fx, tmp_path):
    fx, out, runs = store_of_fx
    moved = tmp_path / "experiments" / "renamed.toml"
    fx.rename(moved)
    results = run_grid(load_experiment(moved), runs, out / "records", live=False)
    assert {status for status, _ in results.values()} == {TRAINED}  # recorded: nothing retrained
    assert json.loads((out / "records" / owner.OWNER).read_text())["file"] == "../../../experiments/renamed.toml"
    assert not (out / "records" / STALE).exists()


def test_a_store_written_before_owners_is_claimed_by_the_experiment_its_records_name(tmp_path, capsys):
    legacy = tmp_path / "reports" / "quickstart" / "records"
    shutil.copytree(QUICKSTART / "post-norm", legacy / "post-norm")
    assert not (legacy / owner.OWNER).exists()
    other = write(tmp_path / "experiments" / "fx.toml")
    before = snapshot(legacy)
    err = refused(capsys, "run", str(other), "--out", str(legacy.parent), "--runs", str(tmp_path / "runs"),
                  "--no-live")
    assert "holds experiment 'quickstart', not 'fx'" in err
    assert snapshot(legacy) == before
    assert owner.recorded_owner(legacy) == {"experiment": "quickstart", "file": ""}


def test_every_committed_store_names_its_experiment_file():
    """The shipped stores carry their owner, so a copy of a shipped experiment file is refused from the start."""
    for folder in sorted((ROOT / "reports").glob("*/records")):
        found = owner.recorded_owner(folder)
        assert (folder / owner.OWNER).is_file(), folder
        experiment = load_experiment((folder / found["file"]).resolve())
        assert experiment.name == found["experiment"] == folder.parent.name


def test_a_damaged_owner_file_is_one_line(tmp_path):
    (tmp_path / owner.OWNER).write_text("{not json")
    with pytest.raises(StoreError, match="not a store's owner file"):
        owner.check(tmp_path, "fx", tmp_path / "fx.toml", "--out")
