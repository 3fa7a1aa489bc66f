"""Seeds until decided: group-sequential boundaries (Lan–DeMets alpha spending) for rounds of seeds.

zoo can train seeds in rounds (e.g. 5 per arm per round up to a declared cap of 30: 6 looks) and analyse every
variant-vs-baseline comparison after each round; an arm whose comparison is decided (better, worse, or
equivalent within a declared margin) gets no more seeds. Testing at alpha at every look would inflate the error
(6 looks at 0.05 with Welch's test: 0.15, simulated in tests/test_sequential.py), so each look gets its own,
smaller, nominal level from an alpha-spending function (Lan & DeMets 1983, "Discrete sequential boundaries for
clinical trials", Biometrika 70:659–663). Numbering: looks count from 1 (look 1 = after the first round).

Information and spending
------------------------
The information in a difference of means with n seeds per arm is proportional to n, so the information fraction
of a look is t = seeds so far / cap (per arm). The O'Brien–Fleming-type spending function at level a is
a(t) = 2 − 2 Φ(z_{1−a/2} / sqrt(t)); Pocock-type a·ln(1 + (e − 1) t) spends evenly (`pocock_spending`). A
spending function spends one side's error: the two-sided test at level alpha spends alpha/2 on each side, total
2·a(t) with a = alpha/2 — the convention of ld98 / R ldbounds (Reboussin et al. 2000) and gsDesign, whose
published boundaries it reproduces (5 equal looks: 4.877, 3.357, 2.680, 2.290, 2.031). (Putting the two-sided
alpha into the formula directly, Lan & DeMets' own form, is also valid but spends more early: 4.383 ... 2.064.)
O'Brien–Fleming spends almost nothing early (6 looks: look 1's level is 8e-8), so the last look's level stays
close to alpha (0.041) and the design costs little power against the fixed 30-seed design (simulated below).

The boundaries (Armitage, McPherson & Rowe 1969; Jennison & Turnbull 2000, "Group Sequential Methods with
Applications to Clinical Trials", ch. 19): with Z_k = S_k / sqrt(I_k) and independent increments,

    Z_k = r_k Z_{k−1} + s_k ε_k,   r_k = sqrt(t_{k−1} / t_k),   s_k = sqrt((t_k − t_{k−1}) / t_k),   ε_k ~ N(0, 1)

under the null. c_k solves P(|Z_j| < c_j for j < k, |Z_k| ≥ c_k) = alpha(t_k) − alpha(t_{k−1}). With f_{k−1}
the (sub-)density of Z_{k−1} on the continuation region C_{k−1} = (−c_{k−1}, c_{k−1}) (f_1 = φ):

    exit_k(c) = ∫_{C_{k−1}} f_{k−1}(z) [Φ((−c − r_k z)/s_k) + 1 − Φ((c − r_k z)/s_k)] dz     (solved for c_k)
    f_k(z')   = ∫_{C_{k−1}} f_{k−1}(z) φ((z' − r_k z)/s_k) / s_k dz,   z' ∈ C_k

Each integral is Simpson's rule on a grid whose step is at most STEP and at most 1/KERNEL_STEPS of the kernel's
width s_{k+1}/r_{k+1} (so unequal, even close, fractions stay accurate): the boundaries agree with rpact's to its
7 digits and the spent alpha with the target to about 1e-7 (tests/test_sequential.py: published ldbounds /
rpact values, and scipy's multivariate normal probabilities). One-sided boundaries (P(Z_j < c_j for j < k, Z_k ≥ c_k) =
increment) use the same recursion with C_k = (−LOW, c_k).

The t statistic
---------------
With few seeds the statistic is a Welch t, not a z. zoo applies the normal-theory nominal level
2(1 − Φ(c_k)) to the look's t-test p-value: the usual "significance level" approximation for an estimated
variance (Jennison & Turnbull 2000 discuss it for group-sequential t-tests; the exact section was not checked
here). What this module relies on is the simulation in tests/test_sequential.py: Welch p-values at 5, 10, ..., 30
seeds per arm against these levels keep the false-rejection rate at or below alpha.

Equivalence (two separately spent budgets)
------------------------------------------
"Equivalent within ±margin" is Schuirmann's TOST (zoo/stats/tost.py): both one-sided tests reject. A false
"equivalent" at a true difference of +margin needs the upper one-sided test (H0: difference ≥ margin) to reject
at some look, and that test alone is a one-sided sequential test; so each one-sided test gets ONE-sided
O'Brien–Fleming boundaries c'_k at level alpha, i.e. a nominal one-sided level a_k = 1 − Φ(c'_k), and look k
declares equivalence when the (1 − 2 a_k) interval lies inside (−margin, margin) (intersection–union: both at
a_k, the claim at alpha, as in the fixed-design TOST at alpha). The difference claim ("better/worse", two-sided
spending at alpha) and the equivalence claim are errors under different truths (a difference of 0, a difference
of ±margin), so each keeps its own alpha: false "better/worse" under the null ≤ alpha, false "equivalent" at a
difference equal to the margin ≤ alpha. An arm stopped by either claim only loses the other's later looks,
which can only lower that one's error.

Multiplicity across comparisons: `sequential_holm` (Maurer & Bretz 2013, below).

    obrien_fleming_spending(t, a)            one side's spending a(t), O'Brien–Fleming type (pocock_spending: Pocock)
    boundaries(fractions, alpha)             two-sided critical |z| at each look
    one_sided_boundaries(fractions, alpha)   one-sided critical z at each look (for the TOST)
    nominal_levels(fractions, alpha)         two-sided p thresholds 2(1 − Φ(c_k)) (what a look's p must fall below)
    equivalence_levels(fractions, alpha)     one-sided levels a_k = 1 − Φ(c'_k) of the TOST's two tests
    equivalent_at(d, se, df, margin, level)  TOST at one-sided level `level` (= a_k)
    SequentialPlan(alpha, round_seeds, max_seeds)   fractions, level_at(look), equivalence_level_at(look)
    sequential_holm(p_by_look, fractions, alpha)    the look at which each comparison is rejected, or None
    holm_rejections(p_by_look, fractions, alpha)    the same, with the look whose p crossed and the share it had
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import optimize
from scipy.special import ndtr, ndtri

from zoo.stats import ALPHA
from zoo.stats.tost import tost_from

STEP = 0.05  # largest grid step in z (Simpson's rule) ...
KERNEL_STEPS = 10  # ... and at least this many steps per width s/r of the next look's kernel; doubling both
# moves no boundary by more than 1e-5
LOW = 9.0  # one-sided continuation regions start at −LOW (P(Z < −9) ≈ 1e-19) and two-sided ones are cut at ±LOW
MAX_POINTS = 2001  # grid points per look at most (only fractions closer than ~0.001 would ask for more)
_SQRT_2PI = math.sqrt(2 * math.pi)

Spending = Callable[[float, float], float]


def obrien_fleming_spending(t: float, alpha: float = ALPHA) -> float:
    """Lan–DeMets O'Brien–Fleming type: alpha(t) = 2 − 2 Φ(z_{1−alpha/2} / sqrt(t)); alpha(1) = alpha."""
    if t <= 0:
        return 0.0
    return float(2 * (1 - ndtr(ndtri(1 - alpha / 2) / math.sqrt(min(t, 1.0)))))


def pocock_spending(t: float, alpha: float = ALPHA) -> float:
    """Lan–DeMets Pocock type: alpha(t) = alpha · ln(1 + (e − 1) t); alpha(1) = alpha."""
    return float(alpha * math.log(1 + (math.e - 1) * min(max(t, 0.0), 1.0)))


def _fractions(fractions: Sequence[float]) -> tuple[float, ...]:
    t = tuple(float(x) for x in fractions)
    if not t or t[0] <= 0 or t[-1] > 1 + 1e-12 or any(b <= a for a, b in zip(t, t[1:])):
        raise ValueError(f"fractions must increase strictly within (0, 1], got {list(fractions)}")
    return t


def _simpson(lo: float, hi: float, step: float) -> tuple[np.ndarray, np.ndarray]:
    """Grid points and Simpson weights on [lo, hi] (an odd number of points, step at most `step`)."""
    intervals = max(2, 2 * math.ceil((hi - lo) / (2 * step)))
    intervals = min(intervals, MAX_POINTS - 1)
    z = np.linspace(lo, hi, intervals + 1)
    w = np.ones(intervals + 1)
    w[1:-1:2], w[2:-1:2] = 4.0, 2.0
    return z, w * (hi - lo) / (3 * intervals)


def _exit(c: float, mass: np.ndarray, mean: np.ndarray, s: float, two_sided: bool, target: float = 0.0) -> float:
    """exit_k(c) − target: the chance of going on at look k − 1 (Simpson mass at z; mean = r z) and crossing ±c
    (one-sided: +c) at look k, less the increment it must equal."""
    crossed = ndtr((mean - c) / s)  # P(r z + s ε ≥ c)
    if two_sided:
        crossed = crossed + ndtr((-c - mean) / s)
    return float(np.sum(mass * crossed)) - target


def _boundaries(t: tuple[float, ...], alpha: float, spending: Spending, two_sided: bool) -> np.ndarray:
    """The recursion of the module docstring: critical values c_1..c_K (inf where a look spends nothing)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    sides = 2 if two_sided else 1
    spent = np.array([sides * spending(x, alpha / sides) for x in t])  # two-sided: alpha/2 on each side
    increments = np.diff(spent, prepend=0.0)
    out = np.empty(len(t))
    z = weights = density = None
    for k in range(len(t)):
        target = increments[k]
        if k == 0:
            out[k] = -ndtri(target / sides) if target > 0 else math.inf
        else:
            r, s = math.sqrt(t[k - 1] / t[k]), math.sqrt((t[k] - t[k - 1]) / t[k])
            flow = (weights * density, r * z, s, two_sided)
            if target <= 1e-15 or _exit(2 * LOW, *flow) >= target:
                out[k] = math.inf
            else:
                out[k] = optimize.brentq(_exit, 0.0 if two_sided else -LOW, 2 * LOW, args=(*flow, target), xtol=1e-10)
        if k == len(t) - 1:
            break
        # the continuation region's density at look k, on a grid fine enough for the next look's kernel
        r_next, s_next = math.sqrt(t[k] / t[k + 1]), math.sqrt((t[k + 1] - t[k]) / t[k + 1])
        hi = min(out[k], LOW)
        lo = -hi if two_sided else -LOW
        new_z, new_weights = _simpson(lo, hi, min(STEP, s_next / r_next / KERNEL_STEPS))
        if k == 0:
            new_density = np.exp(-new_z ** 2 / 2) / _SQRT_2PI
        else:
            kernel = np.exp(-((new_z[:, None] - r * z[None, :]) / s) ** 2 / 2) / (s * _SQRT_2PI)
            new_density = kernel @ (weights * density)
        z, weights, density = new_z, new_weights, new_density
    return out


@lru_cache(maxsize=4096)
def _cached(t: tuple[float, ...], alpha: float, spending: Spending, two_sided: bool) -> np.ndarray:
    out = _boundaries(t, alpha, spending, two_sided)
    out.flags.writeable = False
    return out


def boundaries(fractions: Sequence[float], alpha: float = ALPHA,
               spending: Spending = obrien_fleming_spending) -> np.ndarray:
    """Two-sided critical values c_k: reject at look k when |Z_k| ≥ c_k. `fractions`: information fractions
    (seeds / cap) of the looks made so far, strictly increasing in (0, 1]; c_k depends on looks 1..k only."""
    return _cached(_fractions(fractions), float(alpha), spending, True).copy()


def one_sided_boundaries(fractions: Sequence[float], alpha: float = ALPHA,
                         spending: Spending = obrien_fleming_spending) -> np.ndarray:
    """One-sided critical values c'_k at total one-sided level alpha: reject at look k when Z_k ≥ c'_k. The
    spending function is the same formula with alpha the one-sided level (gsDesign's sfLDOF for test.type 1)."""
    return _cached(_fractions(fractions), float(alpha), spending, False).copy()


def nominal_levels(fractions: Sequence[float], alpha: float = ALPHA,
                   spending: Spending = obrien_fleming_spending) -> np.ndarray:
    """Two-sided nominal p thresholds 2(1 − Φ(c_k)): look k's (t-test) p-value must fall below the k-th."""
    return 2 * ndtr(-boundaries(fractions, alpha, spending))


def equivalence_levels(fractions: Sequence[float], alpha: float = ALPHA,
                       spending: Spending = obrien_fleming_spending) -> np.ndarray:
    """One-sided nominal levels a_k = 1 − Φ(c'_k) of each one-sided test of the TOST at look k."""
    return ndtr(-one_sided_boundaries(fractions, alpha, spending))


def equivalent_at(difference: float, se: float, df: float, margin: float, level: float) -> bool | None:
    """Equivalent within ±margin at a look: both one-sided tests reject at one-sided level `level` (= a_k of
    `equivalence_levels`), i.e. the (1 − 2·level) interval lies inside (−margin, margin). None: no standard
    error (too few seeds). zoo/stats/tost.py's `tost_from` with alpha = level gives the interval and p too."""
    return tost_from(difference, se, df, margin, alpha=level).equivalent


@dataclass(frozen=True)
class SequentialPlan:
    """Rounds of `round_seeds` seeds per arm up to `max_seeds`: look k has min(k·round_seeds, max_seeds) seeds,
    fraction seeds / max_seeds (the last look is at the cap even when the cap is not a multiple of the round)."""

    alpha: float = ALPHA
    round_seeds: int = 5
    max_seeds: int = 30

    def __post_init__(self):
        if not 0 < self.alpha < 1 or self.round_seeds < 1 or self.max_seeds < self.round_seeds:
            raise ValueError(f"SequentialPlan: need 0 < alpha < 1 and 1 <= round_seeds <= max_seeds, got {self}")

    @property
    def looks(self) -> int:
        return math.ceil(self.max_seeds / self.round_seeds)

    def seeds_at(self, look: int) -> int:
        if not 1 <= look <= self.looks:
            raise ValueError(f"look must be in 1..{self.looks}, got {look}")
        return min(look * self.round_seeds, self.max_seeds)

    def fractions(self, looks_done: int) -> np.ndarray:
        """Information fractions of looks 1..looks_done."""
        return np.array([self.seeds_at(k) / self.max_seeds for k in range(1, looks_done + 1)])

    def level_at(self, look: int) -> float:
        """Two-sided nominal level of look `look` (p < it: better or worse)."""
        return float(nominal_levels(self.fractions(look), self.alpha)[-1])

    def equivalence_level_at(self, look: int) -> float:
        """One-sided nominal level a_k of each of the TOST's tests at look `look` (equivalent_at's `level`)."""
        return float(equivalence_levels(self.fractions(look), self.alpha)[-1])


def sequential_holm(p_by_look: Sequence[Sequence[float]], fractions: Sequence[float],
                    alpha: float = ALPHA, spending: Spending = obrien_fleming_spending) -> list[int | None]:
    """Holm over comparisons under sequential looks (Maurer & Bretz 2013, "Multiple testing in group sequential
    trials using graphical approaches", Statistics in Biopharmaceutical Research 5:311–320; Holm is their
    graph with equal weights passed on equally). Returns, per comparison, the look (from 1) at which it is
    rejected, or None. `p_by_look[i][k − 1]`: comparison i's two-sided p at look k, NaN (or missing at the
    end) where it was not looked at (it had stopped); `fractions`: the looks' information fractions.

    At look k, each open comparison is tested at level alpha/|open| with the boundaries of that level for ALL
    looks 1..k (spending recomputed at the new level, earlier looks included): rejected if its p at some look
    j ≤ k is below nominal_levels(fractions, alpha/|open|)[j − 1]. A rejection frees its level for the others
    (|open| shrinks), which are then tested again at this and earlier looks, until nothing more is rejected.

    Why it holds the family-wise error at alpha: it is the shortcut of a closed test whose intersection
    hypothesis H_J is tested by the weighted-Bonferroni group-sequential test (each j in J with its own
    spending at alpha/|J| over all looks), whose error is at most Σ_j alpha/|J| = alpha under any dependence
    (shared baseline included). The shortcut is exact because the nominal levels grow with the level at every
    look (checked for the O'Brien–Fleming and Pocock types in tests/test_sequential.py), Maurer & Bretz's
    condition. What was checked here: that argument, and the simulation (10 comparisons against a shared
    baseline under the global null, family-wise error ≤ alpha within Monte-Carlo error); the paper's exact
    wording was not available to compare with."""
    return [None if r is None else r.look for r in holm_rejections(p_by_look, fractions, alpha, spending)]


@dataclass(frozen=True)
class Rejection:
    """How `holm_rejections` rejected a comparison: at look `look`, on the p of look `crossed` (≤ look: earlier
    when a rejection elsewhere freed its level), which fell below nominal_levels(fractions, alpha/share)[crossed
    − 1], `share` being the comparisons still open then."""

    look: int
    crossed: int
    share: int


def holm_rejections(p_by_look: Sequence[Sequence[float]], fractions: Sequence[float], alpha: float = ALPHA,
                    spending: Spending = obrien_fleming_spending) -> list[Rejection | None]:
    """`sequential_holm` with each rejection's details (Rejection), or None where a comparison is not rejected:
    what a report needs to say which p fell below which level."""
    looks = len(_fractions(fractions))
    p = np.full((len(p_by_look), looks), np.nan)
    for i, row in enumerate(p_by_look):
        if len(row) > looks:
            raise ValueError(f"comparison {i} has {len(row)} looks, fractions only {looks}")
        p[i, :len(row)] = row
    levels = {m: nominal_levels(fractions, alpha / m, spending) for m in range(1, len(p) + 1)}
    rejected: list[Rejection | None] = [None] * len(p)
    for k in range(1, looks + 1):
        while True:
            open_ = [i for i, r in enumerate(rejected) if r is None]
            if not open_:
                return rejected
            with np.errstate(invalid="ignore"):
                below = {i: np.flatnonzero(p[i, :k] < levels[len(open_)][:k]) for i in open_}
            hits = [i for i in open_ if len(below[i])]
            if not hits:
                break
            for i in hits:
                rejected[i] = Rejection(k, int(below[i][0]) + 1, len(open_))
    return rejected
