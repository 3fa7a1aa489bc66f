"""`zoo run --dry-run`: what a grid (or its part) would do per task and the training time it would take, and the
warnings about this machine that `zoo run` also gives before it trains (zoo.experiment.preflight); for a sequential
experiment, where its design stands and the runs it may still take."""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import Progress

from zoo.api import default_folder
from zoo.errors import ZooError
from zoo.experiment import store
from zoo.experiment.executors import worker_threads
from zoo.experiment.grid import Part
from zoo.machine import device_type_here
from zoo.terminal import Table, warn

RECORDS = store.RECORDS

console = Console(emoji=False)  # user text such as ":smile:" is printed as written
errors = Console(stderr=True, emoji=False)


def reuse_folders(args: argparse.Namespace) -> list[Path]:
    return [Path(folder) for folder in args.reuse_from]


def warn_about_this_machine(experiment, grid) -> None:
    """zoo.experiment.preflight's warnings, for the cells a local executor would train on this machine."""
    from zoo.experiment.preflight import warnings

    for line in warnings(experiment, grid):
        warn(errors, line)


def dry_run(experiment, runs: Path, out: Path, args: argparse.Namespace, part: Part) -> int:
    """`zoo run --dry-run`: what the grid (or its part) would do per task and the training time it would take."""
    from zoo.experiment.forecast import forecast
    from zoo.experiment.grid import cells, reusable

    reuse = reuse_folders(args)
    device = getattr(args, "device", None)
    with progress_bar(f"{experiment.name}: reading the records and comparing definitions") as progress:
        grid = reusable(experiment, cells(experiment, runs, out / RECORDS, part=part), reuse)
        committed = default_folder(experiment, "reports")  # the default store: its runs time this grid's too
        timing = [*reuse, committed] if committed.resolve() != out.resolve() and (committed / RECORDS).is_dir() \
            else reuse
        rows = [row for row in forecast(experiment, grid, timing, progress, device=device,
                                        others=committed_reports(experiment))
                if row.cells]  # a --tasks part: its own
    if args.executor == "local" and device in (None, device_type_here("auto")):  # else not about this machine
        warn_about_this_machine(experiment, grid)
    workers, cores = max(1, args.workers or 1), os.cpu_count() or 1
    table, left, unknown = _forecast_table(experiment, rows, workers, cores)
    console.print(table)
    try:  # a grid is priced without its corpora; a run needs them
        experiment.check_data(part.task_entries(experiment))
    except ZooError as err:
        console.print(f"{err}. The grid is priced all the same; `zoo run` needs the data.",
                      markup=False, highlight=False)
    to_run = sum(row.to_run for row in rows)
    console.print(dry_run_summary(left, unknown, workers, to_run), markup=False, highlight=False)
    for line in LEGEND:  # wrapped at words, to the terminal's width
        console.print(line, markup=False, highlight=False, style="dim")
    for row in rows:
        if row.to_run and row.measured_on and row.seconds_per_step is not None:
            console.print(f"{row.task}: its s/step comes from records made on {', '.join(row.measured_on)}, not on "
                          f"this machine's {row.here}: its hours are what the runs took there, not a forecast for "
                          "this machine.", markup=False, highlight=False)
        if row.to_run and row.scaled is not None:
            console.print(scaled_line(row), markup=False, highlight=False)
    if experiment.config.sequential is not None:
        from zoo.report.sequential import read

        state = read(experiment, out / RECORDS)
        for line in [*sequential_lines(state), *forecast_lines(experiment, state)]:
            console.print(line, markup=False, highlight=False)
    return 0


def _forecast_table(experiment, rows: list, workers: int, cores: int) -> tuple[Table, Left, list[str]]:
    """The dry run's table, a row per task, with the hours left summed (`Left`) over the tasks whose runs can be
    priced, and the tasks that cannot."""
    table = Table(title=f"zoo run {experiment.name} --dry-run: nothing is trained, moved or written",
                  title_justify="left")
    for column in ("task", "cells", "recorded", "copied", "stale", "new", "s/step", "run-hours left"):
        table.add_column(column, justify="left" if column == "task" else "right")
    left, unknown = Left(), []
    for row in rows:
        known = row.run_seconds is not None and not row.unbounded
        if known:
            left.add(row, workers, cores)
        else:
            unknown.append(row.task)
        table.add_row(row.task, str(row.cells), str(row.recorded), str(row.copied), str(row.stale), str(row.new),
                      "—" if row.seconds_per_step is None else f"{row.seconds_per_step:.3f}",
                      hours(row.run_seconds) if known else "unknown")
    return table, left, unknown


def sequential_lines(state) -> list[str]:
    """Where each task's seeds-until-decided design stands (zoo/report/sequential.py): one line per task."""
    if state is None:
        return []
    lines = []
    for key, looks in state.tasks.items():
        kinds = [d.kind for d in looks.decisions.values()] + ["stopped (the same numbers)"] * len(looks.same)
        line = (f"{key}: seeds until decided, look {len(looks.looks)} of {state.plan.looks} made: "
                + (", ".join(f"{kinds.count(kind)} {kind}" for kind in dict.fromkeys(kinds)) or "no comparison yet"))
        rounds = max(looks.rounds.values())
        if rounds > len(looks.looks) > 0:
            line += f"; round {rounds} called for {len(looks.undecided())} arms and the baseline"
        if looks.waiting:
            why = [cell.rsplit("(", 1)[1].rstrip(")") for cell in looks.waiting]
            line += (f"; look {len(looks.looks) + 1} waits for {len(why)} cells ("
                     + ", ".join(f"{why.count(w)} {w}" for w in dict.fromkeys(why)) + ")")
        lines.append(line)
    return lines


def forecast_lines(experiment, state) -> list[str]:
    """The runs a sequential design may still take, per task: called so far, the most (every arm to the cap) and
    the expected number (zoo/stats/stopping.py, `expected_runs`: the current estimates taken as the truth, 200
    simulated continuations through the decision rule the runs use)."""
    from zoo.report.sequential import forecast

    lines = []
    for row in forecast(experiment, state):
        expected = (f"expected: cannot be estimated {row.why}" if row.expected is None
                    else f"expected about {row.expected:.0f} (simulated from the current estimates through the same "
                    "decision rule, the estimates taken as the truth)")
        lines.append(f"{row.task}: {row.called} runs called so far; at most {row.most} (every arm to the cap); "
                     + expected)
    return lines


def committed_reports(experiment) -> list[Path]:
    """The report folders of the experiment file's repository (reports/*) that hold records: the committed studies
    whose records price, scaled, a grid that none of its own task settings' records price. None for a file outside
    any repository."""
    from zoo.report.paths import repository

    root = repository(experiment.path)
    reports = root / "reports" if root is not None else None
    if reports is None or not reports.is_dir():
        return []
    return sorted(folder for folder in reports.iterdir() if (folder / RECORDS).is_dir())


def scaled_line(row) -> str:
    """Where a task's s/step came from when no record of its task settings gave one: the records scaled, on what,
    and by how much; on a GPU, why that is rough."""
    scaled = row.scaled
    hardware = ", ".join(sorted({m.hardware for m in scaled.records}))
    low, high = scaled.factors
    by = f"x{low:.2f}" if f"{low:.2f}" == f"{high:.2f}" else f"x{low:.2f} to x{high:.2f}"
    line = (f"{row.task}: no record of its task settings in this grid's folders trained on {scaled.device}, so its "
            f"s/step is scaled from the committed records of other experiments nearest in parameters x tokens a step, "
            f"made on {hardware}: {'; '.join(scaled.sources())}; each record's s/step {by} (the cell's work over "
            "the record's).")
    if scaled.device != "cpu":
        line += (" On a GPU a step this small is bound more by kernel launches than by arithmetic, so a rate scaled "
                 "far from its records is rough.")
    return line


@dataclass
class Left:
    """The training left in the tasks whose time is known: one run after another (run), in CPU core-time (each
    CPU run's threads, or the cores its worker gets where it sets none) and on a GPU, and with the workers
    running at once (wall)."""

    run: float = 0.0
    core: float = 0.0
    gpu: float = 0.0
    wall: float = 0.0

    def add(self, row, workers: int, cores: int) -> None:
        self.run += row.run_seconds
        self.wall += row.wall_seconds(workers, cores)
        if row.device == "cpu":
            self.core += row.run_seconds * (row.threads or worker_threads(workers, cores))
        else:
            self.gpu += row.run_seconds


@contextlib.contextmanager
def progress_bar(description: str, after: float = 2.0) -> Iterator[Callable[[int, int], None]]:
    """progress(done, total) for long work: a transient bar on stderr that appears once the work has taken `after`
    seconds (a dry-run of a huge grid, or one that reads thousands of records), and never for quicker work."""
    bar = Progress(console=errors, transient=True)
    task = bar.add_task(description, total=None)
    start = shown = time.monotonic()

    def progress(done: int, total: int) -> None:
        nonlocal shown
        now = time.monotonic()
        if now - start < after or (now - shown < 0.1 and done < total):  # a tenth of a second between updates
            return
        if not bar.live.is_started:
            bar.start()
        shown = now
        bar.update(task, completed=done, total=total)

    try:
        yield progress
    finally:
        if bar.live.is_started:  # stopping a bar never shown would print an empty line
            bar.stop()


def dry_run_summary(left: Left, unknown: list[str], workers: int, to_run: int) -> str:
    """The line under the dry-run table: the training time left, and what of it cannot be forecast and why (the
    LEGEND of the columns follows it). Where all the training left is in tasks with no rate, its time is unknown,
    and where no cell is left to run, nothing is left: neither is "about 0.0 hours"."""
    why = ("no complete record of the same task and data, trained on the kind of device these runs get here, "
           "gives a rate, or the budget is not in steps")
    if not to_run:
        text = "nothing left to train: every cell has a record or gets a copy"
    elif unknown and not left.run:
        text = f"training time left unknown for {', '.join(unknown)} ({why})"
    else:
        spent = [f"{hours(seconds)} {unit}" for seconds, unit in ((left.core, "CPU core-hours"),
                                                                   (left.gpu, "GPU run-hours")) if seconds]
        text = (f"about {hours(left.run)} hours of training left, one run after another ({', '.join(spent)})"
                + (f" (and an unknown amount for {', '.join(unknown)}: {why})" if unknown else "")
                + f"; with {workers} worker{'s' if workers > 1 else ''} about {hours(left.wall)} hours")
    return f"{text}."


def hours(seconds: float) -> str:
    """Seconds as hours: one decimal from an hour up, two below it, so that a short grid reads 0.04, not 0.0."""
    return f"{seconds / 3600:.1f}" if seconds >= 3600 else f"{seconds / 3600:.2f}"


LEGEND = ("stale: recorded or started under another definition, so run again.",
          "s/step: the median seconds a training step took in the task's complete records (in --out, --reuse-from "
          "and reports/<experiment name>) on this hardware (GPU model or CPU instruction set), else on others of "
          "its kind (named), as many runs sharing the machine as they had; evaluation not counted. Where none, "
          "scaled from other experiments' records (named below).",
          "CPU runs that set their threads share the cores: workers beyond cores / threads do not shorten the wall "
          "time.")
