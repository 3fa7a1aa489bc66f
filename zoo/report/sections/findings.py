"""Findings: each published finding the experiment file lists, checked where it applies (zoo/report/findings.py)."""

from __future__ import annotations

from zoo.report.sections.grid import interim
from zoo.report.study import Report
from zoo.report.tables import label


def findings_section(report: Report) -> list[str]:
    if not report.checks:
        return ["The experiment file lists no findings to check.", ""]
    notes = {task: interim(report.frame, task, report.sequential is not None)
             for task in dict.fromkeys(c.task for c in report.checks if c.task != "—")}
    notes = {task: note for task, note in notes.items() if note}
    lines = [f"**Interim** on `{task}`: {note}." for task, note in notes.items()]
    lines += [""] if lines else []
    for c in report.checks:
        f = c.finding
        published = f" Published: {f.published}." if f.published else ""
        where = f" on `{c.task}`" if c.task != "—" else ""
        where += " (interim)" if c.task in notes else ""
        lines.append(f"- **{c.outcome}**{where}: “{f.claim}” ({f.source}).{published} "
                     f"Expected: {f.variant} {f.expect} vs {f.against or report.experiment.config.baseline_label}"
                     f" ({f.kind}, {label(c.metric)}). Here: {c.evidence}.")
    return [*lines, ""]
