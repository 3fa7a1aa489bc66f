"""The sections of report.md, one file each: a section turns the analysis (zoo/report/study.py) into
markdown and writes its own plots, so a new section is one file and one line in report.py's list.

    grid.py             which runs are missing, stale or broken, before any number
    overview.py         every task at a glance (with more than one task)
    task.py             one task: outcomes, quality, the verdicts, its plots
    sequential.py       (in a task's section) seeds until decided: the design, and what each look decided
    transfers.py        a variant's effect on two tasks
    placebos.py         pairs that measure the noise floor
    equivalence.py      which variants compute the same function
    findings.py         published findings, checked where they apply
    throughput.py       training speed (descriptive)
    method.py           how every number was made
    provenance.py       where the runs trained
    left_out.py         trained runs the records do not hold, their rules, the verdicts with them kept
    experiment_file.py  the experiment file itself
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from zoo.report.study import Report


class Section(Protocol):
    """A part of report.md under one `## title`."""

    def title(self, report: Report) -> str:
        """The heading, without its `## `."""

    def render(self, report: Report, out_dir: Path) -> list[str] | None:
        """The markdown lines under the heading, after writing its plots under `out_dir`/plots (linked
        relative to `out_dir`); None when the section has nothing to say in this report (it is left out)."""


@dataclass(frozen=True)
class Text:
    """A section whose body is a function of the report alone (it writes no plots)."""

    heading: str
    body: Callable[[Report], list[str]]

    def title(self, report: Report) -> str:
        return self.heading

    def render(self, report: Report, out_dir: Path) -> list[str]:
        return self.body(report)
