"""Throughput: training speed per variant, descriptive (runs may have shared the machine)."""

from __future__ import annotations

from pathlib import Path

from zoo.report import plots
from zoo.report.study import Report


class Throughput:
    def title(self, report: Report) -> str:
        return "Throughput (descriptive)"

    def render(self, report: Report, out_dir: Path) -> list[str]:
        png = plots.throughput(report.experiment, report.frame, out_dir / "plots" / "throughput.png")
        return [f"![throughput]({png.relative_to(out_dir).as_posix()})", ""]
