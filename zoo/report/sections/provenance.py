"""Provenance: where the runs trained, from their records (the report's own machine is on its first line)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from zoo.report.study import Report
from zoo.report.tables import fmt_difference, label, md_text
from zoo.stats.blocks import block_test


def many(n: int, noun: str) -> str:
    """'1 run', '3 runs'."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def counted(counter: Counter) -> str:
    """'a (3 runs), b (1 run)': each value and how many runs had it."""
    return ", ".join(f"{key} ({many(n, 'run')})" for key, n in sorted(counter.items()))


def provenance(report: Report) -> list[str]:
    """Where the runs trained, from their records (the report's own machine is on its first line)."""
    records = report.analyst.records.by_cell.values()

    def count(key: str) -> Counter:
        return Counter(md_text(r.provenance.get(key, "unknown")) for r in records)

    devices = Counter(md_text(r.summary.device if r.summary and r.summary.device is not None else "unknown")
                      for r in records)
    shared = max((r.provenance.get("concurrent_runs") or 1 for r in records), default=1)
    signatures = sorted({md_text(sig) for r in records for sig in (r.signatures or {}).values()})
    lines = [f"- {many(len(records), 'record')}; zoo {counted(count('zoo'))}; commit {counted(count('commit'))}",
             f"- PyTorch {counted(count('torch'))}, Python {counted(count('python'))}",
             f"- trained on: {counted(devices)}; CPU {counted(count('cpu'))}",
             f"- runs sharing the machine at once: up to {shared}"
             + (" (training throughput therefore measures the shared machine, not the variant; it gets no verdict, "
                "and `zoo bench` measures speed in isolation)" if shared > 1 else "")]
    copied = Counter(md_text(Path(r.provenance["copied_from"]).parts[0]) for r in records
                     if r.provenance.get("copied_from"))
    if copied:
        lines.append(f"- {many(sum(copied.values()), 'record')} copied from another experiment's records of the same "
                     f"definition instead of trained again: {counted(copied)}; each names its original in "
                     "`provenance.copied_from`")
    lines += devices_by_seed(report.analyst.records.by_cell)
    lines += device_effects(report)
    if signatures:
        lines.append("- sacreBLEU: " + "; ".join(f"`{s}`" for s in signatures))
    return [*lines, ""]


def _seeds(seeds: list[int]) -> str:
    return f"seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}"


def devices_by_seed(by_cell: dict) -> list[str]:
    """For each task whose records trained on more than one device, which seeds trained where. A seed that
    trained on one device for all its arms is a block every comparison is balanced over; a seed whose arms
    trained on different devices puts the device inside that seed's comparisons, and the line says so."""
    seeds_of: dict[str, dict[int, set[str]]] = {}
    for (_, task, seed), record in by_cell.items():
        device = md_text(record.summary.device if record.summary and record.summary.device else "unknown")
        seeds_of.setdefault(task, {}).setdefault(seed, set()).add(device)
    lines = []
    for task, seeds in sorted(seeds_of.items()):
        devices = sorted(set().union(*seeds.values()))
        if len(devices) < 2:
            continue
        where = "; ".join(f"{device}: {_seeds([s for s in sorted(seeds) if seeds[s] == {device}])}"
                          for device in devices if any(seeds[s] == {device} for s in seeds))
        mixed = [s for s in sorted(seeds) if len(seeds[s]) > 1]
        lines.append(f"- {task} trained on {len(devices)} devices, by seed: {where}"
                     + (f"; {_seeds(mixed)} trained {'its' if len(mixed) == 1 else 'their'} arms on different "
                        "devices, so the device is inside those comparisons" if mixed else
                        " (each seed on one device for every arm: the device is a block of seeds, never an arm)"))
    return lines


def device_effects(report: Report) -> list[str]:
    """For each task whose seeds trained on two devices, each seed whole on one: how far the seeds of the
    first device score from the others on the primary metric, averaged over the arms, with the exact
    permutation test over seeds (zoo/stats/blocks.py). Balanced over the arms, the device cannot bias a
    comparison; it adds to the seeds' spread, and this says by how much."""
    frame = report.frame[report.frame["status"].isin(("complete", "stalled"))]  # trained to the end
    lines = []
    for analysis in report.tasks:
        rows = frame[frame["task"] == analysis.task.key]
        by_seed = rows.groupby("seed")["device"].agg(lambda devices: frozenset(map(str, devices)))
        devices = sorted(set().union(*by_seed) if len(by_seed) else (), key=lambda d: (d == "cpu", d))  # CPU last
        if len(devices) != 2 or any(len(found) > 1 for found in by_seed):
            continue
        values = {variant: dict(zip(arm["seed"], arm[analysis.primary])) for variant, arm in rows.groupby("variant")}
        first = [seed for seed, found in by_seed.items() if devices[0] in found]
        test = block_test(values, first)
        if test is None:
            continue
        metric = analysis.primary
        lines.append(f"- {analysis.task.key}, device as a block: the {md_text(devices[0])} seeds score "
                     f"{fmt_difference(test.effect, metric)} {label(metric)} against the {md_text(devices[1])} seeds, "
                     f"averaged over {test.arms} arms (each seed's mean deviation from its arm's mean); exact "
                     f"permutation over the seeds ({test.n_group} v {test.n_rest}): p = {test.p_value:.2f}, where "
                     f"the smallest p this split allows is {test.floor:.2f}")
    return lines
