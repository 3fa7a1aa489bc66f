"""Transfer of an effect between two tasks (budgets): the interaction test, its calibration and power."""

from __future__ import annotations

import math

import numpy as np
import pytest

from zoo.report.transfer import (
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
