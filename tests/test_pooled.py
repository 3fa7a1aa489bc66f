"""zoo.stats.pooled: the pooled-variance many-to-one comparison and Dunnett's single-step and step-down
adjustments, against scipy's own Dunnett test, the classic two-sample pooled t, hand-worked steps and a
simulation of 12 variants against one baseline (family-wise error under the global null, power)."""

import math

import numpy as np
import pytest
from scipy import stats

from zoo.stats import BETTER, FEW, SAME
from zoo.stats.family import adjust
from zoo.stats.pooled import (
    PooledComparison,
    correlation,
    dunnett_single_step,
    dunnett_step_down,
    equal_spreads,
    many_to_one,
)
from zoo.stats.seeds import Difference
from zoo.stats.welch import welch_statistics

# scipy.stats.dunnett's documented example (its reference [2], Table 1): two samples and a control
SAMPLES = {"a": [3.8, 2.7, 4.0, 2.4], "b": [2.8, 3.4, 3.7, 2.2, 2.0]}
CONTROL = [2.9, 3.0, 2.5, 2.6, 3.2]
SCIPY_STATISTIC = [0.90874545, -0.05007117]
SCIPY_PVALUE = [0.58325114, 0.99819341]
QMC = 1e-3  # the multivariate t integral is quasi-Monte Carlo: scipy's and ours differ by its error


def test_scipy_dunnett_documented_example():
    comparisons = many_to_one(CONTROL, SAMPLES)
    assert [c.variant for c in comparisons] == ["a", "b"]
    assert comparisons[0].pooled_df == comparisons[0].df == 14 - 3  # observations − arms
    t = [c.difference / c.se for c in comparisons]
    np.testing.assert_allclose(t, SCIPY_STATISTIC, atol=1e-8)
    np.testing.assert_allclose(dunnett_single_step(comparisons), SCIPY_PVALUE, atol=QMC)
    assert comparisons[0].method == "pooled t over 3 arms (Dunnett many-to-one)"
    assert isinstance(comparisons[0], Difference) and all(c.term == 0 for c in comparisons)


@pytest.mark.parametrize("sizes", [(6, 4, 5, 7, 3), (5, 5, 5, 5, 5, 5, 5, 5, 5, 5)])
def test_scipy_dunnett_unbalanced_and_many(sizes):
    """Where the correlations matter: unbalanced arms and small p-values."""
    rng = np.random.default_rng(sum(sizes))
    control = rng.normal(0, 1, sizes[0])
    samples = [rng.normal(shift, 1, n) for shift, n in zip(np.linspace(0.2, 2.0, len(sizes) - 1), sizes[1:])]
    comparisons = many_to_one(control, {str(i): s for i, s in enumerate(samples)})
    scipy_result = stats.dunnett(*samples, control=control, random_state=1)
    np.testing.assert_allclose([c.difference / c.se for c in comparisons], scipy_result.statistic, rtol=1e-10)
    assert min(scipy_result.pvalue) < 0.05 < max(scipy_result.pvalue)
    np.testing.assert_allclose(dunnett_single_step(comparisons), scipy_result.pvalue, atol=QMC)


def test_one_variant_is_the_classic_pooled_t():
    baseline, variant = [10.1, 9.7, 10.4, 10.0, 9.9], [10.6, 10.2, 11.0, 10.5, 10.3, 10.9]
    (c,) = many_to_one(baseline, {"v": variant}, higher_is_better=True)
    classic = stats.ttest_ind(variant, baseline, equal_var=True)
    assert c.difference / c.se == pytest.approx(classic.statistic, rel=1e-12)
    assert c.p_value == pytest.approx(classic.pvalue, rel=1e-10)
    assert c.df == classic.df == 9
    low, high = classic.confidence_interval(0.95)
    assert (c.ci_low, c.ci_high) == (pytest.approx(low, rel=1e-10), pytest.approx(high, rel=1e-10))
    assert c.pooled_sd == pytest.approx(math.sqrt(((len(baseline) - 1) * np.var(baseline, ddof=1)
                                                   + (len(variant) - 1) * np.var(variant, ddof=1)) / 9))
    assert c.verdict == BETTER and dunnett_step_down([c]) == dunnett_single_step([c]) == [c.p_value]
    (lower,) = many_to_one(baseline, {"v": variant}, higher_is_better=False)
    assert lower.verdict == "worse"


def test_the_step_down_starts_at_the_single_step_and_never_exceeds_it():
    rng = np.random.default_rng(7)
    baseline = rng.normal(0, 1, 6)
    variants = {str(j): rng.normal(shift, 1, 5) for j, shift in enumerate([0.0, 0.5, 1.0, 1.4, 1.5, 1.6, 2.5])}
    comparisons = many_to_one(baseline, variants)
    single, down = dunnett_single_step(comparisons), dunnett_step_down(comparisons)
    t = np.abs([c.difference / c.se for c in comparisons])
    top = int(np.argmax(t))
    assert down[top] == single[top]
    assert all(d <= s + QMC for d, s in zip(down, single))
    assert sum(d < s - 0.01 for d, s in zip(down, single)) >= 3  # it does gain on the later steps
    by_t = [down[i] for i in np.argsort(-t)]
    assert by_t == sorted(by_t)  # a smaller |t| never gets a smaller adjusted p
    raw = [c.p_value for c in comparisons]
    assert all(d >= p for d, p in zip(down, raw))


def test_two_variants_by_hand():
    """k = 2: step 1 is the max of two |T| (correlation 1/2 at equal n); step 2, one comparison left, is
    the ordinary pooled t-test — unless step 1's p is larger (the running max)."""
    baseline = [0.0, 0.3, -0.2, 0.1, -0.1]
    far, near = [0.5, 0.8, 0.2, 0.6, 0.4], [0.3, 0.5, 0.0, 0.4, 0.1]  # t 3.65 and 1.82, 12 df
    comparisons = many_to_one(baseline, {"far": far, "near": near})
    np.testing.assert_allclose(correlation(comparisons), [[1, 0.5], [0.5, 1]], rtol=1e-12)
    down = dunnett_step_down(comparisons)
    t_far, t_near = (c.difference / c.se for c in comparisons)
    mvt = stats.multivariate_t(shape=[[1, 0.5], [0.5, 1]], df=12)
    first = 1 - mvt.cdf([t_far] * 2, lower_limit=[-t_far] * 2, maxpts=200_000, random_state=3)
    assert down[0] == pytest.approx(first, abs=QMC)
    assert down[1] == pytest.approx(2 * stats.t.sf(t_near, 12), rel=1e-12) == comparisons[1].p_value
    assert down[1] > down[0] > comparisons[0].p_value
    assert dunnett_single_step(comparisons)[1] > down[1] + 0.05  # the single step pays for two at step 2
    twins = many_to_one(baseline, {"one": near, "two": [x + 1e-9 for x in near]})
    tied = dunnett_step_down(twins)
    assert tied[1] == tied[0] > twins[1].p_value  # step 2's own p is smaller: the running max keeps step 1's


def test_family_adjust_sets_the_dunnett_verdicts():
    baseline = [0.0, 0.3, -0.2, 0.1, -0.1]
    comparisons = many_to_one(baseline, {"far": [0.5, 0.8, 0.2, 0.6, 0.4], "same": [0.1, -0.2, 0.2, 0.0, -0.1]})
    adjusted = adjust(comparisons, adjusted=dunnett_step_down(comparisons))
    assert [type(c) for c in adjusted] == [PooledComparison] * 2
    assert [c.verdict for c in adjusted] == [BETTER, SAME]
    assert adjusted[0].p_adjusted > adjusted[0].p_value and adjusted[1].p_adjusted == adjusted[1].p_value


def test_a_tiny_p_stays_within_its_exact_bounds():
    """The integral's absolute error (~1e-6) once put the max-|t| p of a raw p of 4e-8 at 7e-10: it is
    kept between the comparison's own p and Bonferroni's."""
    comparisons = many_to_one([0.0, 0.3, -0.2, 0.1, -0.1], {"far": [1.5, 1.8, 1.2, 1.6, 1.4],
                                                           "same": [0.1, -0.2, 0.2, 0.0, -0.1]})
    raw = comparisons[0].p_value
    assert raw < 1e-7
    for adjusted in (dunnett_step_down(comparisons)[0], dunnett_single_step(comparisons)[0]):
        assert raw <= adjusted <= 2 * raw


def test_terms_and_the_correlation():
    rng = np.random.default_rng(3)
    baseline, variants = rng.normal(0, 1, 5), {str(j): rng.normal(0, 1, 4 + j) for j in range(4)}
    terms = {"0": 0.0, "1": 0.2, "2": 0.5}
    comparisons = many_to_one(baseline, variants, terms=terms)
    s2 = comparisons[0].pooled_sd ** 2
    arms = [baseline, *variants.values()]
    assert s2 == pytest.approx(sum(((a - a.mean()) ** 2).sum() for a in arms) / sum(len(a) - 1 for a in arms))
    for c in comparisons:
        assert c.term == terms.get(c.variant, 0.0)
        assert c.se == pytest.approx(math.sqrt(s2 * (1 / 5 + 1 / c.n_variant) + c.term))
        assert c.p_value == pytest.approx(2 * stats.t.sf(abs(c.difference) / c.se, c.pooled_df))
    se = np.array([c.se for c in comparisons])
    expected = s2 / 5 / np.outer(se, se)
    np.fill_diagonal(expected, 1)
    np.testing.assert_allclose(correlation(comparisons), expected, rtol=1e-12)
    with pytest.raises(ValueError, match="unknown"):
        many_to_one(baseline, variants, terms={"x": 0.1})
    with pytest.raises(ValueError, match=">= 0"):
        many_to_one(baseline, variants, terms={"0": -0.1})


def test_too_few_seeds_stay_out_of_the_pool():
    baseline, ok, few = [0.0, 0.3, -0.2, 0.1], [1.0, 1.2, 0.9, 1.1], [5.0, float("nan"), 9.0]
    comparisons = many_to_one(baseline, {"ok": ok, "few": few})
    assert comparisons[1].verdict == FEW and math.isnan(comparisons[1].p_value)
    assert comparisons[0].pooled_df == 6  # the 2-seed arm's wild variance is not pooled
    assert math.isnan(dunnett_step_down(comparisons)[1]) and not math.isnan(dunnett_step_down(comparisons)[0])
    assert dunnett_step_down(comparisons)[0] == comparisons[0].p_value  # one comparison tested
    assert all(c.verdict == FEW for c in many_to_one([1.0, 2.0], {"ok": ok}))
    assert all(math.isnan(p) for p in dunnett_single_step(many_to_one([1.0, 2.0], {"ok": ok})))


def test_constant_arms_are_exact():
    same, higher = many_to_one([3.0] * 4, {"same": [3.0] * 4, "higher": [4.0] * 4})
    assert (same.se, same.p_value, higher.p_value, higher.ci_low, higher.ci_high) == (0, 1.0, 0.0, 1.0, 1.0)
    assert dunnett_step_down([same, higher]) == [1.0, 0.0]


def test_comparisons_from_two_pools_are_refused():
    one = many_to_one([0.0, 0.3, -0.2, 0.1], {"a": [1.0, 1.2, 0.9, 1.1]})
    two = many_to_one([0.0, 0.5, -0.4, 0.1], {"b": [1.0, 1.2, 0.9, 1.1]})
    with pytest.raises(ValueError, match="different pools"):
        dunnett_step_down(one + two)


def test_equal_spreads_is_brown_forsythes_test():
    """Known answers: scipy's Levene test centred on the median (Brown & Forsythe 1974), on the arms with 2 seeds or
    more; undefined (NaN) with fewer than two such arms or no spread in any."""
    arms = [[1.0, 2.0, 3.0, 4.0], [2.0, 2.5, 3.0, 2.7], [0.0, 5.0, 9.0, 1.0], [7.0]]
    assert equal_spreads(arms) == pytest.approx(stats.levene(*arms[:3], center="median").pvalue, rel=1e-12)
    assert stats.levene(*arms[:3], center="mean").pvalue != pytest.approx(equal_spreads(arms), rel=1e-3)  # not Levene's
    assert math.isnan(equal_spreads([[1.0, 2.0], [3.0]])) and math.isnan(equal_spreads([[1.0, 1.0], [2.0, 2.0]]))
    wide = [[0.0, 10.0, -10.0, 5.0, -5.0]] + [[0.0, 0.1, -0.1, 0.05, -0.05]] * 5
    assert equal_spreads(wide) < 0.05  # a hundredfold spread is seen, even at 5 seeds


def test_the_rule_on_five_seed_sample_variances_fails_by_chance_alone():
    """Why no ratio rule on sample variances (the module docstring, and experiments/resolved.toml's header): 13 arms
    of ONE variance, 5 seeds each, have their largest sample variance at most 4 times the smallest in 1.4% of draws
    (100,000 draws; here 4,000, binomial sd 0.2%)."""
    rng = np.random.default_rng(11)
    variances = rng.normal(0, 1, (4000, 13, 5)).var(-1, ddof=1)
    passed = np.mean(variances.max(-1) <= 4 * variances.min(-1))
    assert 0.008 < passed < 0.021


# The simulation: 12 variants v one baseline, 5 seeds each. Seed variances 1..4 in the variants (ratio 4, the
# rule's limit), 2.25 in the baseline (the middle of the spread; with the baseline at the top the family-wise
# error is above alpha: module docstring); a test-set term per comparison, 0..0.4, drawn once per comparison
# and added to all of that variant's seeds (seeds do not shrink it).
M, N = 12, 5
VARIANCES = np.linspace(1, 4, M)
BASELINE_VARIANCE = 2.25
TERMS = np.linspace(0, 0.4, M)
LABELS = [f"v{j}" for j in range(M)]
MAXPTS = 300  # ~2e-3 quasi-Monte Carlo sd on a p near 0.05 over 12 comparisons: enough for a decision


def simulate(experiments, effects, seed):
    """Per experiment: the step-down's and Welch + Bonferroni's rejections at 0.05 (experiments, M)."""
    rng = np.random.default_rng(seed)
    se_true = np.sqrt(BASELINE_VARIANCE / N + VARIANCES / N + TERMS)
    shift = np.where(np.arange(M) < effects, 2 * se_true, 0.0)
    baseline = rng.normal(0, math.sqrt(BASELINE_VARIANCE), (experiments, N))
    variants = (rng.normal(0, 1, (experiments, M, N)) * np.sqrt(VARIANCES)[:, None] + shift[:, None]
                + rng.normal(0, 1, (experiments, M, 1)) * np.sqrt(TERMS)[:, None])
    d, se, df, _ = welch_statistics(baseline[:, None, :], variants)  # Welch + the term, as corpus.py
    welch = np.minimum(1, M * 2 * stats.t.sf(np.abs(d) / np.sqrt(se ** 2 + TERMS), df)) < 0.05
    pooled = np.zeros((experiments, M), bool)
    for e in range(experiments):
        comparisons = many_to_one(baseline[e], dict(zip(LABELS, variants[e])), terms=dict(zip(LABELS, TERMS)))
        raw = [c.p_value for c in comparisons]
        if min(raw) >= 0.05:  # an adjusted p is never below its raw p (checked below): nothing can be rejected
            continue
        down = dunnett_step_down(comparisons, maxpts=MAXPTS)
        assert all(a >= p for a, p in zip(down, raw))
        pooled[e] = np.array(down) < 0.05
    return pooled, welch


def test_simulated_family_wise_error_and_power():
    """Global null, 1,000 experiments: the step-down's family-wise error rate is at most 0.05 + 2.2
    binomial sd (sd 0.007; here 0.057, and 0.048 over 4,000: module docstring). Power, 6 variants at
    d = 2 se (the true se of the difference) and 6 at 0, 200 experiments: the step-down beats Welch +
    Bonferroni on the same draws and keeps the family-wise error of the 6 nulls."""
    spread = np.append(VARIANCES, BASELINE_VARIANCE)
    assert spread.max() <= 4 * spread.min()  # true variances within a fourfold spread
    pooled, welch = simulate(1000, effects=0, seed=1)
    fwer = pooled.any(1).mean()
    assert fwer <= 0.065
    assert fwer >= 0.02  # not the Welch + Bonferroni floor: the pooled test spends its alpha
    pooled, welch = simulate(200, effects=6, seed=2)
    power, power_welch = pooled[:, :6].mean(), welch[:, :6].mean()
    assert power > power_welch + 0.04
    assert pooled[:, 6:].any(1).mean() <= 0.08  # 6 nulls, 200 experiments: binomial sd 0.015
    print(f"FWER {fwer:.3f}; power {power:.3f} v Welch + Bonferroni {power_welch:.3f}")
