"""Plugins that fail, fuzzed: at import (every kind of exception, sys.exit() with any code, BaseException
subclasses, messages of several lines, a __str__ that raises) and in a component's forward (raising or
exiting, while `zoo run` checks it or once it trains, in one process or in worker processes). Each is a
non-zero exit with its cause in one line: no traceback, no hang, no silent exit 0 (issue 34, items 4 and 8).

The forward cases that fail only once the cell trains need `execute` (zoo/experiment/cell.py) to record any
BaseException but Ctrl-C, and the local executor to survive a worker that exits (ids ending in -needs-cell)."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from grid_files import ffn_plugin, tiny_experiment
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zoo.cli import main
from zoo.registry import registry

# What a plugin's import ends with: {name: a statement raising it, with {message} its argument}.
RAISES = {
    "ValueError": "raise ValueError({message!r})",
    "ImportError": "raise ImportError({message!r})",
    "KeyError": "raise KeyError({message!r})",
    "MemoryError": "raise MemoryError({message!r})",
    "RecursionError": "def deeper(n):\n    return deeper(n + 1)\n\n\ndeeper(0)  # {message!r}",
    "GeneratorExit": "raise GeneratorExit({message!r})",
    "BaseException": "class Halt(BaseException):\n    pass\n\n\nraise Halt({message!r})",
    "sys.exit(message)": "import sys\n\nsys.exit({message!r})",
    "sys.exit()": "import sys\n\nsys.exit()  # {message!r}",
    "sys.exit(0)": "import sys\n\nsys.exit(0)  # {message!r}",
    "sys.exit(1)": "raise SystemExit(1)  # {message!r}",
    "unprintable": "class Odd(Exception):\n    def __str__(self):\n        raise RuntimeError('no')\n\n\n"
                   "raise Odd({message!r})",
    "after registering": "from zoo import register\nfrom zoo.components.ffn import LinearFFN\n\n\n"
                         "@register('ffn', 'fuzz-half-registered')\nclass Half(LinearFFN):\n    pass\n\n\n"
                         "raise SystemExit({message!r})",
}
MESSAGES = st.one_of(st.sampled_from(["", "0", "a\nb", "[/]", "  spaced  ", "é", "x" * 200]), st.text(max_size=12))
_names = itertools.count()


def many(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.mark.timeout(300)
@many(300)
@given(kind=st.sampled_from(sorted(RAISES)), message=MESSAGES, command=st.sampled_from(["show", "check"]))
def test_a_plugin_failing_at_import_is_one_line_and_exit_2(tmp_path, capsys, kind, message, command):
    path = tmp_path / f"fuzzed_{next(_names)}.py"  # a new file each time: no cached bytecode of another draw
    path.write_text(RAISES[kind].format(message=message) + "\n")
    argv = ["show", "paper-base", "--plugin", str(path)] if command == "show" else ["check", str(path)]
    try:
        code = main(argv)
    finally:
        if "fuzz-half-registered" in registry.names("ffn"):
            registry.unregister("ffn", "fuzz-half-registered")
    out, err = capsys.readouterr()
    assert code == 2, (kind, message, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and path.name in lines[0] and "Traceback" not in err, err


# -- in a component's forward ----------------------------------------------------------------------
# An FFN whose forward runs {failure} while `when` holds: "self.training" once the cell trains (after `zoo run`
# checked the component in eval mode), "True" from the first call (the check before the grid meets it).
FFN = ffn_plugin("fuzzed", prelude="""

class Halt(BaseException):
    pass
""", forward="""
if {when}:
    {failure}
return self.w(x)
""")


UNPRINTABLE = "raise type('Odd', (Exception,), {'__str__': lambda self: 1 / 0})()"


@pytest.mark.parametrize("failure", ["sys.exit(0)", "raise Halt('halted')", "raise ValueError('in forward')",
                                     UNPRINTABLE])
def test_zoo_check_of_a_forward_that_fails_is_a_failed_contract_per_line(tmp_path, capsys, failure):
    path = tmp_path / f"fuzzed_{next(_names)}.py"
    path.write_text(textwrap.dedent(FFN.format(when="True", failure=failure)))
    try:
        code = main(["check", str(path)])
    finally:
        registry.unregister("ffn", "fuzzed")
    out, err = capsys.readouterr()
    assert code == 1 and "Traceback" not in out + err and not err
    assert "ffn.fuzzed: shapes FAILED: " in out and "0 of 1 entries keep every contract" in out


# -- through `zoo run`, as the user runs it: a process with its exit code ----------------------------
EXPERIMENT = tiny_experiment("fuzzed", plugin="fuzzed_ffn.py", ffn="fuzzed", steps=2, train_size=40)

TIMEOUT = 120  # seconds a `zoo run` of this one-cell grid may take on a loaded machine; a hang takes forever


def _zoo_run(folder: Path, workers: int) -> tuple[int, str]:
    """(exit code, stderr) of `zoo run` on the grid in `folder`, in its own process group; killed with every
    process it started when it outlives TIMEOUT, which fails the test."""
    command = [sys.executable, "-m", "zoo", "run", str(folder / "exp.toml"), "--out", str(folder / "out"),
               "--runs", str(folder / "runs"), "--no-live", "--workers", str(workers)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        _, err = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail(f"zoo run --workers {workers} hung for {TIMEOUT} s")
    return process.returncode, err


def _grid(folder: Path, plugin: str, seeds: int = 1) -> Path:
    """The one-variant grid of EXPERIMENT, with `seeds` cells (the local executor starts worker processes for 2)."""
    (folder / "exp.toml").write_text(EXPERIMENT.replace("seeds = [0]", f"seeds = {list(range(seeds))}"))
    (folder / "fuzzed_ffn.py").write_text(textwrap.dedent(plugin))
    return folder


@pytest.mark.slow
def test_a_plugin_exiting_at_import_ends_zoo_run_with_exit_2(tmp_path):
    code, err = _zoo_run(_grid(tmp_path, "import sys\n\nsys.exit(0)\n"), workers=1)
    assert code == 2 and "Traceback" not in err
    (line,) = [line for line in err.splitlines() if "fuzzed_ffn.py" in line]
    assert "importing it called sys.exit(0)" in line
    assert not list(tmp_path.rglob("seed-*.json"))


@pytest.mark.slow
@pytest.mark.parametrize("failure", ["raise ValueError('in forward')", "sys.exit(0)", "raise Halt('halted')"])
def test_a_forward_failing_when_checked_stops_the_grid_in_one_line(tmp_path, failure):
    """The check before the grid calls the forward in this process, whatever the executor: one line, exit 2."""
    code, err = _zoo_run(_grid(tmp_path, FFN.format(when="True", failure=failure)), workers=1)
    assert code == 2 and "Traceback" not in err
    (line,) = [line for line in err.splitlines() if "fuzzed_ffn.py" in line]
    assert "variant 'fuzzed': ffn 'fuzzed' (plugin 'fuzzed_ffn.py') breaks the shapes contract" in line
    assert not list(tmp_path.rglob("seed-*.json"))


@pytest.mark.slow
@pytest.mark.parametrize("failure, workers", [
    ("raise ValueError('in training')", 1),
    ("raise ValueError('in training')", 2),
    pytest.param("sys.exit(0)", 1, id="exit-workers-1-needs-cell"),
    pytest.param("sys.exit(0)", 2, id="exit-workers-2-needs-cell"),
    pytest.param("raise Halt('halted')", 1, id="BaseException-workers-1-needs-cell"),
])
def test_a_forward_failing_in_training_is_a_failed_record_and_exit_1(tmp_path, failure, workers):
    code, err = _zoo_run(_grid(tmp_path, FFN.format(when="self.training", failure=failure), seeds=workers),
                         workers=workers)
    assert code == 1 and "Traceback" not in err, err
    for seed in range(workers):
        record = json.loads((tmp_path / "out" / "records" / "fuzzed" / "copy" / f"seed-{seed}.json").read_text())
        assert record["status"] == "failed"
        assert any(f"fuzzed/copy/seed-{seed}: failed" in line for line in err.splitlines()), err
