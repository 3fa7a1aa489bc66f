"""`zoo report` on a fabricated study whose right answers are known by construction (tests/fake_study.py):
outcomes, verdicts, families, plots, and a report that regenerates byte for byte."""

from __future__ import annotations

import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from fake_study import EXPERIMENT, VALUES, fabricate
from scipy import stats as scipy_stats

from zoo.cli import main
from zoo.experiment import load_experiment
from zoo.report import analyse, build_report
from zoo.report.collect import record_path
from zoo.report.findings import CONFIRMED, CONTRADICTED, UNTESTABLE


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
    findings = text.split("## Findings")[1].split("\n## ")[0]
    assert findings.count(note) == 1 and f"**Interim** on `copy`: {note}." in findings  # once above the findings
    checked_there = [line for line in findings.splitlines() if line.startswith("- ") and " on `copy`" in line]
    assert checked_there and all(" on `copy` (interim): " in line for line in checked_there)
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
    """The training objective's label smoothing depends on the head (zoo/kernels/loss.py), so the curves draw the
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


def test_the_provenance_counts_runs_in_words():
    from collections import Counter

    from zoo.report.sections.provenance import counted, many

    assert counted(Counter({"cdc6b1a": 20, "6a93e706caf8": 1})) == "6a93e706caf8 (1 run), cdc6b1a (20 runs)"
    assert (many(1, "record"), many(0, "record"), many(50, "record")) == ("1 record", "0 records", "50 records")
