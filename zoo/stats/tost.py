"""Equivalence (Schuirmann 1987, two one-sided tests): "equivalent within ±margin" iff both one-sided
Welch tests reject, i.e. the (1 − 2·alpha) interval lies inside (−margin, margin); p = the larger
one-sided p. Only with a declared margin: "no detectable difference" is never "equivalent".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scipy import stats as scipy_stats

from zoo.stats import ALPHA
from zoo.stats.welch import MIN_SEEDS, clean, welch_statistics


@dataclass(frozen=True)
class Equivalence:
    """TOST result: equivalent within ±margin iff the (1 − 2·alpha) interval lies inside it."""

    difference: float
    margin: float
    ci_low: float  # (1 - 2 alpha) interval, 90% at alpha = 0.05
    ci_high: float
    p_value: float  # max of the two one-sided p-values
    equivalent: bool | None  # None: not enough seeds; in a report, decided on p_adjusted
    n_baseline: int
    n_variant: int
    p_adjusted: float = math.nan  # after a correction over its family (the report adjusts it); NaN until then


def tost_from(difference: float, se: float, df: float, margin: float, alpha: float = ALPHA,
              n_baseline: int = 0, n_variant: int = 0) -> Equivalence:
    """TOST from an estimate, its standard error and df (df = inf: normal) — Welch or corpus."""
    if margin <= 0:
        raise ValueError(f"tost: margin must be > 0, got {margin}")
    if math.isnan(se):
        nan = math.nan
        return Equivalence(difference, margin, nan, nan, nan, None, n_baseline, n_variant)
    if se == 0:
        inside = abs(difference) < margin
        return Equivalence(difference, margin, difference, difference, 0.0 if inside else 1.0, inside,
                           n_baseline, n_variant)
    p_lower = float(scipy_stats.t.sf((difference + margin) / se, df))  # H0: difference <= -margin
    p_upper = float(scipy_stats.t.cdf((difference - margin) / se, df))  # H0: difference >= +margin
    half = float(scipy_stats.t.ppf(1 - alpha, df)) * se
    p = max(p_lower, p_upper)
    return Equivalence(difference, margin, difference - half, difference + half, p, p < alpha, n_baseline, n_variant)


def tost(baseline: Sequence[float], variant: Sequence[float], margin: float, alpha: float = ALPHA,
         min_seeds: int = MIN_SEEDS) -> Equivalence:
    """Schuirmann's two one-sided Welch tests over seeds for |variant − baseline| < margin."""
    b, v = clean(baseline), clean(variant)
    if min(len(b), len(v)) < max(min_seeds, 2):
        difference = float(v.mean() - b.mean()) if len(b) and len(v) else math.nan
        return tost_from(difference, math.nan, math.nan, margin, alpha, len(b), len(v))
    difference, se, df, _ = (float(x) for x in welch_statistics(b, v))
    return tost_from(difference, se, df, margin, alpha, len(b), len(v))
