"""build_report: an experiment's records -> reports/<exp>/report.md + results.csv + plots/*.png.

The report is written for someone who did not run the experiment, and every number in it comes from
the committed records (zoo/experiment/record.py) and the experiment file: `zoo report` regenerates it
byte for byte, apart from its first line (date, zoo version, machine). It says which runs are
missing, stale or broken before any number, gives one verdict per task (on the declared primary
metric) with every p-value adjusted over the report's family, states what each comparison could have
detected, calibrates itself on placebo pairs, and checks published findings only where they apply.

Outputs are replaced as a set: report.md is removed first and written last, so a reader never sees a
new table beside an old report (a kill in between leaves no report.md, and `zoo report` makes it again).
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from zoo.atomic import write_text_atomic
from zoo.experiment import Experiment
from zoo.report.sections import Section, Text
from zoo.report.sections.equivalence import Equivalence
from zoo.report.sections.experiment_file import ExperimentFile
from zoo.report.sections.findings import findings_section
from zoo.report.sections.grid import grid_status
from zoo.report.sections.left_out import LeftOutRuns
from zoo.report.sections.method import method_section
from zoo.report.sections.overview import Overview
from zoo.report.sections.placebos import placebo_section
from zoo.report.sections.provenance import provenance
from zoo.report.sections.task import TaskSection
from zoo.report.sections.throughput import Throughput
from zoo.report.sections.transfers import Transfers
from zoo.report.study import Report, analyse


def sections(report: Report) -> list[Section]:
    """report.md's sections in order (zoo/report/sections/: one file each)."""
    return [Text("Grid status", grid_status), Overview(), *(TaskSection(analysis) for analysis in report.tasks),
            Transfers(), Text("Placebo pairs (the noise floor)", placebo_section), Equivalence(),
            Text("Findings", findings_section), Throughput(), Text("Method", method_section),
            Text("Provenance", provenance), LeftOutRuns(), ExperimentFile()]


def build_report(experiment: Experiment, records_root: Path, out_dir: Path, command: str) -> tuple[Path, Report]:
    """Write report.md, results.csv and plots/ into `out_dir` from the records; returns report.md and the analysis."""
    from zoo.experiment.owner import check

    out_dir = Path(out_dir)
    check(records_root, experiment.name, experiment.path, "--out")  # never write over another experiment's report
    report = analyse(experiment, Path(records_root))  # a damaged record stops it here, the old report intact
    (out_dir / "report.md").unlink(missing_ok=True)  # then: never an old report beside new tables
    out_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out_dir / "results.csv", report.frame.to_csv(index=False))
    config = experiment.config
    from zoo.experiment.provenance import zoo_commit
    from zoo.machine import cpu_model
    from zoo.version import __version__

    lines = [f"<!-- generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC by zoo {__version__} ({zoo_commit()}) "
             f"on {cpu_model()}; the rest of this file is a function of the records and the experiment file -->",
             f"# {config.name}: comparison report", ""]
    if config.description:
        lines += [config.description.strip(), ""]
    lines += [f"Made from the records in `{Path(records_root).name}/` with `{command}`.", ""]
    for section in sections(report):
        body = section.render(report, out_dir)
        if body is not None:
            lines += [f"## {section.title(report)}", "", *body]
    path = out_dir / "report.md"
    write_text_atomic(path, "\n".join(lines))
    _remove_unreferenced_plots(out_dir, "\n".join(lines))
    return path, report


def _remove_unreferenced_plots(out_dir: Path, text: str) -> None:
    """Delete the plots an earlier report drew that this one does not show (a task since removed from the
    experiment, a task whose records are gone): a plot in the folder is always one of the report's."""
    for png in sorted((out_dir / "plots").glob("*.png")):
        if f"]({png.relative_to(out_dir).as_posix()})" not in text:
            png.unlink()
