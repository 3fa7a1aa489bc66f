"""`zoo report` on fabricated records whose right answers are known by construction.

One task (copy, exact match, 1000 test sentences), five seeds per variant:

    linear   (baseline)  60 62 61 59 63, seed 5 stalled (valid exact match 2 < floor 5)
    conv1d   placebo     61 60 62 60 61           same function as linear, trained alike
    prenorm  better      99 98 99 97 98
    masked   collapsed   linear's records, bit for bit (another mask convention: same numbers)
    warm     unstable    seeds 0-3 diverged, 4 and 5 at 80 81: too few trained seeds for a verdict
"""

from __future__ import annotations

import math
import re
import shlex
import shutil
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as scipy_stats

from zoo.cli import main
from zoo.experiment import load_experiment
from zoo.experiment import record as records
from zoo.report import analyse, build_report
from zoo.report.collect import record_path
from zoo.report.findings import CONFIRMED, CONTRADICTED, UNTESTABLE
from zoo.report.growth import fabricated

EXPERIMENT = """
name = "fake"
seeds = [0, 1, 2, 3, 4, 5]
baseline = "linear"
shared = {d_model = 32, n_heads = 4, d_ff = 64, encoder_layers = 1, decoder_layers = 1}

[[variants]]
label = "linear"
base = "paper-base"
[[variants]]
label = "conv1d"
base = "paper-base"
set = {"ffn.kind" = "conv1d"}
[[variants]]
label = "prenorm"
base = "paper-base"
set = {"residual.kind" = "pre-norm"}
[[variants]]
label = "masked"
base = "paper-base"
set = {"mask.convention" = "int-keep"}
[[variants]]
label = "warm"
base = "paper-base"
train = {warmup = 0}

[[tasks]]
name = "copy"
options = {symbols = 8, min_len = 2, max_len = 4}
threshold = 50.0
margin = 5.0

[train]
steps = 400

[[findings]]
kind = "direction"
variant = "prenorm"
expect = "better"
claim = "pre-norm learns copy better"
source = "Fake et al. 2024, Known Answers"
published = "+30 exact-match points (Table 1)"
effect = 30.0
[[findings]]
kind = "direction"
variant = "prenorm"
expect = "worse"
claim = "pre-norm learns copy worse"
source = "Contrarian 2023"
[[findings]]
kind = "equivalence"
variant = "conv1d"
expect = "equivalent"
claim = "Conv1d and Linear feed-forwards train to the same quality"
source = "Vaswani et al. 2017, section 3.3"
[[findings]]
kind = "same-function"
variant = "conv1d"
expect = "same function"
claim = "a kernel-1 Conv1d is a Linear layer"
source = "Vaswani et al. 2017, section 3.3"
[[findings]]
kind = "direction"
variant = "prenorm"
expect = "better"
claim = "needs more seeds than we have"
source = "Greedy 2025"
regime = {min_seeds = 10}
[[findings]]
kind = "failure-rate"
variant = "warm"
expect = "more failures"
claim = "without warmup, training fails more often"
source = "Xiong et al. 2020"
"""

VALUES = {
    "linear": [60, 62, 61, 59, 63, 40],
    "conv1d": [61, 60, 62, 60, 61, 62],
    "prenorm": [99, 98, 99, 97, 98, 99],
    "warm": [None, None, None, None, 80, 81],
}
SENTENCES = 1000


def fabricate(experiment, root: Path, variant: str, seed: int, value: float | None, source: str | None = None,
              valid: float | None = None, steps: int = 400, task_index: int = 0) -> None:
    """A record of cell (variant, task, seed) as `zoo run` would write it, with test exact match `value`
    (None: diverged); `source` names the variant whose definition it claims (for bit-identical copies)."""
    record = fabricated(experiment, variant, seed, value, task_index=task_index, valid=valid, steps=steps,
                        label=source, sentences=SENTENCES)
    records.write(record_path(root, variant, experiment.config.tasks[task_index].key, seed), record)


@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fake")
    path = folder / "fake.toml"
    path.write_text(EXPERIMENT)
    experiment = load_experiment(path)
    root = folder / "out" / "records"
    for variant, values in VALUES.items():
        for seed, value in enumerate(values):
            fabricate(experiment, root, variant, seed, value, valid=2.0 if (variant, seed) == ("linear", 5) else None)
    for seed, value in enumerate(VALUES["linear"]):  # masked: linear's numbers, bit for bit
        fabricate(experiment, root, "masked", seed, value, source="linear",
                  valid=2.0 if seed == 5 else None)
    return experiment, root


@pytest.fixture(scope="module")
def report(fake):
    experiment, root = fake
    return analyse(experiment, root)


def test_outcomes_classify_stalled_and_diverged_runs(report):
    found = report.tasks[0]
    assert found.outcomes["linear"][5] == "stalled"
    assert [found.outcomes["warm"][s] for s in range(6)] == ["diverged"] * 4 + ["complete"] * 2
    assert found.instability["warm"].count == 4 and found.instability["warm"].n == 6
    test = found.failure_tests["warm"]
    expected = scipy_stats.fisher_exact([[4, 2], [1, 5]]).pvalue  # warm 4/6 unstable vs linear 1/6
    assert test.p_value == pytest.approx(expected)


def test_quality_uses_trained_seeds_only(report):
    assert report.analyst.values(report.tasks[0].task, "linear", "exact_match") == [60, 62, 61, 59, 63]


def test_a_real_effect_is_called_with_its_welch_interval(report):
    c = report.tasks[0].comparisons["prenorm"]
    base, other = [60, 62, 61, 59, 63], [99, 98, 99, 97, 98, 99]
    assert c.result.difference == pytest.approx(np.mean(other) - np.mean(base))
    assert c.verdict == "better"
    assert c.result.ci_low > 30 and c.prob_better == 1.0 and c.eps_min == 0.0
    welch = scipy_stats.ttest_ind(other, base, equal_var=False)
    assert c.result.se >= abs(c.result.difference / welch.statistic) - 1e-9  # sentences add variance, never remove


def test_tests_and_tosts_are_adjusted_each_in_their_own_family(report):
    """The difference tests form one family and the TOSTs another (a test and its own TOST are negatively
    dependent: zoo/report/family.py), each adjusted in full: an 'equivalent' cannot come through the back door
    of an unadjusted p (the calibration audit's item 4), nor a near-zero TOST p lower the bar for a difference."""
    found = report.tasks[0]
    for family, size, result in (("tests", report.family, lambda c: c.result),
                                 ("tosts", report.equivalence_family, lambda c: c.equivalence)):
        tested = [result(c) for c in found.comparisons.values()
                  if result(c) is not None and not math.isnan(result(c).p_value)]
        p, adjusted = sorted(t.p_value for t in tested), sorted(t.p_adjusted for t in tested)
        assert size == len(p) == 2, family  # two comparisons, each with its TOST
        assert adjusted[0] == pytest.approx(min(1.0, len(p) * p[0])), family  # Holm's first step over its own family
    for c in found.comparisons.values():
        if c.equivalence is not None and c.equivalence.equivalent is not None:
            assert c.equivalence.equivalent == (c.equivalence.p_adjusted < 0.05)


def test_the_placebo_is_not_different_and_is_equivalent_within_its_margin(report):
    c = report.tasks[0].comparisons["conv1d"]
    assert c.verdict == "no detectable difference"
    assert c.equivalence is not None and c.equivalence.equivalent
    assert [(task, a, b) for task, a, b, _ in report.placebos] == [("copy", "linear", "conv1d"),
                                                                    ("copy", "linear", "masked")]


def test_bit_identical_variants_are_collapsed_not_tested(report):
    found = report.tasks[0]
    assert found.collapsed == {"masked": "linear"}
    assert "masked" not in found.comparisons


def test_too_few_trained_seeds_give_no_verdict(report):
    c = report.tasks[0].comparisons["warm"]
    assert c.verdict == "not enough seeds" and math.isnan(c.result.p_value)
    assert c.per_seed[1] == (80.0, 81.0)


def test_findings_are_checked_where_they_apply(report):
    outcomes = {(c.finding.claim, c.finding.kind): c for c in report.checks}
    assert outcomes[("pre-norm learns copy better", "direction")].outcome == CONFIRMED
    assert "power for the published effect" in outcomes[("pre-norm learns copy better", "direction")].evidence
    assert outcomes[("pre-norm learns copy worse", "direction")].outcome == CONTRADICTED
    assert outcomes[("Conv1d and Linear feed-forwards train to the same quality", "equivalence")].outcome == CONFIRMED
    assert outcomes[("a kernel-1 Conv1d is a Linear layer", "same-function")].outcome == CONFIRMED
    greedy = outcomes[("needs more seeds than we have", "direction")]
    assert greedy.outcome == UNTESTABLE and "needs 10 per arm" in greedy.evidence
    warm = outcomes[("without warmup, training fails more often", "failure-rate")]
    assert warm.outcome in ("inconclusive", CONFIRMED) and "Fisher p" in warm.evidence


def test_the_plateau_column_is_each_seeds_change_over_the_last_quarter(report):
    """Fabricated curves end final*0.9 at step 300 and final at 400: the last quarter adds a tenth."""
    task = report.experiment.config.tasks[0]
    assert report.analyst.values(task, "prenorm", "late_change") == pytest.approx([v / 10 for v in VALUES["prenorm"]])


def test_the_overview_has_a_row_per_variant_and_a_column_per_task(report):
    from zoo.report.tables import overview_rows

    header, rows = overview_rows(report.experiment, report.tasks, report.analyst)
    assert header == ["variant", "copy (exact match %)"]
    cells = {row[0]: row[1] for row in rows}
    assert cells["linear (baseline)"].startswith("61.00; 1/6 unstable")  # seed 5 stalled, five trained
    assert cells["prenorm"] == "98.33; 0/6 unstable; better"
    assert cells["masked"].endswith("≡ linear") and "4/6 unstable" in cells["warm"]


def test_a_stale_record_is_listed_and_never_counted(fake, tmp_path):
    experiment, root = fake
    import shutil

    copy = tmp_path / "records"
    shutil.copytree(root, copy)
    fabricate(experiment, copy, "prenorm", 0, 10.0, steps=200)  # recorded under another definition
    found = analyse(experiment, copy)
    row = found.frame[(found.frame.variant == "prenorm") & (found.frame.seed == 0)].iloc[0]
    assert row.status == "stale" and "train.steps: 200 -> 400" in row.reason
    assert 10.0 not in found.analyst.values(found.tasks[0].task, "prenorm", "exact_match")


def test_a_zero_stall_floor_counts_every_complete_run_in_quality(fake, tmp_path):
    """floor 0 (a study of what each variant delivers, where learning nothing is a score): linear's seed 5,
    stalled under the default floor, counts at its score; the records are the same (a report setting)."""
    from zoo.report.sections.task import stall_rule

    _, root = fake
    path = tmp_path / "fake.toml"
    path.write_text(EXPERIMENT.replace("margin = 5.0\n", "margin = 5.0\nstall = {floor = 0}\n", 1))
    experiment = load_experiment(path)
    found = analyse(experiment, root)
    assert found.tasks[0].outcomes["linear"][5] == "complete"
    assert found.analyst.values(found.tasks[0].task, "linear", "exact_match") == [60, 62, 61, 59, 63, 40]
    assert stall_rule(experiment.config.tasks[0], "exact_match") == \
        "no stall rule (every complete run counts in quality, at its score)"
    assert stall_rule(fake[0].config.tasks[0], "exact_match") == \
        "stalled = complete but the final validation exact match % < 5"


def test_cells_not_run_yet_are_summarised_per_task_and_their_verdicts_called_interim(fake, tmp_path):
    """A grid stopped part-way: the report says which cells have no record, one line per task, and calls the
    verdicts of such a task interim wherever they are shown (its declared seeds are not all in)."""
    experiment, root = fake
    import shutil

    from zoo.report.sections.grid import grid_status

    copy = tmp_path / "records"
    shutil.copytree(root, copy)
    for variant in ("linear", "conv1d", "prenorm", "masked", "warm"):
        record_path(copy, variant, "copy", 5).unlink()
    lines = grid_status(analyse(experiment, copy))
    assert lines[0] == "30 runs planned: 21 complete, 4 diverged, 5 missing."
    assert "- `copy`: **5 of 30 cells not run yet** (no record): every variant, seed 5" in lines
    text = build_report(experiment, copy, tmp_path / "out", "zoo report fake")[0].read_text()
    note = ("5 of 30 cells of `copy` have no record yet, so these verdicts use the seeds trained so far and can "
            "change when the declared seeds are in")
    assert f"**Interim:** {note} (see Grid status)." in text  # above the verdicts
    assert f" on `copy` (interim: {note}): " in text  # and on every finding checked there
    assert "Interim" not in build_report(experiment, root, tmp_path / "whole", "zoo report fake")[0].read_text()
    record_path(copy, "warm", "copy", 4).unlink()
    assert "- `copy`: **6 of 30 cells not run yet** (no record): linear: seed 5; conv1d: seed 5; prenorm: seed 5; " \
           "masked: seed 5; warm: seed 4, 5" in grid_status(analyse(experiment, copy))


def test_the_report_regenerates_byte_for_byte_apart_from_its_first_line(fake, tmp_path):
    experiment, root = fake
    first, _ = build_report(experiment, root, tmp_path / "a", "zoo report fake")
    second, _ = build_report(experiment, root, tmp_path / "b", "zoo report fake")
    a, b = first.read_text().split("\n"), second.read_text().split("\n")
    assert a[0].startswith("<!-- generated") and a[1:] == b[1:]
    text = first.read_text()
    for needle in ("### Outcomes", "the verdicts", "Placebo pairs", "**better**", "equivalent", "≡ linear",
                   "no verdict: 2 v 5 trained seeds", "## Findings", "## Provenance"):
        assert needle in text, needle


def test_the_plots_folder_holds_exactly_the_plots_the_report_shows(fake, tmp_path):
    """A task with no finished run gets no (empty) plots, and a plot an earlier report drew for a task since
    removed is deleted: every file in plots/ is one the report shows."""
    experiment, root = fake
    path = tmp_path / "fake.toml"
    path.write_text(EXPERIMENT.replace("[train]", """[[tasks]]
name = "reverse"
options = {symbols = 8, min_len = 2, max_len = 4}

[train]"""))
    out = tmp_path / "out"
    (out / "plots").mkdir(parents=True)
    (out / "plots" / "a-removed-task-effects.png").write_bytes(b"an old plot")
    text = build_report(load_experiment(path), root, out, "zoo report fake")[0].read_text()
    shown = sorted(re.findall(r"\]\((plots/[^)]+\.png)\)", text))
    assert shown == sorted(p.relative_to(out).as_posix() for p in (out / "plots").glob("*.png"))
    assert any(name.startswith("plots/copy-") for name in shown)
    assert not any(name.startswith("plots/reverse-") for name in shown)
    assert "- `reverse`: **30 of 30 cells not run yet**" in text


def drawn_axes(experiment, root, out, monkeypatch) -> dict:
    """Each plot of a report built into `out`, by file name: its axes, kept before the figure is closed."""
    from zoo.report import plots

    drawn, save = {}, plots.save

    def keep(fig, path):
        drawn[Path(path).name] = fig.axes
        return save(fig, path)

    monkeypatch.setattr(plots, "save", keep)
    build_report(experiment, root, out, "zoo report fake")
    return drawn


def test_the_effects_plot_names_the_margin_in_its_axis_label_not_in_a_legend_over_the_points(fake, tmp_path,
                                                                                            monkeypatch):
    """A legend in a corner of the forest plot hid the point of the variant drawn there (a "better" one at the
    bottom right), so the margin's band is named in the x label."""
    left, _ = drawn_axes(*fake, tmp_path / "out", monkeypatch)["copy-effects.png"]
    assert left.get_legend() is None and "equivalence margin ±" in left.get_xlabel()


def test_the_learning_curves_show_the_training_nll_which_is_alike_across_output_heads(fake, tmp_path, monkeypatch):
    """The training objective's label smoothing depends on the head (zoo/loss.py), so the curves draw the
    logged NLL: the fabricated complete records log, at step 2, loss 2.0 + seed/100 and NLL 1.5 + seed/100."""
    _, right = drawn_axes(*fake, tmp_path / "out", monkeypatch)["copy-curves.png"]
    last = [line.get_ydata()[-1] for line in right.get_lines()]
    assert last and all(y < 2.0 for y in last) and "no smoothing" in right.get_ylabel()


def test_an_interrupted_report_never_leaves_an_old_report_beside_new_tables(fake, tmp_path, monkeypatch):
    experiment, root = fake
    out = tmp_path / "out"
    build_report(experiment, root, out, "zoo report fake")
    from zoo.report import plots

    def crash(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(plots, "seed_values", crash)
    with pytest.raises(KeyboardInterrupt):
        build_report(experiment, root, out, "zoo report fake")
    assert not (out / "report.md").exists()  # removed before the new results.csv was written


def test_zoo_report_cli_prints_tables_and_refuses_a_folder_without_records(fake, tmp_path, capsys):
    experiment, root = fake
    assert main(["report", str(experiment.path), "--out", str(root.parent)]) == 0
    printed = capsys.readouterr().out
    assert "against the baseline" in printed and "report.md" in printed
    assert main(["report", str(experiment.path), "--out", str(tmp_path)]) == 2
    assert "holds no records/ folder" in capsys.readouterr().err


# -- the committed quickstart: a real small experiment ----------------------------------------------
ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "reports" / "quickstart"


@pytest.fixture(scope="module")
def quickstart():
    experiment = load_experiment(ROOT / "experiments" / "quickstart.toml")
    return experiment, analyse(experiment, QUICKSTART / "records")


def test_the_committed_quickstart_records_are_current_and_complete(quickstart):
    experiment, report = quickstart
    assert set(report.frame.status) == {"complete"}, report.frame[["variant", "seed", "status", "reason"]]


def test_in_a_real_experiment_the_placebo_is_equivalent_and_the_real_effect_is_called(quickstart):
    _, report = quickstart
    found = report.tasks[0]
    placebo = found.comparisons["pre-norm-conv1d"]
    assert placebo.verdict == "no detectable difference" and placebo.equivalence.equivalent
    assert found.failure_adjusted["post-norm"] < 0.05 and found.failure_tests["post-norm"].difference > 0
    assert found.failure_tests["post-norm"].odds_low > 1  # the interval of the effect excludes no effect


def test_the_committed_quickstart_report_regenerates_from_its_records(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # from outside the repository: the report names files relative to it
    experiment = load_experiment(ROOT / "experiments" / "quickstart.toml")
    path, _ = build_report(experiment, QUICKSTART / "records", tmp_path, "zoo report experiments/quickstart.toml")
    committed = (QUICKSTART / "report.md").read_text().split("\n")
    assert path.read_text().split("\n")[1:] == committed[1:], "regenerate it: zoo report experiments/quickstart.toml"


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

    from zoo import cli_experiment

    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(cli_experiment, "console", Console(width=200))
    assert main(["plan", "experiments/quickstart.toml", "--effect", "1"]) == 0
    printed = capsys.readouterr().out
    assert "seeds per arm for ±1" in printed and "pre-norm-conv1d" in printed


def test_zoo_plan_says_an_arm_whose_runs_all_failed_compares_failure_rates_not_quality(capsys, monkeypatch):
    """All 5 post-norm runs of the quickstart stalled: `zoo plan` told the user to "run at least 2 seeds of each
    first", which no number of seeds does for a variant with no quality to compare (issue 35, item 9)."""
    from rich.console import Console

    from zoo import cli_experiment

    monkeypatch.setattr(cli_experiment, "console", Console(width=200))
    assert main(["plan", str(ROOT / "experiments" / "quickstart.toml"), "--out", str(QUICKSTART)]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "run at least 2 seeds" not in printed
    assert ("post-norm: all 5 runs stalled or diverged, so its exact_match is undefined and its comparison is of "
            "failure rates") in printed and "not of quality; no number of seeds changes that." in printed


def test_an_arm_with_one_failed_run_is_asked_for_more_seeds_not_called_a_failure():
    from types import SimpleNamespace

    from zoo.report.tables import failing_arm, plan_notes
    from zoo.stats.outcomes import clopper_pearson

    comparison = SimpleNamespace(reference="base", variant="new")
    for failed, runs, expected in ((1, 1, None), (2, 3, None), (3, 3, "new")):
        analysis = SimpleNamespace(instability={"base": clopper_pearson(0, 5), "new": clopper_pearson(failed, runs)},
                                   comparisons={"new": comparison}, primary="bleu")
        assert failing_arm(analysis, comparison) == expected
        assert len(plan_notes(analysis)) == (expected is not None)


def test_differences_are_formatted_signed_and_float_residue_is_zero():
    from zoo.report.tables import fmt_difference, fmt_effect

    assert fmt_difference(1.234, "exact_match") == "+1.23"
    assert fmt_difference(-0.004, "exact_match") == "-0.004"  # would round to zero: two significant digits
    assert fmt_difference(-1.4e-14, "exact_match") == "0.00"  # two equal means summed in another order
    assert fmt_effect(-1.4e-14, -0.29, 0.29, "exact_match") == "0.00 [-0.29, +0.29]"


def test_the_instability_plot_draws_each_variants_share_and_count_in_its_tasks_panel(report, tmp_path, monkeypatch):
    from zoo.report import plots

    png = plots.instability(report.experiment, report.tasks, tmp_path / "instability.png")
    assert png.exists() and png.stat().st_size > 10_000
    drawn = {}
    monkeypatch.setattr(plots, "save", lambda fig, path: drawn.setdefault("axes", fig.axes))
    plots.instability(report.experiment, report.tasks, tmp_path / "again.png")
    panels = [ax for ax in drawn["axes"] if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == [analysis.task.key for analysis in report.tasks]
    variants = [v.label for v in report.experiment.config.variants]
    assert [tick.get_text() for tick in panels[0].get_yticklabels()] == variants
    for ax, analysis in zip(panels, report.tasks):
        finished = [v for v in variants if analysis.instability[v].n]
        widths = {round(bar.get_y() + bar.get_height() / 2): bar.get_width() for bar in ax.patches}
        assert widths == {variants.index(v): pytest.approx(100 * analysis.instability[v].rate) for v in finished}
        counts = sorted(text.get_text() for text in ax.texts)
        assert counts == sorted([f"{analysis.instability[v].count}/{analysis.instability[v].n}" for v in finished]
                                + ["no finished run"] * (len(variants) - len(finished)))


def test_the_effects_overview_draws_a_panel_per_task_each_point_in_its_verdicts_colour(report, tmp_path,
                                                                                       monkeypatch):
    from matplotlib.colors import to_rgba

    from zoo.report import plots
    from zoo.report.tables import verdict_class

    drawn = {}
    monkeypatch.setattr(plots, "save", lambda fig, path: drawn.setdefault("axes", fig.axes))
    tasks = report.tasks * 2  # two panels of one task: the layout, not the numbers, is under test
    plots.effects_overview(report.experiment, tasks, ["first at 2 steps", "second at 2 steps"], tmp_path / "o.png")
    panels = [ax for ax in drawn["axes"] if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == ["first at 2 steps", "second at 2 steps"]
    expected = sorted(to_rgba(plots.VERDICT_COLORS[verdict_class(c)]) for c in tasks[0].comparisons.values()
                      if verdict_class(c) != "no verdict" and not math.isnan(c.result.ci_low))
    for ax in panels:
        colours = sorted(to_rgba(bar.lines[0].get_color()) for bar in ax.containers)
        assert colours == expected and len(set(colours)) > 1  # the fake experiment has more than one verdict


def test_findings_print_tiny_p_values_as_a_bound():
    from zoo.report.findings import fmt_small_p

    assert fmt_small_p(0.0195) == "0.0195" and fmt_small_p(0.000234) == "0.000234"
    assert fmt_small_p(3.2e-78) == "< 0.0001" and fmt_small_p(0.0) == "< 0.0001"  # 0: both arms constant


def test_a_run_is_judged_stalled_on_the_tasks_declared_primary_metric():
    """A translation task scored on chrF: its floor is chrF's (10), and the final validation value held
    against it must be chrF too. Reading BLEU there (1.41 on the WMT sample pilot, 18.94 chrF) set every
    run of such a task apart as stalled."""
    from zoo.experiment.schema import TaskEntry
    from zoo.report.collect import read_row
    from zoo.stats.outcomes import StallRule, classify_run

    task = TaskEntry(name="wmt-ende-10k:en-de", primary="chrf")
    record = records.Record.model_construct(status="complete", summary=records.Summary(),
                                            final={"bleu": 1.41, "chrf": 18.94})
    row = read_row(record, task, None, ["bleu", "chrf"])
    assert row["valid_metric"] == 18.94 and task.stall_floor == 10.0
    assert classify_run(row["status"], row["valid_metric"], (), StallRule(floor=task.stall_floor)) == "complete"


def test_an_inconclusive_finding_says_when_the_published_effect_lies_outside_the_interval():
    """Nguyen & Salazar's +1.1 BLEU against a design that saw -0.77 [-1.41, -0.14] at adjusted p 0.08:
    not significant after the correction, so inconclusive, but the reader must see that the interval
    leaves out the published effect. Inside the interval, nothing is added."""
    from types import SimpleNamespace

    from zoo.experiment.schema import Finding
    from zoo.report.findings import INCONCLUSIVE, Check, settle

    finding = Finding(kind="direction", variant="stack", expect="better", claim="the stack is better",
                      source="Nguyen & Salazar 2019", effect=1.1)

    def settled(low: float, high: float, alpha: float = 0.05) -> Check:
        result = SimpleNamespace(difference=(low + high) / 2, ci_low=low, ci_high=high, p_value=0.02, p_adjusted=0.08,
                                 n_variant=5, n_baseline=5, verdict="no detectable difference")
        comparison = SimpleNamespace(result=result, equivalence=None, mde=0.9, unreachable=None, undetectable=None,
                                     per_seed=((0.0,) * 5, (0.0,) * 5), power_for=lambda effect: 0.4)
        return settle(Check(finding, "mt", "bleu", INCONCLUSIVE, "", comparison=comparison), alpha=alpha)

    outside = settled(-1.41, -0.14)
    assert outside.outcome == INCONCLUSIVE
    assert "the published effect (+1.1) lies outside this 95% CI" in outside.evidence
    assert "outside" not in settled(-0.5, 1.5).evidence
    assert "lies outside this 90% CI" in settled(-1.41, -0.14, alpha=0.1).evidence  # the interval is 1 - alpha


def test_a_budget_known_to_end_before_the_plateau_leaves_convergence_findings_untestable(fake, tmp_path):
    """The last-quarter rule passed Multi30k's 4000 steps (+0.56 BLEU) and 8000 steps (+0.66) alike, while
    doubling the budget added +2.54 BLEU: a task declares such evidence, and every finding that needs
    convergence is then untestable there. The same finding without the declaration is tested (control)."""
    experiment, root = fake
    finding = ('\n[[findings]]\nkind = "direction"\nvariant = "prenorm"\nexpect = "better"\n'
               'claim = "at convergence pre-norm is better"\nsource = "Patient 2026"\n'
               'regime = {converged = true, tolerance = 50}\n')
    declared = 'margin = 5.0\nbelow_plateau = "doubling the steps added 9 points (pilot.toml)"\n'

    def check(text: str):
        path = tmp_path / "fake.toml"
        path.write_text(text)
        checks = analyse(load_experiment(path), root).checks
        return next(c for c in checks if c.finding.claim == "at convergence pre-norm is better")

    assert check(EXPERIMENT + finding).outcome == CONFIRMED
    below = check(EXPERIMENT.replace("margin = 5.0\n", declared, 1) + finding)
    assert below.outcome == UNTESTABLE
    assert "budget ends before the plateau: doubling the steps added 9 points" in below.evidence


def test_a_task_whose_baseline_does_not_clear_its_trivial_floor_gets_no_verdicts(fake, tmp_path):
    """Copying the WMT sample's source scores 21.44 chrF, above its 6000-step baseline (19.59): below a floor no
    comparison says anything about the variants. Here a floor of 70 exact-match points (linear's mean: 61)."""
    import json
    import shutil

    from zoo.experiment import floors

    experiment, root = fake
    records_root = shutil.copytree(root, tmp_path / "records")
    task = experiment.config.tasks[0]

    def write_floor(score: float):
        floor = {"format": 1, "task": "copy", "definition": floors.definition(experiment, task),
                 "systems": {"majority": {"test": {"exact_match": score, "token_accuracy": score}}}}
        path = floors.floor_path(records_root, "copy")
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(floor))

    write_floor(70.0)
    below = analyse(experiment, records_root)
    found = below.tasks[0]
    assert found.floors == {"majority": 70.0}
    assert "does not clear the trivial floor majority (70.00)" in found.below_floor
    assert not found.comparisons and not found.failure_tests
    assert all(c.outcome == UNTESTABLE for c in below.checks if c.task == "copy")
    path, _ = build_report(experiment, records_root, tmp_path / "out", "zoo report fake")
    assert "**No verdicts on this task**" in path.read_text()
    write_floor(10.0)  # control: a floor the baseline clears changes nothing
    above = analyse(experiment, records_root).tasks[0]
    assert not above.below_floor and set(above.comparisons) == {"conv1d", "prenorm", "warm"}


def test_every_parameter_confound_is_labelled_under_the_verdicts(report, tmp_path):
    from zoo.report.sections.task import confound_lines

    (line, _) = confound_lines(report, report.tasks[0])
    assert "against linear's 1,000" in line and "prenorm +1 (+0.1%)" in line
    assert "conv1d" not in line  # the same count: no confound


def test_every_verdict_says_the_budget_it_holds_at(fake, tmp_path):
    experiment, root = fake
    text = build_report(experiment, root, tmp_path / "out", "zoo report fake")[0].read_text()
    assert "Trained at 400 steps, each budget with its own schedule" in text
    assert "### Against linear on exact match % at 400 steps (the verdicts)" in text
    path = tmp_path / "fake.toml"  # a variant with its own budget is named, and the heading drops the budget
    path.write_text(EXPERIMENT.replace('train = {warmup = 0}', 'train = {warmup = 0, steps = 800}'))
    text = build_report(load_experiment(path), root, tmp_path / "out2", "zoo report fake")[0].read_text()
    assert "Trained at 400 steps (linear's budget; warm at 800 steps)" in text
    assert "### Against linear on exact match % (the verdicts)" in text


def test_a_published_effect_inside_the_margin_is_not_testable_at_this_margin(fake, tmp_path):
    """'Equivalent within ±5' must not read as 'no effect' for a claim of +2: the finding says it cannot be tested
    at this margin, and how many seeds would test it."""
    experiment, root = fake
    finding = ('\n[[findings]]\nkind = "direction"\nvariant = "conv1d"\nexpect = "better"\n'
               'claim = "conv1d is a little better"\nsource = "Small 2026"\neffect = 2.0\n')
    path = tmp_path / "fake.toml"
    path.write_text(EXPERIMENT + finding)
    checks = analyse(load_experiment(path), root).checks
    check = next(c for c in checks if c.finding.claim == "conv1d is a little better")
    assert check.outcome == UNTESTABLE
    assert "not testable at this margin: the published effect (+2) is within the task's ±5" in check.evidence
    assert "seeds per arm would" in check.evidence


def test_a_published_effect_inside_the_margin_is_named_when_the_budget_already_rules_the_finding_out(fake, tmp_path):
    """On Multi30k every convergence finding is untestable for its budget first; one whose published effect is
    inside the ±margin would stay untestable at the plateau too, and the evidence says so with the seeds needed.
    An effect outside the margin gets no such clause (control)."""
    experiment, root = fake
    declared = 'margin = 5.0\nbelow_plateau = "doubling the steps added 9 points (pilot.toml)"\n'

    def evidence(effect: float) -> str:
        finding = ('\n[[findings]]\nkind = "direction"\nvariant = "conv1d"\nexpect = "better"\n'
                   f'claim = "conv1d is better"\nsource = "Small 2026"\neffect = {effect}\n'
                   'regime = {converged = true, tolerance = 50}\n')
        path = tmp_path / "fake.toml"
        path.write_text(EXPERIMENT.replace("margin = 5.0\n", declared, 1) + finding)
        check = next(c for c in analyse(load_experiment(path), root).checks if c.finding.claim == "conv1d is better")
        assert check.outcome == UNTESTABLE and "budget ends before the plateau" in check.evidence
        return check.evidence

    inside = evidence(2.0)
    assert "nor is it testable at this margin: the published effect (+2) is within the task's ±5" in inside
    assert "seeds per arm would" in inside  # "... would detect it" or "... would be needed to detect it"
    assert "testable at this margin" not in evidence(8.0)


def test_strings_from_records_cannot_reshape_the_report(fake, tmp_path):
    """A CPU name with a newline and raw HTML, a failure reason with a table pipe: one inert line each."""
    import json
    import shutil

    experiment, root = fake
    records_root = shutil.copytree(root, tmp_path / "records")
    path = records_root / "prenorm" / "copy" / "seed-0.json"
    record = json.loads(path.read_text())
    record["provenance"]["cpu"] = "Evil CPU\n## Injected heading <script>alert(1)</script>"
    record["summary"]["device"] = "cpu | x\n- injected item"
    path.write_text(json.dumps(record))
    text = build_report(experiment, records_root, tmp_path / "out", "zoo report fake")[0].read_text()
    assert "\n## Injected heading" not in text and "<script>" not in text and "\n- injected item" not in text
    assert "Evil CPU ## Injected heading &lt;script&gt;alert(1)&lt;/script&gt;" in text


def test_the_outcomes_table_gives_the_interval_its_test_inverts():
    from zoo.report.tables import fmt_odds
    from zoo.stats.outcomes import compare_failures

    test = compare_failures(0, 6, 4, 6)  # the audit's table, where Newcombe's interval and the test disagreed
    assert 0.05 < test.p_value < 0.07 and test.odds_low < 1  # neither rejects now
    assert fmt_odds(test) == f"∞ [{test.odds_low:.3g}, ∞]"
    assert fmt_odds(compare_failures(0, 6, 0, 6)) == "none [0, ∞]"  # no unstable run anywhere: no estimate


def test_a_quality_verdict_among_trained_seeds_says_so(report):
    from zoo.report.tables import comparison_rows

    header, rows = comparison_rows(report.experiment, report.tasks[0])
    verdict = rows[[r[0] for r in rows].index("prenorm")][header.index("verdict")]
    assert "**better** among trained seeds (6 of 6 v 5 of 6" in verdict  # linear's seed 5 stalled


def test_aso_sees_every_run_that_trained_to_the_end_stalled_ones_included(report):
    from zoo.stats.aso import eps_min

    comparison = report.tasks[0].comparisons["conv1d"]
    assert comparison.result.n_baseline == 5  # the quality test: trained seeds only
    expected = eps_min(VALUES["conv1d"], VALUES["linear"])  # ASO: linear's stalled seed 5 (40) included
    assert comparison.eps_min == pytest.approx(expected)
    assert expected != pytest.approx(eps_min(VALUES["conv1d"], VALUES["linear"][:5]))


def test_power_numbers_are_at_the_level_the_corrected_test_uses():
    """14 Holm-corrected 5 v 5 Fisher tests: the smallest p a table can give (0.0079) is above 0.05 / 14, so no
    test can reject, and the row says so instead of printing a detectable rise."""
    from zoo.report.tables import fmt_rise
    from zoo.stats.outcomes import at_level, compare_failures

    test = at_level(compare_failures(0, 5, 3, 5), 0.05 / 14)
    assert test.cannot_reject and "cannot reject after correction" in fmt_rise(test)
    assert not at_level(compare_failures(0, 8, 3, 8), 0.05 / 2).cannot_reject


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
    assert fmt_detectable(blocked) == "cannot reject after correction (no outcome of these runs has p < 0.0036)"
    assert at_level(c, 0.05, 1.0).unreachable is None  # 0.029 < 0.05: a 4 v 3 test can reject alone


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
    assert verdict_text(wild, 3, short=True) == "none within the metric's range (0–100) detectable"
    assert fmt_detectable(wild) == "287.02: more than the metric's range (0–100)"
    tame = replace(wild, mde=60.0)
    assert tame.undetectable is None and verdict_text(tame, 3, short=True) == "none > 60.00 detectable"


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


def test_a_findings_evidence_gives_the_raw_p_beside_the_adjusted_one(report):
    """So that a reader can re-check the adjustment of a test that joined the report's family."""
    check = next(c for c in report.checks if c.finding.claim == "pre-norm learns copy better")
    raw, adjusted = check.comparison.result.p_value, check.comparison.result.p_adjusted
    from zoo.report.findings import fmt_small_p

    assert f"p {fmt_small_p(raw)}, adjusted p {fmt_small_p(adjusted)}" in check.evidence


def test_the_provenance_says_which_seeds_trained_on_which_device_and_flags_a_seed_split_across_arms():
    from types import SimpleNamespace

    from zoo.report.sections.provenance import devices_by_seed

    def on(device):
        return SimpleNamespace(summary=SimpleNamespace(device=device))

    gpu, cpu = "cuda (NVIDIA H200)", "cpu"
    blocks = {(arm, "m30k", seed): on(gpu if seed < 2 else cpu) for arm in ("a", "b") for seed in range(4)}
    blocks |= {(arm, "copy", seed): on(cpu) for arm in ("a", "b") for seed in range(4)}
    [line] = devices_by_seed(blocks)  # one device for copy: no line
    assert line.startswith("- m30k trained on 2 devices") and "cpu: seeds 2, 3" in line
    assert f"{gpu}: seeds 0, 1" in line and "never an arm" in line
    split = {**blocks, ("b", "m30k", 1): on(cpu)}
    [line] = devices_by_seed(split)
    assert "seed 1 trained its arms on different devices" in line and f"{gpu}: seed 0;" in line
