"""Comparing two variants over seeds: difference with its interval, p-value, P(better), power, TOST, Holm.

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
    mde          the smallest true difference this design (these seed counts, this seed-to-seed
                 spread) detects with 80% power at alpha (see zoo/report/power.py). A "no detectable
                 difference" verdict with mde = 3 BLEU says nothing about differences of 1 BLEU.
    verdict      better | worse | no detectable difference (from p_adjusted) | not enough seeds

Choice of the primary test
--------------------------
Welch's t-test on the per-seed values. Checked by simulation (20,000 null experiments per cell,
alpha = 0.05; "bimodal" = each seed independently 30% (or 50%) at ~4 and 70% at ~25 BLEU, sd 0.5):

    seeds per arm   normal   bimodal 30%   bimodal 50%
    2 v 2           0.021    0.094         0.127        <- invalid: hence MIN_SEEDS = 3
    3 v 3           0.036    0.023         0.032
    5 v 5           0.042    0.014         0.020
    10 v 10         0.049    0.040         0.043
    3 v 10          0.065    0.142         0.202        <- unequal arms + skew: anti-conservative
    5 v 10          0.049    0.072         0.066

With equal arms the skewness terms of the two means cancel in the t statistic, so Welch stays at
or below alpha even for stall-or-succeed outcomes; with unequal arms they do not (a small arm whose
seeds all succeeded looks precise, and the bigger arm's stalls look like an effect). Therefore:
with n_baseline == n_variant the p-value is Welch's; with unequal arms it is the larger of Welch's
and the exact (or, above 5,000 splits, Monte-Carlo) permutation p-value of the Welch statistic, which
is exact whenever the two arms come from one distribution. Why not the permutation test alone: with
5 v 5 its smallest possible p is 2/252 ≈ 0.008, so after Holm over m ≥ 7 comparisons no difference
could ever be significant — a 15-variant report would be blind by construction. The interval is
always Welch's (with unequal arms it can exclude 0 while p > alpha; the p-value is the safer one).

Degenerate cases: both arms constant (e.g. a parameter count) → se = 0, ci of width 0, p = 0 if the
means differ else 1. Fewer than `min_seeds` seeds in an arm → no p, no interval, no P(better), no
mde; only the per-seed values, which the caller shows.

Equivalence (Schuirmann 1987, two one-sided tests): "equivalent within ±margin" iff both one-sided
Welch tests reject, i.e. the (1 − 2·alpha) interval lies inside (−margin, margin); p = the larger
one-sided p. Only with a declared margin: "no detectable difference" is never "equivalent".

Multiple comparisons: Holm (1979) step-down adjustment over a family (e.g. all variant-vs-baseline
comparisons of a task); Benjamini–Hochberg (1995) is available for false-discovery-rate control.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import combinations

import numpy as np
from scipy import stats as scipy_stats

from zoo.report.power import detectable
from zoo.report.stats import ALPHA, BETTER, FEW, SAME, WORSE

MIN_SEEDS = 3  # per arm; below it no test (2 v 2 Welch has a 9-13% false-positive rate on bimodal outcomes)
PERMUTATION_EXACT_LIMIT = 5000  # enumerate all splits up to this many, else Monte-Carlo
PERMUTATIONS = 4999
RESAMPLES = 2000  # bootstrap resamples for the interval of prob_better
SEED = 12345
WELCH = "Welch t-test"
WELCH_PERMUTATION = "Welch t-test, permutation-checked (unequal seeds)"


def clean(values: Sequence[float]) -> np.ndarray:
    """1-D float array without None and NaN."""
    data = np.asarray([np.nan if v is None else v for v in values], dtype=float).ravel()
    return data[~np.isnan(data)]


def welch_arrays(baseline: np.ndarray, variant: np.ndarray) -> tuple[np.ndarray, ...]:
    """Welch's test along the last axis, vectorised over leading axes (many experiments at once).

    Returns (difference, se, df, t, p): variant − baseline, standard error, Welch–Satterthwaite df,
    t = difference / se and the two-sided p (NaN where se = 0)."""
    n_b, n_v = baseline.shape[-1], variant.shape[-1]
    v_b, v_v = baseline.var(-1, ddof=1) / n_b, variant.var(-1, ddof=1) / n_v
    difference = variant.mean(-1) - baseline.mean(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        se = np.sqrt(v_b + v_v)
        df = (v_b + v_v) ** 2 / (v_b ** 2 / (n_b - 1) + v_v ** 2 / (n_v - 1))
        t = difference / se
    p = 2 * scipy_stats.t.sf(np.abs(t), df)
    return difference, se, df, t, p


def splits(n_baseline: int, n_variant: int, seed: int = SEED) -> np.ndarray:
    """(P, n_b + n_v) index permutations of the pooled seeds: the first n_b go to the baseline.
    All C(n, n_b) splits when there are at most PERMUTATION_EXACT_LIMIT (the first is the observed
    one), else the observed split plus PERMUTATIONS random ones."""
    n = n_baseline + n_variant
    if math.comb(n, n_baseline) <= PERMUTATION_EXACT_LIMIT:
        rows = [list(c) + [i for i in range(n) if i not in c] for c in combinations(range(n), n_baseline)]
        return np.asarray(rows)
    rng = np.random.default_rng(seed)
    random = np.argsort(rng.random((PERMUTATIONS, n)), axis=1)
    return np.vstack([np.arange(n), random])


def permutation_p(baseline: np.ndarray, variant: np.ndarray, seed: int = SEED) -> np.ndarray:
    """Two-sided permutation p of Welch's |t|, vectorised over leading axes: the share of splits of
    the pooled seeds whose |t| is at least the observed one (the observed split counts, so p > 0)."""
    n_b = baseline.shape[-1]
    pooled = np.concatenate([baseline, variant], axis=-1)
    index = splits(n_b, variant.shape[-1], seed)
    shuffled = pooled[..., index]  # (..., P, n)
    _, _, _, t, _ = welch_arrays(shuffled[..., :n_b], shuffled[..., n_b:])
    observed = np.abs(welch_arrays(baseline, variant)[3])[..., None]
    t = np.nan_to_num(np.abs(t), nan=0.0)  # a split with both halves constant: no evidence
    return np.mean(t >= observed - 1e-12 * np.abs(observed), axis=-1)


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
    mde: float
    method: str


def compare_seeds(baseline: Sequence[float], variant: Sequence[float], *, higher_is_better: bool,
                  alpha: float = ALPHA, min_seeds: int = MIN_SEEDS) -> SeedComparison:
    """Compare per-seed values of two variants (NaN dropped): Welch's test, its interval, P(better), mde."""
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
                              prob_better=nan, prob_better_ci=(nan, nan), mde=nan, method=WELCH, verdict=FEW)
    difference, se, df, _, p = (float(x) for x in welch_arrays(b, v))
    method = WELCH
    if se == 0:  # both arms constant: the difference is exact
        p, df, half = (1.0 if difference == 0 else 0.0), math.nan, 0.0
    else:
        half = float(scipy_stats.t.ppf(1 - alpha / 2, df)) * se
        if n_b != n_v:
            p, method = max(p, float(permutation_p(b, v))), WELCH_PERMUTATION
    mde = detectable(se, df, alpha)  # the report restates it at the corrected level (analysis.at_level)
    return SeedComparison(**common, ci_low=difference - half, ci_high=difference + half, se=se, df=df,
                          p_value=p, p_adjusted=p, prob_better=prob_better(b, v, higher_is_better),
                          prob_better_ci=prob_better_ci(b, v, higher_is_better, alpha), mde=mde, method=method,
                          verdict=verdict(difference, p, higher_is_better, alpha))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm (1979) step-down adjusted p-values: sort the m non-NaN p ascending, adjusted p_(i) =
    max over j <= i of min(1, (m - j + 1) p_(j)); reject where adjusted p < alpha. NaN stays NaN
    and does not count toward m."""
    p = np.asarray(p_values, dtype=float)
    out = p.copy()
    present = np.flatnonzero(~np.isnan(p))
    order = present[np.argsort(p[present], kind="stable")]
    m = len(order)
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out[order] = np.maximum.accumulate(scaled) if m else scaled
    return out.tolist()


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """Benjamini–Hochberg (1995) adjusted p-values (false discovery rate); NaN as in holm()."""
    p = np.asarray(p_values, dtype=float)
    out = p.copy()
    present = np.flatnonzero(~np.isnan(p))
    order = present[np.argsort(p[present], kind="stable")]
    m = len(order)
    scaled = np.minimum(1.0, m / np.arange(1, m + 1) * p[order])
    out[order] = np.minimum.accumulate(scaled[::-1])[::-1] if m else scaled
    return out.tolist()


CORRECTIONS = {"holm": holm, "benjamini-hochberg": benjamini_hochberg}


def correct(p_values: Sequence[float], method: str = "holm") -> list[float]:
    """Adjusted p-values by `method`: 'holm' (family-wise error) or 'benjamini-hochberg' (false discovery rate)."""
    return CORRECTIONS[method](p_values)


def adjust(results: Sequence, method: str = "holm", adjusted: Sequence[float] | None = None) -> list:
    """The family's results with p_adjusted set and verdicts recomputed from it (for SeedComparison
    and CorpusComparison alike). Results without a p-value (not enough seeds) are left as they are.
    `adjusted`: their p-values already adjusted in a larger family (other kinds of tests beside them)."""
    adjusted = correct([r.p_value for r in results], method) if adjusted is None else adjusted
    out = []
    for r, p in zip(results, adjusted):
        if math.isnan(p):
            out.append(r)
            continue
        out.append(replace(r, p_adjusted=p, verdict=verdict(r.difference, p, r.higher_is_better, r.alpha)))
    return out


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
    p_adjusted: float = math.nan  # after the report's correction, in its family (report.py); NaN until then


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
    difference, se, df, _, _ = (float(x) for x in welch_arrays(b, v))
    return tost_from(difference, se, df, margin, alpha, len(b), len(v))
