"""`zoo report` and `zoo plan` on a committed study (reports/quickstart): its report regenerates from its
records from any folder, and its numbers size seeds and bound what its design could detect."""

from __future__ import annotations

import math
import shlex
import shutil
from pathlib import Path

import pytest
from claims import regenerated_differs

from zoo.cli import main
from zoo.experiment import load_experiment
from zoo.report import analyse

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "reports" / "quickstart"


@pytest.fixture(scope="module")
def quickstart():
    experiment = load_experiment(ROOT / "experiments" / "quickstart.toml")
    return experiment, analyse(experiment, QUICKSTART / "records")


def test_the_committed_quickstart_records_are_current_and_complete(quickstart):
    experiment, report = quickstart
    assert set(report.frame.status) == {"complete", "stalled"}, report.frame[["variant", "seed", "status", "reason"]]
    stalled = report.frame[report.frame.status == "stalled"]
    assert set(stalled.variant) == {"post-norm"}  # every post-norm seed trains to the end below copy's floor


def test_in_a_real_experiment_the_placebo_is_equivalent_and_the_real_effect_is_called(quickstart):
    _, report = quickstart
    found = report.tasks[0]
    placebo = found.comparisons["pre-norm-conv1d"]
    assert placebo.verdict == "no detectable difference" and placebo.equivalence.equivalent
    assert found.failure_adjusted["post-norm"] < 0.05 and found.failure_tests["post-norm"].difference > 0
    assert found.failure_tests["post-norm"].odds_low > 1  # the interval of the effect excludes no effect


def test_the_committed_quickstart_report_regenerates_from_its_records(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # from outside the repository: the report names files relative to it
    assert not regenerated_differs("quickstart", tmp_path), "regenerate it: zoo report experiments/quickstart.toml"


def test_zoo_report_writes_the_same_report_from_any_folder(tmp_path, monkeypatch, capsys):
    """report.md named the experiment file relative to the working folder and quoted the command as typed, so
    the same records gave another report from another folder ('../work/main/experiments/quickstart.toml').
    Made from the repository's root and from a folder outside it, the experiment file and --out spelt either
    way, it is one file: the committed report, apart from its first line and the --out it was written to, which
    the command names relative to the repository or, outside it, absolute (issue 35, item 10)."""
    out = tmp_path / "q"
    shutil.copytree(QUICKSTART / "records", out / "records")
    made = []
    for folder, experiment, where in ((ROOT, "experiments/quickstart.toml", str(out)),
                                      (tmp_path, str(ROOT / "experiments" / "quickstart.toml"), "q")):
        monkeypatch.chdir(folder)
        assert main(["report", experiment, "--out", where]) == 0
        made.append((out / "report.md").read_text().split("\n")[1:])
    capsys.readouterr()
    committed = (QUICKSTART / "report.md").read_text().split("\n")[1:]
    command = "`zoo report experiments/quickstart.toml`"
    assert sum(command in line for line in committed) == 1
    typed_again = shlex.join(["zoo", "report", "experiments/quickstart.toml", "--out", str(out)])
    expected = [line.replace(command, f"`{typed_again}`") for line in committed]
    assert made[0] == made[1] == expected


def test_a_report_names_files_relative_to_the_repository_else_to_the_experiment_files_folder(tmp_path, monkeypatch):
    from zoo.report.paths import home, shown

    monkeypatch.chdir(ROOT / "zoo")  # any folder: the working folder plays no part
    quickstart = Path("../experiments/quickstart.toml")
    assert home(quickstart) == ROOT and shown(quickstart) == "experiments/quickstart.toml"
    assert shown(quickstart, "../reports/quickstart") == "reports/quickstart"
    assert shown(quickstart, tmp_path / "q") == str(tmp_path / "q")  # outside the repository: absolute
    (tmp_path / "project" / "experiments").mkdir(parents=True)
    (tmp_path / "project" / "pyproject.toml").write_text("")
    assert shown(tmp_path / "project" / "experiments" / "x.toml") == "experiments/x.toml"
    loose = tmp_path / "loose" / "x.toml"
    if any((above / marker).exists() for above in tmp_path.parents for marker in ("pyproject.toml", ".git")):
        pytest.skip(f"{tmp_path} lies inside a repository: no folder here is outside one")
    assert home(loose) == loose.parent and shown(loose) == "x.toml"


def test_zoo_plan_sizes_seeds_from_the_records(capsys, monkeypatch):
    from rich.console import Console

    from zoo.cli import experiment as cli_experiment

    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(cli_experiment, "console", Console(width=200))
    assert main(["plan", "experiments/quickstart.toml", "--effect", "1"]) == 0
    printed = capsys.readouterr().out
    assert "seeds per arm for ±1" in printed and "pre-norm-conv1d" in printed


def test_zoo_plan_says_an_arm_whose_runs_all_failed_compares_failure_rates_not_quality(capsys, monkeypatch):
    """All 5 post-norm runs of the quickstart stalled: `zoo plan` told the user to "run at least 2 seeds of each
    first", which no number of seeds does for a variant with no quality to compare (issue 35, item 9)."""
    from rich.console import Console

    from zoo.cli import experiment as cli_experiment

    monkeypatch.setattr(cli_experiment, "console", Console(width=200))
    assert main(["plan", str(ROOT / "experiments" / "quickstart.toml"), "--out", str(QUICKSTART)]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "run at least 2 seeds" not in printed
    assert ("post-norm: all 5 runs stalled or diverged, so its exact_match is undefined and its comparison is of "
            "failure rates") in printed and "not of quality; no number of seeds changes that." in printed


def test_an_arm_with_one_failed_run_is_asked_for_more_seeds_not_called_a_failure():
    from types import SimpleNamespace

    from zoo.report.plan import failing_arm, plan_notes
    from zoo.stats.outcomes import clopper_pearson

    comparison = SimpleNamespace(reference="base", variant="new", undetectable=None)
    for failed, runs, expected in ((1, 1, None), (2, 3, None), (3, 3, "new")):
        analysis = SimpleNamespace(instability={"base": clopper_pearson(0, 5), "new": clopper_pearson(failed, runs)},
                                   comparisons={"new": comparison}, primary="bleu")
        assert failing_arm(analysis, comparison) == expected
        assert len(plan_notes(analysis)) == (expected is not None)


def test_unequal_seeds_whose_permutation_floor_is_above_the_corrected_level_say_they_cannot_reject(quickstart):
    """4 v 3 seeds: the permutation-checked p is at least 1/35 (0.029), so at 0.05 / 14 no outcome rejects,
    and the row says so instead of a detectable difference (the interim five-writeups report printed 'no
    difference larger than 8.63 could be detected' beside an observed -24.5)."""
    from dataclasses import replace

    from zoo.report.analysis import at_level
    from zoo.report.tables import fmt_detectable
    from zoo.stats.seeds import compare_seeds
    from zoo.stats.welch import permutation_floor

    assert permutation_floor(4, 3) == pytest.approx(1 / 35) and permutation_floor(3, 3) == pytest.approx(2 / 20)
    _, report = quickstart
    base, other = (30.1, 30.6, 29.8, 30.3), (5.2, 6.0, 5.5)
    c = replace(report.tasks[0].comparisons["pre-norm-conv1d"], per_seed=(base, other),
                result=compare_seeds(base, other, higher_is_better=True))
    blocked = at_level(c, 0.05 / 14, 1.0)
    assert blocked.unreachable == pytest.approx(0.05 / 14) and math.isinf(blocked.mde)
    assert blocked.undetectable == "correction"  # not "range", though an infinite Δ exceeds every range
    assert fmt_detectable(blocked) == "cannot reach the corrected level (no outcome of these runs has p < 0.0036)"
    assert at_level(c, 0.05, 1.0).unreachable is None  # 0.029 < 0.05: a 4 v 3 test can reject alone
    assert at_level(c, 1 / 35, 1.0).unreachable == 1 / 35  # p < level is needed: a floor at the level blocks too


def test_zoo_plan_says_once_below_its_table_why_unequal_seeds_detect_nothing_yet(quickstart):
    """The long 'cannot reach the corrected level (...)' in every such row of `zoo plan` wrapped into five lines
    in an 80-column terminal (the scale grid at 4 v 3 seeds); the row says 'none yet' and one note says why."""
    from dataclasses import replace

    from zoo.report.analysis import at_level
    from zoo.report.plan import plan_notes, plan_rows
    from zoo.stats.seeds import compare_seeds

    experiment, report = quickstart
    analysis = report.tasks[0]
    base, other = (30.1, 30.6, 29.8, 30.3), (5.2, 6.0, 5.5)
    c = replace(analysis.comparisons["pre-norm-conv1d"], per_seed=(base, other),
                result=compare_seeds(base, other, higher_is_better=True))
    interim = replace(analysis, comparisons={"pre-norm-conv1d": at_level(c, 0.05 / 14, 1.0)})
    header, [row] = plan_rows(experiment, interim, 1.0)
    assert row[header.index("detectable Δ now (80% power)")] == "none yet: unequal seeds (below)"
    [note] = plan_notes(interim)
    assert note.startswith("none yet (pre-norm-conv1d): with unequal seed counts") and "at or above 0.0036" in note
    assert plan_notes(replace(analysis, comparisons={"pre-norm-conv1d": at_level(c, 0.05, 1.0)})) == []


def test_a_detectable_delta_beyond_the_metrics_range_is_said_to_be_none_within_it(quickstart):
    """3 v 3 noisy seeds on exact match (0-100) can need a 287-point difference; 'no difference larger than
    287 could be detected' read as a bound where the design has none (the interim reverse-long report)."""
    from dataclasses import replace

    from zoo.report.tables import fmt_detectable, verdict_text
    from zoo.stats.seeds import compare_seeds

    _, report = quickstart
    c = report.tasks[0].comparisons["pre-norm-conv1d"]
    base, other = (91.4, 90.2, 88.0), (71.4, 52.0, 20.0)
    wild = replace(c, per_seed=(base, other), result=compare_seeds(base, other, higher_is_better=True), mde=287.02,
                   equivalence=None)
    assert wild.undetectable == "range" and wild.result.verdict not in ("better", "worse")
    assert verdict_text(wild, 3).startswith("no difference within the metric's range (0–100) could be detected")
    assert verdict_text(wild, 3, short=True) == "undecided: none within the metric's range (0–100) detectable"
    assert fmt_detectable(wild) == "287.02: more than the metric's range (0–100)"
    tame = replace(wild, mde=60.0)
    assert tame.undetectable is None and verdict_text(tame, 3, short=True) == "undecided: none > 60.00 detectable"


@pytest.mark.parametrize("target", [0.5, 1.0, 2.0, 4.0])
def test_detectable_delta_and_seeds_needed_come_from_one_variance_model(quickstart, target):
    """A design that can detect the target effect at its seeds never asks for more seeds than it has, and one
    that cannot always does (the audit found 'can detect 1.12' beside 'seeds for ±1: 5')."""
    from zoo.report.analysis import at_level

    experiment, report = quickstart
    (found,) = report.tasks
    c = found.comparisons["pre-norm-conv1d"]  # 5 v 5 trained seeds, a corpus metric (exact match)
    level = experiment.config.analysis.alpha / report.family
    sized = at_level(c, level, target)
    n = c.result.n_variant
    assert n == c.result.n_baseline == 5
    assert (sized.mde <= target) == (sized.seeds_needed is not None and sized.seeds_needed <= n)
