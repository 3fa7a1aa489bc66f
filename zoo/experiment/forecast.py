"""What `zoo run` would do and what it would cost, before it does anything (`zoo run --dry-run`).

Per task: how many cells are recorded, would be copied from another experiment (`--reuse-from`), were run under
another definition (stale: run again) or were never run, and the training time the runs left would take. The time
comes from the records themselves: the median seconds per step of the complete records of the same task settings
and data (of the same task settings where the corpus is not on this machine to compare; this experiment's and the
--reuse-from folders'), as they were measured, with as many runs sharing the machine as they had, and trained on
the kind of device the runs left would get here (a GPU's seconds per step say nothing of a CPU's), or on the kind
`device` names (`zoo run --dry-run --device cuda` prices a grid for a GPU on a machine without one): on this very
hardware (the GPU model; the CPU's instruction set as PyTorch uses it) where records were made on it, else on
another of the same kind, which the forecast then names (an AVX2 CPU's bf16 steps are tens of times an AVX-512
CPU's: zoo.machine). Evaluation and test decoding are not counted (a few percent of a run); a cell that was
interrupted resumes from its checkpoint, so its full budget is an upper bound.

Where no record of a cell's task settings gives a rate on that kind of device (a new study, or one never trained
there), the records of other experiments (`others`: the committed report folders) price it by scaling: of the
complete records made on that kind of device (on this very hardware where there are any), those with the cell's
kernels and precision where there are any, and of them the nearest in work a step, parameters x tokens a step
(batch_tokens x accumulate); each one's seconds a step times the cell's work over its own, and the median of them.
The forecast names the records it scaled and by how much. A CPU's step grows with the arithmetic; a GPU's, at these
sizes, mostly with the kernels launched (on one H200 a 0.49M-parameter step of 1,852 tokens took 0.034 s and a
7.6M-parameter one of 3,452 tokens 0.030 s, reports/ablations and reports/scale), so a GPU price scaled far from
its records is rough, and the forecast says so.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, replace
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
    scaled: Scaled | None = None  # where no record of the task's settings gave a rate: the records scaled instead

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


@dataclass(frozen=True)
class Measured:
    """One complete record's training rate, as scaling reads it."""

    seconds_per_step: float
    parameters: int
    tokens: int  # a step's tokens as the definition asks them: batch_tokens x accumulate
    hardware: str  # preflight's: 'cuda (NVIDIA H200)', 'cpu (AVX512)'
    kernels: str
    precision: str
    source: str  # the experiment it came from

    @property
    def work(self) -> float:
        return float(self.parameters) * self.tokens


@dataclass(frozen=True)
class Scaled:
    """How a task's rate was scaled from other experiments' records: which, on what, by how much."""

    device: str
    records: tuple[Measured, ...]  # every record one of the task's cells was priced from
    factors: tuple[float, float]  # the least and the most a record's seconds a step was multiplied by

    def sources(self) -> list[str]:
        """'scale/ (12 records: 7.57M-7.58M parameters, 4,096 tokens a step, 0.030 s a step)', one per
        experiment, in the order first met."""
        out = []
        for source in dict.fromkeys(m.source for m in self.records):
            found = [m for m in self.records if m.source == source]
            low, high = min(m.parameters for m in found), max(m.parameters for m in found)
            size = _millions(low) if _millions(low) == _millions(high) else f"{_millions(low)}-{_millions(high)}"
            tokens = "/".join(f"{t:,}" for t in sorted({m.tokens for m in found}))
            rate = statistics.median(m.seconds_per_step for m in found)
            out.append(f"{source}/ ({len(found)} record{'s' if len(found) > 1 else ''}: {size} parameters, "
                       f"{tokens} tokens a step, median {rate:.4f} s a step)")
        return out


def _millions(count: int) -> str:
    """'7.58M', or below 100,000 the count itself ('5,760')."""
    return f"{count / 1e6:.2f}M" if count >= 100_000 else f"{count:,}"


def _measured(paths: list[Path], progress: Callable[[], object]) -> dict[str, list[Measured]]:
    """{device type: [Measured]} of the complete records among `paths`, the ones scaling may price from; a copy of
    another experiment's record (--reuse-from) is that one measurement again, so only the original counts."""
    found: dict[str, list[Measured]] = {}
    for path in paths:
        progress()
        try:
            record = records.read(path)
        except RunError:
            continue
        summary = record.summary
        if record.status != "complete" or not summary.steps or not summary.train_seconds or not summary.parameters \
                or record.provenance.get("copied_from"):
            continue
        train = record.definition.get("train") or {}
        if not train.get("batch_tokens"):
            continue
        device = (summary.device or "cpu").split()[0]
        found.setdefault(device, []).append(Measured(
            summary.train_seconds / summary.steps, summary.parameters,
            int(train["batch_tokens"]) * int(train.get("accumulate") or 1),
            hardware_of(record) or f"{device} (instruction set not recorded)", train.get("kernels", "reference"),
            train.get("precision", "fp32"), record.cell.experiment))
    return found


@functools.lru_cache(maxsize=None)
def _count(spec_json: str) -> int:
    """The parameters of a spec, built on the meta device (nothing allocated), once per spec."""
    from zoo.model.build import build
    from zoo.model.spec import ModelSpec

    return build(ModelSpec.model_validate_json(spec_json), device="meta").num_parameters()


def cell_parameters(spec, task_config) -> int:
    """A cell's parameters before its data is read: the spec with the vocabulary its task will give it, the
    `vocab_size` of a text task (joint or per side: the size the tokenizer is trained to) or a synthetic task's
    symbols and its 4 special ids."""
    from zoo.data import task_class
    from zoo.data.synthetic import SyntheticTask

    synthetic = issubclass(task_class(task_config.name), SyntheticTask)
    vocab = 4 + task_config.symbols if synthetic else task_config.vocab_size
    return _count(spec.with_overrides({"src_vocab": vocab, "tgt_vocab": vocab}).model_dump_json())


NEAREST = math.log(1.05)  # records within 5% of the nearest one's work a step count as equally near


def scale(parameters: int, tokens: int, kernels: str, precision: str, here: str | None,
          measured: list[Measured]) -> tuple[float, tuple[Measured, ...], tuple[float, float]] | None:
    """A cell's seconds a step scaled from `measured` (one device type's records): those made on `here` where any
    are, of them those with the cell's kernels and precision where any are, of them the nearest in work a step
    (parameters x tokens), each record's rate times the cell's work over its own; the median, the records and the
    least and most factor. None without records."""
    pool = [m for m in measured if m.hardware == here] or measured
    pool = [m for m in pool if (m.kernels, m.precision) == (kernels, precision)] or pool
    if not pool:
        return None
    work = float(parameters) * tokens
    distance = {id(m): abs(math.log(work / m.work)) for m in pool}
    nearest = min(distance.values())
    chosen = tuple(m for m in pool if distance[id(m)] <= nearest + NEAREST)
    factors = [work / m.work for m in chosen]
    return (statistics.median(m.seconds_per_step * f for m, f in zip(chosen, factors)), chosen,
            (min(factors), max(factors)))


def forecast(experiment, grid: list[Cell], reuse_folders: list[Path] = (),
             progress: Callable[[int, int], object] = lambda done, total: None, device: str | None = None,
             others: list[Path] = ()) -> list[TaskForecast]:
    """One TaskForecast per task of the experiment, for `grid` (grid.cells, with `reuse` set by
    grid.reusable when --reuse-from is given); `progress(done, total)` as it reads the records, then the cells.
    A cell with neither a record nor a run directory is new without a look at it: of a grid of 10^5 cells,
    only those are read that have something to read. `device` ('cpu', 'cuda'): price the runs for that kind of
    device, not the one they would get here. `others`: report folders whose records price, scaled, the cells no
    record of their own task settings prices (the module docstring); read only where one needs them."""
    records_root, runs_root = (Path(grid[0].records_root), Path(grid[0].runs_root)) if grid else (None, None)
    own = store.record_files(records_root) if grid else []
    paths = list(own)
    for folder in reuse_folders:
        paths += store.record_files(Path(folder) / store.RECORDS)
    total = len(paths) + len(grid)
    rates = _rates(paths, lambda done: progress(done, total))
    there = _with_files(records_root, runs_root, own) if grid else set()
    define = definitions(experiment)
    entries = {task.key: task for task in experiment.config.tasks}
    out = {key: TaskForecast(key) for key in entries}
    budgets: dict[tuple[str, str], _Budget] = {}  # no seed changes them
    to_run: list[tuple[str, str]] = []  # (variant, task) of each cell to run
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
            budgets[cell.variant, cell.task] = _budget(define(cell.variant, entry, cell.seed), rates, device)
        to_run.append((cell.variant, cell.task))
    unpriced = [key for key, budget in budgets.items() if budget.seconds_per_step is None and budget.steps]
    if unpriced and others:
        files = [path for folder in others for path in store.record_files(Path(folder) / store.RECORDS)]
        done = iter(range(total + 1, total + len(files) + 1))
        measured = _measured(files, lambda: progress(next(done), total + len(files)))
        for variant, task in unpriced:
            budgets[variant, task] = _scaled(budgets[variant, task], experiment, variant, entries[task], measured)
    _add_budgets(out, budgets, to_run)
    return list(out.values())


def _with_files(records_root: Path, runs_root: Path, records: list[Path]) -> set[str]:
    """The names (variant/task/seed-n) of the cells with a record (of `records`) or a run directory."""
    there = {path.relative_to(records_root).with_suffix("").as_posix() for path in records}
    return there | {path.relative_to(runs_root).as_posix() for path in runs_root.glob("*/*/seed-*")}


def _add_budgets(out: dict[str, TaskForecast], budgets: dict[tuple[str, str], _Budget],
                 to_run: list[tuple[str, str]]) -> None:
    """Each task's row (`out`) summed over the budgets of its cells to run (`to_run`: (variant, task) of each), with
    its rate the steps-weighted mean of theirs."""
    priced: dict[str, list[float]] = {key: [0.0, 0.0] for key in out}  # task -> [seconds, steps] with a rate
    for variant, task in to_run:
        budget, row = budgets[variant, task], out[task]
        if row.seconds_per_step is None:  # a rate to show where no cell has a budget in steps to weigh it by
            row.seconds_per_step = budget.seconds_per_step
        row.steps += budget.steps or 0
        row.unbounded += not budget.steps
        row.device, row.here = budget.device, budget.here
        row.measured_on = row.measured_on or budget.measured_on
        row.threads = max(row.threads or 0, budget.threads or 0) or None
        if budget.seconds_per_step is not None and budget.steps:
            priced[task][0] += budget.seconds_per_step * budget.steps
            priced[task][1] += budget.steps
        if budget.scaled is not None:
            row.scaled = _merge(row.scaled, budget.scaled)
    for key, row in out.items():
        seconds, steps = priced[key]
        if steps:  # the steps-weighted mean of the cells' rates: one rate where every cell has the same
            row.seconds_per_step = seconds / steps


@dataclass(frozen=True)
class _Budget:
    steps: int | None
    seconds_per_step: float | None  # the median of the records that give a rate, or None
    device: str
    here: str | None
    measured_on: tuple[str, ...]  # the hardware of those records, where it is not `here`
    threads: int | None
    tokens: int = 0  # a step's tokens as asked: batch_tokens x accumulate
    kernels: str = "reference"
    precision: str = "fp32"
    scaled: Scaled | None = None  # the rate scaled from other experiments' records


def _budget(current: dict, rates: dict[tuple[str, str], dict[str, list[float]]], device: str | None = None) -> _Budget:
    """What a cell defined as `current` would cost to train here (or on a `device` of that kind): from the records
    made on this hardware where there are any, else from those of every other hardware of the same device type."""
    train = current["train"]
    kind = device or device_type_here(train["device"])
    here = hardware_here(kind if device else train["device"])  # a dry-run may lack the GPU
    measured = rates.get((_key(current["task"], current["data"]), kind), {})
    same = measured.get(here) if here else None
    pooled = same or [rate for found in measured.values() for rate in found]
    elsewhere = here and pooled and not same  # with no hardware here to name, there is nothing to set them against
    return _Budget(train["steps"], statistics.median(pooled) if pooled else None, kind, here,
                   tuple(sorted(measured)) if elsewhere else (), train.get("threads"),
                   int(train["batch_tokens"]) * int(train.get("accumulate") or 1), train.get("kernels", "reference"),
                   train["precision"])


def _scaled(budget: _Budget, experiment, variant: str, entry, measured: dict[str, list[Measured]]) -> _Budget:
    """`budget` priced from other experiments' records of its device type, scaled (`scale`); as it was without
    any."""
    parameters = cell_parameters(experiment.specs[variant], experiment.task_config(entry))
    found = scale(parameters, budget.tokens, budget.kernels, budget.precision, budget.here,
                  measured.get(budget.device, []))
    if found is None:
        return budget
    rate, chosen, factors = found
    return replace(budget, seconds_per_step=rate, measured_on=(),
                   scaled=Scaled(budget.device, chosen, factors))


def _merge(a: Scaled | None, b: Scaled) -> Scaled:
    if a is None:
        return b
    seen = {id(m) for m in a.records}
    return Scaled(a.device, a.records + tuple(m for m in b.records if id(m) not in seen),
                  (min(a.factors[0], b.factors[0]), max(a.factors[1], b.factors[1])))
