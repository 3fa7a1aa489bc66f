"""What `zoo run` would do and what it would cost, before it does anything (`zoo run --dry-run`).

Per task: how many cells are recorded, would be copied from another experiment (`--reuse-from`), were run under
another definition (stale: run again) or were never run, and the training time the runs left would take. The time
comes from the records themselves: the median seconds per step of the complete records of the same task settings
and data (of the same task settings where the corpus is not on this machine to compare; this experiment's and the
--reuse-from folders'), as they were measured, with as many runs sharing the machine as they had, and trained on
the kind of device the runs left would get here (a GPU's seconds per step say nothing of a CPU's): on this very
hardware (the GPU model; the CPU's instruction set as PyTorch uses it) where records were made on it, else on
another of the same kind, which the forecast then names (an AVX2 CPU's bf16 steps are tens of times an AVX-512
CPU's: zoo.machine). Evaluation and test decoding are not counted (a few percent of a run); a cell that was
interrupted resumes from its checkpoint, so its full budget is an upper bound.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from zoo.experiment import record as records
from zoo.experiment import store
from zoo.experiment.grid import Cell, cell_state, definitions
from zoo.experiment.preflight import hardware_of
from zoo.machine import device_type_here, hardware_here
from zoo.rundir import RunError


@dataclass
class TaskForecast:
    task: str
    cells: int = 0
    recorded: int = 0
    copied: int = 0  # a --reuse-from record of the same definition stands for it
    stale: int = 0  # recorded or started under another definition: run again
    new: int = 0  # never run
    steps: int = 0  # optimizer steps of the cells to run (stale + new)
    unbounded: int = 0  # cells to run whose budget is not in steps (epochs or minutes)
    seconds_per_step: float | None = None  # median over the task's complete records; None without any
    device: str = "cpu"  # where the cells to run would train here: cpu or cuda
    here: str | None = None  # the hardware they would train on here: 'cpu (AVX2)', 'cuda (NVIDIA H200)'
    measured_on: tuple[str, ...] = ()  # the hardware of the records giving the rate, where it is not `here`
    threads: int | None = None  # the most CPU threads a cell to run sets (TrainConfig.threads); None: none sets them

    @property
    def to_run(self) -> int:
        return self.stale + self.new

    @property
    def run_seconds(self) -> float | None:
        """Training seconds of the cells to run, one run after another, each as fast as the records' runs
        were; None when no record gives a rate."""
        if not self.to_run:
            return 0.0
        return None if self.seconds_per_step is None else self.seconds_per_step * self.steps

    def wall_seconds(self, workers: int, cores: int) -> float | None:
        """run_seconds with `workers` runs at once on a machine of `cores` CPU cores. On the CPU, runs that set
        their threads share the cores: two workers of 2-thread runs on 2 cores train one run's worth at a time
        (runs that do not set them get cores // workers threads each: zoo.experiment.executors). On a GPU the
        workers share the device, as measured by `zoo bench --processes`; the runs' own rate is the estimate."""
        if self.run_seconds is None:
            return None
        at_once = workers if self.device != "cpu" or not self.threads else min(workers, max(1, cores // self.threads))
        return self.run_seconds / at_once


def _key(task: dict | None, data: dict | None) -> str:
    """Which records time a cell: those of its task settings and data; where the data is not on this machine
    (`data` None: a dry run in a fresh clone), those of its task settings on whatever data they had."""
    return store.digest({"task": task, "data": data}) if data is not None else store.digest({"task": task})


def _rates(paths: list[Path], progress: Callable[[int], object]) -> dict[tuple[str, str], dict[str, list[float]]]:
    """{(digest of (task settings, data), device type): {hardware: [seconds per step of each complete record]}};
    `progress(n)` after the n-th record. Hardware is preflight's: 'cpu (AVX512)', 'cuda (NVIDIA H200)', or
    'cpu (instruction set not recorded)' for records made before it was."""
    rates: dict[tuple[str, str], dict[str, list[float]]] = {}
    for done, path in enumerate(paths, 1):
        progress(done)
        try:
            record = records.read(path)
        except RunError:  # an unreadable record gives no rate; `zoo run` names it and runs its cell again
            continue
        summary = record.summary  # a complete record has one
        if record.status != "complete" or not summary.steps or not summary.train_seconds:
            continue
        definition = store.normalise(record.definition)
        device = (summary.device or "cpu").split()[0]  # 'cpu', or 'cuda' of 'cuda (NVIDIA H200)'
        hardware = hardware_of(record) or f"{device} (instruction set not recorded)"
        for key in {_key(definition.get("task"), definition.get("data")), _key(definition.get("task"), None)}:
            rates.setdefault((key, device), {}).setdefault(hardware, []).append(summary.train_seconds / summary.steps)
    return rates


def forecast(experiment, grid: list[Cell], reuse_folders: list[Path] = (),
             progress: Callable[[int, int], object] = lambda done, total: None) -> list[TaskForecast]:
    """One TaskForecast per task of the experiment, for `grid` (grid.cells, with `reuse` set by
    grid.reusable when --reuse-from is given); `progress(done, total)` as it reads the records, then the cells.
    A cell with neither a record nor a run directory is new without a look at it: of a grid of 10^5 cells,
    only those are read that have something to read."""
    records_root, runs_root = (Path(grid[0].records_root), Path(grid[0].runs_root)) if grid else (None, None)
    own = store.record_files(records_root) if grid else []
    paths = list(own)
    for folder in reuse_folders:
        paths += store.record_files(Path(folder) / store.RECORDS)
    total = len(paths) + len(grid)
    rates = _rates(paths, lambda done: progress(done, total))
    there = set()  # names (variant/task/seed-n) of the cells with a record or a run directory
    if grid:
        there = {path.relative_to(records_root).with_suffix("").as_posix() for path in own}
        there |= {path.relative_to(runs_root).as_posix() for path in runs_root.glob("*/*/seed-*")}
    define = definitions(experiment)
    entries = {task.key: task for task in experiment.config.tasks}
    out = {key: TaskForecast(key) for key in entries}
    budgets: dict[tuple[str, str], tuple[int | None, float | None]] = {}  # no seed changes them
    for done, cell in enumerate(grid, len(paths) + 1):
        progress(done, total)
        entry, row = entries[cell.task], out[cell.task]
        state = cell_state(cell, define(cell.variant, entry, cell.seed))[0] if cell.name in there else "todo"
        row.cells += 1
        if state == "recorded":
            row.recorded += 1
            continue
        if cell.reuse:  # copied, also over a stale run directory (which is moved aside first)
            row.copied += 1
            continue
        row.stale += state == "stale"
        row.new += state == "todo"
        if (cell.variant, cell.task) not in budgets:
            budgets[cell.variant, cell.task] = _budget(define(cell.variant, entry, cell.seed), rates)
        budget = budgets[cell.variant, cell.task]
        row.steps += budget.steps or 0
        row.unbounded += not budget.steps
        row.device, row.here = budget.device, budget.here
        row.measured_on = row.measured_on or budget.measured_on
        row.threads = max(row.threads or 0, budget.threads or 0) or None
        if row.seconds_per_step is None:
            row.seconds_per_step = budget.seconds_per_step
    return list(out.values())


@dataclass(frozen=True)
class _Budget:
    steps: int | None
    seconds_per_step: float | None  # the median of the records that give a rate, or None
    device: str
    here: str | None
    measured_on: tuple[str, ...]  # the hardware of those records, where it is not `here`
    threads: int | None


def _budget(current: dict, rates: dict[tuple[str, str], dict[str, list[float]]]) -> _Budget:
    """What a cell defined as `current` would cost to train here: from the records made on this hardware where
    there are any, else from those of every other hardware of the same device type."""
    train = current["train"]
    device, here = device_type_here(train["device"]), hardware_here(train["device"])  # a dry-run may lack the GPU
    measured = rates.get((_key(current["task"], current["data"]), device), {})
    same = measured.get(here) if here else None
    pooled = same or [rate for found in measured.values() for rate in found]
    elsewhere = here and pooled and not same  # with no hardware here to name, there is nothing to set them against
    return _Budget(train["steps"], statistics.median(pooled) if pooled else None, device, here,
                   tuple(sorted(measured)) if elsewhere else (), train.get("threads"))
