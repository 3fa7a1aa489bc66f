"""Many variants against one baseline with the seed variance pooled over every arm (Dunnett 1955).

Why
---
Comparing each variant with the baseline by Welch's test on its own two arms leaves about 8 df at 5 v 5
seeds, so after a correction over 9-13 comparisons the critical t is huge (4.26 at alpha/18 with 8 df,
3.15 with 48). When the arms share one seed variance, it can be estimated from ALL arms at once: about
40-60 df; and the comparisons' joint distribution is known (they share the baseline's mean), so the
family can be corrected exactly rather than by Bonferroni's or Holm's inequality. That is Dunnett's
many-to-one setting.

The numbers (arm 0 the baseline, arms j = 1..m the variants, n_a seeds in arm a, τ_j an optional extra
variance of comparison j's difference that seeds do not shrink, e.g. a corpus metric's test-set term
`sentence_part` of zoo/stats/corpus.py):

    s²       Σ_a Σ_i (y_ai − ȳ_a)² / ν, the pooled seed variance over every arm, baseline included
    ν        Σ_a (n_a − 1), its degrees of freedom
    d_j      ȳ_j − ȳ_0
    se_j     sqrt(s² (1/n_0 + 1/n_j) + τ_j)
    t_j      d_j / se_j; p_j = 2 P(T_ν > |t_j|); interval d_j ± t(1 − alpha/2, ν) se_j
    ρ_ij     corr(t_i, t_j) = (s²/n_0) / (se_i se_j), i ≠ j: the shared baseline mean (with τ = 0 it is
             sqrt(n_i n_j / ((n_0 + n_i)(n_0 + n_j))), free of σ², Dunnett 1955)

τ_j is treated as known and its comparisons as independent of each other, as corpus.py does: t_ν is then
a little heavier-tailed than the true law of t_j (only part of se_j is estimated), so p is conservative.
A test-set term the comparisons share (the baseline's own sentence noise) would raise ρ_ij; leaving it
out only lowers the correlations, which makes the max-|t| p-values larger (Šidák 1968: the probability
of a centred rectangle is non-decreasing in correlations of this product form, ρ_ij = λ_i λ_j).

Adjusting for the family (both adjust the p of the two-sided test; `family.adjust(comparisons,
adjusted=dunnett_step_down(comparisons))` sets p_adjusted and the verdicts):

    single step  p̃_j = 1 − P(max_i |T_i| < |t_j|), T ~ multivariate t(ν, ρ)           (Dunnett 1955)
    step-down    order |t_(1)| ≥ … ≥ |t_(m)|; p̃_(k) = max_{l ≤ k} 1 − P(max_{i ≥ l} |T_(i)| < |t_(l)|),
                 the max over the comparisons not yet rejected     (Dunnett & Tamhane 1991, unbalanced)

The probabilities are scipy's quasi-Monte Carlo multivariate t integral (Genz & Bretz), seeded so a report
reproduces; with its default maxpts (1000 per dimension) a p near 0.06 over 12 comparisons varies by
about 1e-4 between seeds. One comparison left: the ordinary t p.

When pooling is allowed
-----------------------
The pooled t assumes one seed variance in every arm. If the baseline's is larger than the pool's, every
comparison's se is understated together, so the decision to pool must be declared before the data.
`equal_spreads` gives the test an experiment declares (`[analysis] pool_alpha`): Brown & Forsythe's (1974)
test of equal variances (Levene's, centred on the median, robust to skewed seed scores); pool unless it
rejects. A ratio rule of thumb on the sample variances (largest at most 4 times the smallest: Moore, McCabe &
Craig; Dean & Voss 1999 use 3) is no rule at 5 seeds an arm: 13 arms of ONE variance pass it in 1.4% of
draws (tests/test_pooled.py). The test has the opposite fault: at 5 seeds an arm it hardly ever rejects,
and pooled 99% of simulated 14-arm experiments at a fourfold spread (benchmarks/calibration.txt).

The rule does not say which arm is the noisy one, and the baseline's variance sits in every comparison:
simulated, 12 variants v 1 baseline, 5 seeds each, variant seed variances 1..4 (ratio 4, the rule's
limit), test-set terms 0..0.4, global null, alpha 0.05, 4,000 experiments a row (binomial sd 0.0035):

    baseline seed variance              step-down family-wise error   Welch + term, Bonferroni (= Holm)
    2.25, every arm 2.25 (no spread)    0.045                         0.011
    1     (the spread's bottom)         0.024                         0.010
    2.25  (its middle)                  0.048                         0.013
    4     (its top)                     0.082                         0.014
    4, baseline 10 seeds                0.061                         0.019
    4, baseline 17 seeds (5 sqrt(12))   0.054                         0.030

So pool only when the baseline is not the noisiest arm, and give it more seeds: Dunnett (1955) puts
n_0 ≈ n sqrt(m) for power as well. Power in the middle row's setting with 6 of the 12 variants shifted by
2 true standard errors of their difference (4,000 experiments): 0.13 of the shifted variants found,
against 0.056 by Welch + Bonferroni and 0.062 by Welch + Holm; the 6 unshifted ones' family-wise error 0.045.
Shifted by 3 (1,500 experiments): 0.46 against 0.22 and 0.25.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

from zoo.stats import ALPHA, FEW
from zoo.stats.seeds import Difference, verdict
from zoo.stats.welch import MIN_SEEDS, SEED, clean

MAXPTS = None  # multivariate t integration points: None is scipy's 1000 per dimension


def pooled_method(arms: int) -> str:
    """The `method` a pooled comparison reports, naming how many arms (baseline included) were pooled."""
    return f"pooled t over {arms} arms (Dunnett many-to-one)"


def equal_spreads(arms: Sequence[Sequence[float]]) -> float:
    """Brown-Forsythe's p for equal variances across `arms` (those with 2 seeds or more); NaN where it is undefined
    (fewer than 2 such arms, or every arm constant: nothing to tell apart). Pool unless it is below the declared
    level (module docstring)."""
    arms = [list(a) for a in arms if len(a) >= 2]
    if len(arms) < 2 or not any(max(a) > min(a) for a in arms):
        return math.nan
    return float(scipy_stats.levene(*arms, center="median").pvalue)


@dataclass(frozen=True)
class PooledComparison(Difference):
    """One variant against the baseline with the seed variance pooled over all arms (module docstring).
    df = pooled_df; se includes `term`; p_value is the unadjusted pooled t p."""

    variant: str
    baseline_values: tuple[float, ...]
    variant_values: tuple[float, ...]
    pooled_sd: float  # s, over every arm
    pooled_df: float  # ν = Σ (n_a − 1)
    term: float  # τ: variance of the difference that seeds do not shrink (0: per-seed metric)
    method: str


def many_to_one(baseline: Sequence[float], variants: Mapping[str, Sequence[float]], *,
                terms: Mapping[str, float] | None = None, higher_is_better: bool = True, alpha: float = ALPHA,
                min_seeds: int = MIN_SEEDS) -> list[PooledComparison]:
    """Every variant against the baseline with the seed variance pooled over all arms (NaN dropped), in
    the order of `variants`. An arm with fewer than `min_seeds` seeds stays out of the pool and gets the
    verdict 'not enough seeds' (every one does if the baseline has too few). Pooling is the caller's
    decision (`equal_spreads`); this does not refuse."""
    terms = dict(terms or {})
    unknown = set(terms) - set(variants)
    if unknown:
        raise ValueError(f"many_to_one: terms for unknown variants {sorted(unknown)}")
    if any(not (t >= 0) for t in terms.values()):
        raise ValueError(f"many_to_one: terms must be variances >= 0, got {terms}")
    b = clean(baseline)
    arms = {label: clean(values) for label, values in variants.items()}
    enough = len(b) >= max(min_seeds, 2)
    pooled = [a for a in arms.values() if len(a) >= max(min_seeds, 2)] if enough else []
    df = float(sum(len(a) - 1 for a in [b, *pooled])) if enough else math.nan
    ss = sum(float(((a - a.mean()) ** 2).sum()) for a in [b, *pooled]) if enough else math.nan
    s2 = ss / df if enough and df > 0 else math.nan
    quantile = float(scipy_stats.t.ppf(1 - alpha / 2, df)) if enough else math.nan
    method = pooled_method(1 + len(pooled))
    out = []
    for label, v in arms.items():
        n_b, n_v, term = len(b), len(v), float(terms.get(label, 0.0))
        mean_b = float(b.mean()) if n_b else math.nan
        mean_v = float(v.mean()) if n_v else math.nan
        d = mean_v - mean_b
        common = {"higher_is_better": higher_is_better, "alpha": alpha, "n_baseline": n_b, "n_variant": n_v,
                  "baseline_mean": mean_b, "variant_mean": mean_v, "difference": d, "variant": label,
                  "baseline_values": tuple(b.tolist()), "variant_values": tuple(v.tolist()),
                  "pooled_sd": math.sqrt(s2) if enough else math.nan, "pooled_df": df, "term": term,
                  "method": method}
        if not (enough and n_v >= max(min_seeds, 2)):
            nan = math.nan
            out.append(PooledComparison(**common, ci_low=nan, ci_high=nan, se=nan, df=nan, p_value=nan,
                                        p_adjusted=nan, verdict=FEW))
            continue
        se = math.sqrt(s2 * (1 / n_b + 1 / n_v) + term)
        if se == 0:  # every arm constant and no term: the difference is exact (as in seeds.py)
            p, half = (1.0 if d == 0 else 0.0), 0.0
        else:
            p, half = float(2 * scipy_stats.t.sf(abs(d) / se, df)), quantile * se
        out.append(PooledComparison(**common, ci_low=d - half, ci_high=d + half, se=se, df=df, p_value=p,
                                    p_adjusted=p, verdict=verdict(d, p, higher_is_better, alpha)))
    return out


def _tested(comparisons: Sequence[PooledComparison]) -> list[int]:
    """Positions of the comparisons that have a statistic; they must come from one many_to_one call."""
    tested = [i for i, c in enumerate(comparisons) if not math.isnan(c.se)]
    shared = {(comparisons[i].pooled_sd, comparisons[i].pooled_df, comparisons[i].n_baseline) for i in tested}
    if len(shared) > 1:
        raise ValueError("dunnett: the comparisons come from different pools (one many_to_one call per family)")
    return tested


def correlation(comparisons: Sequence[PooledComparison]) -> np.ndarray:
    """ρ_ij = (s²/n_0) / (se_i se_j) off the diagonal, 1 on it, over the comparisons that have a statistic
    (the shared baseline mean; terms independent between comparisons — see the module docstring)."""
    tested = [comparisons[i] for i in _tested(comparisons)]
    se = np.array([c.se for c in tested])
    shared = tested[0].pooled_sd ** 2 / tested[0].n_baseline if tested else 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = np.where(np.outer(se, se) > 0, shared / np.outer(se, se), 0.0)
    np.fill_diagonal(rho, 1.0)
    return rho


def _t(c: PooledComparison) -> float:
    """|t|; an exact difference (se 0) is infinitely far from 0, or exactly at it."""
    if c.se == 0:
        return 0.0 if c.difference == 0 else math.inf
    return abs(c.difference) / c.se


def _max_abs_t_p(threshold: float, rho: np.ndarray, df: float, maxpts: int | None, seed: int) -> float:
    """1 − P(max_i |T_i| < threshold), T ~ multivariate t(df, rho), kept within its exact bounds: at least
    one comparison's own p, at most Bonferroni's m times it (the integral's absolute error, ~1e-6 and
    more, would otherwise put a p of 1e-8 below its own raw p)."""
    if math.isinf(threshold) or threshold == 0:
        return 0.0 if threshold else 1.0
    own = float(2 * scipy_stats.t.sf(threshold, df))
    if len(rho) == 1:
        return own
    x = np.full(len(rho), threshold)
    inside = scipy_stats.multivariate_t(shape=rho, df=df).cdf(x, lower_limit=-x, maxpts=maxpts, random_state=seed)
    return float(min(1.0, len(rho) * own, max(own, 1.0 - inside)))


def dunnett_single_step(comparisons: Sequence[PooledComparison], *, maxpts: int | None = MAXPTS,
                        seed: int = SEED) -> list[float]:
    """Dunnett's (1955) single-step adjusted p-values: p̃_j = 1 − P(max_i |T_i| < |t_j|) over every
    comparison with a statistic. NaN where a comparison has none (not enough seeds)."""
    tested = _tested(comparisons)
    out = [math.nan] * len(comparisons)
    if not tested:
        return out
    rho, df = correlation(comparisons), comparisons[tested[0]].df
    for i in tested:
        out[i] = _max_abs_t_p(_t(comparisons[i]), rho, df, maxpts, seed)
    return out


def dunnett_step_down(comparisons: Sequence[PooledComparison], *, maxpts: int | None = MAXPTS,
                      seed: int = SEED) -> list[float]:
    """Dunnett & Tamhane's (1991) step-down adjusted p-values: in order of |t| descending, step k's p is
    1 − P(max |T_i| < |t_(k)|) over the comparisons from the k-th on (those not yet rejected), with their
    correlation; then the running max, so a smaller |t| never gets a smaller p. Its first step is the
    single step's; every later one is at most the single step's. NaN as in dunnett_single_step."""
    tested = _tested(comparisons)
    out = [math.nan] * len(comparisons)
    if not tested:
        return out
    rho, df = correlation(comparisons), comparisons[tested[0]].df
    t = np.array([_t(comparisons[i]) for i in tested])
    order = np.argsort(-t, kind="stable")
    running = 0.0
    for k, position in enumerate(order):
        remaining = order[k:]
        running = max(running, _max_abs_t_p(t[position], rho[np.ix_(remaining, remaining)], df, maxpts, seed))
        out[tested[position]] = running
    return out
