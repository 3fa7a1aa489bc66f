"""Provenance: where the runs trained, from their records (the report's own machine is on its first line)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from zoo.report.study import Report
from zoo.report.tables import md_text


def provenance(report: Report) -> list[str]:
    """Where the runs trained, from their records (the report's own machine is on its first line)."""
    records = report.analyst.records.by_cell.values()
    count = lambda key: Counter(md_text(r.provenance.get(key, "unknown")) for r in records)  # noqa: E731
    devices = Counter(md_text(r.summary.device if r.summary and r.summary.device is not None else "unknown")
                      for r in records)
    shared = max((r.provenance.get("concurrent_runs") or 1 for r in records), default=1)
    signatures = sorted({md_text(sig) for r in records for sig in (r.signatures or {}).values()})
    join = lambda counter: ", ".join(f"{k} ({n} runs)" for k, n in sorted(counter.items()))  # noqa: E731
    lines = [f"- {len(records)} records; zoo {join(count('zoo'))}; commit {join(count('commit'))}",
             f"- PyTorch {join(count('torch'))}, Python {join(count('python'))}",
             f"- trained on: {join(devices)}; CPU {join(count('cpu'))}",
             f"- runs sharing the machine at once: up to {shared}"
             + (" (training throughput therefore measures the shared machine, not the variant; it gets no verdict, "
                "and `zoo bench` measures speed in isolation)" if shared > 1 else "")]
    copied = Counter(md_text(Path(r.provenance["copied_from"]).parts[0]) for r in records
                     if r.provenance.get("copied_from"))
    if copied:
        lines.append(f"- {sum(copied.values())} records copied from another experiment's records of the same "
                     f"definition instead of trained again: {join(copied)}; each names its original in "
                     "`provenance.copied_from`")
    lines += devices_by_seed(report.analyst.records.by_cell)
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
