"""`zoo run`: expand an experiment's grid and run each cell into its run directory and its record.

The pieces, one file each: the grid and each cell's state (zoo/experiment/grid.py), running one cell under
its lock (cell.py), the executors that run the cells (executors.py) and the live view (view.py). `run_grid`
puts them together: it names the stale cells and the copied ones, then runs the grid with the chosen
executor in a thread while the view, which reads only the store, refreshes: on a terminal a live table, in a
log file a line per change of a cell's state. A cell locked by another `zoo run` is left to it at first, then
waited for at the end. A sequential experiment's grid is the cells its plan has called (`Experiment.with_calls`);
`zoo run --until-decided` calls `run_grid` once per round (zoo/api.py, `Study.run`), reading the calls from the
records before each.
"""

from __future__ import annotations

import threading
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.padding import Padding

from zoo.experiment import executed, executors, owner, store
from zoo.experiment.executors import Executor, Results
from zoo.experiment.grid import WHOLE, Cell, Part, cells, read_record, reusable, states
from zoo.experiment.outcome import outcome
from zoo.experiment.provenance import zoo_commit
from zoo.experiment.schema import TaskEntry
from zoo.experiment.view import GridLog, GridView, held_digest
from zoo.testing import preflight


def run_grid(experiment, runs_root: Path, records_root: Path, *, executor: str | Executor = "local",
             console: Console | None = None, live: bool = True, reuse_from: list[Path] = (),
             log_to: Path | None = None, part: Part = WHOLE, **options: Any) -> Results:
    """Run every cell; returns {cell name: (final status, reason)}. `executor`: a registered executor's name
    (zoo/experiment/executors.py), with its `options` (local: workers; ray: address, threads), or an executor.
    `reuse_from`: other experiments' report folders whose records of a cell's very definition are copied
    instead of training it again. `part`: only those variants, tasks and seeds."""
    executors.refuse_in_a_workers_import()
    runner = executor if isinstance(executor, Executor) else executors.create(executor, **options)
    grid = cells(experiment, runs_root, records_root, concurrent=max(runner.concurrent, 1),
                 commit=zoo_commit(), part=part)
    with executed.watching():  # a helper a plugin's component imports as it runs, first here, is the cells' too
        preflight(experiment, [cell.variant for cell in grid])  # a plugin's broken component stops it here
    owner.claim_grid(experiment, runs_root, records_root)
    if log_to is not None:
        grid = [replace(cell, log_to=str(Path(log_to).resolve())) for cell in grid]
    console = console or Console(stderr=True)
    state = states(experiment, grid)
    stale = {name: changed for name, (kind, changed) in state.items() if kind == "stale"}
    _name_stale(console, stale)
    grid = reusable(experiment, grid, list(reuse_from))
    crowded = runner.oversubscribed(experiment, grid) if isinstance(runner, executors.Local) else None
    if crowded:
        console.print(f"[yellow]{crowded}[/]")
    _name_copies(console, grid)
    # a cell with its current record is its result, read here: an executor gets only what has to train, so a grid
    # with nothing left starts no worker (a script without a `__main__` guard would re-import itself in each one)
    tasks = {task.key: task for task in experiment.config.tasks}
    results: Results = {cell.name: ("complete", "") for cell in grid if state[cell.name][0] == "recorded"}
    held = {cell.name: held_digest(cell) for cell in grid if cell.name in stale}  # shown as stale until replaced
    _run_in_view(runner, grid, tasks, results, held, f"zoo run {experiment.name}: {len(grid)} runs -> {runs_root}",
                 console, live)
    return {cell.name: _counted(cell, tasks[cell.task], results.get(cell.name, ("failed", "not run"))) for cell in grid}


def _name_stale(console: Console, stale: dict[str, list[str]]) -> None:
    """Name the stale cells and what changed in each, before they are moved aside and run again."""
    if stale:
        console.print(f"[yellow]{len(stale)} cells were run under another definition or have a record that is "
                      f"refused; their old records and run directories go to {store.STALE}/ and they are run "
                      "again:[/]")
        for name, changed in stale.items():  # wrapped at words, not cut mid-name at the terminal's edge
            console.print(Padding(escape(f"{name}: " + "; ".join(changed[:4]) + (" ..." if len(changed) > 4 else "")),
                                  (0, 0, 0, 2)), highlight=False)


def _name_copies(console: Console, grid: list[Cell]) -> None:
    """Name the cells that get a copy of another experiment's record instead of training."""
    copies = [cell for cell in grid if cell.reuse]
    if copies:
        console.print(f"{len(copies)} cells have a record of the same definition in another experiment's records; "
                      "it is copied instead of training them again:")
        for cell in copies:
            console.print(f"  {cell.name} <- {cell.reuse}", soft_wrap=True)


def _run_in_view(runner: Executor, grid: list[Cell], tasks: dict[str, TaskEntry], results: Results,
                 held: dict[str, str | None], title: str, console: Console, live: bool) -> None:
    """Run the cells without a result (`results`, which the executor fills) in a thread while the view refreshes:
    on a terminal a live table (`live`), in a file a line per change of a cell's state. `held`: the stale cells'
    held digests, shown as stale until replaced. An executor's error is raised here, in the main thread."""
    todo = [cell for cell in grid if cell.name not in results]
    errors: list[BaseException] = []

    def guarded() -> None:
        try:
            if todo:  # nothing to train starts no executor: no worker process, no cluster
                runner.run(todo, results)
        except BaseException as err:  # noqa: BLE001 - re-raised in the main thread
            errors.append(err)

    worker = threading.Thread(target=guarded, daemon=True)
    notes = {name: reason for name, (_, reason) in results.items()}
    view = GridView(title, grid, tasks, notes, held)
    log = GridLog(grid, console, tasks, notes, held) if live and not console.is_terminal else None
    if log is not None:
        log.update()
    with Live(view, console=console, refresh_per_second=2, transient=False) if live and log is None \
            else nullcontext():
        worker.start()
        while worker.is_alive():
            worker.join(timeout=0.5)
            notes.update({name: reason for name, (_, reason) in results.items()})
            if log is not None:
                log.update()
    if log is not None:
        log.update()
        console.print(view)  # the final table, as a terminal shows it
    if errors:
        raise errors[0]


def _counted(cell: Cell, task: TaskEntry, result: tuple[str, str]) -> tuple[str, str]:
    """A cell's result as the report counts it: a run that trained to the end below its task's floor is 'stalled'
    (zoo/experiment/outcome.py), not 'complete'."""
    record = read_record(cell.record) if result[0] == "complete" else None
    return outcome(record, task) if record is not None else result

