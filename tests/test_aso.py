"""zoo.stats.aso against deepsig 1.2.8 (reference values computed with deepsig.aso(a, b, seed=...))."""

import math

import pytest

from zoo.stats.aso import ASO_MIN_SEEDS, eps_min

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


def test_deterministic_direction_and_minimum():
    a, b = [21.5, 22.0, 23.1, 21.9, 22.8], [20.1, 21.0, 19.5, 22.3, 20.8]
    assert eps_min(a, b) == eps_min(a, b)
    # lower is better: negating both sides swaps who is better
    assert eps_min([-x for x in a], [-x for x in b], higher_is_better=False) == eps_min(a, b)
    assert math.isnan(eps_min(a[:ASO_MIN_SEEDS - 1], b))


def test_live_deepsig_agrees():
    deepsig = pytest.importorskip("deepsig")
    a, b = [0.5, 1.2, 0.8, 1.5, 0.9, 1.1], [1.0, 0.7, 1.3, 0.6, 0.95]
    expected = deepsig.aso(a, b, seed=99, num_bootstrap_iterations=100, show_progress=False)
    assert eps_min(a, b, seed=99, iterations=100) == pytest.approx(float(expected), abs=1e-12)
