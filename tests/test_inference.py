"""Known answers and simulated error rates for zoo.stats (seeds, welch, family, tost) and zoo.stats.power."""

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from zoo.stats import BETTER, FEW, SAME, WORSE
from zoo.stats.family import adjust, benjamini_hochberg, holm
from zoo.stats.power import detectable, minimum_detectable_effect, power_of, seeds_needed
from zoo.stats.seeds import WELCH_PERMUTATION, compare_seeds, prob_better
from zoo.stats.tost import tost
from zoo.stats.welch import MIN_SEEDS, permutation_p, welch_arrays

ALPHA = 0.05
EXPERIMENTS = 4000  # null FPR estimate has sd ~0.0035, so "<= alpha + 0.02" is a ~6 sd margin


def bimodal(rng, shape, stall=0.3):
    """Stall-or-succeed: each seed independently ~4 (stalled) with probability `stall`, else ~25 BLEU."""
    return np.where(rng.random(shape) < stall, 4.0, 25.0) + rng.normal(0, 0.5, shape)


def test_vectorised_welch_agrees_with_scipy():
    rng = np.random.default_rng(0)
    a, b = rng.normal(0, 1, (5, 5)), rng.normal(0.5, 2, (5, 7))
    _, _, df, t, p = welch_arrays(a, b)
    for i in range(5):
        reference = scipy_stats.ttest_ind(b[i], a[i], equal_var=False)
        assert t[i] == pytest.approx(reference.statistic) and p[i] == pytest.approx(reference.pvalue)
        assert df[i] == pytest.approx(reference.df)


@pytest.mark.parametrize("shape", ["normal", "bimodal 30%", "bimodal 50%"])
def test_null_false_positive_rate_5_v_5(shape):
    rng = np.random.default_rng(1)
    draw = {"normal": lambda s: rng.normal(20, 1, s), "bimodal 30%": lambda s: bimodal(rng, s, 0.3),
            "bimodal 50%": lambda s: bimodal(rng, s, 0.5)}[shape]
    p = welch_arrays(draw((EXPERIMENTS, 5)), draw((EXPERIMENTS, 5)))[4]
    assert np.mean(np.nan_to_num(p, nan=1.0) < ALPHA) <= ALPHA + 0.02


@pytest.mark.parametrize("n_baseline, n_variant", [(3, 10), (5, 10)])
def test_unequal_arms_bimodal_need_the_permutation_check(n_baseline, n_variant):
    """Welch alone is anti-conservative here (~0.15 at 3 v 10); max(Welch, permutation) is not."""
    rng = np.random.default_rng(2)
    a, b = bimodal(rng, (600, n_baseline)), bimodal(rng, (600, n_variant))
    welch_p = np.nan_to_num(welch_arrays(a, b)[4], nan=1.0)
    checked = np.maximum(welch_p, np.concatenate([permutation_p(a[i:i + 100], b[i:i + 100])
                                                  for i in range(0, 600, 100)]))
    assert np.mean(checked < ALPHA) <= ALPHA + 0.02
    if n_baseline == 3:
        assert np.mean(welch_p < ALPHA) > ALPHA + 0.05  # the reason for the check


def test_compare_seeds_uses_the_permutation_check_for_unequal_arms():
    result = compare_seeds([20, 21, 19.5, 22, 20.5], [22, 23, 21.5, 22.5, 24, 25], higher_is_better=True)
    assert result.method == WELCH_PERMUTATION
    welch_p = scipy_stats.ttest_ind([22, 23, 21.5, 22.5, 24, 25], [20, 21, 19.5, 22, 20.5], equal_var=False).pvalue
    assert result.p_value >= welch_p


def test_simulated_power_matches_power_of():
    rng = np.random.default_rng(3)
    p = welch_arrays(rng.normal(0, 1, (EXPERIMENTS, 5)), rng.normal(1.5, 1, (EXPERIMENTS, 5)))[4]
    assert np.mean(p < ALPHA) == pytest.approx(power_of(1.5, 1, 1, 5, 5), abs=0.05)


def test_power_of_is_honest_at_three_seeds():
    """The calibration audit: the noncentral-t formula predicted 0.46 at 3 v 3 (sd 1, effect 2) where the test's
    measured power is 0.36; power_of simulates the report's own test."""
    rng = np.random.default_rng(4)
    p = welch_arrays(rng.normal(0, 1, (20000, 3)), rng.normal(2.0, 1, (20000, 3)))[4]
    assert power_of(2.0, 1, 1, 3, 3) == pytest.approx(np.mean(p < ALPHA), abs=0.02)


def test_mde_and_seeds_needed_invert_power():
    mde = minimum_detectable_effect(1.0, 2.0, 5, 7)
    assert power_of(mde, 1.0, 2.0, 5, 7) == pytest.approx(0.8, abs=2e-3)  # a simulated power moves in 1/4000 steps
    n = seeds_needed(1.0, 1.0, 1.5)
    assert power_of(1.5, 1, 1, n, n) >= 0.8 > power_of(1.5, 1, 1, n - 1, n - 1)
    assert seeds_needed(1.0, 1.0, 0.01, max_seeds=20) is None
    assert minimum_detectable_effect(0.0, 0.0, 5, 5) == 0.0


def test_compare_seeds_fields():
    base, var = [20, 21, 19.5, 22, 20.5], [22, 23, 21.5, 22.5, 24]
    result = compare_seeds(base, var, higher_is_better=True)
    reference = scipy_stats.ttest_ind(var, base, equal_var=False)
    assert result.difference == pytest.approx(2.0) and result.p_value == pytest.approx(reference.pvalue)
    assert result.df == pytest.approx(reference.df)
    low, high = reference.confidence_interval(0.95)
    assert (result.ci_low, result.ci_high) == (pytest.approx(low), pytest.approx(high))
    assert result.verdict == BETTER and result.n_baseline == result.n_variant == 5
    assert result.mde == pytest.approx(detectable(result.se, result.df))  # from its own standard error and df
    assert result.prob_better_ci[0] <= result.prob_better <= result.prob_better_ci[1]
    assert compare_seeds(base, var, higher_is_better=False).verdict == WORSE


def test_prob_better_hand_count():
    # pairs (variant, baseline): 3>1, 3>2, 3=3 (1/2), 2>1, 2=2 (1/2), 2<3 -> (3 + 2/2) / 6
    assert prob_better([1, 2, 3], [3, 2]) == pytest.approx(4 / 6)
    assert prob_better([1, 2, 3], [3, 2], higher_is_better=False) == pytest.approx(2 / 6)
    assert prob_better([1, 2, float("nan")], [5]) == 1.0


def test_degenerate_and_too_few_seeds():
    same = compare_seeds([7, 7, 7], [7, 7, 7], higher_is_better=True)
    assert (same.p_value, same.ci_low, same.ci_high, same.verdict) == (1.0, 7 - 7, 0.0, SAME)
    differ = compare_seeds([100, 100, 100], [120, 120, 120, float("nan")], higher_is_better=False)
    assert (differ.p_value, differ.ci_low, differ.ci_high, differ.verdict) == (0.0, 20.0, 20.0, WORSE)
    few = compare_seeds([1, 2], [3, 4, 5], higher_is_better=True)
    assert few.verdict == FEW and math.isnan(few.p_value) and math.isnan(few.ci_low) and math.isnan(few.mde)
    assert few.baseline_values == (1.0, 2.0) and MIN_SEEDS == 3


def test_holm_hand_example():
    # sorted 0.005, 0.01, 0.03, 0.04 (m = 4): 4*0.005, 3*0.01, max(0.03, 2*0.03), max(0.06, 1*0.04)
    assert holm([0.01, 0.04, math.nan, 0.03, 0.005]) == pytest.approx([0.03, 0.06, math.nan, 0.06, 0.02],
                                                                       nan_ok=True)
    assert holm([0.5, 0.9]) == [1.0, 1.0] and holm([]) == []
    # BH: m/rank * p, then running minimum from the top
    assert benjamini_hochberg([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.02, 0.04, 0.04, 0.02])


def test_adjust_recomputes_verdicts():
    strong = compare_seeds([20, 21, 19.5, 22, 20.5], [30, 31, 29.5, 32, 30.5], higher_is_better=True)
    weak = compare_seeds([20, 21, 19.5, 22, 20.5], [22, 23, 21.5, 22.5, 24], higher_is_better=True)
    few = compare_seeds([1], [2], higher_is_better=True)
    assert weak.verdict == BETTER and strong.p_value < weak.p_value / 100
    adjusted = adjust([weak] * 7 + [strong, few])  # m = 8: strong first, then 7 * p(weak) for every weak
    assert adjusted[0].p_adjusted == pytest.approx(7 * weak.p_value) and adjusted[0].verdict == SAME
    assert adjusted[7].verdict == BETTER and adjusted[-1] is few
    assert [r.p_adjusted for r in adjust([weak, strong], "benjamini-hochberg")] == pytest.approx(
        benjamini_hochberg([weak.p_value, strong.p_value]))


def test_tost_known_cases():
    rng = np.random.default_rng(4)
    assert tost(10 + rng.normal(0, 0.1, 5), 10 + rng.normal(0, 0.1, 5), margin=1.0).equivalent is True
    assert tost(rng.normal(0, 0.3, 5), 2.0 + rng.normal(0, 0.3, 5), margin=1.0).equivalent is False
    assert tost([1, 2], [1, 2, 3], margin=1.0).equivalent is None


@pytest.mark.parametrize("n, margin", [(5, 1.0), (10, 2.0)])
def test_tost_false_equivalence_at_the_margin(n, margin):
    """True difference exactly the margin: equivalence may be declared in at most alpha of experiments."""
    rng = np.random.default_rng(5)
    difference, se, df, _, _ = welch_arrays(rng.normal(0, 1, (EXPERIMENTS, n)), rng.normal(margin, 1, (EXPERIMENTS, n)))
    p = np.maximum(scipy_stats.t.sf((difference + margin) / se, df), scipy_stats.t.cdf((difference - margin) / se, df))
    assert np.mean(p < ALPHA) <= ALPHA + 0.02
    one = tost(rng.normal(0, 1, n), rng.normal(margin, 1, n), margin)  # the scalar function, same formula
    assert one.ci_low <= one.difference <= one.ci_high


def test_detectable_survives_scipys_nan_lower_tail():
    """df 3.04 (Welch with one arm nearly constant): scipy's nct.cdf is NaN at ncp 8, where the search
    for the detectable difference passes; the answer must still be the ncp reaching 80% power."""
    from scipy import stats as st

    from zoo.stats.power import detectable

    se, df = 1.438401703720846, 3.0445721048038075
    found = detectable(se, df)
    critical = st.t.ppf(0.975, df)
    assert st.nct.sf(critical, df, found / se) == pytest.approx(0.8, abs=1e-4)
