"""zoo.stats.outcomes: known answers."""

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from zoo.stats.outcomes import (
    COMPLETE,
    DIVERGED,
    FAILED,
    STALLED,
    StallRule,
    classify_run,
    clopper_pearson,
    compare_failures,
    curve_area,
    first_reach,
    fisher_p,
    instability_rate,
    late_change,
    logrank,
    time_to_threshold,
)


def test_classify_run():
    floor = StallRule(floor=5.0)
    assert classify_run("complete", 3.0, [1, 2, 3], floor) == STALLED
    assert classify_run("complete", 30.0, [1, 20, 30], floor) == COMPLETE
    assert classify_run("complete", 0.5, [], StallRule(floor=1.0, higher_is_better=False)) == COMPLETE
    assert classify_run("complete", 30.0, [10, 30, 30, 29, 30], StallRule(patience=3)) == STALLED
    assert classify_run("complete", 31.0, [10, 30, 30, 29, 31], StallRule(patience=3)) == COMPLETE
    assert classify_run("complete", float("nan")) == DIVERGED
    assert classify_run("diverged", None) == DIVERGED and classify_run("failed", None) == FAILED
    assert classify_run("missing", None) == "missing"
    with pytest.raises(ValueError):
        StallRule(patience=0)


@pytest.mark.parametrize("count, n", [(0, 5), (1, 5), (2, 10), (5, 5), (7, 30)])
def test_clopper_pearson_matches_scipy(count, n):
    rate = clopper_pearson(count, n)
    reference = scipy_stats.binomtest(count, n).proportion_ci(confidence_level=0.95, method="exact")
    assert (rate.ci_low, rate.ci_high) == (pytest.approx(reference.low), pytest.approx(reference.high))


def test_instability_rate_counts_finished_runs_only():
    rate = instability_rate([COMPLETE, STALLED, DIVERGED, FAILED, "missing", COMPLETE])
    assert (rate.count, rate.n, rate.rate) == (2, 4, 0.5)


def test_compare_failures_fisher():
    result = compare_failures(0, 5, 4, 5)
    assert result.p_value == pytest.approx(scipy_stats.fisher_exact([[4, 1], [0, 5]]).pvalue)
    assert result.p_value == pytest.approx(10 / 210)  # P(X = 4) + P(X = 0) = (5 + 5) / C(10, 4)
    assert result.difference == pytest.approx(0.8)


def test_first_reach_censors():
    assert first_reach([100, 200, 300], [1, 5, 9], 5) == (200.0, True)
    assert first_reach([100, 200, 300], [1, 2, 3], 5) == (300.0, False)
    assert first_reach([100, 200], [3.0, 1.0], 2.0, higher_is_better=False) == (200.0, True)


def test_kaplan_meier_median_by_hand():
    # at risk 6, event at 100: S = 5/6; 200: 5 at risk -> 4/6; 300 censored; 400: 3 at risk -> 4/6 * 2/3 = 0.444
    survival = time_to_threshold([100, 200, 300, 400, 500, 600], [True, True, False, True, False, True])
    assert (survival.n, survival.reached, survival.median) == (6, 4, 400.0)
    assert survival.ci_low <= 400 <= survival.ci_high
    assert time_to_threshold([100, 200, 300], [True, False, False]).median == math.inf


def test_logrank_separates_fast_from_slow():
    fast = logrank([100, 200, 300, 400, 500], [1, 1, 1, 1, 1], [600, 700, 800, 900, 1000], [1, 1, 1, 0, 0])
    same = logrank([100, 200, 300], [1, 1, 1], [100, 200, 300], [1, 1, 1])
    assert fast < 0.01 and same == pytest.approx(1.0)
    assert logrank([100, 200], [0, 0], [300], [0]) == 1.0  # nobody reached it: one flat curve
    assert logrank([500, 500], [1, 1], [500, 500, 500], [1, 1, 1]) == 1.0  # all at one step: one curve
    assert math.isnan(logrank([], [], [100], [1]))


def test_logrank_by_hand():
    """Baseline reaches the threshold at steps 1 and 2, the variant at 3 and 4. At step 1, 4 runs at risk (2 each),
    one event: expected in the baseline 2/4, hypergeometric variance 2*2*1*3 / (4^2 * 3) = 1/4; at step 2, 3 at risk
    (1 baseline): expected 1/3, variance 1*2*1*2 / (3^2 * 2) = 2/9; later the baseline has none at risk. Observed
    minus expected 2 - 5/6 = 7/6, variance 17/36: chi-square (7/6)^2 / (17/36) = 49/17 on one degree of freedom."""
    from scipy.stats import chi2

    assert logrank([1, 2], [1, 1], [3, 4], [1, 1]) == pytest.approx(chi2.sf(49 / 17, 1), rel=1e-12)
    # a censored baseline run leaves the risk set without an event: (3 at risk at step 1, 1 of them the baseline's
    # uncensored run) expected 1/3, variance 1*2*1*2 / (9*2) = 2/9; then the baseline has none at risk
    assert logrank([1, 0.5], [1, 0], [3, 4], [1, 1]) == pytest.approx(chi2.sf((2 / 3) ** 2 / (2 / 9), 1), rel=1e-12)


def test_curve_area():
    assert curve_area([0, 10, 20], [0, 10, 10]) == pytest.approx(7.5)  # (50 + 100) / 20
    assert curve_area([20, 0, 10], [10, 0, 10]) == pytest.approx(7.5)  # order does not matter
    assert curve_area([0, 10, 20], [5, np.nan, 5]) == pytest.approx(5.0)
    assert math.isnan(curve_area([0], [1]))


def test_fishers_test_and_its_interval_known_answers():
    """R's fisher.test on the tea-tasting table [[3, 1], [1, 3]] (its documentation's example): p 0.4857,
    conditional MLE odds ratio 6.408. The interval's ends are checked against their defining equations with
    the noncentral hypergeometric distribution (R's documented 621.93 upper end is its root finder's
    tolerance: P(X <= 3) there is 0.0252, not 0.025)."""
    from scipy.stats import nchypergeom_fisher

    test = compare_failures(1, 4, 3, 4)  # variant 3 of 4 unstable, baseline 1 of 4
    assert test.p_value == pytest.approx(17 / 35) and test.odds_ratio == pytest.approx(6.408, abs=1e-3)
    assert nchypergeom_fisher.sf(2, 8, 4, 4, test.odds_low) == pytest.approx(0.025)  # P(X >= 3) at the low end
    assert nchypergeom_fisher.cdf(3, 8, 4, 4, test.odds_high) == pytest.approx(0.025)  # P(X <= 3) at the high end
    assert test.difference == 0.5


@pytest.mark.parametrize("alpha", [0.05, 0.01])
def test_the_test_rejects_exactly_when_its_interval_leaves_out_one(alpha):
    """Every table of up to 6 runs an arm: the decision and the interval never disagree (Newcombe's interval of
    the difference and scipy's minimum-likelihood Fisher p did in 1-6.5% of null tables)."""
    for n_b in range(1, 7):
        for n_v in range(1, 7):
            for b in range(n_b + 1):
                for v in range(n_v + 1):
                    test = compare_failures(b, n_b, v, n_v, alpha)
                    rejects = test.p_value < alpha
                    assert rejects == (test.odds_low > 1 or test.odds_high < 1), (b, n_b, v, n_v)


def test_fisher_p_is_twice_the_smaller_one_sided_p():
    table = [[4, 2], [0, 6]]
    less = scipy_stats.fisher_exact(table, alternative="less")[1]
    greater = scipy_stats.fisher_exact(table, alternative="greater")[1]
    assert fisher_p(table) == pytest.approx(min(1, 2 * min(less, greater)))
    assert fisher_p([[3, 3], [3, 3]]) == 1.0


def test_late_change_is_the_move_over_the_last_quarter():
    assert late_change([100, 200, 300, 400], [1.0, 2.0, 3.0, 5.0]) == 2.0  # 5 - value at step 300
    assert late_change([10, 20], [4.0, 4.5]) == 0.5
    assert math.isnan(late_change([10], [4.0]))


def test_fisher_power_and_the_detectable_rise_by_hand():
    """0/6 against k/6: Fisher rejects at 5/6 (p 0.015), not at 4/6 (p 0.061), so the power at rate r is
    P(k >= 5) = r^6 + 6 r^5 (1 - r), which first reaches 80% at r = 0.87."""
    from zoo.stats.outcomes import detectable_rise, fisher_power

    for r in (0.5, 0.87, 0.95):
        assert fisher_power(0.0, r, 6, 6) == pytest.approx(r**6 + 6 * r**5 * (1 - r))
    assert detectable_rise(0.0, 6, 6) == pytest.approx(0.87)
    assert math.isnan(detectable_rise(0.0, 2, 2))  # 2/2 v 0/2 gives p 0.33: nothing is detectable
    assert compare_failures(0, 6, 6, 6).detectable == pytest.approx(0.87)
