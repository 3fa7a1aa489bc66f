"""Findings: each published finding the experiment file lists, checked where it applies (zoo/report/findings.py)."""

from __future__ import annotations

from zoo.report.sections.grid import interim
from zoo.report.study import Report
from zoo.report.tables import label


def findings_section(report: Report) -> list[str]:
    if not report.checks:
        return ["The experiment file lists no findings to check.", ""]
    lines = []
    for c in report.checks:
        f = c.finding
        published = f" Published: {f.published}." if f.published else ""
        where = f" on `{c.task}`" if c.task != "—" else ""
        note = interim(report.frame, c.task, report.sequential is not None) if c.task != "—" else ""
        where += f" (interim: {note})" if note else ""
        lines.append(f"- **{c.outcome}**{where}: “{f.claim}” ({f.source}).{published} "
                     f"Expected: {f.variant} {f.expect} vs {f.against or report.experiment.config.baseline_label}"
                     f" ({f.kind}, {label(c.metric)}). Here: {c.evidence}.")
    return [*lines, ""]
