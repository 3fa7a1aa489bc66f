"""What a design could detect: its power for an effect, its detectable difference, and the seeds it would need.

One model serves every table and finding (zoo/report/analysis.py: `at_level`), so a row cannot give one seed
count in one column and another in the next. A `Design` is what a comparison's test sees: each arm's seed
spread and size, and `extra`, the variance that does not shrink with seeds (a corpus metric's test-set part,
zoo/stats/corpus.py). Power is simulated through the test the verdict uses, with fixed random numbers: the
seeds' scores drawn normal with the observed spreads, Welch's standard error with `extra` added and Welch's df
of the seed part, a two-sided t p-value, and with unequal arms the larger of it and the exact permutation p
(zoo/stats/welch.py). Simulated because the noncentral-t formula is optimistic at small n (3 v 3, sd 1,
effect 2: 0.46 predicted, 0.36 measured): Welch's df is itself estimated, and often smaller than its value
at the true spreads.

    power_at(design, effect, level)     the chance the design has to find a true difference `effect` at `level`
    detectable_at(design, level)        the smallest |difference| found with `power` (default 80%): "no
                                        detectable difference" only rules out effects above it
    seeds_at(design, effect, level)     the smallest equal number of seeds per arm that finds `effect`

`level` is the one the verdict is decided at: alpha, or after a correction the level one rejection needs. The
spreads are observed ones, themselves uncertain at 5 seeds: treat the results as orders of magnitude.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np
from scipy import stats as scipy_stats

from zoo.stats import ALPHA, POWER
from zoo.stats.welch import MIN_SEEDS, permutation_p

MAX_SEEDS = 100
SIMULATIONS = 4000
# With unequal arms every simulated experiment is also permutation-checked over all its splits (792 of them at
# 5 v 7), so fewer are simulated: power then moves in steps of 0.2%, its Monte Carlo error about 2% at 80%.
PERMUTED_SIMULATIONS = 500
POWER_SEED = 20261125


@dataclass(frozen=True)
class Design:
    sd_baseline: float
    sd_variant: float
    n_baseline: int
    n_variant: int
    extra: float = 0.0  # variance that more seeds do not shrink (a corpus metric's test-set part)
    # A pooled test (zoo/stats/pooled.py): sd_baseline = sd_variant = the pooled sd, over `arms` arms whose other
    # arms bring `other_df` degrees of freedom; 0 arms: Welch's test on the two arms.
    arms: int = 0
    other_df: float = 0.0

    @property
    def pooled(self) -> bool:
        return self.arms > 0

    @property
    def df(self) -> float:
        """A pooled design's degrees of freedom: its two arms' and the other arms'."""
        return self.other_df + self.n_baseline + self.n_variant - 2

    def with_seeds(self, n: int) -> Design:
        """The same design with n seeds in every arm (the other arms too, where pooled)."""
        other = (self.arms - 2) * (n - 1) if self.pooled else 0.0
        return replace(self, n_baseline=n, n_variant=n, other_df=other)

    @property
    def testable(self) -> bool:
        return min(self.n_baseline, self.n_variant) >= 2 and not any(
            math.isnan(x) for x in (self.sd_baseline, self.sd_variant, self.extra))


_stream = np.empty(0)  # the power model's standard normals, drawn once from POWER_SEED and grown on demand


def _normals(count: int) -> np.ndarray:
    """The first `count` standard normals of the POWER_SEED stream. numpy's Generator draws a stream the same
    however it is cut into arrays, so drawing it once and slicing gives every arm size the numbers it would get
    from its own draw, without drawing 6 MB again for each size `seeds_at` tries."""
    global _stream
    if _stream.size < count:
        _stream = np.random.default_rng(POWER_SEED).standard_normal(max(count, 2 * SIMULATIONS * MAX_SEEDS))
        _stream.flags.writeable = False  # every design's draws are views of it: none may change another's
    return _stream[:count]


def _draws(n_baseline: int, n_variant: int) -> tuple[np.ndarray, np.ndarray]:
    """Standard normal seeds for every simulated experiment of these arm sizes (views of one stream, as
    `rng.standard_normal((SIMULATIONS, n_baseline))` then `((SIMULATIONS, n_variant))` would draw them): the
    same for every effect, spread and level, so power grows with the effect as it should."""
    split = SIMULATIONS * n_baseline
    normals = _normals(split + SIMULATIONS * n_variant)
    return normals[:split].reshape(SIMULATIONS, n_baseline), normals[split:].reshape(SIMULATIONS, n_variant)


@lru_cache(maxsize=32)  # a design is asked about in runs (a bisection's ~20 calls); 32 x 4000 x 3 floats
def _noise(design: Design) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """Per simulated experiment: the difference's noise, its standard error, its df, and (unequal arms) the
    baseline and variant noise for the permutation check; none of them depends on the effect."""
    z_b, z_v = _draws(design.n_baseline, design.n_variant)
    if design.n_baseline != design.n_variant:
        z_b, z_v = z_b[:PERMUTED_SIMULATIONS], z_v[:PERMUTED_SIMULATIONS]
    base, var = design.sd_baseline * z_b, design.sd_variant * z_v
    v_b = base.var(axis=1, ddof=1) / design.n_baseline
    v_v = var.var(axis=1, ddof=1) / design.n_variant
    seed_part = v_b ** 2 / (design.n_baseline - 1) + v_v ** 2 / (design.n_variant - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(seed_part > 0, (v_b + v_v) ** 2 / seed_part, np.inf)
    se = np.sqrt(v_b + v_v + design.extra)
    noise = var.mean(axis=1) - base.mean(axis=1)
    arms = (base, var) if design.n_baseline != design.n_variant else None
    return noise, se, df, arms


@lru_cache(maxsize=32)  # as _noise: 1024 of these held 32 MB of the ablations report's peak, for no hits
def _critical(design: Design, level: float) -> np.ndarray:
    """Each simulated experiment's two-sided critical |t| at `level` for its own Welch df: the effect moves
    the t statistics, never these, so power at any effect is a comparison, not a t-distribution call."""
    return scipy_stats.t.ppf(1 - level / 2, _noise(design)[2])


def _pooled_power(design: Design, effect: float, level: float) -> float:
    """A pooled t test's power, exact under its model: one seed variance in every arm (estimated with the pooled
    df, so no simulation is needed: the t statistic is noncentral t with those df) and `extra` known."""
    se = math.sqrt(design.sd_baseline ** 2 * (1 / design.n_baseline + 1 / design.n_variant) + design.extra)
    if se == 0:
        return float(effect != 0)
    critical, shift = scipy_stats.t.ppf(1 - level / 2, design.df), abs(effect) / se
    return float(scipy_stats.nct.sf(critical, design.df, shift) + scipy_stats.nct.cdf(-critical, design.df, shift))


def power_at(design: Design, effect: float, level: float = ALPHA, permuted: bool = True) -> float:
    """Two-sided power at `level` of the report's test for a true difference `effect` (NaN where the design
    cannot be tested: fewer than 2 seeds an arm). `permuted=False` leaves out the unequal arms' permutation
    check: an upper bound, as the check can only take rejections away. A pooled design: `_pooled_power`."""
    if not design.testable or math.isnan(effect):
        return math.nan
    if design.pooled:
        return _pooled_power(design, effect, level)
    noise, se, _, arms = _noise(design)
    difference = effect + noise
    with np.errstate(divide="ignore", invalid="ignore"):  # p < level, as |t| beyond its critical value
        reject = np.where(se > 0, np.abs(difference) > _critical(design, level) * se, difference != 0)
    if arms is not None and permuted:  # run the permutation check only where Welch rejects
        rows = np.flatnonzero(reject)
        reject[rows] = permutation_p(arms[0][rows], arms[1][rows] + effect) < level
    return float(np.mean(reject))


def detectable_at(design: Design, level: float = ALPHA, power: float = POWER) -> float:
    """The smallest |difference| the design finds with probability `power` at `level`: 0 where both arms
    are constant and nothing else varies, infinite where no difference is found that often (unequal arms
    whose permutation floor is above `level`), NaN below 2 seeds an arm."""
    if not design.testable:
        return math.nan
    scale = math.sqrt(design.sd_baseline ** 2 / design.n_baseline + design.sd_variant ** 2 / design.n_variant
                      + design.extra)
    if scale == 0:
        return 0.0
    high = scale
    while power_at(design, high, level, permuted=False) < power:
        high *= 2
        if high > 1e6 * scale:
            return math.inf
    low = 0.0
    while high - low > 1e-3 * scale:  # bisection: simulated power is a step function of the effect
        middle = (low + high) / 2
        low, high = (middle, high) if power_at(design, middle, level, permuted=False) < power else (low, middle)
    if design.n_baseline == design.n_variant or design.pooled:
        return high
    # Unequal arms: Welch's answer is a lower bound; the permutation check (all splits, per simulated
    # experiment, the costly part) is run from there up in steps of 2%, where bisecting with it would run it
    # some fifteen times. The answer is then to 2%, as precise as spreads from a few seeds warrant.
    while power_at(design, high, level) < power:
        high *= 1.02
        if high > 1e6 * scale:
            return math.inf
    return high


def seeds_at(design: Design, effect: float, level: float = ALPHA, power: float = POWER,
             max_seeds: int = MAX_SEEDS) -> int | None:
    """The smallest equal number of seeds per arm (MIN_SEEDS..max_seeds: below it no verdict is given) with which
    the design, its spreads and extra variance kept, finds a true difference `effect` with probability `power` at
    `level`; None if none does."""
    if any(math.isnan(x) for x in (effect, design.sd_baseline, design.sd_variant, design.extra)):
        return None

    def enough(n: int) -> bool:
        return power_at(design.with_seeds(n), abs(effect), level) >= power

    if not enough(max_seeds):
        return None
    low, high = MIN_SEEDS - 1, max_seeds  # power grows with the seeds: bisect for the first n that is enough
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle) else (middle, high)
    return high
