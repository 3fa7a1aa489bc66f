"""`zoo run` and `zoo report`: the commands that work on a whole experiment grid."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from rich.console import Console
from rich.table import Table

from zoo.experiment import load_experiment

console = Console()
errors = Console(stderr=True)
TERMINAL_OMITS = {"trainable parameters", "training tokens/s", "valid loss"}


# -- zoo run ---------------------------------------------------------------------------------------
def cmd_run(args: argparse.Namespace) -> int:
    from zoo.experiment.runner import run_grid

    experiment = load_experiment(args.experiment)
    experiment.check_data()
    runs = Path(args.runs) if args.runs else Path("runs") / experiment.name
    results = run_grid(experiment, runs, executor=args.executor, workers=args.workers, address=args.address,
                       threads=args.threads, console=errors, live=not args.no_live)
    counts = {state: sum(1 for s in results.values() if s == state) for state in sorted(set(results.values()))}
    errors.print(f"{experiment.name}: " + ", ".join(f"{n} {state}" for state, n in counts.items()) + f" -> {runs}")
    if args.report:
        args.out = None
        args.runs = str(runs)
        cmd_report(args)
    else:
        errors.print(f"next: zoo report {args.experiment}" + (f" --runs {runs}" if args.runs else ""))
    return 0 if set(results.values()) == {"complete"} else 1



# -- zoo report ------------------------------------------------------------------------------------
def _report_command(args: argparse.Namespace) -> str:
    """The command as it would be typed again, written into the report."""
    words = ["zoo", "report", args.experiment]
    for flag, value in (("--runs", args.runs), ("--out", args.out)):
        if value is not None:
            words += [flag, value]
    return shlex.join(words)


def cmd_report(args: argparse.Namespace) -> int:
    from zoo.report import ReportError, build_report, collect
    from zoo.report.compare import results_rows

    experiment = load_experiment(args.experiment)
    runs = Path(args.runs) if args.runs else Path("runs") / experiment.name
    out = Path(args.out) if args.out else Path("reports") / experiment.name
    if not runs.is_dir():
        raise ReportError(f"--runs: {runs} is not a folder of run directories; run the experiment first "
                          "or point --runs at where its runs are")
    with errors.status(f"reading {runs}, testing, plotting, checking equivalence..."):
        report = build_report(experiment, runs, out, _report_command(args))
    frame = collect(experiment, runs)
    for task in experiment.config.tasks:
        header, rows = results_rows(frame, experiment, task)
        shown = [i for i, name in enumerate(header) if name not in TERMINAL_OMITS]  # all of them are in report.md
        header, rows = [header[i] for i in shown], [[row[i] for i in shown] for row in rows]
        table = Table(title=f"{experiment.name} / {task.key} (mean ± 95% CI over seeds)", title_justify="left")
        for i, column in enumerate(header):
            table.add_column(column, justify="left" if i == 0 else "right", no_wrap=i == 0)
        for row in rows:
            table.add_row(*row)
        console.print(table)
    print(report)
    return 0


def _experiment_arguments(parser, runs: str) -> None:
    """EXPERIMENT and --runs, the same for `zoo run` and `zoo report` (which must agree on where runs live)."""
    parser.add_argument("experiment", metavar="EXPERIMENT", help="experiment file, or the name of experiments/NAME.toml")
    parser.add_argument("--runs", metavar="DIR", help=f"{runs} (default runs/<experiment name>)")


def add_commands(sub) -> None:
    p = sub.add_parser("run", help="run an experiment's grid of variants x tasks x seeds (resumable)",
                       description="Expand EXPERIMENT into runs/<experiment>/<variant>/<task>/seed-<n>/ and run each "
                       "cell: finished cells are skipped, interrupted ones resume from their checkpoint, a failing "
                       "or diverging cell is recorded and the grid goes on. Exit 0 when every cell completed, 1 otherwise.")
    _experiment_arguments(p, runs="where run directories go")
    p.add_argument("--executor", choices=["local", "ray"], default="local")
    p.add_argument("--workers", type=int, default=1, help="local: worker processes, CPU threads split between them")
    p.add_argument("--address", help="ray: address of an existing cluster (default: start a local Ray instance)")
    p.add_argument("--threads", type=int, default=1, help="ray: CPUs (and torch threads) per run")
    p.add_argument("--report", action="store_true", help="write the report when the grid is done (zoo report)")
    p.add_argument("--no-live", action="store_true", help="no live grid display")
    p.set_defaults(run=cmd_run)

    p = sub.add_parser("report", help="write a comparison report from an experiment's run directories",
                       description="Read the run directories of EXPERIMENT (never trains) and write report.md, "
                       "results.csv and plots: mean ± 95% CI per variant, tests against the baseline, the "
                       "equivalence matrix of the variants and the check of the experiment's findings.")
    _experiment_arguments(p, runs="run directories")
    p.add_argument("--out", metavar="DIR", help="where the report goes (default reports/<experiment name>)")
    p.set_defaults(run=cmd_report)
