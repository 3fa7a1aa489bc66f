"""The examples plugin package: its component registers and builds without touching the core, and installed (found
through its `zoo.plugins` entry point) it runs through `zoo run`, whose cells go stale when the plugin is edited."""

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import zoo
from zoo.plugins import ENV
from zoo.registry import registry

ROOT = Path(__file__).resolve().parents[1]


def test_glu_example_registers_and_trains():
    from zoo.plugins import load

    load(str(ROOT / "examples" / "zoo_examples"))  # registers ffn.glu

    try:
        assert "ffn.glu" in registry.list("ffn.*")
        spec = zoo.load_spec("paper-base", {"ffn.kind": "glu", "ffn.activation": "gelu", "d_model": 16, "n_heads": 2,
                                            "d_ff": 24, "encoder_layers": 1, "decoder_layers": 1,
                                            "src_vocab": 11, "tgt_vocab": 11})
        model = zoo.build(spec)
        scores = model(torch.randint(1, 11, (2, 5)), torch.randint(1, 11, (2, 4)))
        scores.sum().backward()
        assert scores.shape == (2, 4, 11)
        assert model.num_parameters() == zoo.build(spec.with_overrides({"ffn.kind": "linear"})).num_parameters() \
            + spec.encoder_layers * (16 * 24 + 24) + spec.decoder_layers * (16 * 24 + 24)
    finally:
        registry.unregister("ffn", "glu")


@pytest.mark.slow
def test_the_installed_plugin_runs_through_zoo_run_and_its_edits_make_cells_stale(tmp_path):
    """A user's view, as the README says it: `pip install ./examples` beside zoo, then `zoo run` the example
    experiment, which also names the plugin by its folder (one plugin, loaded once). Edit the plugin: the installed
    copy and the folder now differ, which is one line saying so; reinstall, and the dry run says the plugin's cells
    are stale while the built-in ones stay recorded.

    The package is installed into a folder of its own put on PYTHONPATH (`pip install --target`), and the commands
    run under this interpreter: they see the environment zoo is installed in, a virtual environment or not (a nested
    `venv --system-site-packages` saw the base Python's packages, not an outer venv's: 'No module named zoo'), and
    the distribution's .dist-info in that folder is what `importlib.metadata` finds the entry point by."""
    package = shutil.copytree(ROOT / "examples", tmp_path / "examples",
                              ignore=shutil.ignore_patterns("build", "*.egg-info"))
    target = tmp_path / "installed"

    def install() -> None:
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--upgrade",
                               "--target", str(target), str(package)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr

    install()
    assert [p.name for p in target.glob("zoo_examples-*.dist-info")], "no distribution metadata for the entry point"
    path = package / "experiments" / "glu.toml"
    path.write_text(path.read_text().replace("steps = 300", "steps = 20").replace("seeds = [0, 1, 2]", "seeds = [0]"))
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(target), os.environ.get("PYTHONPATH")]))}
    env.pop(ENV, None)  # the plugin is found by its entry point, not named by $ZOO_PLUGINS
    zoo = [sys.executable, "-m", "zoo"]
    unlisted = subprocess.run(zoo + ["list", "ffn.*"], capture_output=True, text=True, cwd=tmp_path,
                              env={**env, "PYTHONPATH": os.environ.get("PYTHONPATH", "")})
    glu = re.compile(r"\bffn\.glu\b")  # the plugin's ffn.glu, not the built-in ffn.geglu
    assert unlisted.returncode == 0 and not glu.search(unlisted.stdout), \
        "zoo-examples is installed in this environment already (pip uninstall zoo-examples): nothing to prove"
    listed = subprocess.run(zoo + ["list", "ffn.*"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert glu.search(listed.stdout), listed.stderr  # found through the entry point of the --target install
    run = subprocess.run(zoo + ["run", str(path), "--out", str(tmp_path / "out"), "--runs", str(tmp_path / "runs"),
                                "--no-live"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "out" / "records" / "geglu-plugin" / "copy" / "seed-0.json").is_file()
    assert (tmp_path / "out" / "records" / "relu" / "rotate" / "seed-0.json").is_file()  # the plugin's task
    report = subprocess.run(zoo + ["report", str(path), "--out", str(tmp_path / "out")], capture_output=True,
                            text=True, env=env, cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    assert "edit accuracy" in (tmp_path / "out" / "report.md").read_text()  # the plugin's metric, as primary

    plugin = package / "zoo_examples" / "glu_ffn.py"
    plugin.write_text(plugin.read_text() + "\n# edited by the user\n")
    dry = [*zoo, "run", str(path), "--out", str(tmp_path / "out"), "--runs", str(tmp_path / "runs"), "--dry-run"]
    differs = subprocess.run(dry, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert differs.returncode == 2 and "loaded already with other source files" in differs.stderr
    assert len(differs.stderr.strip().splitlines()) == 1
    install()
    dry = subprocess.run(dry, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    row = next(line for line in dry.stdout.splitlines() if "copy" in line)
    cells = [int(x) for x in row.replace("│", " ").split() if x.isdigit()]
    assert cells[:4] == [2, 1, 0, 1]  # cells, recorded (relu), copied, stale (the plugin's variant)
    row = next(line for line in dry.stdout.splitlines() if "rotate" in line)
    cells = [int(x) for x in row.replace("│", " ").split() if x.isdigit()]
    assert cells[:4] == [2, 0, 0, 2]  # on the plugin's task both variants use the (edited) plugin


def example_commands() -> list[tuple[str, str]]:
    """(file, command) for every `zoo ...` line the examples show a user (in a docstring or a header comment),
    continuation lines joined."""
    found = []
    for path in sorted([*(ROOT / "examples").rglob("*.py"), *(ROOT / "examples").rglob("*.toml")]):
        if "build" in path.parts:
            continue
        text = re.sub(r"\\\n\s*(#\s*)?", " ", path.read_text())
        for line in text.splitlines():
            line = line.lstrip("# ").strip()
            if line.startswith("zoo ") and not line.startswith("zoo command"):
                found.append((path.relative_to(ROOT).as_posix(), line))
    return found


@pytest.mark.parametrize("file, line", example_commands(), ids=lambda value: value[:60])
def test_the_examples_commands_run_as_written(file, line, tmp_path):
    """Each command an example shows runs from the repository root as written, in a new process as a user's would
    (with a budget cut to seconds, and `zoo run` as a dry run, whose plan needs every plugin, variant and task it
    names); its outputs go to tmp."""
    words = shlex.split(line)[1:]
    if "--out" in words:
        words[words.index("--out") + 1] = str(tmp_path / "out")
    if words[0] == "train":
        words += ["--train", "steps=2", "--task-set", "test_size=10", "--task-set", "valid_size=10", "--no-progress"]
    if words[0] == "run":
        words = [w for w in words if w != "--report"] + ["--dry-run", "--runs", str(tmp_path / "runs")]
    done = subprocess.run([sys.executable, "-m", "zoo", *words], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr
    assert {f for f, _ in example_commands()} >= {"examples/zoo_examples/rotate_task.py"}
