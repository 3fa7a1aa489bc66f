"""What happened to the runs: stalled / diverged / failed rates, steps to a threshold, learning speed.

A variant can be worse by being unstable rather than by scoring lower, and a mean over the seeds that
survived hides that. These functions report outcomes per run (the seed is the unit here too):

    classify_run       complete | stalled | diverged | failed (incomplete / missing pass through)
    StallRule          when a complete run counts as stalled; declared in the experiment file,
                       ABSOLUTE (never relative to the best seed of the experiment, which would make
                       the rule depend on the outcome it judges):
                         floor     final primary validation metric below it (above it when lower is
                                   better) ⇒ stalled; no default: it is a property of the task
                                   (e.g. exact match 50 on a copy task, BLEU 5 on a translation task)
                         patience  the best of the last `patience` evaluations is no better (by more than
                                   min_delta) than the best before them ⇒ stalled; default None
                                   (off), since a run that converged early also stops improving: set
                                   it to a large part of the schedule (e.g. half the evaluations)
    instability_rate   stalled + diverged among the finished runs (complete, stalled, diverged) with
                       a Clopper–Pearson exact 95% interval; "failed" (crashes) is counted apart, being
                       more often infrastructure than the model. 0 of 5 is still compatible with 52%.
    compare_failures   two variants' counts by Fisher's exact test (two-sided), with the smallest rise
                       of the failure rate the test detects with 80% power (exact binomial power)
    first_reach        the first evaluation step at which the validation metric reaches a threshold,
                       or the last evaluated step, censored, for a run that never did
    time_to_threshold  Kaplan–Meier median steps to threshold with its 95% interval (lifelines):
                       runs that never reached it are right-censored, not dropped (dropping them
                       makes a variant that often never gets there look fast); the median is inf when
                       fewer than half of the runs reach the threshold
    logrank            log-rank test of two variants' steps to threshold (censoring-aware)
    late_change        how much a validation curve moved over the last quarter of training (still improving?)
    curve_area         normalised area under a validation curve, trapezoid / step range: the curve's
                       mean level over training, a learning-speed measure (compare it only over the
                       same step range; each seed gives one number, compared with compare_seeds)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache

import numpy as np
from scipy import stats as scipy_stats

from zoo.stats import ALPHA, POWER

COMPLETE, STALLED, DIVERGED, FAILED = "complete", "stalled", "diverged", "failed"
FINISHED = (COMPLETE, STALLED, DIVERGED)
UNSTABLE = (STALLED, DIVERGED)


@dataclass(frozen=True)
class StallRule:
    """When a complete run counts as stalled (see the module docstring); the default rule stalls nothing."""

    floor: float | None = None
    patience: int | None = None
    min_delta: float = 0.0
    higher_is_better: bool = True

    def __post_init__(self) -> None:
        if self.patience is not None and self.patience < 1:
            raise ValueError(f"StallRule.patience must be >= 1, got {self.patience}")
        if self.min_delta < 0:
            raise ValueError(f"StallRule.min_delta must be >= 0, got {self.min_delta}")


def _stalled(final: float | None, curve: Sequence[float], rule: StallRule) -> bool:
    sign = 1.0 if rule.higher_is_better else -1.0
    if rule.floor is not None and final is not None and sign * final < sign * rule.floor:
        return True
    values = sign * np.asarray([v for v in curve if v is not None and not math.isnan(v)], dtype=float)
    if rule.patience is not None and len(values) > rule.patience:
        before, last = values[: -rule.patience], values[-rule.patience:]
        return bool(last.max() <= before.max() + rule.min_delta)
    return False


def classify_run(status: str, final_metric: float | None, curve: Sequence[float] = (),
                 rule: StallRule = StallRule()) -> str:
    """Outcome of one run from its status, final primary validation metric and validation curve
    (the metric at each evaluation, in order). A complete run whose final metric is NaN or infinite
    diverged; other statuses ('incomplete', 'missing') are returned unchanged and count for nothing."""
    if status in (DIVERGED, FAILED):
        return status
    if status != COMPLETE:
        return status
    if final_metric is not None and not math.isfinite(final_metric):
        return DIVERGED
    return STALLED if _stalled(final_metric, curve, rule) else COMPLETE


@dataclass(frozen=True)
class Rate:
    """count of n, with a Clopper–Pearson exact interval for the underlying probability."""

    count: int
    n: int
    rate: float
    ci_low: float
    ci_high: float


def clopper_pearson(count: int, n: int, alpha: float = ALPHA) -> Rate:
    """Exact binomial interval: Beta(α/2; k, n − k + 1) to Beta(1 − α/2; k + 1, n − k)."""
    if not 0 <= count <= n:
        raise ValueError(f"clopper_pearson: count {count} is not between 0 and n = {n}")
    if n == 0:
        return Rate(0, 0, math.nan, math.nan, math.nan)
    low = 0.0 if count == 0 else float(scipy_stats.beta.ppf(alpha / 2, count, n - count + 1))
    high = 1.0 if count == n else float(scipy_stats.beta.ppf(1 - alpha / 2, count + 1, n - count))
    return Rate(count, n, count / n, low, high)


def instability_rate(outcomes: Sequence[str], unstable: Sequence[str] = UNSTABLE,
                     counted: Sequence[str] = FINISHED, alpha: float = ALPHA) -> Rate:
    """Share of `unstable` outcomes among the `counted` ones (default: stalled + diverged of finished)."""
    kept = [o for o in outcomes if o in counted]
    return clopper_pearson(sum(o in unstable for o in kept), len(kept), alpha)


@dataclass(frozen=True)
class FailureComparison:
    baseline: Rate
    variant: Rate
    difference: float  # variant rate − baseline rate (descriptive)
    odds_ratio: float  # the conditional maximum-likelihood odds ratio, variant over baseline (inf or 0 at empty cells)
    p_value: float  # Fisher's exact test, central: twice the smaller one-sided p
    odds_low: float = math.nan  # the exact conditional interval of the odds ratio: the inversion of that test
    odds_high: float = math.nan
    detectable: float = math.nan  # smallest rise over the baseline's rate the test detects with 80% power
    level: float = ALPHA  # the level `detectable` is computed at (the report's adjusted level)
    cannot_reject: bool = False  # at that level no outcome of these run counts could be significant


def fisher_p(table) -> float:
    """Fisher's exact test of a 2x2 table, central two-sided: twice the smaller one-sided p (at most 1). Its
    inversion is the exact conditional interval of the odds ratio, so the test rejects at alpha exactly
    when that (1 − alpha) interval leaves out 1; the minimum-likelihood p (scipy's default) has no such
    interval, and Newcombe's interval of the difference disagreed with it in 1–6.5% of null tables."""
    less = scipy_stats.fisher_exact(table, alternative="less")[1]
    greater = scipy_stats.fisher_exact(table, alternative="greater")[1]
    return float(min(1.0, 2 * min(less, greater)))


def compare_failures(baseline_count: int, baseline_n: int, variant_count: int, variant_n: int,
                     alpha: float = ALPHA) -> FailureComparison:
    """Two variants' failure (or instability) counts: the difference of the rates, and the odds ratio with
    the exact test and interval that decide (`fisher_p`)."""
    base, var = clopper_pearson(baseline_count, baseline_n, alpha), clopper_pearson(variant_count, variant_n, alpha)
    if not (baseline_n and variant_n):
        return FailureComparison(base, var, math.nan, math.nan, math.nan)
    table = [[variant_count, variant_n - variant_count], [baseline_count, baseline_n - baseline_count]]
    odds = scipy_stats.contingency.odds_ratio(table, kind="conditional")
    interval = odds.confidence_interval(confidence_level=1 - alpha)
    rise = detectable_rise(baseline_count / baseline_n, baseline_n, variant_n, alpha)
    return FailureComparison(base, var, var.rate - base.rate, float(odds.statistic), fisher_p(table),
                             float(interval.low), float(interval.high), rise)


@cache
def _fisher_rejects(n_baseline: int, n_variant: int, alpha: float) -> np.ndarray:
    """(n_baseline + 1, n_variant + 1) booleans: does Fisher's test (`fisher_p`) reject at these counts?"""
    return np.array([[fisher_p([[b, n_variant - b], [a, n_baseline - a]]) < alpha
                      for b in range(n_variant + 1)] for a in range(n_baseline + 1)])


def fisher_power(rate_baseline: float, rate_variant: float, n_baseline: int, n_variant: int,
                 alpha: float = ALPHA) -> float:
    """Exact power of Fisher's test (`fisher_p`): the chance, over both arms' binomial counts, that it rejects."""
    weights = np.outer(scipy_stats.binom.pmf(np.arange(n_baseline + 1), n_baseline, rate_baseline),
                       scipy_stats.binom.pmf(np.arange(n_variant + 1), n_variant, rate_variant))
    return float(weights[_fisher_rejects(n_baseline, n_variant, alpha)].sum())


def detectable_rise(rate_baseline: float, n_baseline: int, n_variant: int, alpha: float = ALPHA,
                    power: float = POWER) -> float:
    """The smallest rise of the failure rate above `rate_baseline` (the baseline's observed rate) that
    Fisher's test at `alpha` detects with `power`, to 0.01; NaN when not even a rate of 1 would be
    (too few runs). What 'no detectable difference' in failure rates could have seen."""
    for rate in np.linspace(rate_baseline, 1.0, int(round((1.0 - rate_baseline) * 100)) + 1):
        if fisher_power(rate_baseline, float(rate), n_baseline, n_variant, alpha) >= power:
            return float(rate - rate_baseline)
    return math.nan


def at_level(test: FailureComparison, level: float) -> FailureComparison:
    """`test` with its detectable rise computed at `level` (the level the report's correction makes a single
    rejection need), and whether any outcome could reach it at all."""
    n_b, n_v = test.baseline.n, test.variant.n
    if not (n_b and n_v):
        return test
    cannot = not smallest_p(n_b, n_v) < level
    rise = math.nan if cannot else detectable_rise(test.baseline.count / n_b, n_b, n_v, level)
    return replace(test, detectable=rise, level=level, cannot_reject=cannot)


def smallest_p(n_baseline: int, n_variant: int) -> float:
    """The smallest p Fisher's test (`fisher_p`) can give with these run counts (every variant run fails, no
    baseline run does): when even it is not below a test's level, no outcome can be significant."""
    if not (n_baseline and n_variant):
        return math.nan
    return fisher_p([[n_variant, 0], [0, n_baseline]])


def first_reach(steps: Sequence[float], values: Sequence[float], threshold: float,
                higher_is_better: bool = True) -> tuple[float, bool]:
    """(step, reached): the first evaluation step whose value reaches `threshold`, or the last evaluated
    step and False (right-censored there); (nan, False) for an empty curve."""
    steps_a, values_a = np.asarray(steps, dtype=float), np.asarray(values, dtype=float)
    if not len(steps_a):
        return math.nan, False
    with np.errstate(invalid="ignore"):
        hit = values_a >= threshold if higher_is_better else values_a <= threshold
    if hit.any():
        return float(steps_a[np.argmax(hit)]), True
    return float(steps_a.max()), False


@dataclass(frozen=True)
class Survival:
    """Kaplan–Meier summary of steps to threshold over seeds."""

    n: int
    reached: int
    median: float  # inf when fewer than half of the runs reach the threshold
    ci_low: float
    ci_high: float  # inf when the upper confidence band never drops to one half


def time_to_threshold(steps: Sequence[float], reached: Sequence[bool], alpha: float = ALPHA) -> Survival:
    """Kaplan–Meier median steps to threshold with its (1 − alpha) interval (lifelines: exponential
    Greenwood band, the interval is where the band crosses one half)."""
    from lifelines import KaplanMeierFitter
    from lifelines.utils import median_survival_times

    durations, events = np.asarray(steps, dtype=float), np.asarray(reached, dtype=bool)
    if not len(durations):
        return Survival(0, 0, math.nan, math.nan, math.nan)
    fitter = KaplanMeierFitter(alpha=alpha).fit(durations, events)
    interval = median_survival_times(fitter.confidence_interval_).to_numpy().ravel()
    return Survival(len(durations), int(events.sum()), float(fitter.median_survival_time_),
                    float(interval[0]), float(interval[1]))


def logrank(baseline_steps: Sequence[float], baseline_reached: Sequence[bool], variant_steps: Sequence[float],
            variant_reached: Sequence[bool]) -> float:
    """p-value of the log-rank test that the two variants reach the threshold equally fast (scipy's: the same
    p-values as lifelines' logrank_test, at a thirtieth of its cost: 0.4 s of the ablations report's analysis).
    Where the statistic has no variance the runs cannot tell the arms apart (none reaches the threshold, or every
    run of both reaches it at one step: the same curve twice), and p = 1, as lifelines gives."""
    if not (len(baseline_steps) and len(variant_steps)):
        return math.nan
    arms = []
    for steps, reached in ((baseline_steps, baseline_reached), (variant_steps, variant_reached)):
        steps, reached = np.asarray(steps, dtype=float), np.asarray(reached, dtype=bool)
        arms.append(scipy_stats.CensoredData(uncensored=steps[reached], right=steps[~reached]))
    with np.errstate(invalid="ignore", divide="ignore"):
        p = float(scipy_stats.logrank(*arms).pvalue)
    return 1.0 if math.isnan(p) else p


def curve_area(steps: Sequence[float], values: Sequence[float]) -> float:
    """Area under the curve (trapezoid) divided by its step range: the mean level of the metric over
    training. NaN points are dropped; NaN with fewer than two points or a zero step range."""
    s, v = np.asarray(steps, dtype=float), np.asarray(values, dtype=float)
    keep = ~(np.isnan(s) | np.isnan(v))
    s, v = s[keep], v[keep]
    order = np.argsort(s, kind="stable")
    s, v = s[order], v[order]
    if len(s) < 2 or s[-1] == s[0]:
        return math.nan
    return float(np.trapezoid(v, s) / (s[-1] - s[0]))


def late_change(steps: Sequence[float], values: Sequence[float], fraction: float = 0.25) -> float:
    """How much the metric moved over the last `fraction` of training: the last value minus the value at
    the first evaluation at or after (1 - fraction) of the last step. Clearly positive = still improving;
    near 0 = flat at the end, which a schedule decaying to zero gives any budget (only a longer budget shows
    the plateau); NaN with fewer than two evaluations."""
    if len(steps) < 2:
        return math.nan
    start = int(np.searchsorted(np.asarray(steps, dtype=float), (1 - fraction) * steps[-1]))
    return float(values[-1] - values[min(start, len(values) - 2)])
