"""Transfer of an effect between two tasks (budgets): the interaction test, its calibration and power."""

from __future__ import annotations

import math

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


def test_rank_correlation_of_effects():
    assert rank_correlation([1, 2, 3, 4], [10, 20, 30, 40]).rho == pytest.approx(1.0)
    assert rank_correlation([1, 2, 3, 4], [4, 3, 2, 1]).rho == pytest.approx(-1.0)
    assert math.isnan(rank_correlation([1, math.nan], [1, 2]).rho)


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
    from test_report import fabricate

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
    # per task two primary comparisons and their TOSTs; per variant an interaction and its TOST
    assert report.family == 2 * (2 + 2) + 2 * 2
    text = report_path.read_text()
    assert "## Transfer between tasks" in text and "**changes**" in text and "**holds** within ±5" in text
    assert "| better → equivalent |" in text and "| same: better |" in text  # prenorm's verdict changes, gelu's not
    assert (tmp_path / "out" / "plots" / "transfer-copy-copy-800.png").is_file()
