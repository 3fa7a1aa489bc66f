"""The live view of `zoo run`: the grid's cells with their status and progress, re-read from the store.

It reads only the store (records, run directories, locks), never the executor, so it works the same for
every executor, and shows cells another `zoo run` works on as such.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path

from rich.console import Group
from rich.markup import escape

from zoo import rundir
from zoo.experiment.grid import Cell, read_record
from zoo.experiment.outcome import outcome
from zoo.experiment.schema import TaskEntry
from zoo.terminal import Table
from zoo.train.config import TrainConfig


def held_digest(cell: Cell) -> str | None:
    """The definition digest of what the store holds for `cell`: its record's, else its run directory's."""
    record = read_record(cell.record)
    if record is not None:
        return record.definition_digest
    try:
        return rundir.read_table(cell.out / rundir.DEFINITION).get("digest")
    except rundir.RunError:
        return None


def view_state(cell: Cell, task: TaskEntry, stale: dict[str, str | None] | None = None) -> str:
    """What the view shows for a cell: "stale" while the store still holds what `stale` (cell name -> the digest
    of its record or run directory when the grid started, `held_digest`) found of another definition; else its
    record's outcome as the report counts it (stalled where it ended below `task`'s floor), else its run
    directory's status, said to be elsewhere when another process holds its lock."""
    if stale and cell.name in stale and held_digest(cell) == stale[cell.name]:
        return "stale"  # a finished run of the old definition is not this cell's result: it runs again
    if cell.record.exists():
        record = read_record(cell.record)
        return outcome(record, task)[0] if record is not None else "failed"
    state = rundir.status(cell.out)
    if state == "complete":  # trained and tested, its record not yet written: what it counts as is not known yet
        state = "evaluating"
    if state in ("pending", "started", "evaluating") and cell.lock.holder() not in (None, os.getpid()):
        return f"{state} elsewhere" if state != "pending" else "locked"
    return state


def _progress(out: Path) -> tuple[str, float | None]:
    """A short line on a started cell (step, loss, tokens/s) and its fraction done, from its files."""
    try:
        rows = [r for r in rundir.read_metrics(out / rundir.METRICS) if "event" not in r]
        config = TrainConfig.model_validate(rundir.read_table(out / rundir.TRAIN))
    except (rundir.RunError, ValueError):  # ValueError: a train.json of another zoo, which this one cannot read
        return "", None
    if not rows:
        return "", None
    last = rows[-1]
    line = f"step {last['step']}  loss {last.get('loss', float('nan')):.3f}  {last.get('tok_per_s', 0):,.0f} tok/s"
    return line, config.fraction_done(last["step"], last.get("epoch", 0), last.get("seconds", 0))


def _reason(cell: Cell, task: TaskEntry, notes: dict[str, str]) -> str:
    """Why a cell stalled, failed or diverged: its record's outcome's reason, else what this process noted."""
    record = read_record(cell.record)
    return (outcome(record, task)[1] if record is not None else "") or notes.get(cell.name, "")


FINAL = ("complete", "stalled", "diverged", "failed")
TROUBLE = ("stalled", "diverged", "failed")  # the final states whose reason the view shows

STYLE = {"complete": "green", "stalled": "yellow", "diverged": "yellow", "failed": "red", "started": "cyan",
         "evaluating": "cyan", "pending": "dim", "stale": "yellow", "locked": "magenta", "started elsewhere": "magenta",
         "evaluating elsewhere": "magenta"}


class GridView:
    """Rich renderable of the grid, re-read from the store on every refresh."""

    def __init__(self, title: str, grid: list[Cell], tasks: dict[str, TaskEntry], notes: dict[str, str] | None = None,
                 stale: dict[str, str | None] | None = None):
        self.title, self.grid, self.tasks, self.started = title, grid, tasks, time.time()
        self.first_seen: dict[str, float] = {}
        self.notes = notes if notes is not None else {}  # cell name -> failure reason from this process
        self.stale = stale or {}  # cell name -> held_digest at the start, for the cells `plan` found stale

    def __rich__(self):
        states = {cell.name: view_state(cell, self.tasks[cell.task], self.stale) for cell in self.grid}
        table = Table(title=self.title, title_justify="left", expand=False)
        for column in ("variant", "task", "seed", "status", "progress"):
            table.add_column(column)
        for cell in self.grid:
            state = states[cell.name]
            detail = ""
            if state in ("started", "evaluating", "started elsewhere"):
                line, fraction = _progress(cell.out)
                seen = self.first_seen.setdefault(cell.name, time.time())
                eta = ""
                if fraction and fraction > 0.02 and state == "started":
                    eta = f"  ETA {max(0.0, (time.time() - seen) * (1 - fraction) / fraction):.0f} s"
                detail = line + (f"  {fraction:.0%}" if fraction is not None else "") + eta
            elif state in TROUBLE:
                detail = _reason(cell, self.tasks[cell.task], self.notes)
            elif state == "stale":
                detail = "run under another definition: runs again"
            elif state in ("locked", "evaluating elsewhere"):
                detail = f"another zoo run (pid {cell.lock.holder()}) works on it; waiting"
            table.add_row(cell.variant, cell.task, str(cell.seed), f"[{STYLE.get(state, 'white')}]{state}[/]",
                          escape(detail[:100]))  # a reason quotes user input: never markup
        summary = "  ".join(f"{k}: {v}" for k, v in Counter(states.values()).items())
        return Group(table, f"{summary}   elapsed {time.time() - self.started:.0f} s")


class GridLog:
    """The view where `zoo run` writes to a file, not a terminal (`zoo run ... > log 2>&1 &`): rich redraws
    nothing there, so a long grid's log stayed empty until its final table. This prints a timestamped line for
    each cell whose state changes instead, after one line that counts the cells' states at the start."""

    def __init__(self, grid: list[Cell], console, tasks: dict[str, TaskEntry], notes: dict[str, str],
                 stale: dict[str, str | None] | None = None):
        self.grid, self.console, self.tasks, self.notes, self.stale = grid, console, tasks, notes, stale or {}
        self.states: dict[str, str] = {}
        self.started: dict[str, float] = {}
        self.opened = False

    def update(self) -> None:
        opening, self.opened = not self.opened, True
        for cell in self.grid:
            before = self.states.get(cell.name)
            if before in FINAL:
                continue  # a finished cell is read once
            state = self.states[cell.name] = view_state(cell, self.tasks[cell.task], self.stale)
            if state == "started":
                self.started.setdefault(cell.name, time.time())
            if opening or state == before:
                continue
            line = f"{cell.name}: {state}"
            if state in FINAL and cell.name in self.started:
                line += f" after {time.time() - self.started[cell.name]:.0f} s"
            if state in TROUBLE:
                line += f" ({_reason(cell, self.tasks[cell.task], self.notes)})"
            self._print(line)
        if opening:
            counts = Counter(self.states.values())
            self._print(f"{len(self.grid)} cells: " + ", ".join(f"{v} {k}" for k, v in counts.items()))

    def _print(self, line: str) -> None:
        self.console.print(f"{time.strftime('%H:%M:%S')} {line}", markup=False, highlight=False, soft_wrap=True)
