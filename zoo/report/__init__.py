"""Comparison reports read from run directories: tables with confidence intervals, significance
tests against the baseline, plots, the equivalence matrix and the check of published findings.

    frame = collect(experiment, Path("runs/quickstart"))        # one row per grid cell
    build_report(experiment, Path("runs/quickstart"), Path("reports/quickstart"), "zoo report quickstart")

Files: collect.py (run directories -> table), stats.py (CI, Welch, paired bootstrap BLEU),
compare.py (per-task tables, comparisons, findings), equiv.py (equivalence matrix), plots.py,
report.py (report.md).
"""

from zoo.report.collect import ReportError, collect
from zoo.report.report import build_report

__all__ = ["ReportError", "build_report", "collect"]
