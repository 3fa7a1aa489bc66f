"""Which `[sequential]` settings to declare: the cap, the round size, and the runs the design is expected to take.

Seeds until decided (zoo/stats/stopping.py) needs two numbers declared before its runs: `round_seeds` and
`max_seeds`, the cap. A comparison still open at the cap ends "undecided at the cap", so the cap should be where
the design, with the report's power, decides the comparisons the experiment is for. This sizes it from a pilot's
numbers (each arm's seed sd, each comparison's test-set term): numbers in, numbers out.

The cap is sized for the FIXED design that the last look roughly is: one test at the cap, at the level the last
look has. A comparison is planned to decide either way, so it needs both of

    equivalence   at a true difference 0, TOST within ±margin at one-sided level a_eq shows equivalence with
                  probability `power`
    difference    at a true difference of ±margin, the two-sided test at level a_diff rejects with probability
                  `power`

With n seeds per arm, seed sds s_b and s_v and a test-set term T (variance that more seeds do not shrink),

    se(n)² = (s_b² + s_v²) / n + T,     df(n) = (n − 1)(s_b² + s_v²)² / (s_b⁴ + s_v⁴)   (Welch's, of the seed part)

and (normal approximation with t quantiles at df(n), the usual iterative sample-size formula)

    equivalence   margin ≥ (t_{1−a_eq} + t_{(1+power)/2}) · se(n)
    difference    margin ≥ (t_{1−a_diff/2} + t_{power}) · se(n)

Why (1 + power)/2 for equivalence: at a true difference 0 the estimate d ~ N(0, se²) and TOST holds iff
|d| + t_{1−a}·se < margin, whose chance is 2Φ(margin/se − t_{1−a}) − 1: the estimate can miss on either side, so
each side may take only (1 − power)/2. The one-sided t_{power} in its place asks for about 30% fewer seeds than
80% power needs (2.48² against 2.93² at a = 0.05). The difference test's other tail is negligible at that effect.
Checked by simulating Welch's TOST (tests/test_plan_sequential.py): at sds 1, margin 1, the n this gives shows
equivalence in 80.6% of experiments, one seed fewer in 77%.

A comparison needs the smallest n meeting both; the cap is the largest such n over the task's comparisons (the
`limiting` one), rounded up to a whole number of rounds. As n grows se → sqrt(T) and df → ∞, so no number of
seeds suffices when (z_{1−a_eq} + z_{(1+power)/2}) · sqrt(T) ≥ margin (or the difference test's multiplier, which
is smaller at the usual power): the test set, not the seeds, limits the comparison (zoo/stats/noise.py's floor).

The levels. The sequential rule over m comparisons tests, at its last look, a difference at the nominal level of
Holm's first step (alpha/m spent O'Brien–Fleming over the looks) and equivalence by Bonferroni at alpha/m spent
the same way (stopping.py's docstring). O'Brien–Fleming spends almost all of it at the last look, so the fixed
design is sized at a_diff = a_eq = alpha/m first; the plan that cap gives then sets the levels its last look has
(`SequentialPlan.level_at`, `equivalence_level_at`: slightly lower, 0.041 against 0.05 at six looks), and the cap
is sized again at those, until the cap meets the need at its own plan's levels. The earlier looks add a little
power the fixed design lacks, so this errs towards more seeds. With the seed variance pooled over the arms
(`pool = "many-to-one"`) the test has more df than Welch's, so it errs the same way. The sds are a pilot's,
themselves uncertain at 5 seeds (zoo/stats/power.py's docstring): treat the cap as an order of magnitude.

Rounds: the candidate round size is kept unless the cap would take more than MAX_LOOKS looks, when the round is
raised until it does not. More looks buy little (O'Brien–Fleming spends almost nothing early) and each look waits
for a whole round of every open arm.

Expected runs: simulated through `decide_look`, the rule `zoo run --until-decided` applies. stopping.expected_runs
continues a design from the looks it has made, drawing from each arm's per-seed values; before any look there is
nothing for it to continue, so this starts at round 1, each arm's seeds drawn normal with its sd around a chosen
truth: every difference 0 (all arms equivalent), and the observed differences. A comparison with no seed sd
(fewer than 2 trained seeds an arm: its runs stalled) counts in the family but is never sized: the rule has no
estimate to decide it on, so it and the baseline go on to the cap.

    Arm(sd, term, difference)                   one variant as the pilot shows it
    recommend(baseline_sd, arms, margin, ...)   the settings, their expected runs and the fixed design's: Recommendation
    seeds_needed(sd_b, sd_v, term, margin, level, equivalence_level)   one comparison's n at given levels
    beyond_floor(term, margin, level, equivalence_level)               no n suffices: the test-set term alone
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

from zoo.stats import ALPHA, POWER
from zoo.stats.power import MAX_SEEDS
from zoo.stats.sequential import SequentialPlan
from zoo.stats.stopping import Decision, Estimate, decide_look, welch_estimate

ROUND_SEEDS = 5  # the candidate round size: docs/experiments.md's example, the size of most pilots
MIN_ROUND_SEEDS = 3  # the schema's least round_seeds: a look needs 3 seeds an arm for a verdict
MAX_LOOKS = 10  # rounds beyond it buy little power and each one waits for a whole round (module docstring)
DRAWS = 200  # simulated designs per expected-runs figure, as stopping.expected_runs draws


@dataclass(frozen=True)
class Arm:
    """One variant of the task as the pilot shows it: its seed sd (NaN: fewer than 2 trained seeds), its
    comparison's test-set term T (a variance, in the metric's units squared; 0 for a per-seed metric) and its
    observed difference from the baseline (variant − baseline)."""

    sd: float
    term: float = 0.0
    difference: float = 0.0

    @property
    def sized(self) -> bool:
        return not math.isnan(self.sd)


@dataclass(frozen=True)
class Recommendation:
    """What `recommend` advises for one task. `max_seeds` None: no cap up to `ceiling` suffices (`reason`)."""

    round_seeds: int
    max_seeds: int | None
    looks: int  # max_seeds / round_seeds; 0 without a cap
    limiting: str | None  # the comparison that sets the cap (or that no cap suffices for)
    needed: int | None  # seeds per arm it needs at the last look's levels (the cap rounds it up to whole rounds)
    reason: str | None  # why no cap suffices: the test-set term, or more than `ceiling` seeds
    expected_null: float | None  # runs (arms x seeds) expected from round 1 when every true difference is 0
    expected_observed: float | None  # ... when the true differences are the observed ones
    fixed_runs: int | None  # the fixed design at the cap: (variants + 1) x max_seeds
    unsized: tuple[str, ...] = ()  # comparisons with no seed sd: in the family, never decided (module docstring)


def _multipliers(level: float, equivalence_level: float, power: float, df):
    """(difference, equivalence): how many se fit in the margin for each test to have `power` (module docstring).
    df: a number or an array (per n); inf gives the normal quantiles."""
    t = scipy_stats.t
    difference = t.ppf(1 - level / 2, df) + t.ppf(power, df)
    equivalence = t.ppf(1 - equivalence_level, df) + t.ppf((1 + power) / 2, df)
    return difference, equivalence


def seeds_needed(sd_baseline: float, sd_variant: float, term: float, margin: float, level: float,
                 equivalence_level: float, power: float = POWER, ceiling: int = MAX_SEEDS) -> int | None:
    """The smallest n (2..ceiling) seeds per arm at which the fixed design both shows equivalence within ±margin at
    a true difference 0 (TOST at one-sided `equivalence_level`) and detects a difference of the margin (two-sided
    `level`) with probability `power`; None if none does. The formula: the module docstring."""
    n = np.arange(2, ceiling + 1)  # (N,) candidate seeds per arm
    seed_variance = sd_baseline ** 2 + sd_variant ** 2  # of one seed's difference: se² = this / n + term
    fourth = sd_baseline ** 4 + sd_variant ** 4
    df = (n - 1) * seed_variance ** 2 / fourth if fourth > 0 else np.full(len(n), np.inf)
    se = np.sqrt(seed_variance / n + term)
    difference, equivalence = _multipliers(level, equivalence_level, power, df)
    enough = np.flatnonzero(np.maximum(difference, equivalence) * se <= margin)
    return int(n[enough[0]]) if len(enough) else None


def beyond_floor(term: float, margin: float, level: float, equivalence_level: float, power: float = POWER) -> bool:
    """True when no number of seeds suffices: the test-set term alone, sqrt(T), takes more of the margin than
    the tests allow at infinite df."""
    return max(_multipliers(level, equivalence_level, power, math.inf)) * math.sqrt(term) >= margin


def _rounds(needed: int, candidate: int) -> tuple[int, int]:
    """(round_seeds, max_seeds): the candidate round, raised until ceil(needed / round) <= MAX_LOOKS; the cap is
    the smallest whole number of rounds that holds `needed` seeds."""
    round_seeds = max(candidate, MIN_ROUND_SEEDS, math.ceil(needed / MAX_LOOKS))
    return round_seeds, round_seeds * math.ceil(needed / round_seeds)


def recommend(baseline_sd: float, arms: Mapping[str, Arm], margin: float, alpha: float = ALPHA,
              power: float = POWER, round_seeds: int = ROUND_SEEDS, ceiling: int = MAX_SEEDS,
              draws: int = DRAWS) -> Recommendation:
    """The `[sequential]` settings for one task whose comparisons (each variant against the one baseline, one
    family of m = len(arms)) are `arms`, with equivalence margin `margin` (module docstring: how and why)."""
    m = max(len(arms), 1)
    sized = {name: arm for name, arm in arms.items() if arm.sized}
    unsized = tuple(name for name in arms if name not in sized)

    def without(reason: str, limiting: str | None = None) -> Recommendation:
        return Recommendation(max(round_seeds, MIN_ROUND_SEEDS), None, 0, limiting, None, reason, None, None, None,
                              unsized)

    if not sized or math.isnan(baseline_sd):
        return without("no comparison has 2 trained seeds an arm to size it from")
    levels = (alpha / m, alpha / m)  # (two-sided difference, one-sided equivalence): the fixed design's
    beyond = [name for name, arm in sized.items() if beyond_floor(arm.term, margin, *levels, power)]
    if beyond:
        worst = max(beyond, key=lambda name: sized[name].term)
        return without(f"its test-set term alone (sd {math.sqrt(sized[worst].term):.2g}) takes too much of the "
                       f"margin: no number of seeds gives {power:.0%} power both to show equivalence within "
                       f"±{margin:g} and to detect a difference of ±{margin:g} at alpha {alpha:g} over {m} comparisons "
                       "(more test sentences would)", worst)
    cap = 0
    while True:  # each pass stops or raises the cap, so this ends by the ceiling
        needs = {name: seeds_needed(baseline_sd, arm.sd, arm.term, margin, *levels, power, ceiling)
                 for name, arm in sized.items()}
        over = next((name for name, n in needs.items() if n is None), None)
        if over is not None:
            return without(f"it needs more than {ceiling} seeds an arm", over)
        limiting = max(needs, key=needs.get)  # the first of the largest, in the family's order
        if needs[limiting] <= cap:  # the cap meets the need at its own plan's levels
            break
        rounds, cap = _rounds(needs[limiting], round_seeds)
        if cap > ceiling:
            return without(f"it needs more than {ceiling} seeds an arm", limiting)
        last = SequentialPlan(alpha / m, rounds, cap)  # Holm's first step and the Bonferroni share: alpha / m
        levels = (last.level_at(last.looks), last.equivalence_level_at(last.looks))
    plan = SequentialPlan(alpha, rounds, cap)
    null = {name: 0.0 for name in arms}
    observed = {name: arm.difference for name, arm in arms.items()}
    return Recommendation(rounds, cap, plan.looks, limiting, needs[limiting], None,
                          _expected_runs(plan, baseline_sd, arms, null, margin, draws),
                          _expected_runs(plan, baseline_sd, arms, observed, margin, draws),
                          (len(arms) + 1) * cap, unsized)


def _expected_runs(plan: SequentialPlan, baseline_sd: float, arms: Mapping[str, Arm], truth: Mapping[str, float],
                   margin: float, draws: int, seed: int = 0) -> float:
    """Mean runs over `draws` simulated designs from round 1 (a fixed generator: the same figure each time, and
    the same draws for every truth): each arm's seeds normal around its `truth` (the baseline's around 0), each
    look's Welch estimate with the comparison's test-set term (stopping.py's stand-in for the report's test)
    decided by `decide_look`. Unsized arms never enter a look, so they stay open to the cap."""
    names = list(arms)
    rng = np.random.default_rng(seed)
    total = 0
    for _ in range(draws):
        baseline = np.empty(0)
        values = {name: np.empty(0) for name in names}
        looks: list[dict[str, Estimate]] = []
        decided: dict[str, Decision] = {}
        still = names
        for k in range(1, plan.looks + 1):
            n = plan.seeds_at(k) - (plan.seeds_at(k - 1) if k > 1 else 0)
            total += n * (1 + len(still))
            baseline = np.concatenate([baseline, rng.normal(0.0, baseline_sd, n)])
            for name in still:
                if arms[name].sized:
                    values[name] = np.concatenate([values[name], rng.normal(truth[name], arms[name].sd, n)])
            looks.append({name: welch_estimate(baseline, values[name], arms[name].term, True)
                          for name in still if arms[name].sized})
            decided.update(decide_look(plan, looks, names, margin, decided))
            still = [name for name in still if name not in decided]
            if not still:
                break
    return total / draws
