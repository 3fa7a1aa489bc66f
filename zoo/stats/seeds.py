"""Comparing two variants over seeds: difference with its interval, p-value, P(better), verdict.

What the numbers mean (for a reader of the report)
--------------------------------------------------
The SEED is the unit of inference (Clark et al. 2011, "Better Hypothesis Testing for Statistical
Machine Translation: Controlling for Optimizer Instability"; Bouthillier et al. 2021, "Accounting
for Variance in Machine Learning Benchmarks"): every run contributes one number per metric, and two
variants are compared over those per-seed numbers.

    difference   mean(variant) − mean(baseline) over seeds, in the metric's own unit (the effect size)
    ci           its 95% confidence interval (1 − alpha): difference ± t(1 − alpha/2, df) · se
    se, df       Welch's standard error sqrt(s_b²/n_b + s_v²/n_v) and Welch–Satterthwaite degrees of
                 freedom df = (s_b²/n_b + s_v²/n_v)² / ((s_b²/n_b)²/(n_b − 1) + (s_v²/n_v)²/(n_v − 1))
    p_value      two-sided p of the primary test (below); p_adjusted after Holm over the report's family
    prob_better  P(a random variant seed beats a random baseline seed), ties counted ½ — the
                 probability of outperforming of Bouthillier et al. (2021) (= the Mann–Whitney AUC);
                 0.5 means no tendency; its interval is a percentile bootstrap over seeds (descriptive)
    verdict      better | worse | no detectable difference (from p_adjusted) | not enough seeds

The test itself and why it is Welch's (permutation-checked with unequal arms): zoo/stats/welch.py.

Degenerate cases: both arms constant (e.g. a parameter count) → se = 0, ci of width 0, p = 0 if the
means differ else 1. Fewer than `min_seeds` seeds in an arm → no p, no interval, no P(better); only the
per-seed values, which the caller shows. What the design could detect is zoo/stats/power.py's (the report
states it at the level its verdicts are decided at: zoo/report/analysis.py, `at_level`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

from zoo.stats import ALPHA, BETTER, FEW, SAME, WORSE
from zoo.stats.welch import MIN_SEEDS, SEED, clean, permutation_p, welch_arrays

RESAMPLES = 2000  # bootstrap resamples for the interval of prob_better
WELCH = "Welch t-test"
WELCH_PERMUTATION = "Welch t-test, permutation-checked (unequal seeds)"


def prob_better(baseline: Sequence[float], variant: Sequence[float], higher_is_better: bool = True) -> float:
    """P(a random variant seed beats a random baseline seed), ties ½ (Bouthillier et al. 2021)."""
    b, v = clean(baseline), clean(variant)
    if not (len(b) and len(v)):
        return math.nan
    return float(_prob_better(b, v, higher_is_better))


def _prob_better(b: np.ndarray, v: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """Vectorised over leading axes: b (..., n_b), v (..., n_v)."""
    diff = v[..., None, :] - b[..., :, None]
    wins = (diff > 0) if higher_is_better else (diff < 0)
    return (wins + 0.5 * (diff == 0)).mean(axis=(-2, -1))


def prob_better_ci(b: np.ndarray, v: np.ndarray, higher_is_better: bool, alpha: float = ALPHA,
                   resamples: int = RESAMPLES, seed: int = SEED) -> tuple[float, float]:
    """Percentile bootstrap interval of prob_better, resampling seeds within each arm."""
    rng = np.random.default_rng(seed)
    boot = _prob_better(b[rng.integers(0, len(b), (resamples, len(b)))],
                        v[rng.integers(0, len(v), (resamples, len(v)))], higher_is_better)
    low, high = np.quantile(boot, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def verdict(difference: float, p: float, higher_is_better: bool, alpha: float = ALPHA) -> str:
    """better/worse when p < alpha, in the direction that is good for the measure; else no difference."""
    if math.isnan(p) or p >= alpha or difference == 0:
        return SAME
    return BETTER if (difference > 0) == higher_is_better else WORSE


@dataclass(frozen=True)
class Difference:
    """What every comparison of a variant with a baseline says (per-seed or corpus metric alike)."""

    higher_is_better: bool
    alpha: float
    n_baseline: int
    n_variant: int
    baseline_mean: float
    variant_mean: float
    difference: float  # variant − baseline
    ci_low: float
    ci_high: float
    se: float
    df: float
    p_value: float
    p_adjusted: float  # = p_value until adjusted over a family (adjust())
    verdict: str


@dataclass(frozen=True)
class SeedComparison(Difference):
    """Variant against baseline on one metric, over seeds (see the module docstring for each field)."""

    baseline_values: tuple[float, ...]
    variant_values: tuple[float, ...]
    prob_better: float
    prob_better_ci: tuple[float, float]
    method: str


def compare_seeds(baseline: Sequence[float], variant: Sequence[float], *, higher_is_better: bool,
                  alpha: float = ALPHA, min_seeds: int = MIN_SEEDS) -> SeedComparison:
    """Compare per-seed values of two variants (NaN dropped): Welch's test, its interval, P(better)."""
    b, v = clean(baseline), clean(variant)
    n_b, n_v = len(b), len(v)
    mean_b = float(b.mean()) if n_b else math.nan
    mean_v = float(v.mean()) if n_v else math.nan
    common = {"baseline_values": tuple(b.tolist()), "variant_values": tuple(v.tolist()),
              "higher_is_better": higher_is_better, "alpha": alpha, "n_baseline": n_b, "n_variant": n_v,
              "baseline_mean": mean_b, "variant_mean": mean_v, "difference": mean_v - mean_b}
    if min(n_b, n_v) < max(min_seeds, 2):
        nan = math.nan
        return SeedComparison(**common, ci_low=nan, ci_high=nan, se=nan, df=nan, p_value=nan, p_adjusted=nan,
                              prob_better=nan, prob_better_ci=(nan, nan), method=WELCH, verdict=FEW)
    difference, se, df, _, p = (float(x) for x in welch_arrays(b, v))
    method = WELCH
    if se == 0:  # both arms constant: the difference is exact
        p, df, half = (1.0 if difference == 0 else 0.0), math.nan, 0.0
    else:
        half = float(scipy_stats.t.ppf(1 - alpha / 2, df)) * se
    if n_b != n_v:  # an exact difference too: unequal arms are never surer than their permutation floor
        p, method = max(p, float(permutation_p(b, v))), WELCH_PERMUTATION
    return SeedComparison(**common, ci_low=difference - half, ci_high=difference + half, se=se, df=df,
                          p_value=p, p_adjusted=p, prob_better=prob_better(b, v, higher_is_better),
                          prob_better_ci=prob_better_ci(b, v, higher_is_better, alpha), method=method,
                          verdict=verdict(difference, p, higher_is_better, alpha))
