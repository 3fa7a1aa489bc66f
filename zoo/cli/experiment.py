"""`zoo run` and `zoo report`: the commands that work on a whole experiment grid."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from zoo.api import Study, default_folder, folder
from zoo.cli.dry_run import dry_run, reuse_folders, sequential_lines, warn_about_this_machine
from zoo.cli.process import positive_number
from zoo.config_io import parse_assignments
from zoo.errors import ZooError, install_hint
from zoo.experiment import load_experiment, store
from zoo.experiment.executors import EXECUTORS, ExecutorError, create
from zoo.terminal import Table

RECORDS = store.RECORDS

console = Console(emoji=False)  # user text such as ":smile:" is printed as written
errors = Console(stderr=True, emoji=False)
EXECUTOR_FLAGS = ("workers", "address", "threads")  # `zoo run` flags an executor takes when its options declare them
TERMINAL_OMITS = {"stalled", "diverged", "failed", "vs baseline: Fisher p"}


# -- zoo run ---------------------------------------------------------------------------------------
def _study(args: argparse.Namespace) -> Study:
    """The experiment file with its folders from --runs / --out (or their defaults); records live in
    <out>/records. A folder given as a file is said with the flag's name."""
    experiment = load_experiment(args.experiment)
    runs = Path(args.runs) if getattr(args, "runs", None) else default_folder(experiment, "runs")
    out = Path(args.out) if args.out else default_folder(experiment, "reports")
    return Study(experiment, out=folder("--out", out), runs=folder("--runs", runs))


def cmd_run(args: argparse.Namespace) -> int:
    from zoo.train.tensorboard import log_destination

    study = _study(args)
    experiment, runs, out = study.experiment, study.runs, study.out
    part = study.part(args.variants, args.tasks, args.seeds, data=not args.dry_run)
    executor = _executor(args)  # an unknown executor or a bad option: said before anything is written
    called = study.called(args.until_decided)  # with [sequential]: the seeds its plan has called, from the records
    if args.dry_run:
        return dry_run(called, runs, out, args, part)
    if args.device is not None:
        raise ZooError("--device prices a dry run (--dry-run): where a run trains is its train.device ('auto': a "
                       "GPU where PyTorch sees one)")
    if experiment.config.sequential is not None and not args.until_decided:
        errors.print(f"{experiment.name} trains seeds until decided ([sequential]): plain `zoo run` trains the rounds "
                     "its plan has called and begun, never a new one; `--until-decided` makes each look and calls the "
                     "next round", markup=False, highlight=False, soft_wrap=True)
    if args.executor == "local":
        from zoo.experiment.grid import cells, reusable

        grid = reusable(called, cells(called, runs, out / RECORDS, part=part), reuse_folders(args))
        warn_about_this_machine(called, grid)
    results = study.run(executor=executor, variants=args.variants, tasks=args.tasks, seeds=args.seeds,
                        reuse_from=args.reuse_from, log_to=log_destination(args.log_to), live=not args.no_live,
                        console=errors, until_decided=args.until_decided)
    counts: dict[str, int] = {}
    for state, _ in results.values():
        counts[state] = counts.get(state, 0) + 1
    errors.print(f"{experiment.name}: " + ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
                 + f" -> records in {out / RECORDS}, run directories in {runs}"
                 + ("; stalled = trained to the end below its task's floor (the report counts it as unstable, "
                    "never in a quality verdict)" if counts.get("stalled") else ""))
    for name, (state, reason) in results.items():
        if state in ("failed", "locked", "stalled"):
            errors.print(f"  [red]{escape(name)}: {state}[/]: {escape(reason)}")
    for line in sequential_lines(study.sequential()):
        errors.print(line, markup=False, highlight=False, soft_wrap=True)
    if args.report:
        cmd_report(args)
    else:
        errors.print(f"next: zoo report {args.experiment}" + (f" --out {out}" if args.out else ""))
    return 1 if counts.get("failed") or counts.get("locked") else 0


def _executor(args: argparse.Namespace):
    """The executor `--executor` names, with the options it declares taken from their flags (--workers,
    --address, --threads) and from --executor-option KEY=VALUE (a plugin executor's own options)."""
    declared = EXECUTORS.get(args.executor).Options.model_fields
    flags = {name: getattr(args, name) for name in EXECUTOR_FLAGS if getattr(args, name) is not None}
    for name in flags.keys() - declared.keys():  # a flag of another executor would be ignored silently
        raise ExecutorError(f"--{name}: executor {args.executor} takes no {name} "
                            f"(its options: {', '.join(declared) or 'none'})")
    given = parse_assignments(args.executor_option, "--executor-option", "workers=2")
    return create(args.executor, **{**flags, **given})


# -- zoo floors ------------------------------------------------------------------------------------
def cmd_floors(args: argparse.Namespace) -> int:
    from zoo.experiment.floors import read_floor

    study = _study(args)
    experiment, out = study.experiment, study.out
    experiment.check_data()
    study.floors(console=errors)
    table = Table(title=f"{experiment.name}: trivial floors on the test sets (no verdicts on a task whose baseline "
                        "does not clear them)", title_justify="left")
    for column in ("task", "system", "primary metric", "score", "other metrics"):
        table.add_column(column, justify="left" if column in ("task", "system", "other metrics") else "right")
    for task in experiment.config.tasks:
        floor = read_floor(out / RECORDS, task.key)
        for system, scored in floor["systems"].items():
            metrics = scored["test"]
            primary = task.primary_metric
            others = ", ".join(f"{name} {value:.2f}" for name, value in metrics.items() if name != primary)
            table.add_row(task.key, system, primary, f"{metrics[primary]:.2f}", others)
    console.print(table)
    return 0


# -- zoo export ------------------------------------------------------------------------------------
def cmd_export(args: argparse.Namespace) -> int:
    from zoo.errors import ExportError

    tracker, *where = args.to
    if tracker not in ("tensorboard", "mlflow") or len(where) > 1 or (tracker == "tensorboard" and not where):
        raise ExportError(f"--to: {' '.join(args.to)!r}: give 'tensorboard DIR' or 'mlflow [URI]'")
    study = _study(args)
    experiment, out = study.experiment, study.out
    with errors.status(f"exporting {experiment.name}'s records to {tracker}..."):
        if tracker == "tensorboard":
            from zoo.export.tensorboard import to_tensorboard

            runs = to_tensorboard(experiment, out / RECORDS, folder("--to tensorboard", Path(where[0])))
            said = f"{len(runs)} TensorBoard runs in {where[0]}: tensorboard --logdir {where[0]}"
        else:
            from zoo.export.mlflow import to_mlflow, ui_command

            uri, parent = to_mlflow(experiment, out / RECORDS, out, where[0] if where else None)
            said = f"MLflow experiment {experiment.name!r}, parent run {parent}, at {uri}: {ui_command(uri)}"
    console.print(said, markup=False, highlight=False, soft_wrap=True)
    return 0


# -- zoo report ------------------------------------------------------------------------------------
def cmd_report(args: argparse.Namespace) -> int:
    from zoo.report import ReportError
    from zoo.report.tables import outcome_rows, terminal_rows

    study = _study(args)
    experiment, out = study.experiment, study.out
    try:
        with errors.status(f"reading {study.records_root}, testing, plotting, checking equivalence..."):
            path, report = study.write_report()
    except OSError as err:  # a read-only or full --out: say where, not a traceback
        where = f" ({err.filename})" if err.filename else ""
        raise ReportError(f"--out: cannot write the report into {out}: {err.strerror or err}{where}; "
                          "point --out at a folder you can write, holding the records/ folder") from None
    for analysis in report.tasks:
        for title, (header, rows) in (("outcomes", outcome_rows(experiment, analysis)),
                                      ("against the baseline", terminal_rows(experiment, analysis))):
            if not rows:
                continue
            shown = [i for i, name in enumerate(header) if name not in TERMINAL_OMITS]  # all are in report.md
            table = Table(title=f"{experiment.name} / {analysis.task.key}: {title}", title_justify="left")
            for i in shown:
                table.add_column(header[i], justify="left" if i == 0 else "right", no_wrap=i == 0)
            for row in rows:
                table.add_row(*(re.sub(r"\*\*(.+?)\*\*", r"[bold]\1[/]", escape(row[i])) for i in shown))
            console.print(table)
    print(path)
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    from zoo.report import ReportError, analyse
    from zoo.report.plan import plan_notes, plan_rows, sequential_advice

    study = _study(args)
    experiment, out = study.experiment, study.out
    if not (out / RECORDS).is_dir() or not any((out / RECORDS).glob("*/*/seed-*.json")):
        raise ReportError(f"--out: no records of {experiment.name} in {out / RECORDS}; `zoo plan` sizes seeds from "
                          f"the spread of a pilot: run a few seeds first (zoo run {args.experiment})")
    with errors.status("reading the records and testing as the report does..."):
        report = analyse(experiment, out / RECORDS)
    settings = experiment.config.analysis
    level = settings.alpha / max(report.family, 1)
    for analysis in report.tasks:
        task = analysis.task
        effect = args.effect if args.effect is not None else task.target_effect
        header, rows = plan_rows(experiment, analysis, effect)
        table = Table(title=f"{experiment.name} / {task.key}: seeds needed on {task.primary_metric} (power "
                            f"{settings.power:.0%} at {level:.2g}, the level one rejection needs after the report's "
                            f"{settings.correction} correction over {report.family} tests; seed spread and, for corpus "
                            "metrics, test-set variance)", title_justify="left")
        for i, column in enumerate(header):
            table.add_column(column, justify="left" if i == 0 else "right")
        for row in rows:
            table.add_row(*(escape(cell) for cell in row))
        console.print(table)
        for line in plan_notes(analysis) + sequential_advice(experiment, analysis):
            console.print(line, markup=False, highlight=False)
    return 0


def _names(text: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in text.split(",") if name.strip())


def _seeds(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(seed) for seed in _names(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds are whole numbers separated by commas, e.g. 3,4 (got {text!r})"
                                         ) from None


def _experiment_arguments(parser) -> None:
    """EXPERIMENT and --out, the same for `zoo run` and `zoo report` (which must agree on where records live)."""
    parser.add_argument("experiment", metavar="EXPERIMENT",
                        help="experiment file, or the name of experiments/NAME.toml")
    parser.add_argument("--out", metavar="OUT", help="the report folder, with the records in OUT/records "
                        "(default reports/<experiment name> in the experiment file's repository)")


def add_commands(sub) -> None:
    """`zoo run`, `zoo floors`, `zoo export`, `zoo report` and `zoo plan`, in the order `zoo --help` lists them."""
    _add_run(sub)
    _add_floors(sub)
    _add_export(sub)
    _add_report(sub)
    _add_plan(sub)


def _add_run(sub) -> None:
    p = sub.add_parser("run", help="run an experiment's grid of variants x tasks x seeds (resumable)",
                       description="Expand EXPERIMENT into cells (variant x task x seed) and run each into "
                       "runs/<experiment>/<variant>/<task>/seed-<n>/, then write its record into "
                       "OUT/records/ (commit those beside the report). Cells whose record matches the experiment "
                       "file are skipped; cells run under another definition are named, moved to .stale/ and run "
                       "again; a cell whose very definition a --reuse-from report folder's records hold is copied "
                       "from there; interrupted ones resume from their checkpoint; a cell another `zoo run` holds is "
                       "left to it, then waited for; a failing cell is recorded and the grid goes on. Exit 0 when no "
                       "cell failed (diverged runs are results), 1 otherwise.")
    _experiment_arguments(p)
    _where_runs_train(p)
    _what_run_does(p)
    _grid_part(p)
    p.add_argument("--log-to", nargs=2, metavar=("tensorboard", "DIR"), help="also write each cell's curves to "
                   "TensorBoard while it trains, in DIR/<variant>/<task>/seed-<n> (the tensorboard extra)")
    p.set_defaults(run=cmd_run)


def _where_runs_train(p) -> None:
    """`zoo run`'s run directories and executor, with the executor's options."""
    p.add_argument("--runs", metavar="DIR", help="where run directories (checkpoints, logs) go "
                   "(default runs/<experiment name>)")
    p.add_argument("--executor", default="local", metavar="NAME", help="what runs the cells: "
                   f"{', '.join(EXECUTORS.names())} or a plugin's executor (zoo list 'executor.*'; default local)")
    p.add_argument("--executor-option", action="append", metavar="KEY=VALUE", help="an option of the executor "
                   "(e.g. a plugin executor's own), repeatable; local takes workers, ray address and threads")
    p.add_argument("--workers", type=int, help="local: worker processes, CPU threads split between them (default 1)")
    p.add_argument("--address", help="ray: address of an existing cluster (default: start a local Ray instance)")
    p.add_argument("--threads", type=int, help="ray: CPUs (and torch threads) per run (default 1)")


def _what_run_does(p) -> None:
    """What `zoo run` does beyond training the grid: rounds until decided, the report, the live view, a dry run,
    copies of other experiments' records."""
    p.add_argument("--until-decided", action="store_true", help="an experiment with [sequential]: train its rounds "
                   "of seeds one after another, analysing every comparison after each and giving the next round only "
                   "to the arms still undecided (and the baseline), until each is decided (better, worse, equivalent) "
                   "or at its cap; resumes from the records. Without it `zoo run` trains the rounds already begun")
    p.add_argument("--report", action="store_true", help="write the report when the grid is done (zoo report)")
    p.add_argument("--no-live", action="store_true", help="no live grid display (on a terminal) and no line per "
                   "change of a cell's state (in a file)")
    p.add_argument("--dry-run", action="store_true", help="train, move and write nothing: print per task how many "
                   "cells are recorded, would be copied, are stale or new, and the training time left, from the "
                   "seconds per step of the records made on this hardware (else on others, named), with the warnings "
                   "about this machine `zoo run` gives before training (bf16 without fast bf16 matmuls, seeds split "
                   "across hardware)")
    p.add_argument("--device", choices=("cpu", "cuda"), help="with --dry-run: price the runs as trained on this "
                   "kind of device, from the records made on one (e.g. cuda on a machine without a GPU), not on the "
                   "one they would get here; where no record of a task's settings was made on it, from the committed "
                   "records of other experiments nearest in parameters x tokens a step, scaled, and named")
    p.add_argument("--reuse-from", metavar="REPORT_DIR", nargs="+", default=[],
                   help="other experiments' report folders (e.g. reports/budget-pilot): a cell whose very "
                   "definition (spec, task, data, training config and seed, decoding) one of their records has is "
                   "not trained but gets a copy of that record, whose provenance names the original")


def _grid_part(p) -> None:
    """The part of the grid `zoo run` works on: variants, tasks and seeds."""
    p.add_argument("--variants", type=_names, metavar="LABEL,...", help="only these variants")
    p.add_argument("--tasks", type=_names, metavar="KEY,...", help="only these tasks, by key (the "
                   "task's label, else its name with ':' as '-', as reports and --dry-run show it)")
    p.add_argument("--seeds", type=_seeds, metavar="N,...", help="only these seeds. With --variants "
                   "and --tasks: part of the grid, the same cells and records, e.g. to train whole seeds on another "
                   "machine and commit their records (the rest resumes from them)")


def _add_floors(sub) -> None:
    p = sub.add_parser("floors", help="score each task's trivial systems (copying the source, ...): its floor",
                       description="Score what systems that learn nothing output on each task of EXPERIMENT "
                       "(translation: the source copied unchanged; synthetic tasks: the identity, where it is not the "
                       "answer, and the per-position majority), exactly as models are scored on the test set, and "
                       "write OUT/records/.floors/<task>.json beside the records. `zoo run` does this before it "
                       "trains; a report gives no verdicts on a task whose baseline does not clear its floor.")
    _experiment_arguments(p)
    p.set_defaults(run=cmd_floors)


def _add_export(sub) -> None:
    p = sub.add_parser("export", help="export an experiment's records to TensorBoard or MLflow (nothing trains)",
                       description="Write what EXPERIMENT's records hold (OUT/records) into a tracker. "
                       "'--to tensorboard DIR': a run per cell with every logged curve and an HParams row (status, "
                       "d_model, layers, lr, steps, every field a variant changes, the final test metrics) under one "
                       "HParams experiment, and per variant and task the mean curve with its seed band. '--to mlflow "
                       "[URI]' (a server, sqlite:///FILE.db or another database, a FILE.db or a folder; default: "
                       "./mlflow.db, MLflow's own default store): a parent run per experiment with report.md, "
                       "results.csv and plots as artifacts and each variant's verdict and effect per task, and a "
                       "nested run per cell with the record's definition and trained spec as params, the curves as "
                       "metrics, the definition digest, zoo commit and status as tags. Exporting again updates the "
                       "same runs. Needs the extra: " + install_hint("tensorboard") + " (or mlflow).")
    _experiment_arguments(p)
    p.add_argument("--to", nargs="+", required=True, metavar="TRACKER", help="tensorboard DIR | mlflow [URI]")
    p.set_defaults(run=cmd_export)


def _add_report(sub) -> None:
    p = sub.add_parser("report", help="write a comparison report from an experiment's records",
                       description="Read the records of EXPERIMENT (OUT/records; never trains, never reads a run "
                       "directory) and write report.md, results.csv and plots: run outcomes and instability, "
                       "per-variant estimates over seeds, one verdict per task on its primary metric with p-values "
                       "adjusted by the experiment's correction (Holm or Benjamini-Hochberg), effect sizes, "
                       "detectable differences, equivalence by TOST, placebo pairs, trivial floors, transfer tables, "
                       "the equivalence matrix and the check of the experiment's findings.")
    _experiment_arguments(p)
    p.set_defaults(run=cmd_report)


def _add_plan(sub) -> None:
    p = sub.add_parser("plan", help="how many seeds each comparison needs to detect a given effect",
                       description="From the seed-to-seed spread in EXPERIMENT's records (a pilot run), print per task "
                       "and variant the smallest difference the current seeds can detect and how many seeds per arm "
                       "would detect the task's target effect (its `detect`, else its `margin`, else 1 BLEU / 5 "
                       "points) with the experiment's power at its alpha. For a task with a `margin` it then "
                       "recommends the [sequential] settings (seeds until decided): the cap at which every "
                       "comparison would, with that power, both show equivalence within the margin at a true "
                       "difference of 0 and detect a difference of the margin; the round size; and the runs the plan "
                       "is expected to take against the fixed design's.")
    _experiment_arguments(p)
    p.add_argument("--effect", type=positive_number, help="the difference to detect, in the primary metric's units "
                   "(default: each task's target effect)")
    p.set_defaults(run=cmd_plan)
