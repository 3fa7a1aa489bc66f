"""Comparison reports from an experiment's records: outcomes, seed-level tests with effect sizes and
power, placebo calibration, the equivalence matrix, findings checked where they apply, plots.

    path, report = build_report(experiment, Path("reports/quickstart/records"), Path("reports/quickstart"),
                                "zoo report quickstart")

Two layers. The statistics are zoo/stats/, which imports nothing from zoo. Here: collect.py (records ->
tables), analysis.py (outcomes and comparisons per task), findings.py, equiv.py (equivalence matrix),
transfer.py (effects on two tasks), family.py (the families of tests, adjusted together), study.py (the whole
experiment's analysis, adjusted), then the writer: tables.py (formatting), plots.py, paths.py (files named
relative to the repository), sections/ (one file per section of report.md, with its plots) and report.py (lists
the sections in order, writes report.md); plan.py formats `zoo plan`'s table from the same analysis.
"""

from zoo.report.collect import ReportError, collect, load_records
from zoo.report.report import build_report
from zoo.report.study import analyse

__all__ = ["ReportError", "analyse", "build_report", "collect", "load_records"]
