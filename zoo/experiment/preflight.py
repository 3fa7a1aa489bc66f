"""What `zoo run` says before it trains, about the machine it would train on: two costs a grid's definition
cannot show.

- bf16 on a CPU whose bf16 matmuls take PyTorch's slow fallback (zoo.machine.cpu_has_bf16_matmul): a run of the
  scale study that takes 35 minutes on an AVX-512 CPU would take more than a day there.
- A seed finished on other hardware than its recorded arms. The reports pair arms within a seed, and a seed that
  trains whole on one kind of device is a block every comparison is balanced over (the report's provenance tests
  the device as a block); a seed split across hardware puts the hardware inside its comparisons. A CPU's kind is
  its instruction set as PyTorch uses it (cpu_capability): it decides the kernels, hence the floats and the speed.

Both are warnings, not refusals: the user may have reasons, and the records name their hardware either way.
"""

from __future__ import annotations

from collections import defaultdict

from zoo.experiment import record as records
from zoo.experiment.grid import Cell, cell_state, definitions
from zoo.machine import bf16_warning, cpu_hardware, device_type_here, hardware_here
from zoo.rundir import RunError


def hardware_of(record) -> str | None:
    """Where a complete record trained, in hardware_here's terms; None where it does not say (records made before
    the CPU's instruction set was recorded)."""
    device = record.summary.device if record.summary else None
    if device == "cpu":
        capability = record.provenance.get("cpu_capability")
        return cpu_hardware(capability) if capability else None
    return device


def warnings(experiment, grid: list[Cell]) -> list[str]:
    """One line per finding for the cells of `grid` that would train here (neither recorded nor copied)."""
    define = definitions(experiment)
    entries = {task.key: task for task in experiment.config.tasks}
    to_run: list[tuple[Cell, dict]] = []
    trained: dict[tuple[str, int], dict[str, int]] = defaultdict(lambda: defaultdict(int))  # (task, seed) -> where
    for cell in grid:
        current = define(cell.variant, entries[cell.task], cell.seed)
        if cell_state(cell, current)[0] == "recorded":
            try:
                where = hardware_of(records.read(cell.record))
            except RunError:
                where = None
            if where:
                trained[cell.task, cell.seed][where] += 1
        elif not cell.reuse:
            to_run.append((cell, current["train"]))
    lines = []
    bf16 = [cell for cell, train in to_run
            if train["precision"] == "bf16" and device_type_here(train["device"]) == "cpu"]
    if bf16:
        lines.append(bf16_warning(f"{len(bf16)} run{'s' if len(bf16) > 1 else ''} of {experiment.name} "
                                  f"train{'' if len(bf16) > 1 else 's'}"))
    split: dict[tuple[str, str], dict[int, list]] = defaultdict(dict)  # (task, here) -> seed -> [there, arms left]
    for cell, train in to_run:
        here, there = hardware_here(train["device"]), trained.get((cell.task, cell.seed), {})
        if there and here and here not in there:
            split[cell.task, here].setdefault(cell.seed, [there, 0])[1] += 1
    for (task, here), seeds in sorted(split.items()):
        described = "; ".join(f"seed {seed} has {', '.join(f'{n} on {w}' for w, n in sorted(there.items()))} and "
                              f"{left} to train" for seed, (there, left) in sorted(seeds.items()))
        lines.append(f"{task}: arms recorded on other hardware than this machine's {here} ({described}). Finishing "
                     "a seed here puts the hardware inside its comparisons: finish it where its arms trained, or "
                     "train here only seeds no arm has trained yet (--seeds).")
    return [line for line in lines if line]
