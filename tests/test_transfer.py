"""Transfer of an effect between two tasks (budgets): the interaction test, its calibration and power."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from zoo.stats.transfer import (
    CHANGES,
    FEW,
    HOLDS,
    UNDETERMINED,
    adjusted,
    compare_interaction,
    interaction_arrays,
    rank_correlation,
)

ALPHA = 0.05


def _monte_carlo_limit(rate: float, runs: int) -> float:
    return rate + 3 * math.sqrt(rate * (1 - rate) / runs)


@pytest.mark.parametrize("sds, n", [((1, 1, 1, 1), 5), ((0.3, 0.3, 1.0, 1.0), 5), ((0.2, 1.0, 0.4, 1.5), 5),
                                    ((1, 1, 1, 1), 3), ((0.2, 1.0, 0.4, 1.5), 3)])
def test_no_interaction_is_found_at_most_at_alpha(sds, n):
    runs = 4000
    rng = np.random.default_rng(1)
    effect = 2.0  # the same effect on both tasks: no interaction, however large the effect
    groups = [rng.normal(shift, sd, (runs, n)) for shift, sd in zip((0, effect, 5, 5 + effect), sds)]
    _, _, _, p = interaction_arrays(*groups)
    assert (p < ALPHA).mean() <= _monte_carlo_limit(ALPHA, runs)


def test_an_interaction_that_exists_is_found():
    """5 seeds per arm, seed sd 0.4 (about Multi30k's): an effect of +2 BLEU that halves (interaction −1, about 2.8
    standard errors) is found about 3 times in 4 before any correction; one that vanishes, nearly always."""
    runs = 2000
    rng = np.random.default_rng(2)
    groups = [rng.normal(mean, 0.4, (runs, 5)) for mean in (30.0, 32.0, 33.0, 34.0)]
    estimate, _, _, p = interaction_arrays(*groups)
    assert np.mean(estimate) == pytest.approx(-1.0, abs=0.05)
    assert 0.65 < (p < ALPHA).mean() < 0.85
    groups[3] = groups[3] - 1.0  # the effect vanishes at B
    assert (interaction_arrays(*groups)[3] < ALPHA).mean() > 0.99


def test_the_verdicts_and_their_adjustment():
    base = [30.0, 30.4, 29.8, 30.2, 30.1]
    same = compare_interaction(base, [v + 2 for v in base], [v + 3 for v in base[::-1]],
                               [v + 5.05 for v in base], margin=1.0, alpha=ALPHA)
    assert same.effect_a == pytest.approx(2.0) and same.effect_b == pytest.approx(2.05)
    assert same.verdict == HOLDS and same.ci_low < 0.05 < same.ci_high
    changed = compare_interaction(base, [v + 2 for v in base], [v + 3 for v in base[::-1]], [v + 3 for v in base],
                                  margin=1.0, alpha=ALPHA)
    assert changed.difference == pytest.approx(-2.0) and changed.verdict == CHANGES
    assert adjusted(changed, p_adjusted=0.2, tost_adjusted=0.3).verdict == UNDETERMINED
    assert compare_interaction(base[:1], base, base, base, margin=1.0, alpha=ALPHA).verdict == FEW


def test_without_a_margin_there_is_no_tost_and_no_holds():
    """A TOST within ±inf would pass anything: p 0 for any interval. With no margin declared, equivalence
    cannot be shown, so the interaction is 'changes' or undetermined, and its NaN TOST p joins no family."""
    base = [10, 10.5, 9.8, 10.2, 10.1]
    wide = compare_interaction(base, [13, 13.5, 12.8, 20, 5], base, [v - 1 for v in base], margin=None, alpha=ALPHA)
    assert math.isnan(wide.tost_p) and wide.verdict == UNDETERMINED and wide.ci_low < -10
    exact = compare_interaction(base, base, base, base, margin=None, alpha=ALPHA)  # se 0: no interaction at all
    assert math.isnan(exact.tost_p) and exact.verdict == UNDETERMINED
    assert compare_interaction(base, base, base, base, margin=1.0, alpha=ALPHA).verdict == HOLDS


def test_rank_correlation_of_effects():
    base = [0.0, 0.1, -0.1, 0.05, -0.05]

    def arms(effects):
        return base, {f"v{i}": [e + x for x in base] for i, e in enumerate(effects)}

    same = rank_correlation(arms([1, 2, 3, 4]), arms([10, 20, 30, 40]))
    assert same.rho == pytest.approx(1.0) and same.n == 4
    assert same.ci_low == pytest.approx(1.0) and same.ci_high == pytest.approx(1.0)  # noise far below the gaps
    assert rank_correlation(arms([1, 2, 3, 4]), arms([4, 3, 2, 1])).rho == pytest.approx(-1.0)
    noisy = rank_correlation((base, {f"v{i}": [e + 3 * x for x in base] for i, e in enumerate([1, 1.1, 1.2, 1.3])}),
                             arms([10, 20, 30, 40]))
    assert noisy.rho == pytest.approx(1.0) and noisy.ci_low < 0.5  # overlapping effects: the ranks are not known
    assert math.isnan(rank_correlation(arms([1, 2]), arms([1, 2])).rho)  # fewer than 3 variants


@pytest.mark.parametrize("shared", [False, True])
def test_an_interaction_with_a_test_set_term_is_found_at_most_at_alpha(shared):
    """Each task's test set moves the variant's effect by its own draw (sd 0.5, shared by every seed of the arm,
    as a sentence x variant interaction is), so Δ_B − Δ_A carries 2 x 0.25 of variance no seed sees: Welch over
    the seeds alone rejects far above alpha, the term added keeps it at or below. Where both tasks share the
    draw (one test set) it cancels, and no term is due."""
    rng = np.random.default_rng(11)
    runs, n = 4000, 5
    groups = [rng.normal(0, 0.3, (runs, n)) for _ in range(4)]
    draw_a = rng.normal(0, 0.5, (runs, 1))
    draw_b = draw_a if shared else rng.normal(0, 0.5, (runs, 1))
    groups[1], groups[3] = groups[1] + draw_a, groups[3] + draw_b
    with_term = interaction_arrays(*groups, term=0.0 if shared else 2 * 0.25)[3]
    assert (with_term < ALPHA).mean() <= _monte_carlo_limit(ALPHA, runs)
    if not shared:
        assert (interaction_arrays(*groups)[3] < ALPHA).mean() > 3 * ALPHA


def test_a_contrast_of_two_arms_has_the_comparisons_own_term():
    """contrast_term over (baseline, variant) with signs (−1, +1) is compare_corpus's test-set term, bit for bit
    in its resamples: one rule for a comparison and for the interactions built from comparisons."""
    from zoo.report.noise import sentence_term
    from zoo.stats.corpus import compare_corpus, contrast_term

    rng = np.random.default_rng(3)
    chance = rng.uniform(0.2, 0.8, 500)
    lift = rng.normal(0, 0.2, 500)  # the variant's sentence x variant interaction: a real term
    def arm(shift):
        return [(rng.random(500) < np.clip(chance + shift, 0, 1)).astype(float)[:, None] for _ in range(4)]
    base, variant = arm(0), arm(lift)
    def score(totals):
        return 100 * totals[..., 0] / 500
    c = compare_corpus(base, variant, score, vectorised=True)
    term = contrast_term([base, variant], (-1.0, 1.0), score, vectorised=True)
    assert term == pytest.approx(sentence_term(c.se_sentences, c.se_within), rel=1e-9) and term > 0
    assert math.isnan(contrast_term([base[:1], variant], (-1.0, 1.0), score, vectorised=True))


TWO_BUDGETS = """
name = "fake-transfer"
seeds = [0, 1, 2, 3, 4]
baseline = "linear"
shared = {d_model = 32, n_heads = 4, d_ff = 64, encoder_layers = 1, decoder_layers = 1}

[[variants]]
label = "linear"
base = "paper-base"
[[variants]]
label = "prenorm"
base = "paper-base"
set = {"residual.kind" = "pre-norm"}
[[variants]]
label = "gelu"
base = "paper-base"
set = {"ffn.activation" = "gelu"}

[[tasks]]
name = "copy"
options = {symbols = 8, min_len = 2, max_len = 4}
train = {steps = 400}
margin = 5.0
stall = {floor = 0.0}
[[tasks]]
name = "copy"
label = "copy-800"
options = {symbols = 8, min_len = 2, max_len = 4}
train = {steps = 800}
margin = 5.0
stall = {floor = 0.0}

[[transfers]]
tasks = ["copy", "copy-800"]
question = "Does each effect at 400 steps hold at 800?"
"""
# exact match per seed: prenorm's +20 at 400 steps vanishes at 800 (an interaction of -20); gelu's +10 stays
SCORES = {
    ("linear", 0): [50, 52, 51, 49, 53], ("prenorm", 0): [70, 72, 71, 69, 73], ("gelu", 0): [60, 62, 61, 59, 63],
    ("linear", 1): [80, 82, 81, 79, 83], ("prenorm", 1): [81, 79, 80, 82, 83], ("gelu", 1): [90, 92, 91, 89, 93],
}


def test_the_report_finds_an_interaction_that_exists_and_none_where_the_effect_holds(tmp_path):
    from fake_study import fabricate

    from zoo.experiment import load_experiment
    from zoo.report import build_report

    path = tmp_path / "fake.toml"
    path.write_text(TWO_BUDGETS)
    experiment = load_experiment(path)
    root = tmp_path / "out" / "records"
    for (variant, task_index), values in SCORES.items():
        for seed, value in enumerate(values):
            fabricate(experiment, root, variant, seed, value, steps=(400, 800)[task_index], task_index=task_index)
    report_path, report = build_report(experiment, root, tmp_path / "out", "zoo report fake")
    (transfer,) = report.transfers
    changed, held = transfer.rows["prenorm"], transfer.rows["gelu"]
    assert changed.effect_a == pytest.approx(20, abs=0.01) and changed.effect_b == pytest.approx(0, abs=0.5)
    assert changed.verdict == CHANGES and changed.p_adjusted >= changed.p_value
    assert held.difference == pytest.approx(0, abs=0.5) and held.verdict == HOLDS
    # differences: per task two primary comparisons, per variant an interaction; equivalences: their TOSTs
    assert report.family == report.equivalence_family == 2 * 2 + 2
    text = report_path.read_text()
    assert "## Transfer between tasks" in text and "**changes**" in text and "**holds** within ±5" in text
    assert "| better → equivalent |" in text and "| same: better |" in text  # prenorm's verdict changes, gelu's not
    assert (tmp_path / "out" / "plots" / "transfer-copy-copy-800.png").is_file()

    path.write_text(TWO_BUDGETS.replace("margin = 5.0\n", ""))  # the same records, no margin on either task
    report_path, report = build_report(load_experiment(path), root, tmp_path / "out", "zoo report fake")
    (transfer,) = report.transfers
    assert transfer.rows["prenorm"].verdict == CHANGES and transfer.rows["gelu"].verdict == UNDETERMINED
    assert report.equivalence_family == 0
    text = report_path.read_text()
    assert "with no TOST: neither task declares a margin" in text and "**holds**" not in text


def _one_budget(name: str, steps: int, d_model: int, transfer: str = "") -> str:
    """TWO_BUDGETS cut to one task (`copy` at `steps`) under another name and width, with `transfer` appended."""
    head, _, _ = TWO_BUDGETS.partition("[[tasks]]\nname = \"copy\"\nlabel")
    return (head.replace('name = "fake-transfer"', f'name = "{name}"').replace("d_model = 32", f"d_model = {d_model}")
            .replace("train = {steps = 400}", f"train = {{steps = {steps}}}") + transfer)


def test_a_transfer_across_experiments_reads_the_other_experiments_records(tmp_path):
    """A scale transfer: the same factors in a small model's experiment and a wide one's; the small side is
    the other experiment's own analysis, from its records in the report folder beside this one's."""
    from fake_study import fabricate

    from zoo.experiment import load_experiment
    from zoo.report import build_report

    (tmp_path / "small.toml").write_text(_one_budget("small", 400, 32))
    (tmp_path / "wide.toml").write_text(_one_budget("wide", 400, 64, '\n[[transfers]]\ntasks = ["copy", "copy"]\n'
                                                    'experiment = "small.toml"\nquestion = "Does it hold wider?"\n'))
    small, wide = load_experiment(tmp_path / "small.toml"), load_experiment(tmp_path / "wide.toml")
    assert wide.others["small.toml"].name == "small"
    for experiment, side in ((small, 0), (wide, 1)):
        for (variant, task_index), values in SCORES.items():
            if task_index == side:
                for seed, value in enumerate(values):
                    fabricate(experiment, tmp_path / "reports" / experiment.name / "records", variant, seed, value)
    report_path, report = build_report(wide, tmp_path / "reports" / "wide" / "records", tmp_path / "reports" / "wide",
                                       "zoo report wide")
    (transfer,) = report.transfers
    assert transfer.names == ("small/copy", "copy") and transfer.first.comparisons["prenorm"].result.difference == \
        pytest.approx(20, abs=0.01)
    assert transfer.rows["prenorm"].verdict == CHANGES and transfer.rows["gelu"].verdict == HOLDS
    # this report's own comparisons and the interactions; their TOSTs (the other report's are its own)
    assert report.family == report.equivalence_family == 2 + 2
    text = report_path.read_text()
    assert "### `small/copy` → `copy`" in text and "Δ on small/copy [CI]" in text and "**changes**" in text
    assert (tmp_path / "reports" / "wide" / "plots" / "transfer-small_copy-copy.png").is_file()

    import shutil

    shutil.rmtree(tmp_path / "reports" / "small")
    (transfer,) = build_report(wide, tmp_path / "reports" / "wide" / "records", tmp_path / "reports" / "wide",
                               "zoo report wide")[1].transfers
    assert transfer.skipped.startswith("no records of `small` in") and not transfer.rows


@pytest.mark.parametrize("experiment, message", [
    ("nowhere.toml", "transfers[0].experiment: 'nowhere.toml' is not another experiment file"),
    ("wide.toml", "transfers[0].experiment: 'wide.toml' is not another experiment file"),
    ("other.toml", "transfers[0].tasks: 'copy' is not a task of"),
])
def test_a_transfer_across_experiments_names_what_is_wrong(tmp_path, experiment, message):
    from zoo.experiment import ExperimentError, load_experiment

    (tmp_path / "other.toml").write_text(_one_budget("other", 400, 32).replace('name = "copy"', 'name = "reverse"'))
    (tmp_path / "wide.toml").write_text(_one_budget("wide", 400, 64, f'\n[[transfers]]\ntasks = ["copy", "copy"]\n'
                                                    f'experiment = "{experiment}"\n'))
    with pytest.raises(ExperimentError, match=re.escape(message)):
        load_experiment(tmp_path / "wide.toml")


def test_experiments_that_refer_to_each_other_in_a_circle_are_one_error(tmp_path):
    from zoo.experiment import ExperimentError, load_experiment

    for name, other in (("a", "b"), ("b", "a")):
        (tmp_path / f"{name}.toml").write_text(_one_budget(name, 400, 32, f'\n[[transfers]]\ntasks = ["copy", "copy"]\n'
                                                            f'experiment = "{other}.toml"\n'))
    with pytest.raises(ExperimentError, match="cannot refer to each other in a circle"):
        load_experiment(tmp_path / "a.toml")


SENTENCES, SIGMA_G, TWO_TASKS_SEEDS = 2000, 0.15, 8


def test_an_interactions_term_is_the_sentences_that_move_the_effect_differently_on_the_two_tasks(tmp_path):
    """Exact match per sentence, sentence i right with probability p_i (+ g_i where the variant interacts). `alike`
    interacts with the same sentences on both tasks (g on A and on B): its comparisons each carry a term of about
    100² var(g) / N, but the interaction's cancels. `flips` has g on A and −g on B: the contrast holds 2g, a term
    of about 4 x that. Summing the comparisons' terms would get the first wrong by 2x, the second by half."""
    from zoo.experiment import load_experiment
    from zoo.experiment import record as records
    from zoo.report import analyse
    from zoo.report.collect import record_path
    from zoo.report.growth import fabricated
    from zoo.report.noise import term_of

    text = (TWO_BUDGETS.replace("seeds = [0, 1, 2, 3, 4]", f"seeds = {list(range(TWO_TASKS_SEEDS))}")
            .replace('label = "prenorm"', 'label = "alike"').replace('label = "gelu"', 'label = "flips"'))
    path = tmp_path / "two.toml"
    path.write_text(text)
    experiment = load_experiment(path)
    rng = np.random.default_rng(5)
    p, g = rng.uniform(0.3, 0.7, SENTENCES), rng.normal(0, SIGMA_G, SENTENCES)
    g -= g.mean()
    lift = {("linear", 0): 0, ("linear", 1): 0, ("alike", 0): g, ("alike", 1): g, ("flips", 0): g, ("flips", 1): -g}
    root = tmp_path / "out" / "records"
    for (variant, task_index), shift in lift.items():
        key = experiment.config.tasks[task_index].key
        for seed in range(TWO_TASKS_SEEDS):
            right = (rng.random(SENTENCES) < np.clip(p + rng.normal(0, 0.01) + shift, 0, 1)).astype(int)
            record = fabricated(experiment, variant, seed, 100 * right.mean(), task_index=task_index,
                                steps=(400, 800)[task_index], sentences=SENTENCES)
            record = record.model_copy(update={"sentences": {"exact_match": records.packed_rows(right.tolist())},
                                               "test": {**record.test, "exact_match": 100 * float(right.mean())}})
            records.write(record_path(root, variant, key, seed), record)
    report = analyse(experiment, root)
    (transfer,) = report.transfers
    truth = 100 ** 2 * SIGMA_G ** 2 / SENTENCES
    first, second = report.tasks
    for variant in ("alike", "flips"):  # each comparison carries the interaction with its sentences
        assert term_of(first.comparisons[variant]) == pytest.approx(truth, rel=0.35)
        assert term_of(second.comparisons[variant]) == pytest.approx(truth, rel=0.35)
    alike, flips = transfer.rows["alike"], transfer.rows["flips"]
    assert alike.term < truth / 4
    assert flips.term == pytest.approx(4 * truth, rel=0.35)
    seeds_part = sum(np.var(v, ddof=1) / len(v) for c in (first.comparisons["flips"], second.comparisons["flips"])
                     for v in c.per_seed)
    assert flips.se ** 2 == pytest.approx(seeds_part + flips.term, rel=1e-9)
