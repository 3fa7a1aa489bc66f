"""Welch's test over seeds, vectorised over many experiments at once, and its permutation check.

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
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import combinations

import numpy as np
from scipy import stats as scipy_stats

MIN_SEEDS = 3  # per arm; below it no test (2 v 2 Welch has a 9-13% false-positive rate on bimodal outcomes)
PERMUTATION_EXACT_LIMIT = 5000  # enumerate all splits up to this many, else Monte-Carlo
PERMUTATIONS = 4999
SEED = 12345


def clean(values: Sequence[float]) -> np.ndarray:
    """1-D float array without None and NaN."""
    data = np.asarray([np.nan if v is None else v for v in values], dtype=float).ravel()
    return data[~np.isnan(data)]


def welch_statistics(baseline: np.ndarray, variant: np.ndarray) -> tuple[np.ndarray, ...]:
    """Welch's statistics along the last axis, vectorised over leading axes (many experiments at once).

    Returns (difference, se, df, t): variant − baseline, standard error, Welch–Satterthwaite df and
    t = difference / se (NaN where se = 0). No p: where only t or the interval's parts are needed (every split
    of a permutation check), the t distribution's tail is most of the cost."""
    n_b, n_v = baseline.shape[-1], variant.shape[-1]
    v_b, v_v = baseline.var(-1, ddof=1) / n_b, variant.var(-1, ddof=1) / n_v
    difference = variant.mean(-1) - baseline.mean(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        se = np.sqrt(v_b + v_v)
        df = (v_b + v_v) ** 2 / (v_b ** 2 / (n_b - 1) + v_v ** 2 / (n_v - 1))
        t = difference / se
    return difference, se, df, t


def welch_arrays(baseline: np.ndarray, variant: np.ndarray) -> tuple[np.ndarray, ...]:
    """Welch's test: `welch_statistics` and the two-sided p, as (difference, se, df, t, p)."""
    difference, se, df, t = welch_statistics(baseline, variant)
    return difference, se, df, t, 2 * scipy_stats.t.sf(np.abs(t), df)


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


def permutation_floor(n_baseline: int, n_variant: int) -> float:
    """The smallest p `permutation_p` can give with these arm sizes (that of a perfectly separated sample):
    a permutation-checked test at a level below it can reject nothing, whatever the runs show."""
    separated = np.arange(n_variant, dtype=float) + 2.0 * (n_baseline + n_variant)
    return float(permutation_p(np.arange(n_baseline, dtype=float), separated))


def permutation_p(baseline: np.ndarray, variant: np.ndarray, seed: int = SEED) -> np.ndarray:
    """Two-sided permutation p of Welch's |t|, vectorised over leading axes: the share of splits of
    the pooled seeds whose |t| is at least the observed one (the observed split counts, so p > 0). Arms
    that are each constant give an infinite |t|, which only splits as cleanly separated match; two
    constant arms of one value give no evidence (p 1). Every split's t comes from `_split_t`: a product
    with the splits' membership matrix, not a copy of the pooled seeds per split."""
    index = splits(baseline.shape[-1], variant.shape[-1], seed)  # (P, n): row 0 is the observed split
    t = np.abs(_split_t(np.concatenate([baseline, variant], axis=-1), index, baseline.shape[-1]))  # (..., P)
    observed = t[..., :1]
    t = np.nan_to_num(t, nan=0.0, posinf=np.inf)  # a split with both halves one value: no evidence
    with np.errstate(invalid="ignore"):
        at_least = np.where(np.isinf(observed), np.inf, observed * (1 - 1e-12))  # rounding: ties count
    return np.where(np.isnan(observed[..., 0]), 1.0, np.mean(t >= at_least, axis=-1))


def _split_t(pooled: np.ndarray, index: np.ndarray, n_baseline: int) -> np.ndarray:
    """Welch's t for each split of `pooled` (..., n) that `index` (P, n) lists (its first n_baseline columns are
    the baseline), as (..., P), from each half's sum and sum of squares: two matrix products with the splits'
    0/1 membership, where gathering every split's seeds held P copies of them (the cost of a report's power
    checks). Centring first keeps the sums of squares to rounding; a within-arm sum of squares or a difference
    at rounding's size (1e-12 of the seeds' own) is taken as 0, so an arm of one value has no spread even where that
    value has no exact binary form (np.var of a batch of 29.3s is not 0)."""
    n = pooled.shape[-1]
    n_variant = n - n_baseline
    scale = (pooled ** 2).sum(-1, keepdims=True) * 1e-12  # (..., 1): rounding's size in sums of squares
    centred = pooled - pooled.mean(-1, keepdims=True)  # Welch's t is unchanged by a shift
    member = np.zeros(index.shape)
    np.put_along_axis(member, index[:, :n_baseline], 1.0, axis=1)  # (P, n): 1 where a seed is in the baseline
    squares = centred ** 2
    sum_b, squares_b = centred @ member.T, squares @ member.T  # (..., P)
    sum_v, squares_v = centred.sum(-1, keepdims=True) - sum_b, squares.sum(-1, keepdims=True) - squares_b

    def variance_of_mean(total: np.ndarray, sum_of_squares: np.ndarray, size: int) -> np.ndarray:
        within = sum_of_squares - total ** 2 / size  # the arm's sum of squared deviations
        return np.where(within > scale, within, 0.0) / (size - 1) / size

    difference = sum_v / n_variant - sum_b / n_baseline
    difference = np.where(difference ** 2 * n > scale, difference, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return difference / np.sqrt(variance_of_mean(sum_b, squares_b, n_baseline)
                                    + variance_of_mean(sum_v, squares_v, n_variant))
