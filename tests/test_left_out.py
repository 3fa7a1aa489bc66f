"""Runs left out (zoo/report/left_out.py): a report folder's left-out/ beside records/, listed in report.md's "Runs
left out" with the rule that left each out, and the verdicts recomputed with the left-out records kept. On the
fabricated study of tests/fake_study.py, whose answers are known: `warm` has two trained seeds (80, 81) and no
verdict; a left-out record of its seed 0 at 80 gives it a third, and then it is better than linear (about 61)."""

from __future__ import annotations

import json
import shutil

import pytest
from fake_study import SENTENCES, fabricate

from zoo.experiment.record import write as write_record
from zoo.report import analyse, build_report
from zoo.report import left_out as lo
from zoo.report.collect import ReportError, record_path
from zoo.report.growth import fabricated
from zoo.report.report import sections
from zoo.report.sections.left_out import LeftOutRuns

REASONS = """
[rules.retrained]
text = "a run trained again after its machine was found faulty"
declared = {commit = "abc1234", date = "2026-01-02 03:04 UTC"}

[rules.gpu-call]
text = "a seed trains whole on one device"
declared = {commit = "def5678", date = "2026-01-01 00:00 UTC"}

[[runs]]
cell = "warm/copy/seed-0"
rule = "retrained"
recorded = {commit = "1111111", date = "2026-01-01 12:00 UTC"}
removed = {commit = "2222222", date = "2026-01-03 00:00 UTC"}

[[runs]]
cell = "prenorm/copy/seed-1"
rule = "gpu-call"
device = "cuda (a GPU)"
value = 12.5
source = "docs/a-log.txt"
"""


@pytest.fixture
def study(fake, tmp_path):
    """The fabricated study's records copied to tmp/out/records, with left-out/ beside them: a record of warm's
    seed 0 at 80 (the kept one diverged), and prenorm's seed 1 known from a log alone."""
    experiment, root = fake
    records = tmp_path / "out" / "records"
    shutil.copytree(root, records)
    folder = tmp_path / "out" / "left-out"
    fabricate(experiment, folder, "warm", 0, 80.0)
    (folder / "reasons.toml").write_text(REASONS)
    return experiment, records, folder


def _section(text: str) -> str:
    start = text.index("## Runs left out")
    return text[start:text.index("\n## ", start + 1)]


def test_a_left_out_record_that_gives_an_arm_its_verdict_is_reported_as_a_change(study, tmp_path):
    experiment, records, _ = study
    path, report = build_report(experiment, records, tmp_path / "out", "zoo report fake")
    assert report.tasks[0].comparisons["warm"].verdict == "not enough seeds"  # the left-out record is not counted
    found = lo.read(experiment, records)
    assert [(run.key, run.rule, run.record is not None) for run in found.runs] == [
        (("warm", "copy", 0), "retrained", True), (("prenorm", "copy", 1), "gpu-call", False)]
    result = lo.sensitivity(report, found.runs)
    assert ("warm on copy", "no verdict", "better") in result.changed
    moved = {variant: (kept, now) for _, variant, kept, now in result.moves}
    assert moved["prenorm"][0] == moved["prenorm"][1]  # the log's 12.5 for prenorm seed 1 enters nothing
    again = lo.substituted(report, found.recorded)
    assert again.analyst.values(again.tasks[0].task, "warm", "exact_match") == [80.0, 80.0, 81.0]
    assert report.analyst.values(report.tasks[0].task, "warm", "exact_match") == [80.0, 81.0]  # untouched

    section = _section(path.read_text())
    assert "| warm | copy | 0 | cpu | 80.00 | diverged |" in section
    assert "| prenorm | copy | 1 | cuda (a GPU) | 12.50 | 98.00, cpu |" in section
    assert "no record in the repository; the number is docs/a-log.txt's" in section
    assert "| `retrained` | abc1234 (2026-01-02 03:04 UTC) | 1111111 (2026-01-01 12:00 UTC) | 2222222 (2026-01-03" \
           in section and "never committed" in section
    assert "- `gpu-call`, declared in def5678 (2026-01-01 00:00 UTC): a seed trains whole on one device" in section
    assert "1 run known from a log alone, with no record in the repository, cannot enter it (prenorm seed 1)" in section
    assert "- with every left-out record (1 record): verdicts that change (1 of 12): warm on copy: no verdict → " \
           "better;" in section
    assert "rule `retrained`" not in section  # one rule with records: no line per rule


def test_each_rule_gets_its_own_line_and_a_seed_not_run_is_added_to_its_arm(study, tmp_path):
    experiment, records, folder = study
    fabricate(experiment, folder, "prenorm", 6, 10.0)  # seed 6 is none of the grid's 0-5
    (folder / "reasons.toml").write_text(REASONS + '\n[[runs]]\ncell = "prenorm/copy/seed-6"\nrule = "gpu-call"\n')
    report = analyse(experiment, records)
    found = lo.read(experiment, records)
    again = lo.substituted(report, found.recorded)
    assert again.analyst.values(again.tasks[0].task, "prenorm", "exact_match") == [99, 98, 99, 97, 98, 99, 10]
    assert again.experiment.seeds_of("prenorm", "copy") == [0, 1, 2, 3, 4, 5, 6]
    section = "\n".join(LeftOutRuns().render(report, tmp_path / "out"))
    assert "| prenorm | copy | 6 | cpu | 10.00 | none |" in section
    assert "- with every left-out record (2 records): " in section
    assert "- with the 1 record rule `retrained` left out: " in section
    assert "- with the 1 record rule `gpu-call` left out: " in section


@pytest.mark.parametrize("spec_of", ["prenorm", "linear"])
def test_a_recomputed_report_checks_its_pairs_again_only_where_a_spec_changed(study, spec_of):
    """The equivalence matrix is a function of the specs (with where each was read and the size its run counted):
    a left-out record of prenorm's seed 0 in place of the kept one leaves them as they were, so no pair is checked
    again; one whose spec is linear's makes prenorm linear's function, which the recomputed matrix says."""
    experiment, records, folder = study
    shutil.rmtree(folder / "warm")
    record = fabricated(experiment, "prenorm", 0, 90.0, label="prenorm", sentences=SENTENCES)
    record.spec = experiment.specs[spec_of].model_dump(mode="json")
    write_record(record_path(folder, "prenorm", "copy", 0), record)
    (folder / "reasons.toml").write_text(REASONS.split("[[runs]]")[0] + '[[runs]]\ncell = "prenorm/copy/seed-0"\n'
                                         'rule = "retrained"\n')
    report = analyse(experiment, records)
    again = lo.substituted(report, lo.read(experiment, records).recorded)
    assert again.analyst.values(again.tasks[0].task, "prenorm", "exact_match")[0] == 90.0
    assert (again.matrix is report.matrix) == (spec_of == "prenorm")
    assert again.matrix.equivalent("prenorm", "linear") == (spec_of == "linear")
    assert not report.matrix.equivalent("prenorm", "linear")


def test_no_left_out_folder_no_section(report, tmp_path):
    """The fabricated study's folder has records/ alone (every committed report but scale's: they regenerate as
    they were, tests/test_report_committed.py)."""
    assert lo.read(report.experiment, report.analyst.records.root) is None
    assert LeftOutRuns().render(report, tmp_path) is None
    assert any(isinstance(section, LeftOutRuns) for section in sections(report))


def test_left_out_records_are_read_as_records_are_and_each_names_its_rule(study):
    experiment, records, folder = study
    path = record_path(folder, "warm", "copy", 0)
    data = json.loads(path.read_text())
    data["test"]["exact_match"] = 70.0  # its per-sentence statistics give 80
    path.write_text(json.dumps(data))
    with pytest.raises(ReportError, match="a damaged record"):
        lo.read(experiment, records)
    fabricate(experiment, folder, "warm", 0, 80.0)
    fabricate(experiment, folder, "conv1d", 2, 61.0)  # in no entry
    with pytest.raises(ReportError, match="no entry for conv1d/copy/seed-2.json"):
        lo.read(experiment, records)
    record_path(folder, "conv1d", "copy", 2).unlink()
    (folder / "reasons.toml").write_text(REASONS.replace('rule = "gpu-call"', 'rule = "unknown"'))
    with pytest.raises(ReportError, match="rule 'unknown' is not one of"):
        lo.read(experiment, records)
    (folder / "reasons.toml").write_text(REASONS.replace('value = 12.5\n', ''))
    with pytest.raises(ReportError, match="no value and source for a run known from a log alone"):
        lo.read(experiment, records)
    (folder / "reasons.toml").unlink()
    with pytest.raises(ReportError, match="no reasons.toml"):
        lo.read(experiment, records)


def test_every_committed_left_out_folder_reads_whole():
    """Every left-out record committed under reports/ passes the records' own reader (types, consistency, digest)
    and names its rule, as the report that lists it reads it."""
    from pathlib import Path

    from zoo.experiment import load_experiment

    root = Path(__file__).resolve().parent.parent
    folders = sorted(root.glob(f"reports/*/{lo.FOLDER}"))
    assert folders  # reports/scale/left-out
    for folder in folders:
        experiment = load_experiment(root / "experiments" / f"{folder.parent.name}.toml")
        found = lo.read(experiment, folder.parent / "records")
        assert len(found.recorded) == len(list(folder.glob("*/*/seed-*.json")))
