"""A helper module a plugin imports as its code runs (inside `forward`), not as it loads, is part of what decided a
cell (issue 56 part 2): the cell's record names it with the hash of its file, and editing or removing that file
stales the cell, naming the module, for `zoo run` and the report alike; an untouched one keeps the cell current."""

from __future__ import annotations

import json

import pytest
from grid_files import TRAINING, ffn_plugin, forgetting, tiny_experiment

from zoo import plugins
from zoo.experiment import executed, load_experiment
from zoo.experiment import record as records
from zoo.experiment.grid import cells, states
from zoo.experiment.runner import run_grid
from zoo.report import load_records
from zoo.rundir import RunError

ON_PATH = 'sys.path.insert(0, os.path.join(os.path.dirname(__file__), "lib"))\nimport loaded_helper  # noqa: F401\n'
HELPER = "def scale(x):\n    return x * {factor}\n"
ALWAYS = "from runtime_helper import scale\n\nreturn scale(self.w(x))"  # also in the check before the grid trains
TRAINING_ONLY = "if _training():\n    from runtime_helper import scale\n\n    return scale(self.w(x))\nreturn self.w(x)"


@pytest.fixture
def new_process(tmp_path, monkeypatch):
    """Forget what running the grid left in this process (the plugins, the modules imported from `tmp_path`, the
    ffn entries registered, sys.path, the modules noted as plugins ran), as the next `zoo run` would not have it."""
    monkeypatch.setattr(plugins, "_loaded", {})
    monkeypatch.setattr(executed, "_noted", {})
    forget = forgetting(tmp_path)
    yield forget
    forget()


def grid_of(tmp_path, forward: str, name: str, workers: int = 1):
    """A one-variant grid whose plugin (tmp_path/lazy_ffn.py) registers ffn.`name` running `forward`, the folder
    lib/ put on sys.path as it loads, where loaded_helper (imported as it loads) and runtime_helper (imported by
    `forward`) lie; run; returns (experiment, its cells, the helper's file)."""
    (tmp_path / "lib").mkdir(exist_ok=True)
    (tmp_path / "lib" / "loaded_helper.py").write_text("SCALE = 1.0\n")
    helper = tmp_path / "lib" / "runtime_helper.py"
    helper.write_text(HELPER.format(factor=1.0))
    (tmp_path / "lazy_ffn.py").write_text(ffn_plugin(name, forward=forward, prelude=ON_PATH + TRAINING))
    (tmp_path / "exp.toml").write_text(tiny_experiment("lazy", seeds=(0, 1), plugin="lazy_ffn.py", ffn=name))
    experiment = load_experiment(tmp_path / "exp.toml")
    run_grid(experiment, tmp_path / "runs", tmp_path / "records", live=False, workers=workers)
    grid = cells(experiment, tmp_path / "runs", tmp_path / "records")
    assert [records.read(cell.record).status for cell in grid] == ["complete"] * 2
    return experiment, grid, helper


def again(tmp_path):
    """The experiment and its cells as the next `zoo run` finds them."""
    experiment = load_experiment(tmp_path / "exp.toml")
    return experiment, cells(experiment, tmp_path / "runs", tmp_path / "records")


@pytest.mark.parametrize("name, forward", [("lazy-check", ALWAYS), ("lazy-cell", TRAINING_ONLY)],
                         ids=["imported-in-the-check", "imported-in-the-cell"])
def test_a_helper_imported_as_the_plugin_runs_is_recorded_and_editing_it_stales_the_cells(tmp_path, new_process,
                                                                                          name, forward):
    """The check of the plugin's component before the grid trains (in this process, which then trains the cells)
    imports the helper first, or the cell does: either way the records name it, and editing it stales them."""
    experiment, grid, helper = grid_of(tmp_path, forward, name)
    recorded = {cell.name: records.read(cell.record).provenance.get("imported") for cell in grid}
    first = executed.current("runtime_helper")
    assert recorded == {cell.name: {"runtime_helper": first} for cell in grid}  # not loaded_helper: fingerprinted

    new_process()
    experiment, grid = again(tmp_path)
    assert {state for state, _ in states(experiment, grid).values()} == {"recorded"}  # untouched: current

    helper.write_text(HELPER.format(factor=2.0))
    new_process()
    experiment, grid = again(tmp_path)
    now = executed.current("runtime_helper")
    assert now != first
    said = [f"imported module runtime_helper: {first} -> {now}"]
    assert states(experiment, grid) == {cell.name: ("stale", said) for cell in grid}
    assert load_records(experiment, tmp_path / "records").stale == {(name, "copy", seed): said for seed in (0, 1)}


def test_a_helper_that_is_gone_stales_the_cells(tmp_path, new_process):
    experiment, grid, helper = grid_of(tmp_path, ALWAYS, "lazy-gone")
    first = executed.current("runtime_helper")
    helper.unlink()
    new_process()
    experiment, grid = again(tmp_path)
    assert states(experiment, grid)[grid[0].name] == ("stale", [f"imported module runtime_helper: {first} -> (absent)"])


@pytest.mark.slow
def test_worker_processes_record_what_the_plugin_imports_in_them(tmp_path, new_process):
    """Spawned workers load the plugin anew and run none of its code before their cells: what a cell imports there
    is noted there, and each worker's records name it."""
    experiment, grid, helper = grid_of(tmp_path, TRAINING_ONLY, "lazy-workers", workers=2)
    first = executed.current("runtime_helper")
    assert [records.read(cell.record).provenance.get("imported") for cell in grid] == [{"runtime_helper": first}] * 2


def test_a_cell_running_no_plugin_records_no_module(tmp_path, new_process, monkeypatch):
    """A cell of zoo's own code runs no plugin's code: its record reads as every record before imports were recorded,
    whatever this process noted."""
    monkeypatch.setitem(executed._noted, "runtime_helper", "0123456789abcdef")
    (tmp_path / "exp.toml").write_text(tiny_experiment("builtin"))
    run_grid(load_experiment(tmp_path / "exp.toml"), tmp_path / "runs", tmp_path / "records", live=False)
    (record,) = (tmp_path / "records").glob("*/*/seed-0.json")
    assert "imported" not in records.read(record).provenance


MALFORMED = [
    ({"runtime_helper": 5}, "provenance.imported.runtime_helper: Input should be a valid string"),
    ({"../runtime_helper": "0123456789abcdef"}, "provenance.imported.../runtime_helper.[key]: String should match"),
    ({"runtime_helper": "not a hash"}, "provenance.imported.runtime_helper: String should match pattern"),
    (["runtime_helper"], "provenance.imported: Input should be an object"),
]


def test_a_malformed_imported_field_refuses_the_record_in_one_line(tmp_path, new_process):
    """Checked as every provenance field is: module names, and hashes of 16 hex digits; a record that breaks it is
    refused in one line naming the field (a zoo that wrote it so would have given it a matching digest), and its
    cell is stale."""
    experiment, grid, _ = grid_of(tmp_path, ALWAYS, "lazy-malformed")
    path = grid[0].record
    written = json.loads(path.read_text())
    for value, says in MALFORMED:
        fields = {**written, "provenance": {**written["provenance"], "imported": value}}
        fields.pop("digest")
        fields["digest"] = records.content_digest(records.canonical(fields))
        path.write_text(records.canonical(fields) + "\n")
        with pytest.raises(RunError, match="^[^\n]*$") as refused:
            records.read(path)
        assert says in str(refused.value)
        assert states(experiment, grid)[grid[0].name] == ("stale", [f"its record is refused: {refused.value}"])
