"""What a design could detect: power, minimum detectable effect and seeds needed.

`power_of` is the power of the report's own per-seed test, simulated through its own functions with fixed
random numbers (zoo/stats/welch.py: Welch, and with unequal arms the exact permutation check), because
the noncentral-t formula is optimistic at small n (3 v 3, sd 1, effect 2: 0.46 predicted, 0.37 measured).
`detectable` and `seeds_for` serve comparisons whose standard error is not a plain Welch one (corpus
metrics, with test-set variance) through the noncentral t of that standard error and Welch's df.

    power_of(effect, ...)               the chance this design had to detect `effect` (e.g. a
                                        published one) at alpha
    minimum_detectable_effect(...)      the smallest |effect| detected with `power` (default 80%):
                                        "no detectable difference" only rules out effects above it
    seeds_needed(...)                   the smallest equal number of seeds per arm reaching `power`

The standard deviations are seed-to-seed spreads (a report plugs in the observed ones, which are
themselves uncertain at 5 seeds: treat the mde as an order of magnitude, not a bound).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize
from scipy import stats as scipy_stats

from zoo.stats import ALPHA, POWER
from zoo.stats.welch import permutation_p, welch_arrays

MAX_SEEDS = 100
SIMULATIONS = 4000
POWER_SEED = 20261125


def _welch_df(sd_baseline: float, sd_variant: float, n_baseline: int, n_variant: int) -> float:
    v_b, v_v = sd_baseline ** 2 / n_baseline, sd_variant ** 2 / n_variant
    if v_b + v_v == 0:
        return math.inf
    return (v_b + v_v) ** 2 / (v_b ** 2 / (n_baseline - 1) + v_v ** 2 / (n_variant - 1))


def power_of(effect: float, sd_baseline: float, sd_variant: float, n_baseline: int, n_variant: int,
             alpha: float = ALPHA, simulations: int = SIMULATIONS) -> float:
    """Two-sided power of the report's per-seed test for a true difference `effect`, by simulation with fixed
    random numbers (the same draws for every effect, so power grows with the effect as it should)."""
    if min(n_baseline, n_variant) < 2 or any(math.isnan(x) for x in (effect, sd_baseline, sd_variant)):
        return math.nan
    if sd_baseline == sd_variant == 0:
        return 1.0 if effect != 0 else alpha
    rng = np.random.default_rng(POWER_SEED)
    baseline = sd_baseline * rng.standard_normal((simulations, n_baseline))
    variant = effect + sd_variant * rng.standard_normal((simulations, n_variant))
    p = welch_arrays(baseline, variant)[4]
    if n_baseline != n_variant:
        p = np.maximum(p, permutation_p(baseline, variant))
    return float(np.mean(p < alpha))


def minimum_detectable_effect(sd_baseline: float, sd_variant: float, n_baseline: int, n_variant: int,
                              alpha: float = ALPHA, power: float = POWER) -> float:
    """Smallest |difference| that Welch's test detects with probability `power` at `alpha` (0 when both
    sds are 0: any difference of constants is detected; NaN below 2 seeds per arm)."""
    if min(n_baseline, n_variant) < 2 or math.isnan(sd_baseline) or math.isnan(sd_variant):
        return math.nan
    se = math.sqrt(sd_baseline ** 2 / n_baseline + sd_variant ** 2 / n_variant)
    if se == 0:
        return 0.0
    def short(ncp: float) -> float:
        return power_of(ncp * se, sd_baseline, sd_variant, n_baseline, n_variant, alpha) - power
    high = 1.0
    while short(high) < 0:
        high *= 2
    return float(optimize.brentq(short, 0.0, high, xtol=1e-10)) * se


def seeds_needed(sd_baseline: float, sd_variant: float, effect: float, alpha: float = ALPHA, power: float = POWER,
                 max_seeds: int = MAX_SEEDS) -> int | None:
    """Smallest equal n per arm (2..max_seeds) whose power for `effect` reaches `power`; None if none does."""
    for n in range(2, max_seeds + 1):
        if power_of(effect, sd_baseline, sd_variant, n, n, alpha) >= power:
            return n
    return None


def detectable(se: float, df: float, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest |difference| a test with standard error `se` and `df` degrees of freedom detects with
    probability `power` (noncentral t, as above; df = inf: normal). Serves comparisons whose se is not
    a plain Welch one, such as corpus metrics with seed and sentence variation."""
    if math.isnan(se):
        return math.nan
    if se == 0:
        return 0.0
    df = df if df is not None and not math.isnan(df) else math.inf
    critical = scipy_stats.t.ppf(1 - alpha / 2, df)

    def short(ncp: float) -> float:
        if math.isinf(df):
            reached = scipy_stats.norm.sf(critical - ncp) + scipy_stats.norm.cdf(-critical - ncp)
        else:
            # scipy's nct.cdf returns NaN far in the lower tail (df 3.04, ncp 8: the wrong-side rejection
            # probability is below 1e-8 there), so a NaN tail counts as 0
            wrong_side = float(scipy_stats.nct.cdf(-critical, df, ncp))
            reached = scipy_stats.nct.sf(critical, df, ncp) + (0.0 if math.isnan(wrong_side) else wrong_side)
        return float(reached) - power

    high = 1.0
    while short(high) < 0:
        high *= 2
    return float(optimize.brentq(short, 0.0, high, xtol=1e-10)) * se


def seeds_for(effect: float, sd_baseline: float, sd_variant: float, extra_variance: float = 0.0,
              alpha: float = ALPHA, power: float = POWER, max_seeds: int = MAX_SEEDS) -> int | None:
    """Smallest equal n per arm (2..max_seeds) at which a true difference `effect` is detected with `power`
    at `alpha`, under the variance model the report's tests use: se(n)² = (sd_b² + sd_v²) / n + extra, with
    `extra` the test-set variance of a corpus metric (it does not shrink with seeds) and Welch's df. The
    same model as `detectable`, so 'seeds for ±X' and 'detectable Δ' never disagree. None if no n does."""
    if any(math.isnan(x) for x in (effect, sd_baseline, sd_variant, extra_variance)):
        return None
    for n in range(2, max_seeds + 1):
        seed_part = (sd_baseline ** 2 + sd_variant ** 2) / n
        se = math.sqrt(seed_part + extra_variance)
        if detectable(se, _welch_df(sd_baseline, sd_variant, n, n), alpha, power) <= abs(effect):
            return n
    return None
