"""What a plugin's source is: the helpers it imports, the files beside it, the built-ins it patches, and one
plugin however it is reached; a cell's definition carries that source's fingerprint, so editing any of it stales
the cells that use it and no other."""

from __future__ import annotations

import sys
import textwrap

import pytest
from grid_files import ffn_plugin, forgetting, tiny_experiment
from import_graph import graph

from zoo import plugins
from zoo.plugins import PluginError, load
from zoo.registry import registry


# -- everything a plugin brings in is its source (issue 34, item 3) ----------------------------------
@pytest.fixture
def new_process(tmp_path):
    """Forget what loading plugins from `tmp_path` left in this process (the plugins, their modules, the ffn
    entries they registered, the folders they put on sys.path), as a new process would not have it; called
    by the test between an edit and the next load, and at the end."""
    forget = forgetting(tmp_path)
    yield forget
    forget()


def _definitions(folder, plugin: str, ffn: str, other: str = "conv1d") -> dict[str, dict]:
    """{variant: definition} of seed 0 of a two-variant experiment loading `plugin`: `plugged` (ffn.kind = `ffn`)
    and `other` (ffn.kind = `other`)."""
    from zoo.experiment import load_experiment, store

    (folder / "exp.toml").write_text(
        tiny_experiment("plugged", plugin=plugin, ffn=ffn, label="plugged")
        + f'\n[[variants]]\nlabel = "{other}"\nbase = "paper-base"\nset = {{"ffn.kind" = "{other}"}}\n')
    experiment = load_experiment(folder / "exp.toml")
    return {v: store.definition(experiment, v, experiment.config.tasks[0], 0) for v in ("plugged", other)}


def test_a_helper_a_plugin_imports_is_part_of_its_source(tmp_path, new_process):
    """The plugin puts a folder outside itself on sys.path and imports a helper there, which registers the
    component: editing the helper stales the cells that use the component, and no other."""
    helpers, package = tmp_path / "helpers", tmp_path / "plugin_pkg"
    helpers.mkdir()
    package.mkdir()
    helper = helpers / "plugged_helper.py"
    helper.write_text(ffn_plugin("plugged-helper"))
    (package / "__init__.py").write_text(f"import sys\n\nsys.path.insert(0, {str(helpers)!r})\nimport plugged_helper\n")
    before = _definitions(tmp_path, "./plugin_pkg", "plugged-helper")
    assert list(before["plugged"]["plugins"]) == ["plugin_pkg"] and "plugins" not in before["conv1d"]
    (plugin,) = [p for p in plugins.loaded() if p.label == "plugin_pkg"]
    assert "plugged_helper" in plugin.modules

    helper.write_text(helper.read_text() + "\n# edited\n")
    new_process()
    after = _definitions(tmp_path, "./plugin_pkg", "plugged-helper")
    assert after["plugged"]["plugins"]["plugin_pkg"] != before["plugged"]["plugins"]["plugin_pkg"]
    assert after["conv1d"] == before["conv1d"]


def test_a_file_plugin_covers_the_python_files_beside_it(tmp_path, new_process):
    """A file plugin may import a module beside it that an earlier import already brought in: the folder's .py
    files are part of its source either way (erring on the side of stale)."""
    (tmp_path / "my_components.py").write_text(ffn_plugin("plugged-beside"))
    beside = tmp_path / "notes.py"
    beside.write_text("X = 1\n")
    first = plugins.load(str(tmp_path / "my_components.py")).sha256
    beside.write_text("X = 2\n")
    new_process()
    assert plugins.load(str(tmp_path / "my_components.py")).sha256 != first


PATCH_LINEAR = """
from zoo.components.ffn import LinearFFN


def forward(self, x):  # version {version}
    return 0.5 * self.w2(self.dropout(self.activation(self.w1(x))))


LinearFFN.forward = forward
"""


def test_a_plugin_that_patches_a_builtin_makes_its_cells_depend_on_it(tmp_path, new_process, monkeypatch):
    """`LinearFFN.forward = ...` in a plugin: the cells using ffn.kind=linear carry the plugin's hash (and go stale
    when it is edited); a cell using conv1d keeps the definition it had without the plugin."""
    from zoo.components.ffn import LinearFFN

    monkeypatch.setattr(LinearFFN, "forward", LinearFFN.forward)  # the original comes back at the end
    (tmp_path / "empty.py").write_text("")
    unplugged = _definitions(tmp_path, "empty.py", "linear")
    patch = tmp_path / "patch_linear.py"
    patch.write_text(PATCH_LINEAR.format(version=1))
    first = _definitions(tmp_path, "patch_linear.py", "linear")
    assert set(first["plugged"]["plugins"]) == {"patch_linear.py"}
    assert first["conv1d"] == unplugged["conv1d"] and "plugins" not in first["conv1d"]

    patch.write_text(PATCH_LINEAR.format(version=2))
    new_process()
    monkeypatch.undo()
    monkeypatch.setattr(LinearFFN, "forward", LinearFFN.forward)
    second = _definitions(tmp_path, "patch_linear.py", "linear")
    assert second["plugged"]["plugins"]["patch_linear.py"] != first["plugged"]["plugins"]["patch_linear.py"]
    assert second["conv1d"] == unplugged["conv1d"]


def test_a_plugin_that_patches_zoo_outside_the_registry_makes_every_cell_depend_on_it(tmp_path, new_process,
                                                                                         monkeypatch):
    """A change zoo cannot attribute to a registered class (here: a class of zoo.model.seq2seq) errs on the side of
    stale."""
    import zoo.model.seq2seq

    monkeypatch.setattr(zoo.model.seq2seq, "Seq2Seq", zoo.model.seq2seq.Seq2Seq)
    (tmp_path / "patch_model.py").write_text("import zoo.model.seq2seq\n\n\nclass Other(zoo.model.seq2seq.Seq2Seq):\n"
                                             "    pass\n\n\nzoo.model.seq2seq.Seq2Seq = Other\n")
    definitions = _definitions(tmp_path, "patch_model.py", "linear")
    assert all(set(d["plugins"]) == {"patch_model.py"} for d in definitions.values())


def test_the_watched_modules_do_not_import_plugins():
    """zoo.plugins imports the modules it watches by name, out of the import-cycle test's sight: none of them may
    import zoo.plugins, or the cycle would hide there."""
    edges = graph()

    def reached(module: str) -> set[str]:
        seen, todo = set(), [module]
        while todo:
            todo += [m for m in edges.get(todo.pop(), ()) if m not in seen and not seen.add(m)]
        return seen

    assert not [m for m in plugins.NUMBERS if "zoo.plugins" in reached(m)]


HELPED_AND_PATCHING = f"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "helpers"))
import plugged_helper  # registers ffn.plugged-workers

from zoo.components.ffn import LinearFFN

{PATCH_LINEAR.format(version=1)}
"""


@pytest.mark.slow
def test_worker_processes_define_cells_as_zoo_run_does(tmp_path, new_process, monkeypatch):
    """Records written by worker processes, which load the plugins anew, are current for the `zoo run` that reads
    them: the helper the plugin imports and the built-in it patches are seen alike in both."""
    from zoo.cli import main
    from zoo.components.ffn import LinearFFN
    from zoo.experiment import load_experiment
    from zoo.experiment.grid import cells, plan

    monkeypatch.setattr(LinearFFN, "forward", LinearFFN.forward)
    monkeypatch.setattr(plugins, "_loaded", {})  # workers load every plugin loaded here: the other tests' too
    (tmp_path / "helpers").mkdir()
    (tmp_path / "helpers" / "plugged_helper.py").write_text(ffn_plugin("plugged-workers"))
    (tmp_path / "plugin_pkg").mkdir()
    (tmp_path / "plugin_pkg" / "__init__.py").write_text(HELPED_AND_PATCHING)
    (tmp_path / "exp.toml").write_text(
        tiny_experiment("plugged", plugin="./plugin_pkg", ffn="plugged-workers", label="plugged")
        + '\n[[variants]]\nlabel = "linear"\nbase = "paper-base"\n')
    out, runs = tmp_path / "out", tmp_path / "runs"
    assert main(["run", str(tmp_path / "exp.toml"), "--out", str(out), "--runs", str(runs), "--no-live",
                 "--workers", "2"]) == 0
    experiment = load_experiment(tmp_path / "exp.toml")
    assert not plan(experiment, cells(experiment, runs, out / "records"))
    for variant in ("plugged", "linear"):
        record = __import__("json").loads((out / "records" / variant / "copy" / "seed-0.json").read_text())
        assert list(record["definition"]["plugins"]) == ["plugin_pkg"]


def test_zoo_check_of_a_plugin_checks_what_its_helper_registered_and_the_built_ins_it_changed(tmp_path, new_process,
                                                                                             capsys, monkeypatch):
    """`zoo check PLUGIN` picks the entries whose code the plugin brought or changed (Plugin.touches), not those of
    its top-level module alone: a component a helper outside the plugin registered, and the built-in it patched."""
    from zoo.cli import main
    from zoo.components.ffn import LinearFFN

    monkeypatch.setattr(LinearFFN, "forward", LinearFFN.forward)  # the original comes back at the end
    helpers, package = tmp_path / "helpers", tmp_path / "checked_pkg"
    helpers.mkdir()
    package.mkdir()
    (helpers / "checked_helper.py").write_text(ffn_plugin("checked-helper"))
    (package / "__init__.py").write_text(f"import sys\n\nsys.path.insert(0, {str(helpers)!r})\nimport checked_helper\n"
                                         + textwrap.dedent(PATCH_LINEAR.format(version=1)))
    assert main(["check", str(package)]) == 0
    out = capsys.readouterr().out
    assert "ffn.checked-helper: passed" in out and "ffn.linear: passed" in out, out
    assert "ffn.conv1d" not in out and "2 of 2 entries keep every contract" in out


# -- one plugin, however it is reached (issue 35, item 1) ---------------------------------------------
def _package(folder, name: str, ffn: str, note: str = "") -> None:
    """A plugin package `name` in `folder`, registering ffn.<ffn> from a submodule (as zoo_examples does)."""
    (folder / name).mkdir(parents=True)
    (folder / name / "__init__.py").write_text(f"from . import parts  # noqa: F401\n{note}")
    (folder / name / "parts.py").write_text(ffn_plugin(ffn))


@pytest.mark.parametrize("installed_first", [True, False])
def test_a_plugin_installed_and_named_by_path_is_loaded_once(tmp_path, new_process, monkeypatch, installed_first):
    """`pip install ./examples` copies the package into site-packages, while the experiment names its folder: two
    files, the same bytes, one plugin (it was two, and the second's registrations failed as duplicates)."""
    site, source = tmp_path / "site", tmp_path / "source"
    _package(site, "twin_plugin", "twin-ffn")
    _package(source, "twin_plugin", "twin-ffn")
    monkeypatch.syspath_prepend(str(site))
    first, second = ("twin_plugin", str(source / "twin_plugin"))[::1 if installed_first else -1]
    assert load(second) is load(first)  # no 'already registered' error
    assert registry.names("ffn").count("twin-ffn") == 1


def test_a_plugin_installed_with_other_source_than_its_folder_says_so(tmp_path, new_process, monkeypatch):
    site, source = tmp_path / "site", tmp_path / "source"
    _package(site, "stale_plugin", "stale-ffn")
    _package(source, "stale_plugin", "stale-ffn", note="# edited since it was installed\n")
    monkeypatch.syspath_prepend(str(site))
    load("stale_plugin")
    with pytest.raises(PluginError, match=r"already registered.*'stale_plugin' \(unversioned\) is loaded already "
                                          r"with other source files"):
        load(str(source / "stale_plugin"))


def test_zoo_study_loads_the_plugins_the_zoo_command_loads(tmp_path):
    """zoo.study() loaded only the experiment file's own `plugins`, not $ZOO_PLUGINS or entry points: a grid
    `zoo run` had recorded with such a plugin read as stale from Python, and study.run() trained it again without."""
    import os
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    experiment = tmp_path / "glu.toml"
    experiment.write_text("\n".join(line for line in (root / "examples/experiments/glu.toml").read_text().splitlines()
                                    if not line.startswith("plugins = ")))  # its task 'rotate' is the plugin's
    code = f"import zoo; print([t.name for t in zoo.study({str(experiment)!r}).experiment.config.tasks])"
    env = {**os.environ, "ZOO_PLUGINS": str(root / "examples" / "zoo_examples")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=120)
    assert done.returncode == 0 and "'rotate'" in done.stdout, done.stderr


def test_two_plugins_of_one_file_name_both_decide_a_cell(tmp_path, new_process, monkeypatch):
    """Definitions name a path plugin by its file name, so that they do not depend on where a checkout lives.
    Two plugins called ext.py in two folders, both behind one cell (one registers its FFN, the other patches
    zoo.model): editing either one stales the cell."""
    import zoo.model.seq2seq
    from zoo.experiment import load_experiment, store

    monkeypatch.setattr(zoo.model.seq2seq, "Seq2Seq", zoo.model.seq2seq.Seq2Seq)
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
    (tmp_path / "a" / "ext.py").write_text(ffn_plugin("from-a"))
    (tmp_path / "b" / "ext.py").write_text("import zoo.model.seq2seq\n\n\nclass Other(zoo.model.seq2seq.Seq2Seq):\n"
                                           "    pass\n\n\nzoo.model.seq2seq.Seq2Seq = Other\n")

    def cell() -> dict:
        (tmp_path / "exp.toml").write_text(tiny_experiment("plugged", ffn="from-a", label="plugged").replace(
            "seeds = [0]\n", 'seeds = [0]\nplugins = ["a/ext.py", "b/ext.py"]\n'))
        experiment = load_experiment(tmp_path / "exp.toml")
        return store.definition(experiment, "plugged", experiment.config.tasks[0], 0)

    first = cell()
    assert list(first["plugins"]) == ["ext.py"]
    for edited in ("a", "b"):
        (tmp_path / edited / "ext.py").write_text((tmp_path / edited / "ext.py").read_text() + "\n# edited\n")
        new_process()
        second = cell()
        assert second["plugins"] != first["plugins"], edited
        first = second


# -- what issue 56 found unseen: torch patched, code replaced in place, data files read --------------------------
def test_a_plugin_that_patches_torch_makes_every_cell_depend_on_it(tmp_path, new_process, monkeypatch):
    """`torch.nn.Linear.forward = ...` changes every model's numbers and no registered class shows it: every cell
    carries the plugin's hash."""
    import torch

    monkeypatch.setattr(torch.nn.Linear, "forward", torch.nn.Linear.forward)  # the original comes back at the end
    (tmp_path / "patch_torch.py").write_text(
        "import torch\n\n_forward = torch.nn.Linear.forward\n\n\n"
        "def forward(self, x):\n    return _forward(self, x) * 1.0001\n\n\ntorch.nn.Linear.forward = forward\n")
    definitions = _definitions(tmp_path, "patch_torch.py", "conv1d", other="linear")
    assert all(set(d["plugins"]) == {"patch_torch.py"} for d in definitions.values())


def test_a_function_whose_code_a_plugin_replaces_in_place_is_seen(tmp_path, new_process, monkeypatch):
    """The same function object with another `__code__`: no binding changed, yet the numbers did."""
    from zoo.components.ffn import LinearFFN

    monkeypatch.setattr(LinearFFN.forward, "__code__", LinearFFN.forward.__code__)
    (tmp_path / "recode.py").write_text(
        "from zoo.components.ffn import LinearFFN\n\n\ndef forward(self, x):\n    return x\n\n\n"
        "LinearFFN.forward.__code__ = forward.__code__\n")
    definitions = _definitions(tmp_path, "recode.py", "linear")
    assert set(definitions["plugged"]["plugins"]) == {"recode.py"} and "plugins" not in definitions["conv1d"]


def test_the_data_files_a_plugin_declares_are_part_of_its_source(tmp_path, new_process):
    """`ZOO_READS = ["constants.json"]`: editing the constants stales the plugin's cells; a declared file that is not
    there is one line."""
    folder = tmp_path / "pkg"
    folder.mkdir()
    (folder / "__init__.py").write_text(ffn_plugin("constff") + '\nZOO_READS = ["constants.json"]\n')
    (folder / "constants.json").write_text('{"scale": 1.0}')
    first = _definitions(tmp_path, "pkg", "constff")["plugged"]["plugins"]["pkg"]
    new_process()
    (folder / "constants.json").write_text('{"scale": 2.0}')
    assert _definitions(tmp_path, "pkg", "constff")["plugged"]["plugins"]["pkg"] != first
    new_process()
    (folder / "constants.json").unlink()
    with pytest.raises(PluginError, match="ZOO_READS names 'constants.json', which is not a file"):
        load(str(folder))
