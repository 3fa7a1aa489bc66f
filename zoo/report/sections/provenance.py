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
    if signatures:
        lines.append("- sacreBLEU: " + "; ".join(f"`{s}`" for s in signatures))
    return [*lines, ""]
