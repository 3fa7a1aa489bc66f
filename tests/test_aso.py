"""zoo.stats.aso against deepsig 1.2.8 (reference values computed with deepsig.aso(a, b, seed=...))."""

import math

import numpy as np
import pytest

from zoo.stats.aso import ASO_MIN_SEEDS, eps_min, violation_ratio

REFERENCE = [  # (variant, baseline, seed, deepsig.aso(variant, baseline, seed=seed, show_progress=False))
    ([21.5, 22.0, 23.1, 21.9, 22.8], [20.1, 21.0, 19.5, 22.3, 20.8], 1234, 0.04626796994627536),
    ([20.1, 21.0, 19.5, 22.3, 20.8], [21.5, 22.0, 23.1, 21.9, 22.8], 1234, 1.0),
    ([0.5, 1.2, 0.8, 1.5, 0.9, 1.1], [1.0, 0.7, 1.3, 0.6, 0.95], 1234, 0.6675682249829127),
    ([24.0, 24.5, 23.9, 24.2, 24.8], [4.1, 25.2, 24.8, 25.5, 3.9], 7, 0.4441485730273836),
    ([1, 1, 1, 1, 1], [1, 1, 1, 1, 1], 1234, 0.5),
]


@pytest.mark.parametrize("variant, baseline, seed, expected", REFERENCE)
def test_matches_deepsig(variant, baseline, seed, expected):
    assert eps_min(variant, baseline, seed=seed) == pytest.approx(expected, abs=1e-12)


def test_a_violation_ratio_worked_by_hand():
    """better = [0, 3] against worse = [1, 2]: on the grid t = 0.005, ..., 0.995 the better side's quantile is
    0 up to t = 0.5 (100 points, below the other's 1: squared gap 1) and 3 after it (99 points, above the
    other's 2: squared gap 1). The distance counts all 199 points; the violation leaves out the first grid
    point, as deepsig does: 99 / 199."""
    assert violation_ratio(np.array([0.0, 3.0]), np.array([1.0, 2.0])) == pytest.approx(99 / 199)
    assert violation_ratio(np.array([10.0, 11.0]), np.array([1.0, 2.0])) == 0.0  # better everywhere
    assert violation_ratio(np.array([1.0, 2.0]), np.array([1.0, 2.0])) == 0.5  # the same distribution


def test_the_suggested_threshold_fires_without_a_difference():
    """Why the report gives ε_min no verdict word (zoo/stats/aso.py): 400 experiments of 5 v 5 seeds drawn
    from one distribution put ε_min below Ulmer et al.'s 0.2 in about 8% of them."""
    rng = np.random.default_rng(5)
    rate = np.mean([eps_min(rng.normal(0, 1, 5).tolist(), rng.normal(0, 1, 5).tolist(), iterations=300) < 0.2
                    for _ in range(400)])
    assert 0.05 < rate < 0.12


def test_direction_and_minimum():
    a, b = [21.5, 22.0, 23.1, 21.9, 22.8], [20.1, 21.0, 19.5, 22.3, 20.8]
    # lower is better: negating both sides swaps who is better
    assert eps_min([-x for x in a], [-x for x in b], higher_is_better=False) == eps_min(a, b)
    assert math.isnan(eps_min(a[:ASO_MIN_SEEDS - 1], b))


def test_the_bootstrap_draws_are_deepsigs_whatever_came_before():
    """The cached uniforms are deepsig's draws (np.random.seed(seed + i + 1), then a's, then b's), the same for a
    second comparison of the same arm sizes, and left unchanged by it."""
    from zoo.stats.aso import _uniforms

    draws_a, draws_b = _uniforms(20, 5, 3, 1234)
    for i in (0, 7, 19):
        np.random.seed(1234 + i + 1)
        assert np.array_equal(draws_a[i], np.random.uniform(0, 1, 5)) and np.array_equal(draws_b[i],
                                                                                        np.random.uniform(0, 1, 3))
    before = eps_min([1, 2, 3, 4, 5.5], [1.5, 2, 2.5, 3, 4])
    assert eps_min([1, 2, 3, 4, 5.5], [1.5, 2, 2.5, 3, 4]) == before
    with pytest.raises(ValueError):
        _uniforms(1000, 5, 5, 1234)[0][0, 0] = 0.5  # read-only: no caller can change another's draws
