"""Transfer: does a variant's effect on one task hold on another (twice the budget, the other direction,
another corpus)? The same variants, trained on two tasks with the same seeds, give per task

    Δ_A = mean(variant on A) − mean(baseline on A),     Δ_B likewise on B,

and the question is the interaction Δ_B − Δ_A (a difference of differences over four independent
groups of runs; a seed of one budget is a different run from the same seed at the other budget).
Its variance is Σ s²/n over the four groups plus, for a corpus metric, the test-set term T that the
comparisons it subtracts carry too (corpus.contrast_term: the paired sentence bootstrap of the contrast
over all four arms where both tasks score one test set, beyond the sentence noise the per-seed scores
already hold; the sum of the two comparisons' terms where they score different sets). Its df is
Welch–Satterthwaite's generalised to four groups (of the seed part: T is estimated from a thousand
resamples, not from seeds), and the test is two-sided t (simulated through these functions in
tests/test_transfer.py: null rate <= alpha at 5 v 5 v 5 v 5, at unequal spreads, and with a term).
The interaction joins the report's family of tests and is adjusted with it; so is its TOST at the
task's margin ("the effect is the same on both tasks within ±margin"). The verdict per variant:

    changes            the interaction is significant after the report's correction
    holds within ±m    the interaction is shown to lie within ±margin (TOST, adjusted likewise)
    undetermined       neither; the row gives the interval, which says how large a change it allows

Spearman's rank correlation of the variants' effects between the tasks says whether the ranking of
the factors transfers, even where single effects change size (descriptive: as many points as variants).

Pure statistics: numbers in, numbers out, nothing else from zoo.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np
from scipy import stats as scipy_stats

HOLDS, CHANGES, UNDETERMINED, FEW = "holds", "changes", "undetermined", "too few seeds"


def interaction_arrays(baseline_a: np.ndarray, variant_a: np.ndarray, baseline_b: np.ndarray,
                       variant_b: np.ndarray, term: float | np.ndarray = 0.0) -> tuple[np.ndarray, ...]:
    """(Δ_B − Δ_A, se, df, p) along the last axis, vectorised over leading axes (many experiments at once);
    `term`: the test-set variance added to the seeds' (broadcast against the leading axes)."""
    groups = (baseline_a, variant_a, baseline_b, variant_b)
    signs = (1.0, -1.0, -1.0, 1.0)  # (v_b − b_b) − (v_a − b_a)
    estimate = sum(sign * g.mean(-1) for sign, g in zip(signs, groups))
    parts = [g.var(-1, ddof=1) / g.shape[-1] for g in groups]
    seeds = sum(parts)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(seeds > 0, seeds ** 2 / sum(part ** 2 / (g.shape[-1] - 1) for part, g in zip(parts, groups)),
                      np.inf)  # constant seeds: only the term is uncertain, and it is not a seed estimate
        se = np.sqrt(seeds + term)
        p = 2 * scipy_stats.t.sf(np.abs(estimate / se), df)
    return estimate, se, df, p


@dataclass(frozen=True)
class Interaction:
    """One variant's transfer from task A to task B (see the module docstring)."""

    effect_a: float
    effect_b: float
    difference: float  # Δ_B − Δ_A
    ci_low: float
    ci_high: float
    se: float
    df: float
    p_value: float
    p_adjusted: float  # = p_value until adjusted with the report's family
    margin: float | None  # None: neither task declares one, so there is no TOST and no 'holds'
    tost_p: float  # TOST p for |Δ_B − Δ_A| < margin (max of the one-sided p); NaN without a margin
    tost_adjusted: float
    alpha: float
    verdict: str
    term: float = math.nan  # the test-set variance within se² (module docstring); NaN: none (a per-seed metric)


def _verdict(p_adjusted: float, tost_adjusted: float, alpha: float) -> str:
    if math.isnan(p_adjusted):
        return FEW
    if p_adjusted < alpha:
        return CHANGES
    return HOLDS if tost_adjusted < alpha else UNDETERMINED


def compare_interaction(baseline_a: Sequence[float], variant_a: Sequence[float], baseline_b: Sequence[float],
                        variant_b: Sequence[float], *, margin: float | None, alpha: float,
                        min_seeds: int = 2, term: float = math.nan) -> Interaction:
    """Δ_B − Δ_A with its (1 − alpha) interval, two-sided p, and the TOST within ±margin (NaN dropped; no TOST,
    a NaN p that no family counts, without a margin: equivalence needs a bound to be shown within). `term`: the
    test-set variance of the contrast (module docstring; NaN: none, a per-seed metric, whose seeds carry it all)."""
    groups = [np.asarray([v for v in g if v is not None and not math.isnan(v)], dtype=float)
              for g in (baseline_a, variant_a, baseline_b, variant_b)]
    effect_a = float(groups[1].mean() - groups[0].mean()) if min(map(len, groups[:2])) else math.nan
    effect_b = float(groups[3].mean() - groups[2].mean()) if min(map(len, groups[2:])) else math.nan
    nan = math.nan
    if min(len(g) for g in groups) < max(min_seeds, 2):
        return Interaction(effect_a, effect_b, effect_b - effect_a, nan, nan, nan, nan, nan, nan, margin, nan, nan,
                           alpha, FEW)
    difference, se, df, p = (float(x) for x in interaction_arrays(*groups, term=0.0 if math.isnan(term) else term))
    if se == 0:  # every group constant: the interaction is exact
        p, half = (1.0 if difference == 0 else 0.0), 0.0
        tost_p = nan if margin is None else (0.0 if abs(difference) < margin else 1.0)
    else:
        half = float(scipy_stats.t.ppf(1 - alpha / 2, df)) * se
        tost_p = nan if margin is None else max(float(scipy_stats.t.sf((difference + margin) / se, df)),
                                                float(scipy_stats.t.cdf((difference - margin) / se, df)))
    return Interaction(effect_a, effect_b, difference, difference - half, difference + half, se, df, p, p, margin,
                       tost_p, tost_p, alpha, _verdict(p, tost_p, alpha), term)


def adjusted(interaction: Interaction, p_adjusted: float, tost_adjusted: float) -> Interaction:
    """The interaction with its family-adjusted p-values and the verdict they give."""
    return replace(interaction, p_adjusted=p_adjusted, tost_adjusted=tost_adjusted,
                   verdict=_verdict(p_adjusted, tost_adjusted, interaction.alpha))


@dataclass(frozen=True)
class RankCorrelation:
    rho: float
    ci_low: float  # seed-bootstrap 95% interval: the effects are estimates, not fixed points
    ci_high: float
    n: int


Arms = tuple[Sequence[float], dict[str, Sequence[float]]]  # a task's baseline seeds, each variant's seeds
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20261127


def rank_correlation(first: Arms, second: Arms, resamples: int = BOOTSTRAP_RESAMPLES,
                     seed: int = BOOTSTRAP_SEED) -> RankCorrelation:
    """Spearman's rho of the variants' effects (mean variant - mean baseline, per task) on the two tasks, with
    a percentile interval from resampling the seeds within every arm (one baseline draw per task serves all
    its variants, as one baseline does): Spearman's own p would treat noisy effects as fixed points. Variants
    with fewer than 2 seeds in an arm on either task are left out."""
    base_a, arms_a = first
    base_b, arms_b = second
    names = [v for v in arms_a if v in arms_b and min(len(arms_a[v]), len(arms_b[v])) >= 2]
    if len(names) < 3 or min(len(base_a), len(base_b)) < 2:
        return RankCorrelation(math.nan, math.nan, math.nan, len(names))
    rng = np.random.default_rng(seed)

    def effects(base, arms, draw: bool) -> np.ndarray:  # (resamples, variants), or (1, variants)
        def means(values) -> np.ndarray:
            values = np.asarray(values, dtype=float)
            if not draw:
                return np.array([values.mean()])
            return values[rng.integers(0, len(values), (resamples, len(values)))].mean(axis=1)
        baseline = means(base)
        return np.stack([means(arms[v]) - baseline for v in names], axis=1)

    rho = float(scipy_stats.spearmanr(effects(base_a, arms_a, False)[0], effects(base_b, arms_b, False)[0]).statistic)
    a, b = effects(base_a, arms_a, True), effects(base_b, arms_b, True)
    ranks_a, ranks_b = scipy_stats.rankdata(a, axis=1), scipy_stats.rankdata(b, axis=1)
    drawn = np.array([np.corrcoef(x, y)[0, 1] for x, y in zip(ranks_a, ranks_b)])  # Spearman: Pearson of ranks
    low, high = np.nanpercentile(drawn, [2.5, 97.5])
    return RankCorrelation(rho, float(low), float(high), len(names))
