"""The grid of an experiment and the state of each of its cells, read from the store.

Where things live, what defines a cell and how cells are locked: zoo/experiment/store.py. A cell is:

1. recorded: a record of its current definition is there (committed, or from an earlier run), so it is skipped;
2. stale: a record or run directory of another definition is there, or a record that `records.read` refuses (not
   a record, numbers that disagree, content changed since it was written); it is moved aside (runs/.stale,
   records/.stale) and run again, and the grid's first lines name such cells and what changed, or the file and
   why it was refused (`plan`);
3. todo: nothing of it yet, or a run directory of its definition to resume. Where the records of another
   experiment named with `--reuse-from` hold one of the same definition, `reusable` marks the cell to copy it
   (the definition decides the numbers, and training is deterministic on one machine, so training it again
   would repeat that record).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from zoo import rundir
from zoo.experiment import executed, owner, store
from zoo.experiment import record as records
from zoo.experiment.config import ExperimentError
from zoo.plugins import loaded as loaded_plugins


@dataclass(frozen=True)
class Cell:
    """One (variant, task, seed) of the grid; plain data so it can travel to a worker or a Ray node."""

    experiment: str  # path of the experiment file
    experiment_name: str
    variant: str
    task: str  # TaskEntry.key
    seed: int
    runs_root: str
    records_root: str
    concurrent: int = 1  # runs sharing the machine with this one (recorded as provenance)
    commit: str = ""  # the code's commit when the grid started (recorded as provenance)
    reuse: str = ""  # another experiment's record of the same definition, copied instead of training
    plugins: tuple[str, ...] = ()  # the plugins the parent loaded (zoo/plugins.py), loaded again by a worker
    log_to: str = ""  # a TensorBoard folder the cell's curves are also written to while it trains

    @property
    def name(self) -> str:
        return f"{self.variant}/{self.task}/seed-{self.seed}"

    @property
    def out(self) -> Path:
        return store.inside(Path(self.runs_root), Path(self.runs_root) / store.cell_part(self.variant, self.task,
                                                                                          self.seed))

    @property
    def record(self) -> Path:
        part = store.cell_part(self.variant, self.task, self.seed)
        return store.inside(Path(self.records_root), Path(self.records_root) / part.with_name(part.name + ".json"))

    @property
    def lock(self) -> store.CellLock:
        part = store.cell_part(self.variant, self.task, self.seed)
        return store.CellLock(Path(self.runs_root) / store.LOCKS / part.with_name(part.name + ".lock"))


@dataclass(frozen=True)
class Part:
    """Some of an experiment's variants, tasks (by key) and seeds, each None for all of them (`zoo run
    --variants/--tasks/--seeds`): the same cells with the same definitions and records, fewer of them, so
    machines can share a grid (a GPU takes whole seeds, the CPU the rest) and each resumes from the records.
    An empty selection selects nothing, and `checked` refuses it: `--tasks "$EMPTY"` must not train everything.
    With [sequential], a part's seeds may be any of the plan's (`Experiment.plan_seeds`), and it selects among the
    cells the plan has called (`Experiment.seeds_of`)."""

    variants: tuple[str, ...] | None = None
    tasks: tuple[str, ...] | None = None
    seeds: tuple[int, ...] | None = None

    def checked(self, experiment) -> Part:
        """Itself, when each selection is not empty and the experiment has every value it names; else an error
        naming the allowed values."""
        config = experiment.config
        for flag, what, asked, allowed in (("--variants", "variant", self.variants, [v.label for v in config.variants]),
                                           ("--tasks", "task", self.tasks, [t.key for t in config.tasks]),
                                           ("--seeds", "seed", self.seeds, experiment.plan_seeds())):
            has = ", ".join(map(str, allowed))
            if asked is not None and not asked:
                raise ExperimentError(f"{flag}: empty selection; give at least one {what} ({experiment.name} has "
                                      f"{has})")
            unknown = [str(value) for value in asked or () if value not in allowed]
            if unknown:
                raise ExperimentError(f"{flag}: {experiment.name} has no {', '.join(unknown)} (it has {has})")
        return self

    def holds(self, variant: str, task: str, seed: int) -> bool:
        return ((self.variants is None or variant in self.variants) and (self.tasks is None or task in self.tasks)
                and (self.seeds is None or seed in self.seeds))

    def task_entries(self, experiment) -> list:
        return [task for task in experiment.config.tasks if self.tasks is None or task.key in self.tasks]


WHOLE = Part()  # the whole grid


def cells(experiment, runs_root: Path, records_root: Path, concurrent: int = 1, commit: str = "",
          part: Part = WHOLE) -> list[Cell]:
    """The grid (or its `part`) in run order: task by task, and within a task seed by seed across all variants,
    so a grid stopped part-way (a session's end) leaves every variant with the same seeds, ready to compare.
    A store of another experiment is refused here, before anything reads or moves its cells (owner.py)."""
    owner.check_grid(experiment, runs_root, records_root)
    runs, kept = str(Path(runs_root).resolve()), str(Path(records_root).resolve())
    seeds = {seed: i for i, seed in enumerate(experiment.plan_seeds())}
    tasks = {task.key: i for i, task in enumerate(experiment.config.tasks)}
    chosen = [(variant, task, seed) for variant, task, seed in experiment.grid() if part.holds(variant, task.key, seed)]
    ordered = sorted(chosen, key=lambda cell: (tasks[cell[1].key], seeds[cell[2]]))  # stable: variants
    plugins, path = tuple(plugin.where for plugin in loaded_plugins()), str(experiment.path.resolve())
    return [Cell(path, experiment.name, variant, task.key, seed, runs, kept, concurrent, commit, plugins=plugins)
            for variant, task, seed in ordered]


def read_record(path: Path) -> records.Record | None:
    """The record at `path`, or None when there is none or it is unreadable (a cell whose record file
    exists but reads as None is stale: its record is moved aside)."""
    if not path.exists():
        return None
    try:
        return records.read(path)
    except rundir.RunError:
        return None


def cell_state(cell: Cell, current: dict) -> tuple[str, list[str]]:
    """('recorded' | 'stale' | 'todo', what changed) for a cell whose definition is now `current`.
    A failed record is no result: the cell is run again (and its record replaced); a refused one is stale, with
    the one line `records.read` gives (the file and why)."""
    try:
        record = records.read(cell.record) if cell.record.exists() else None
    except rundir.RunError as err:
        return "stale", [f"its record is refused: {err}"]
    if record is not None and record.status != "failed":
        changed = executed.what_changed(record, current)
        return ("stale", changed) if changed else ("recorded", [])
    defined = cell.out / rundir.DEFINITION
    if defined.exists():
        try:
            changed = store.changes(rundir.read_table(defined).get("definition", {}), current)
        except rundir.RunError:
            changed = [f"{defined} cannot be read"]
        return ("stale" if changed else "todo"), changed
    if (cell.out / rundir.SPEC).exists():
        return "stale", ["a run directory without definition.json (written by an older zoo)"]
    return "todo", []


def states(experiment, grid: list[Cell]) -> dict[str, tuple[str, list[str]]]:
    """{cell name: (cell_state's state, what changed)} for every cell of `grid`, each against its definition now."""
    define, tasks = definitions(experiment), {entry.key: entry for entry in experiment.config.tasks}
    return {cell.name: cell_state(cell, define(cell.variant, tasks[cell.task], cell.seed)) for cell in grid}


def plan(experiment, grid: list[Cell]) -> dict[str, list[str]]:
    """{cell name: what changed} for the cells whose record or run directory is of another definition."""
    return {name: changed for name, (state, changed) in states(experiment, grid).items() if state == "stale"}


def definitions(experiment) -> Callable[[str, Any, int], dict[str, Any]]:
    """`store.definition` as a function of (variant, task entry, seed), built once per variant and task: the seed
    is the training config's `seed` and nothing else (tests/test_forecast.py checks that they agree), and a grid
    of 10^5 seeds must not build 10^5 specs, task and training configs (`zoo run --dry-run`). Callers must not
    change what it returns: the parts other than `train` are shared."""
    made: dict[tuple[str, str], dict[str, Any]] = {}

    def define(variant: str, task, seed: int) -> dict[str, Any]:
        if (variant, task.key) not in made:
            made[variant, task.key] = store.definition(experiment, variant, task, seed)
        first = made[variant, task.key]
        return {**first, "train": {**first["train"], "seed": seed}}

    return define


def reusable(experiment, grid: list[Cell], report_folders: list[Path]) -> list[Cell]:
    """The grid with `reuse` set on every cell not recorded under its current definition (no record,
    or a stale one) while the records of `report_folders` (other experiments') hold one of the same
    definition digest."""
    if not grid or not report_folders:
        return grid
    by_digest = store.records_by_digest(report_folders, exclude=Path(grid[0].records_root))
    entries = {task.key: task for task in experiment.config.tasks}
    define = definitions(experiment)
    out = []
    for cell in grid:
        current = define(cell.variant, entries[cell.task], cell.seed)
        source = by_digest.get(store.digest(current))
        out.append(replace(cell, reuse=str(source)) if source and cell_state(cell, current)[0] != "recorded"
                   else cell)
    return out
