"""Plugins: a user's file, folder or module loads once, is fingerprinted, and every bad plugin is one line."""

from __future__ import annotations

import sys
import textwrap

import pytest

from zoo import plugins
from zoo.plugins import PluginError, load, load_all
from zoo.registry import registry

FFN = """
from torch import nn

from zoo import register
from zoo.components.ffn import FeedForward, FFNParams


@register("ffn", "{name}", params=FFNParams)
class Plugged(FeedForward):
    def __init__(self, d_model, d_ff, params, dropout):
        super().__init__(d_model, d_ff, params, dropout)
        self.w = nn.Linear(d_model, d_model)

    def forward(self, x):
        return self.w(x)
"""


@pytest.fixture
def plugin_file(tmp_path):
    """Write a plugin registering ffn.<name>; every name it registered is removed afterwards."""
    names = []

    def write(name: str, body: str = FFN, file: str = "my_components.py"):
        path = tmp_path / file
        path.write_text(textwrap.dedent(body.format(name=name)))
        names.append(name)
        return path

    yield write
    for name in names:
        if name in registry.names("ffn"):
            registry.unregister("ffn", name)


def test_a_plugin_file_registers_its_component_once(plugin_file):
    path = plugin_file("plugged-once")
    first = load(str(path))
    assert "ffn.plugged-once" in registry.list("ffn.*")
    assert load(str(path)) is first  # the second load is the first one's: no duplicate registration
    assert first.version == "unversioned" and len(first.sha256) == 64
    assert first in plugins.loaded()


def test_a_relative_path_is_taken_from_the_given_folder(plugin_file, tmp_path, monkeypatch):
    plugin_file("plugged-relative")
    monkeypatch.chdir("/")
    assert load("my_components.py", base=tmp_path).name == "my_components.py"
    assert "ffn.plugged-relative" in registry.list("ffn.*")


def test_a_folder_beside_an_experiment_is_a_path_even_without_a_slash(tmp_path, monkeypatch):
    (tmp_path / "plugged_folder").mkdir()
    (tmp_path / "plugged_folder" / "__init__.py").write_text("")
    monkeypatch.chdir("/")
    plugin = load("plugged_folder", base=tmp_path)
    assert plugin.where == str(tmp_path / "plugged_folder") and plugin.label == "plugged_folder"


def test_the_fingerprint_follows_the_source(tmp_path):
    path = tmp_path / "a.py"
    path.write_text("x = 1\n")
    before = plugins.fingerprint([path])
    path.write_text("x = 2\n")
    assert plugins.fingerprint([path]) != before


def test_plugins_from_the_environment(plugin_file, monkeypatch):
    path = plugin_file("plugged-env", file="env_plugin.py")
    monkeypatch.setenv(plugins.ENV, str(path))
    assert [p.name for p in load_all(entry_points=False)] == [str(path)]
    assert "ffn.plugged-env" in registry.list("ffn.*")


@pytest.mark.parametrize("body, message", [
    ("raise RuntimeError('boom')\n", "importing it failed: RuntimeError: boom"),
    ("def broken(:\n", "importing it failed: SyntaxError"),
    ("import no_such_module_zzz\n", "importing it failed: ModuleNotFoundError"),
    ("from zoo import register\n@register('ffn', 'linear')\nclass X:\n    pass\n", "ffn.linear is already registered"),
    ("from zoo import register\n@register('ffn', 'plugged-wrong-base')\nclass X:\n    pass\n", "must derive from"),
])
def test_a_bad_plugin_is_one_line_naming_it(plugin_file, body, message):
    path = plugin_file("unused", body=body, file="bad_plugin.py")
    with pytest.raises(PluginError, match=message) as err:
        load(str(path))
    assert "bad_plugin.py" in str(err.value) and "\n" not in str(err.value)


def test_missing_plugins_are_one_line(tmp_path):
    with pytest.raises(PluginError, match="does not exist"):
        load(str(tmp_path / "absent.py"))
    with pytest.raises(PluginError, match="cannot import it"):
        load("no_such_package_zzz.ext")


def test_a_file_that_is_not_python_is_one_line(tmp_path):
    """An experiment file given to `zoo check` (or as --plugin) was an AttributeError from importlib."""
    (tmp_path / "experiment.toml").write_text('name = "x"\n')
    with pytest.raises(PluginError, match=r"experiment.toml is neither a .py file nor a folder with __init__.py"):
        load(str(tmp_path / "experiment.toml"))


EXPERIMENT = """
name = "plugged"
seeds = [0]
plugins = ["my_components.py"]
shared = {d_model = 16, n_heads = 2, d_ff = 32, encoder_layers = 1, decoder_layers = 1}

[[variants]]
label = "plugged"
base = "paper-base"
set = {"ffn.kind" = "plugged-e2e"}

[[tasks]]
name = "copy"
options = {symbols = 6, min_len = 2, max_len = 4, train_size = 100, valid_size = 10, test_size = 10}

[train]
steps = 4
batch_tokens = 128
warmup = 1
eval_interval = 2
eval_sentences = 10
checkpoint_interval = 2
device = "cpu"
threads = 1
"""


def test_an_experiment_runs_with_its_plugin_and_goes_stale_when_the_plugin_changes(plugin_file, tmp_path):
    from zoo.cli import main
    from zoo.experiment import load_experiment, store
    from zoo.experiment.grid import cell_state, cells

    path = plugin_file("plugged-e2e")
    (tmp_path / "exp.toml").write_text(EXPERIMENT)
    out, runs = tmp_path / "out", tmp_path / "runs"
    assert main(["run", str(tmp_path / "exp.toml"), "--out", str(out), "--runs", str(runs), "--no-live"]) == 0
    record = __import__("json").loads((out / "records" / "plugged" / "copy" / "seed-0.json").read_text())
    assert record["status"] == "complete"
    assert list(record["definition"]["plugins"]) == ["my_components.py"]
    assert {"name": "my_components.py", "version": "unversioned"}.items() <= record["provenance"]["plugins"][0].items()

    path.write_text(path.read_text() + "\n# edited\n")
    plugins._loaded.clear()  # a new process: the edited plugin is what it loads
    for name in [m for m in sys.modules if m.startswith("zoo_plugin_")]:
        del sys.modules[name]
    registry.unregister("ffn", "plugged-e2e")
    experiment = load_experiment(tmp_path / "exp.toml")
    (cell,) = cells(experiment, runs, out / "records")
    state, changed = cell_state(cell, store.definition(experiment, "plugged", experiment.config.tasks[0], 0))
    assert state == "stale" and any(c.startswith("plugins.my_components.py") for c in changed)


def test_every_command_takes_plugins_and_a_bad_one_is_one_line(plugin_file, capsys):
    from zoo.cli import main

    path = plugin_file("plugged-cli")
    assert main(["show", "paper-base", "--set", "ffn.kind=plugged-cli", "--plugin", str(path)]) == 0
    assert main(["list", "ffn.*", "--plugin", str(path.parent / "absent.py")]) == 2
    err = capsys.readouterr().err.strip()
    assert "absent.py" in err and "does not exist" in err and len(err.splitlines()) == 1


def test_a_builtin_cell_has_no_plugins_in_its_definition():
    from pathlib import Path

    from zoo.experiment import load_experiment, store

    experiment = load_experiment(Path(__file__).resolve().parents[1] / "experiments" / "smoke.toml")
    assert "plugins" not in store.definition(experiment, "post-norm", experiment.config.tasks[0], 0)


DATA_PLUGIN = '''
import numpy as np

from zoo.data import SyntheticTask, register_task
from zoo.metrics import Metric, register_metric


@register_task("{task}")
class Rotated(SyntheticTask):
    metrics = ("{metric}", "exact_match")

    def target(self, source):
        return [*source[1:], *source[:1]]


@register_metric("{metric}")
class FirstRight(Metric):
    """Percentage of outputs whose first token is the reference's."""

    label, unit, stall_floor, effect = "first token right %", "% of sequences", 5.0, 5.0
    sentence_level = vectorised = True

    def score(self, hypotheses, references):
        return float(self.from_totals(self.as_array(self.sentence_statistics(hypotheses, references)).sum(axis=0)))

    def sentence_statistics(self, hypotheses, references):
        return [[int(h.split()[:1] == r.split()[:1]), 1] for h, r in zip(hypotheses, references)]

    def from_totals(self, totals):
        totals = np.asarray(totals, dtype=float)
        return 100.0 * totals[..., 0] / np.maximum(totals[..., 1], 1)
'''

def _data_experiment(ffn: str, task: str, metric: str) -> str:
    return (EXPERIMENT.replace('plugins = ["my_components.py"]', 'plugins = ["my_components.py", "my_data.py"]')
            .replace('name = "copy"', f'name = "{task}"\nprimary = "{metric}"').replace('"plugged-e2e"', f'"{ffn}"'))


def _run_plugged_task_and_metric(plugin_file, tmp_path, executor: str, tag: str) -> str:
    """Run a one-cell experiment whose component, task and metric all come from plugins outside the repository;
    return its report."""
    from zoo import metrics
    from zoo.cli import main
    from zoo.data import TASKS

    names = {"ffn": f"plugged-{tag}", "task": f"rotated-{tag}", "metric": f"first_right_{tag}"}
    plugin_file(names["ffn"])
    (tmp_path / "my_data.py").write_text(DATA_PLUGIN.format(**names))
    (tmp_path / "exp.toml").write_text(_data_experiment(**names))
    out = tmp_path / "out"
    try:
        argv = ["run", str(tmp_path / "exp.toml"), "--out", str(out), "--runs", str(tmp_path / "runs"), "--no-live",
                "--report", "--executor", executor] + (["--threads", "1"] if executor == "ray" else [])
        assert main(argv) == 0
    finally:
        TASKS.unregister(names["task"])
        metrics.METRICS.unregister(names["metric"])
        metrics.get.cache_clear()
    record = __import__("json").loads((out / "records" / "plugged" / names["task"] / "seed-0.json").read_text())
    assert record["status"] == "complete"
    assert set(record["definition"]["plugins"]) == {"my_components.py", "my_data.py"}
    assert names["metric"] in record["test"] and names["metric"] in record["sentences"]
    return (out / "report.md").read_text()


def test_a_plugin_task_and_metric_run_and_appear_in_the_report(plugin_file, tmp_path):
    report = _run_plugged_task_and_metric(plugin_file, tmp_path, "local", "local")
    assert "rotated-local" in report and "first token right %" in report


@pytest.mark.slow
def test_a_plugin_task_and_metric_run_on_ray(plugin_file, tmp_path):
    ray = pytest.importorskip("ray", reason="the Ray executor needs the ray extra (./setup.sh dev installs it)")
    try:
        report = _run_plugged_task_and_metric(plugin_file, tmp_path, "ray", "ray")
    finally:
        ray.shutdown()
    assert "rotated-ray" in report and "first token right %" in report


PARENT_ONLY = FFN + """
import os

if os.getpid() != {pid}:
    raise ImportError("this module only imports in the process that wrote it")
"""


@pytest.mark.parametrize("executor", ["local", pytest.param("ray", marks=pytest.mark.slow)])
def test_a_plugin_missing_on_a_worker_is_one_line_and_nothing_trains(plugin_file, tmp_path, capsys, executor):
    """A plugin that loads in `zoo run` but not in its worker processes (here: it refuses any other pid) stops the
    grid before any cell starts, with one line naming the plugin."""
    import os

    from zoo.cli import main

    if executor == "ray":
        pytest.importorskip("ray", reason="the Ray executor needs the ray extra (./setup.sh dev installs it)")
    plugin_file(f"plugged-parent-{executor}", PARENT_ONLY.replace("{pid}", str(os.getpid())))
    (tmp_path / "exp.toml").write_text(EXPERIMENT.replace("seeds = [0]", "seeds = [0, 1]")
                                       .replace('"plugged-e2e"', f'"plugged-parent-{executor}"'))
    out, runs = tmp_path / "out", tmp_path / "runs"
    parallel = ["--workers", "2"] if executor == "local" else ["--threads", "1"]
    try:
        code = main(["run", str(tmp_path / "exp.toml"), "--out", str(out), "--runs", str(runs), "--no-live",
                     "--executor", executor, *parallel])
    finally:
        if executor == "ray":
            __import__("ray").shutdown()
    problems = [line for line in capsys.readouterr().err.splitlines() if "my_components.py" in line]
    assert code == 2 and len(problems) == 1  # before it, only the floors' progress line
    assert f"on {'a Ray worker' if executor == 'ray' else 'a worker process'}: " in problems[0]
    assert "only imports in the process" in problems[0]
    assert not list(out.rglob("seed-*.json")) and not list(runs.rglob("metrics.jsonl"))


# -- everything a plugin brings in is its source (issue 34, item 3) ----------------------------------
@pytest.fixture
def new_process(tmp_path):
    """Forget what loading plugins from `tmp_path` left in this process (the plugins, their modules, the ffn
    entries they registered, the folders they put on sys.path), as a new process would not have it; called
    by the test between an edit and the next load, and at the end."""
    loaded, ffns, path = dict(plugins._loaded), set(registry.names("ffn")), list(sys.path)

    def forget() -> None:
        plugins._loaded.clear()
        plugins._loaded.update(loaded)
        for name, module in list(sys.modules.items()):
            origin = getattr(module, "__file__", None) or ""
            if name.startswith("zoo_plugin_") or origin.startswith(str(tmp_path)):
                del sys.modules[name]
        for name in set(registry.names("ffn")) - ffns:
            registry.unregister("ffn", name)
        sys.path[:] = path

    yield forget
    forget()


def _definitions(folder, plugin: str, ffn: str, other: str = "conv1d") -> dict[str, dict]:
    """{variant: definition} of seed 0 of a two-variant experiment loading `plugin`: `plugged` (ffn.kind = `ffn`)
    and `other` (ffn.kind = `other`)."""
    from zoo.experiment import load_experiment, store

    (folder / "exp.toml").write_text(
        EXPERIMENT.replace('"my_components.py"', f'"{plugin}"').replace('"plugged-e2e"', f'"{ffn}"')
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
    helper.write_text(textwrap.dedent(FFN.format(name="plugged-helper")))
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
    (tmp_path / "my_components.py").write_text(textwrap.dedent(FFN.format(name="plugged-beside")))
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
    """A change zoo cannot attribute to a registered class (here: a function of zoo.model) errs on the side of stale."""
    import zoo.model

    monkeypatch.setattr(zoo.model, "Seq2Seq", zoo.model.Seq2Seq)
    (tmp_path / "patch_model.py").write_text("import zoo.model\n\n\nclass Other(zoo.model.Seq2Seq):\n    pass\n\n\n"
                                             "zoo.model.Seq2Seq = Other\n")
    definitions = _definitions(tmp_path, "patch_model.py", "linear")
    assert all(set(d["plugins"]) == {"patch_model.py"} for d in definitions.values())


def test_the_watched_modules_do_not_import_plugins():
    """zoo.plugins imports the modules it watches by name, out of the import-cycle test's sight: none of them may
    import zoo.plugins, or the cycle would hide there."""
    from tests.test_imports import graph

    edges = graph()

    def reached(module: str) -> set[str]:
        seen, todo = set(), [module]
        while todo:
            todo += [m for m in edges.get(todo.pop(), ()) if m not in seen and not seen.add(m)]
        return seen

    assert not [m for m in plugins.NUMBERS if "zoo.plugins" in reached(m)]


# -- a plugin that exits while importing (issue 34, item 4) -------------------------------------------
EXITS = [
    ("import sys\nsys.exit(0)\n", "importing it called sys.exit(0)"),
    ("import sys\nsys.exit(3)\n", "importing it called sys.exit(3)"),
    ("raise SystemExit\n", "importing it called sys.exit(None)"),
    ("class Stop(BaseException):\n    pass\n\n\nraise Stop('no\\nmore')\n", "importing it failed: Stop: no more"),
]


@pytest.mark.parametrize("body, message", EXITS)
def test_a_plugin_that_exits_while_importing_is_one_line_and_nothing_runs(tmp_path, capsys, body, message):
    from zoo.cli import main

    path = tmp_path / "my_components.py"
    path.write_text(body)
    assert main(["show", "paper-base", "--plugin", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'" + str(path) + "'" in err and message in err

    (tmp_path / "exp.toml").write_text(EXPERIMENT.replace('"plugged-e2e"', '"linear"'))
    out, runs = tmp_path / "out", tmp_path / "runs"
    assert main(["run", str(tmp_path / "exp.toml"), "--out", str(out), "--runs", str(runs), "--no-live"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "plugin 'my_components.py'" in err and message in err
    assert not out.exists() and not runs.exists()


# -- a plugin's components keep the fast contracts before a grid trains (issue 34, item 8) -----------
BROKEN_FFN = {
    "broadcast": ("return self.w(x).mean(dim=1, keepdim=True)  # (B, 1, D)",
                  "breaks the shapes contract: output shape (4, 1, 32) != input shape (4, 7, 32)"),
    "future": ("return self.w(x).mean(dim=1, keepdim=True).expand_as(x)  # every position sees them all",
               "breaks the causal contract: positions before 1 see the token at 1"),
}


@pytest.mark.parametrize("kind", sorted(BROKEN_FFN))
def test_a_broken_plugin_component_stops_the_grid_before_its_first_cell(plugin_file, tmp_path, capsys, kind):
    from zoo.cli import main

    body, message = BROKEN_FFN[kind]
    plugin_file(f"plugged-{kind}", FFN.replace("return self.w(x)", body))
    (tmp_path / "exp.toml").write_text(EXPERIMENT.replace('"plugged-e2e"', f'"plugged-{kind}"'))
    out, runs = tmp_path / "out", tmp_path / "runs"
    code = main(["run", str(tmp_path / "exp.toml"), "--out", str(out), "--runs", str(runs), "--no-live"])
    problems = [line for line in capsys.readouterr().err.splitlines() if "my_components.py" in line]
    assert code == 2 and len(problems) == 1
    assert f"variant 'plugged': ffn 'plugged-{kind}' (plugin 'my_components.py') {message}" in problems[0]
    assert not list(out.rglob("seed-*.json")) and not list(runs.rglob("metrics.jsonl"))


def test_a_grid_of_builtins_is_not_checked_before_it_trains(monkeypatch):
    from pathlib import Path

    from zoo import testing
    from zoo.experiment import load_experiment

    def refuse(*args, **kwargs):
        raise AssertionError("a built-in component was checked")

    monkeypatch.setattr(testing, "check", refuse)
    experiment = load_experiment(Path(__file__).resolve().parents[1] / "experiments" / "smoke.toml")
    testing.preflight(experiment, list(experiment.specs))


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
    (tmp_path / "helpers" / "plugged_helper.py").write_text(textwrap.dedent(FFN.format(name="plugged-workers")))
    (tmp_path / "plugin_pkg").mkdir()
    (tmp_path / "plugin_pkg" / "__init__.py").write_text(HELPED_AND_PATCHING)
    (tmp_path / "exp.toml").write_text(
        EXPERIMENT.replace('"my_components.py"', '"./plugin_pkg"').replace('"plugged-e2e"', '"plugged-workers"')
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
    (helpers / "checked_helper.py").write_text(textwrap.dedent(FFN.format(name="checked-helper")))
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
    (folder / name / "parts.py").write_text(textwrap.dedent(FFN.format(name=ffn)))


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
