"""Plugins: a user's file, folder or module loads once, is fingerprinted, and every bad plugin is one line."""

from __future__ import annotations

import sys

import pytest
from grid_files import ffn_plugin, tiny_experiment

from zoo import plugins
from zoo.experiment import packing
from zoo.plugins import PluginError, load, load_all
from zoo.registry import registry


@pytest.fixture
def plugin_file(tmp_path):
    """Write a plugin registering ffn.<name> (conftest.ffn_plugin), or `body` in its place; every name it
    registered is removed afterwards."""
    names = []

    def write(name: str, body: str | None = None, file: str = "my_components.py"):
        path = tmp_path / file
        path.write_text(ffn_plugin(name) if body is None else body)
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


EXPERIMENT = tiny_experiment("plugged", plugin="my_components.py", ffn="plugged-e2e", label="plugged")


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
    sentences, _ = packing.unpack(record["packed"])  # a record of format 2 keeps them packed
    assert names["metric"] in record["test"] and names["metric"] in sentences
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


PARENT_ONLY = """
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
    name = f"plugged-parent-{executor}"
    plugin_file(name, ffn_plugin(name, prelude=PARENT_ONLY.format(pid=os.getpid())))
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
    plugin_file(f"plugged-{kind}", ffn_plugin(f"plugged-{kind}", forward=body))
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
