"""The `zoo` command: the command line, the layer above every other (nothing in zoo imports it but __main__).

This module parses the arguments, runs the commands that prove (`zoo equiv`, `zoo check`) and hands the others to
the modules beside it:

    listing.py     `zoo list`, `zoo show`, `zoo schema`
    train.py       `zoo train`, `zoo translate`, `zoo evaluate`, `zoo bench`
    experiment.py  `zoo run`, `zoo report`, `zoo plan`, `zoo export`, `zoo floors`
    dry_run.py     `zoo run --dry-run`
    data.py        `zoo data list`, `zoo data get`
    process.py     how a `zoo` process meets the world: signals, refused writes, unencodable output

Every user error is one line on stderr and exit code 2; `zoo equiv` exits 1 when the two specs are not
equivalent. `zoo` (pyproject.toml's console script) and `python -m zoo` both call `run`."""

from __future__ import annotations

import argparse
import fnmatch
import functools
import json
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel

from zoo.cli.listing import add_commands as add_listing_commands
from zoo.cli.listing import listable
from zoo.cli.process import (
    Output,
    OutputError,
    add_plugin_option,
    drop_output,
    os_error,
    positive_number,
    replace_unencodable,
    stopped,
    stops_as_interrupts,
)
from zoo.config_io import parse_assignments
from zoo.errors import PLUGIN_HINT, ZooError, closest
from zoo.model.spec import load_spec
from zoo.model.summary import diff
from zoo.plugins import load_all
from zoo.proofs.equivalence import equivalence
from zoo.registry import registry
from zoo.version import __version__

console = Console(emoji=False)  # user text such as ":smile:" is printed as written
errors = Console(stderr=True, emoji=False)


def cmd_equiv(args: argparse.Namespace) -> int:
    shared = parse_assignments(args.set)
    spec_a = load_spec(args.a, shared)
    spec_b = load_spec(args.b, {**shared, **parse_assignments(args.set_b)})
    with console.status("building, transplanting and comparing..."):
        verdict = equivalence(spec_a, spec_b, seed=args.seed, tolerance=args.tolerance)
    rows = diff(spec_a, spec_b)
    changed = (", ".join(f"{f}: {json.dumps(a)} -> {json.dumps(b)}" for f, a, b in rows)
               or "no model-defining field differs")
    style, word = ("green", "EQUIVALENT") if verdict.equivalent else ("red", "NOT EQUIVALENT")
    console.print(Panel(
        f"[bold {style}]{word}[/bold {style}]\n" + escape(
            f"A = {spec_a.name} ({spec_a.digest()})   B = {spec_b.name} ({spec_b.digest()})\n"
            f"B differs in: {changed}\n{verdict.reason}"),
        title="zoo equiv", title_align="left", expand=False,
    ))
    return 0 if verdict.equivalent else 1


def cmd_check(args: argparse.Namespace) -> int:
    """Run the contracts (zoo/testing/__init__.py, zoo/testing/data.py) on registered components, tasks and metrics, or
    on what a plugin registers."""
    subjects = _check_subjects(args.target)
    if not subjects:
        raise ZooError(f"check: {args.target!r} matches nothing registered{closest(args.target, listable())} (a "
                       "pattern such as 'ffn.*', 'task.*' or 'metric.bleu', or a plugin that registers components, "
                       f"tasks or metrics; {PLUGIN_HINT})")
    failed = 0
    for qualified, contracts, check in subjects:
        with console.status(f"checking {qualified}..."):
            failures = check()
        failed += bool(failures)
        if not failures:
            console.print(f"{qualified}: passed {contracts} contracts", markup=False, highlight=False)
        for contract, reason in failures:
            console.print(f"{qualified}: {contract} FAILED: {reason}", markup=False, highlight=False, soft_wrap=True)
    console.print(f"{len(subjects) - failed} of {len(subjects)} entries keep every contract", markup=False)
    return 1 if failed else 0


def _check_subjects(target: str) -> list[tuple[str, int, Callable[[], list[tuple[str, str]]]]]:
    """(qualified name, number of contracts, run them) for each entry TARGET names: a 'slot.name', 'task.name' or
    'metric.name' pattern, or a plugin, whose components, tasks and metrics are all checked, with those a helper
    module it imported registered and the built-ins it changed (zoo.plugins.Plugin.touches)."""
    from zoo import metrics, testing
    from zoo.data import TASKS
    from zoo.plugins import load
    from zoo.testing import data as testing_data

    head = target.split(".")[0]
    if "*" in target or head in registry.slots() or head in ("task", "metric"):
        def wanted(qualified: str, cls: type) -> bool:
            return fnmatch.fnmatchcase(qualified, target)
    else:
        plugin = load(target)  # a plugin path or module: check everything whose code it brought or changed

        def wanted(qualified: str, cls: type) -> bool:
            return plugin.touches(cls)

    subjects = [(e.qualified, len(testing.contracts_for(e)), functools.partial(testing.check, e))
                for e in registry.entries() if wanted(e.qualified, e.impl)]
    subjects += [(f"task.{name}", len(testing_data.task_contracts(name)),
                  functools.partial(testing_data.check_task, name))
                 for name in TASKS.names() if wanted(f"task.{name}", TASKS.get(name))]
    subjects += [(f"metric.{name}", len(testing_data.metric_contracts(name)),
                  functools.partial(testing_data.check_metric, name))
                 for name in metrics.names() if wanted(f"metric.{name}", metrics.METRICS.get(name))]
    return subjects


class _Version(argparse.Action):
    """--version: zoo's version and commit beside torch's version and build (CPU or CUDA), so a user sees which
    torch setup.sh left them; torch is imported only when asked."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest, nargs=0, default=default, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        import torch

        from zoo.experiment.provenance import zoo_commit

        build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU"
        print(f"zoo {__version__} ({zoo_commit()}), torch {torch.__version__} ({build} build)")
        parser.exit()


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="zoo", description="A Transformer component zoo for variant comparison.")
    top.add_argument("--version", action=_Version, help="zoo's version and commit, and torch's version and build")
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_listing_commands(sub)
    _add_equiv_and_check(sub)

    from zoo.cli.data import add_commands as add_data_commands
    from zoo.cli.experiment import add_commands as add_experiment_commands
    from zoo.cli.train import add_commands

    add_commands(sub)
    add_experiment_commands(sub)
    add_data_commands(sub)
    for command in sub.choices.values():  # every command sees a user's components as it sees zoo's own
        add_plugin_option(command)
    return top


def _add_equiv_and_check(sub) -> None:
    """The commands that prove: two specs compute one function, entries keep their contracts."""
    p = sub.add_parser("equiv", help="decide whether two specs compute the same function",
                       description="Build A, give it generic weights, transplant them into B's layout and compare "
                       "log-probabilities in eval mode on random padded batches. Exit 0 if equivalent, 1 if not.")
    p.add_argument("a", metavar="A", help="preset name or spec file whose weights are transplanted")
    p.add_argument("b", metavar="B", help="preset name or spec file given A's weights")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a field of both A and B")
    p.add_argument("--set-b", action="append", metavar="KEY=VALUE", help="override a field of B only")
    p.add_argument("--seed", type=int, default=0, help="seed of the generic weights and random batches (default 0)")
    p.add_argument("--tolerance", type=positive_number, default=1e-5,
                   help="largest log-probability difference (default 1e-5)")
    p.set_defaults(run=cmd_equiv)

    p = sub.add_parser("check", help="run the contracts on registered components, tasks and metrics or a plugin's",
                       description="Run the contracts zoo's own entries keep on COMPONENT_OR_PLUGIN: a pattern "
                       "('ffn.*', 'attention.sdpa', 'task.*', 'metric.bleu') or a plugin (a .py file, "
                       "folder or module), whose components, tasks and metrics are checked. Components: "
                       "shapes and dtypes, gradients, causality, fully padded rows, determinism under a "
                       "seed, cached = full decoding, transplant round trip. Tasks: sequences, text "
                       "view, seeded data, held-out splits, floors, save and restore. Metrics: bounds, "
                       "the references scoring best, per-sentence statistics that sum to the score. One "
                       "line per failure; exit 1 if any contract fails.")
    p.add_argument("target", metavar="COMPONENT_OR_PLUGIN", help="a registry pattern (slot.name, wildcards) or a "
                   "plugin's .py file, folder or module")
    p.set_defaults(run=cmd_check)


def _error(message: str) -> int:
    # escaped: the message quotes user input ('d_model=[/]', "pip install '.[ray]'"), never markup
    errors.print(f"[bold red]zoo: error:[/bold red] {escape(message)}", highlight=False, soft_wrap=True)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    replace_unencodable()
    args = parser().parse_args(argv)
    try:
        with stops_as_interrupts():
            load_all(args.plugin)
            return args.run(args)
    except ZooError as err:
        return _error(str(err))
    except KeyboardInterrupt as err:
        line, code = stopped(err, args)
        errors.print(line, highlight=False, markup=False, soft_wrap=True)
        return code
    except (BrokenPipeError, OutputError):  # the output itself (`zoo list | head`, `zoo list > /dev/full`): run()
        raise
    except OSError as err:  # a place that cannot be written or read; not a programming error's traceback
        return _error(os_error(err))
    except UnicodeEncodeError as err:
        return _error(f"cannot encode {err.object[err.start:err.end]!r} in {err.encoding}; set "
                      "PYTHONIOENCODING=utf-8")


def run() -> Any:  # pragma: no cover - console entry point
    sys.stdout = Output(sys.stdout)
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:  # `zoo schema | head`: the reader left; not an error of ours
        drop_output()
        code = 0
    except OutputError as err:  # `zoo list > /dev/full`: the output cannot be written
        drop_output()
        code = _error(f"cannot write the output: {err.strerror or err}")
    if code > 128 and threading.active_count() > 1:
        # Ctrl-C or SIGTERM while a cell trains in a thread of this process (`zoo run` with one worker): that
        # thread cannot be stopped, and finalising the interpreter under it aborts in torch's C++ ("terminate
        # called ..."). End as a kill would, which the run store is built for: writes are atomic, locks die with
        # the process.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    run()
