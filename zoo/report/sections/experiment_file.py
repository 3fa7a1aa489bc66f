"""The experiment file the report was made from, verbatim, and where the runs' rows and records are."""

from __future__ import annotations

from pathlib import Path

from zoo.report.paths import shown
from zoo.report.study import Report


class ExperimentFile:
    def title(self, report: Report) -> str:
        return f"Experiment file `{shown(report.experiment.path)}`"

    def render(self, report: Report, out_dir: Path) -> list[str]:
        path, records = report.experiment.path, report.analyst.records.root.name
        return [f"```{path.suffix.lstrip('.') or 'text'}", path.read_text(encoding="utf-8").strip("\n"), "```", "",
                f"All runs, one row each: [results.csv](results.csv); per-run records: [{records}/]({records}/).", ""]
