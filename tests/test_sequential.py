"""zoo/stats/sequential.py: group-sequential boundaries against published values and an exact multivariate normal,
and the error rates, power and seeds of "seeds until decided" simulated through its functions (run with -s to see
the numbers)."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from scipy import stats as scipy_stats

from zoo.stats import sequential as sq
from zoo.stats.sequential import (
    SequentialPlan,
    boundaries,
    equivalence_levels,
    equivalent_at,
    nominal_levels,
    obrien_fleming_spending,
    one_sided_boundaries,
    pocock_spending,
    sequential_holm,
)
from zoo.stats.tost import tost_from
from zoo.stats.welch import welch_arrays

ALPHA = 0.05
PLAN = SequentialPlan(alpha=ALPHA, round_seeds=5, max_seeds=30)  # 6 looks at 5, 10, ..., 30 seeds per arm
SIX = PLAN.fractions(PLAN.looks)
UNEQUAL = [0.1, 0.35, 0.4, 0.8, 29 / 30, 1.0]  # an arm that skipped rounds, two close looks at the end


def mc_bound(rate: float, n: int) -> float:
    """alpha plus two Monte-Carlo standard errors of a rate estimated from n trials."""
    return rate + 2 * math.sqrt(rate * (1 - rate) / n)


# ---- the boundaries -------------------------------------------------------------------------------------------


def test_spending_functions_spend_nothing_at_0_and_alpha_at_1():
    for spending in (obrien_fleming_spending, pocock_spending):
        assert spending(0.0, ALPHA) == 0.0
        assert spending(1.0, ALPHA) == pytest.approx(ALPHA, abs=1e-12)
        values = [spending(t, ALPHA) for t in np.linspace(0.1, 1, 50)]
        assert np.all(np.diff(values) > 0)
    assert obrien_fleming_spending(0.2, 0.05) == pytest.approx(2 - 2 * scipy_stats.norm.cdf(1.959964 / math.sqrt(0.2)))


def test_one_look_is_the_fixed_sample_test():
    assert boundaries([1.0], ALPHA)[0] == pytest.approx(1.959964, abs=1e-6)
    assert one_sided_boundaries([1.0], ALPHA)[0] == pytest.approx(1.644854, abs=1e-6)
    assert nominal_levels([1.0], ALPHA)[0] == pytest.approx(ALPHA, abs=1e-9)


def test_five_equal_looks_match_the_published_lan_demets_boundaries():
    # Two-sided alpha 0.05, O'Brien-Fleming type, alpha/2 spent on each side: ld98 / R ldbounds `ldBounds(5)`
    # (Reboussin, DeMets, Kim & Lan 2000, Controlled Clinical Trials 21:190-207; the same as gsDesign's
    # gsDesign(k = 5, test.type = 2, alpha = 0.025, sfu = sfLDOF)), to the three decimals usually quoted.
    assert boundaries(np.arange(1, 6) / 5, ALPHA) == pytest.approx([4.877, 3.357, 2.680, 2.290, 2.031], abs=6e-4)
    # Pocock type (alpha ln(1 + (e - 1) t)), the same design's usually quoted values
    assert boundaries(np.arange(1, 6) / 5, ALPHA, pocock_spending) == pytest.approx(
        [2.438, 2.427, 2.410, 2.397, 2.386], abs=6e-4)


def test_one_sided_boundaries_match_rpact_to_seven_digits():
    # R rpact's own unit tests (github.com/cran/rpact, tests/testthat/test-f_design_group_sequential.R, versions
    # 3.1.0 (x6) and 3.5.1 (x6b)): getDesignGroupSequential(kMax = 3, alpha = 0.03, typeOfDesign = "asOF") with a
    # non-binding futility bound (which leaves the efficacy bound alone), and typeOfDesign = "asP" at alpha 0.025
    # with informationRates c(0.4, 0.7) (unequal looks, the last before the cap).
    thirds = [1 / 3, 2 / 3, 1.0]
    assert one_sided_boundaries(thirds, 0.03) == pytest.approx([3.5815302, 2.417863, 1.9175839], abs=1e-6)
    assert equivalence_levels(thirds, 0.03) == pytest.approx([0.00017079385, 0.0078059773, 0.027581894], rel=1e-5)
    assert one_sided_boundaries([0.4, 0.7], 0.025, pocock_spending) == pytest.approx([2.223875, 2.3050796], abs=1e-6)
    # SeqBounds.jl's README (github.com/PharmCat/SeqBounds.jl): one-sided alpha 0.05, four looks, on a coarse grid
    assert one_sided_boundaries([0.25, 0.5, 0.75, 1.0], 0.05) == pytest.approx(
        [3.74955, 2.53993, 2.01604, 1.72014], abs=1e-4)


@pytest.mark.parametrize("spending, fractions", [(obrien_fleming_spending, SIX), (obrien_fleming_spending, UNEQUAL),
                                                  (pocock_spending, UNEQUAL), (pocock_spending, [0.5, 1.0])],
                         ids=["obf-six-equal", "obf-unequal", "pocock-unequal", "pocock-two"])
def test_the_boundaries_spend_exactly_the_spending_function(spending, fractions):
    """Independent check: P(|Z_j| < c_j for all j <= k) from scipy's multivariate normal (Genz's algorithm, to
    1e-6) must be 1 − alpha(t_k), with corr(Z_i, Z_j) = sqrt(t_i / t_j); and one-sided likewise."""
    t = np.asarray(fractions)
    cov = np.sqrt(np.minimum.outer(t, t) / np.maximum.outer(t, t))
    two, one = boundaries(t, ALPHA, spending), one_sided_boundaries(t, ALPHA, spending)
    for k in range(1, len(t) + 1):
        mvn = scipy_stats.multivariate_normal(mean=np.zeros(k), cov=cov[:k, :k], abseps=1e-6, releps=0, seed=1)
        stayed = mvn.cdf(two[:k], lower_limit=-two[:k])
        assert 1 - stayed == pytest.approx(2 * spending(t[k - 1], ALPHA / 2), abs=5e-6)
        assert 1 - mvn.cdf(one[:k]) == pytest.approx(spending(t[k - 1], ALPHA), abs=5e-6)


def test_the_grid_is_fine_enough(monkeypatch):
    """Halving the grid's steps moves no boundary by more than 1e-5 (so the spent alpha is right to far below 1e-4)."""
    coarse = [sq._boundaries(tuple(f), ALPHA, obrien_fleming_spending, side) for f in (SIX, UNEQUAL)
              for side in (True, False)]
    monkeypatch.setattr(sq, "STEP", sq.STEP / 2)
    monkeypatch.setattr(sq, "KERNEL_STEPS", sq.KERNEL_STEPS * 2)
    fine = [sq._boundaries(tuple(f), ALPHA, obrien_fleming_spending, side) for f in (SIX, UNEQUAL)
            for side in (True, False)]
    for a, b in zip(coarse, fine):
        assert np.max(np.abs(a - b)) < 1e-5


def test_six_looks_take_well_under_a_tenth_of_a_second():
    best = math.inf
    for _ in range(3):
        start = time.perf_counter()
        sq._boundaries(tuple(SIX), ALPHA, obrien_fleming_spending, True)
        sq._boundaries(tuple(UNEQUAL), ALPHA, obrien_fleming_spending, False)
        best = min(best, time.perf_counter() - start)
    print(f"\nboundaries, 6 looks two-sided + 6 unequal looks one-sided: {best * 1000:.1f} ms")
    assert best < 0.1


def test_an_early_boundary_does_not_depend_on_later_looks():
    assert boundaries(SIX[:3], ALPHA) == pytest.approx(boundaries(SIX, ALPHA)[:3], abs=1e-12)


@pytest.mark.parametrize("bad", [[], [0.0, 1.0], [0.5, 0.5], [0.6, 0.3], [0.5, 1.2]])
def test_fractions_must_increase_within_0_and_1(bad):
    with pytest.raises(ValueError, match="fractions"):
        boundaries(bad, ALPHA)


def test_nominal_levels_rise_with_alpha_at_every_look():
    """Maurer & Bretz's condition for the sequential Holm shortcut, for both spending types."""
    for spending in (obrien_fleming_spending, pocock_spending):
        for fractions in (SIX, UNEQUAL):
            levels = np.array([nominal_levels(fractions, a, spending) for a in ALPHA / np.arange(12, 0, -1)])
            assert np.all(np.diff(levels, axis=0) >= 0) and np.all(np.diff(levels[:, 1:], axis=0) > 0)
    assert nominal_levels(SIX, ALPHA) == pytest.approx(2 * scipy_stats.norm.sf(boundaries(SIX, ALPHA)))


# ---- the plan and the equivalence decision --------------------------------------------------------------------


def test_the_plan_numbers_its_looks_from_one_and_ends_at_the_cap():
    assert PLAN.looks == 6 and [PLAN.seeds_at(k) for k in range(1, 7)] == [5, 10, 15, 20, 25, 30]
    assert PLAN.fractions(6) == pytest.approx(np.arange(1, 7) / 6)
    all_levels = nominal_levels(SIX, ALPHA)
    assert [PLAN.level_at(k) for k in range(1, 7)] == pytest.approx(all_levels, rel=1e-9)
    assert [PLAN.equivalence_level_at(k) for k in range(1, 7)] == pytest.approx(equivalence_levels(SIX), rel=1e-9)
    odd = SequentialPlan(ALPHA, round_seeds=4, max_seeds=30)
    assert odd.looks == 8 and odd.fractions(8)[-2:] == pytest.approx([28 / 30, 1.0])
    with pytest.raises(ValueError):
        PLAN.seeds_at(7)
    with pytest.raises(ValueError):
        SequentialPlan(ALPHA, round_seeds=10, max_seeds=5)
    print("\nlook  seeds  two-sided level  equivalence level (one-sided)")
    for k in range(1, 7):
        print(f"{k:>4}  {PLAN.seeds_at(k):>5}  {PLAN.level_at(k):>15.3g}  {PLAN.equivalence_level_at(k):>17.3g}")


def test_equivalent_at_is_the_tost_at_the_looks_level():
    assert equivalent_at(0.0, 0.1, 20.0, 0.5, 0.05) is True
    assert equivalent_at(0.0, 0.1, 20.0, 0.5, 1e-7) is False  # the (1 − 2e-7) interval is wider than ±0.5
    assert equivalent_at(0.0, math.nan, math.nan, 0.5, 0.05) is None
    for d, se, df in [(0.2, 0.15, 8.0), (-0.3, 0.1, 30.0), (0.45, 0.02, 5.0)]:
        for level in PLAN.equivalence_level_at(6), PLAN.equivalence_level_at(3):
            assert equivalent_at(d, se, df, 0.5, level) is tost_from(d, se, df, 0.5, alpha=level).equivalent


# ---- sequential Holm: its logic on hand-made p-values ---------------------------------------------------------


def test_sequential_holm_with_one_comparison_is_the_sequential_test():
    levels = nominal_levels(SIX, ALPHA)
    p = [0.5, levels[1] * 2, levels[2] / 2, 1e-9, math.nan, math.nan]  # below its look's level first at look 3
    assert sequential_holm([p], SIX, ALPHA) == [3]
    assert sequential_holm([[0.5] * 6], SIX, ALPHA) == [None]


def test_a_rejection_raises_the_others_levels_at_earlier_looks_too():
    two = [0.5, 1.0]
    half, full = nominal_levels(two, ALPHA / 2), nominal_levels(two, ALPHA)
    between = (half[0] + full[0]) / 2  # look 1: above alpha/2's first level, below alpha's
    p_a = [0.9, half[1] / 10]  # rejected at look 2 at alpha/2
    p_b = [between, math.nan]  # stopped after look 1; alpha/2 never rejects it
    assert sequential_holm([p_a, p_b], two, ALPHA) == [2, 2]  # B rejected at look 2, on its look-1 p
    assert sequential_holm([[0.9, 0.9], p_b], two, ALPHA) == [None, None]
    assert sequential_holm([p_a, [between]], two, ALPHA) == [2, 2]  # a row may end where the comparison stopped
    with pytest.raises(ValueError):
        sequential_holm([[0.1, 0.1, 0.1]], two, ALPHA)


# ---- simulations: seeds until decided, through the functions above --------------------------------------------


def p_by_look(baseline: np.ndarray, variant: np.ndarray) -> tuple[np.ndarray, ...]:
    """Welch difference, se, df and two-sided p at each look of PLAN (last axis: seeds), for many trials at once."""
    looks = [welch_arrays(baseline[..., :n], variant[..., :n]) for n in (PLAN.seeds_at(k) for k in range(1, 7))]
    return tuple(np.stack([look[i] for look in looks], axis=-1) for i in (0, 1, 2, 4))


def test_a_single_comparison_keeps_its_false_rejections_under_alpha():
    trials = 20000
    rng = np.random.default_rng(20260601)
    _, _, _, p = p_by_look(rng.normal(size=(trials, 30)), rng.normal(size=(trials, 30)))
    sequential = np.mean(np.any(p < nominal_levels(SIX, ALPHA), axis=1))
    naive = np.mean(np.any(p < ALPHA, axis=1))
    bound = mc_bound(ALPHA, trials)
    print(f"\n(a) null, 6 looks, {trials} trials: sequential {sequential:.4f}, naive alpha at every look {naive:.4f}, "
          f"bound {bound:.4f}")
    assert sequential <= bound
    assert naive > bound  # the check would catch looks tested at alpha


def test_a_false_equivalent_at_the_margin_stays_under_alpha():
    trials, margin = 4000, 1.0  # margin 1 seed sd; the true difference sits on it
    rng = np.random.default_rng(20260602)
    d, se, df, _ = p_by_look(rng.normal(size=(trials, 30)), rng.normal(margin, 1.0, size=(trials, 30)))
    levels = equivalence_levels(SIX, ALPHA)

    def first_equivalent(i: int, at_levels) -> int | None:
        return next((k for k in range(6) if equivalent_at(d[i, k], se[i, k], df[i, k], margin, at_levels[k])), None)

    sequential = naive = 0
    for i in range(trials):
        sequential += first_equivalent(i, levels) is not None
        naive += first_equivalent(i, [ALPHA] * 6) is not None
    sequential, naive = sequential / trials, naive / trials
    bound = mc_bound(ALPHA, trials)
    print(f"\n(b) difference = margin, {trials} trials: false 'equivalent' at any look {sequential:.4f}, "
          f"naive TOST at alpha every look {naive:.4f}, bound {bound:.4f}")
    assert sequential <= bound
    assert naive > bound


def test_ten_comparisons_against_one_baseline_keep_the_family_wise_error():
    trials, m = 4000, 10
    rng = np.random.default_rng(20260603)
    baseline = rng.normal(size=(trials, 1, 30))
    _, _, _, p = p_by_look(baseline, rng.normal(size=(trials, m, 30)))  # (trials, m, looks)
    sequential = np.mean([any(r is not None for r in sequential_holm(p[i], SIX, ALPHA)) for i in range(trials)])
    holm_at_every_look = np.mean(np.any(np.min(p, axis=1) * m < ALPHA, axis=1))  # Holm's first step at alpha
    bound = mc_bound(ALPHA, trials)
    print(f"\n(c) 10 comparisons v one baseline, global null, {trials} trials: family-wise error, sequential Holm "
          f"{sequential:.4f}, Holm at alpha at every look {holm_at_every_look:.4f}, bound {bound:.4f}")
    assert sequential <= bound
    assert holm_at_every_look > bound


def test_levels_freed_by_true_effects_keep_the_family_wise_error():
    """Partial null: 5 comparisons with large effects are rejected early and free their levels, which the 5 null
    ones are then tested at, earlier looks included. Rejecting a null one is the family-wise error."""
    trials, m = 4000, 10
    rng = np.random.default_rng(20260605)
    effects = np.r_[np.full(5, 1.5), np.zeros(5)][None, :, None]
    _, _, _, p = p_by_look(rng.normal(size=(trials, 1, 30)), rng.normal(size=(trials, m, 30)) + effects)
    rejected = [sequential_holm(p[i], SIX, ALPHA) for i in range(trials)]
    error = np.mean([any(r is not None for r in row[5:]) for row in rejected])
    recycled = np.mean([all(r is not None for r in row[:5]) for row in rejected])
    bonferroni = np.mean(np.any(p[:, 5:] < nominal_levels(SIX, ALPHA / m), axis=(1, 2)))
    bound = mc_bound(ALPHA, trials)
    print(f"\n(c') 5 large effects + 5 nulls, {trials} trials: all 5 effects found in {recycled:.3f}; family-wise "
          f"error {error:.4f} (sequential Bonferroni, no recycling: {bonferroni:.4f}), bound {bound:.4f}")
    assert error <= bound
    assert error > bonferroni  # the freed levels were used


@pytest.mark.parametrize("label, effect", [("2 se(5 seeds)", 2 * math.sqrt(2 / 5)),
                                           ("80% power at 30 seeds", 2.8 * math.sqrt(2 / 30))])
def test_sequential_seeds_save_seeds_at_little_cost_in_power(label, effect):
    trials = 4000
    rng = np.random.default_rng(20260604)
    d, _, _, p = p_by_look(rng.normal(size=(trials, 30)), rng.normal(effect, 1.0, size=(trials, 30)))
    crossed = p < nominal_levels(SIX, ALPHA)
    stopped = np.any(crossed, axis=1)
    first = np.argmax(crossed, axis=1)
    seeds = np.where(stopped, 5 * (first + 1), 30)
    power_sequential = np.mean(stopped & (d[np.arange(trials), first] > 0))
    power_fixed = np.mean((p[:, -1] < ALPHA) & (d[:, -1] > 0))
    at_look = np.bincount(np.where(stopped, first + 1, 0), minlength=7)[1:]
    print(f"\n(d) effect {effect:.3f} sd = {label}, {trials} trials: power sequential {power_sequential:.3f}, "
          f"fixed 30 seeds {power_fixed:.3f}; expected seeds per arm {seeds.mean():.1f} of 30 "
          f"({seeds.mean() / 30:.0%}); stopped at looks 1-6: {at_look.tolist()}")
    assert abs(power_sequential - power_fixed) <= 0.05
    assert seeds.mean() < 30
