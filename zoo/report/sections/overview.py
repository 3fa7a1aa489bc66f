"""Overview: every task at a glance (only when the report has more than one task)."""

from __future__ import annotations

from pathlib import Path

from zoo.report import plots
from zoo.report.sections.task import budgets
from zoo.report.study import Report
from zoo.report.tables import md_table, overview_rows


class Overview:
    def title(self, report: Report) -> str:
        return "Overview"

    def render(self, report: Report, out_dir: Path) -> list[str] | None:
        if len(report.tasks) < 2:
            return None
        experiment = report.experiment
        png = plots.instability(experiment, report.tasks, out_dir / "plots" / "instability.png")
        figures = []
        if any(analysis.comparisons for analysis in report.tasks):  # a pilot of the baseline alone has none
            titles = [f"{analysis.task.key} at {budgets(experiment, analysis.task)[0]}" for analysis in report.tasks]
            effects = plots.effects_overview(experiment, report.tasks, titles,
                                             out_dir / "plots" / "effects-overview.png")
            figures = [f"![effects per task]({effects.relative_to(out_dir).as_posix()})", ""]
        return ["Per task: the mean test primary metric over trained seeds, the unstable (stalled + diverged) runs, "
                f"and the verdict against {experiment.config.baseline_label}; each task's section has the intervals "
                "and p-values.", "", md_table(*overview_rows(experiment, report.tasks, report.analyst)), "",
                *figures, f"![unstable runs per task]({png.relative_to(out_dir).as_posix()})", ""]
