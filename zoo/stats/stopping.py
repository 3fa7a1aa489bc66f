"""When an arm stops getting seeds: the decision rule of seeds-until-decided, applied look by look.

zoo/stats/sequential.py gives the levels; this applies them to the comparisons of one task (every variant
against the one baseline, on the primary metric) after each round of seeds, as `zoo run --until-decided` and
the report both do (zoo/report/sequential.py reads the estimates from the records; `expected_runs` simulates
them). Numbers in, decisions out: nothing here knows about records or files.

At look k (k = 1..K, seeds so far / cap = the plan's information fraction t_k):

    better / worse   the comparison is rejected by the sequential Holm procedure (`holm_rejections`) over every
                     comparison of the task, on the two-sided p of every look it was analysed at (NaN after it
                     stopped), each look's nominal level from the Lan–DeMets spending at alpha/|not rejected|;
                     the direction is that of the difference at the look whose p crossed.
    equivalent       TOST within ±margin at the one-sided spent level of look k (`equivalence_levels`) at
                     alpha/m_k, m_k = the comparisons not yet shown equivalent (Bonferroni over them at this look).
    open             neither; after the last look (the cap): undecided at the cap.

An arm decided at look k gets no more seeds; the baseline goes on while any comparison is open. A decision is
final: a comparison stopped as equivalent may later be rejected for a difference by the sequential Holm on its
earlier p (a share freed by other rejections); it stays "equivalent" (both claims would hold: a difference
smaller than the margin).

Why these two budgets are valid (each family-wise at alpha, as zoo/stats/sequential.py's module docstring sets
out for one comparison: a false "better/worse" and a false "equivalent" are errors under different truths):
- differences: Maurer & Bretz's sequential Holm, `sequential_holm`'s docstring. The arms stopped as equivalent
  stay in its count, holding their share unused: their difference null was not rejected, and only a rejection
  may pass a share on.
- equivalences: Bonferroni at each look over the comparisons not yet shown equivalent. That is Holm's step-down
  for the equivalence nulls without its retroactive part (no earlier look is tested again at a freed level), so
  its equivalence claims are a subset of those of the closed test whose intersections are weighted-Bonferroni
  group-sequential TOSTs (error ≤ alpha under any dependence): simple, and valid. The arms decided better or worse
  stay in m_k: their equivalence null was not rejected, so dropping them would pass on a share the closure
  argument does not free (at a true difference of exactly the margin, an arm can be "better" and its
  equivalence null still true).

Multiplicity is per task: the task's comparisons are one family at alpha, as each task of a sequential experiment
is its own design (each task's arms stop on their own).

    Estimate                         one comparison at one look: difference, se, df, two-sided p, direction
    Decision                         what a comparison's looks decided, and on which numbers
    decide_look(...)                 the decisions one more look adds
    decide_ahead(...)                a whole design on every look's statistics drawn ahead (simulations)
    decide(plan, looks, names, margin)   every comparison's decision after the looks made
    expected_runs(...)               the runs a design is expected to take, by simulation through decide_look
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

from zoo.stats import BETTER, WORSE
from zoo.stats.sequential import (
    SequentialPlan,
    Spending,
    equivalence_levels,
    equivalent_at,
    holm_rejections,
    nominal_levels,
    obrien_fleming_spending,
)

EQUIVALENT, OPEN, CAP = "equivalent", "open", "undecided at the cap"
DECIDED = (BETTER, WORSE, EQUIVALENT)


@dataclass(frozen=True)
class Estimate:
    """One comparison at one look: variant − baseline, its standard error and df (as the report's test has them:
    Welch, corpus or pooled), its two-sided p (NaN: too few seeds), and which way is better."""

    difference: float
    se: float
    df: float
    p: float
    higher_is_better: bool = True


@dataclass(frozen=True)
class Decision:
    """What the looks decided for one comparison.

    kind          better | worse | equivalent | open (a later look may decide) | undecided at the cap
    look          the look it was decided at; open and at the cap: the last look it was analysed at
    estimate      the comparison at `look`
    p             better/worse: the p that fell below `level` (look `crossed`'s); otherwise the estimate's
    level         better/worse: the two-sided nominal level its p fell below (at look `crossed`, with the
                  Holm share it had then); otherwise the level its p at `look` had to fall below there
    crossed       better/worse: the look whose p fell below `level` (earlier than `look` only when another
                  rejection freed a share); otherwise `look`
    equivalence_level   the one-sided TOST level at `look` (NaN: no margin declared)
    seeds, cap    the seeds per arm the plan has at `look`, and at its last look
    also_equivalent     decided better/worse at a look where its TOST held as well
    """

    kind: str
    look: int
    estimate: Estimate
    p: float
    level: float
    crossed: int
    equivalence_level: float
    seeds: int
    cap: int
    also_equivalent: bool = False

    @property
    def decided(self) -> bool:
        return self.kind in DECIDED


def _equivalence_level(plan: SequentialPlan, look: int, open_: int, margin: float | None,
                       spending: Spending) -> float:
    if margin is None:
        return math.nan
    return float(equivalence_levels(plan.fractions(look), plan.alpha / max(open_, 1), spending)[-1])


def decide_look(plan: SequentialPlan, looks: Sequence[Mapping[str, Estimate]], names: Sequence[str],
                margin: float | None, decided: Mapping[str, Decision],
                spending: Spending = obrien_fleming_spending) -> dict[str, Decision]:
    """The comparisons that look k = len(looks) decides, given the earlier looks' `decided` ones. `looks[j]`
    holds look j + 1's estimates of the comparisons analysed then (the ones still open); `names` is the task's
    whole family, in a fixed order."""
    k = len(looks)
    fractions = plan.fractions(k)
    p = [[looks[j][name].p if name in looks[j] else math.nan for j in range(k)] for name in names]
    rejections = holm_rejections(p, fractions, plan.alpha, spending)
    shown = sum(d.kind == EQUIVALENT or d.also_equivalent for d in decided.values())
    eq_level = _equivalence_level(plan, k, len(names) - shown, margin, spending)
    not_rejected = max(sum(r is None for r in rejections), 1)
    open_level = float(nominal_levels(fractions, plan.alpha / not_rejected, spending)[-1])
    out = {}
    for name, rejection in zip(names, rejections):
        if name in decided or name not in looks[-1]:
            continue
        now = looks[-1][name]
        equivalent = margin is not None and bool(equivalent_at(now.difference, now.se, now.df, margin, eq_level))
        if rejection is not None:
            at = looks[rejection.crossed - 1][name]
            level = float(nominal_levels(fractions, plan.alpha / rejection.share, spending)[rejection.crossed - 1])
            kind = BETTER if (at.difference > 0) == at.higher_is_better else WORSE
            out[name] = Decision(kind, k, now, at.p, level, rejection.crossed, eq_level, plan.seeds_at(k),
                                 plan.max_seeds, equivalent)
        elif equivalent:
            out[name] = Decision(EQUIVALENT, k, now, now.p, open_level, k, eq_level, plan.seeds_at(k), plan.max_seeds)
    return out


def decide(plan: SequentialPlan, looks: Sequence[Mapping[str, Estimate]], names: Sequence[str],
           margin: float | None, spending: Spending = obrien_fleming_spending) -> dict[str, Decision]:
    """Every comparison's Decision after the looks made (see `decide_look`); a comparison never analysed gets
    none. Open ones say the level their last p was held to."""
    decided: dict[str, Decision] = {}
    for k in range(1, len(looks) + 1):
        decided.update(decide_look(plan, looks[:k], names, margin, decided, spending))
    out = {}
    for name in names:
        if name in decided:
            out[name] = decided[name]
            continue
        seen = [k for k in range(1, len(looks) + 1) if name in looks[k - 1]]
        if not seen:
            continue
        k = seen[-1]
        p = [[looks[j][n].p if n in looks[j] else math.nan for j in range(k)] for n in names]
        still = max(sum(r is None for r in holm_rejections(p, plan.fractions(k), plan.alpha, spending)), 1)
        level = float(nominal_levels(plan.fractions(k), plan.alpha / still, spending)[-1])
        shown = sum(d.kind == EQUIVALENT or d.also_equivalent for d in decided.values() if d.look < k)
        now = looks[k - 1][name]
        kind = CAP if len(looks) == plan.looks and k == plan.looks else OPEN
        eq_level = _equivalence_level(plan, k, len(names) - shown, margin, spending)
        out[name] = Decision(kind, k, now, now.p, level, k, eq_level, plan.seeds_at(k), plan.max_seeds)
    return out


def decide_ahead(plan: SequentialPlan, estimates: Sequence[Mapping[str, Estimate]], names: Sequence[str],
                 margin: float | None, spending: Spending = obrien_fleming_spending) -> tuple[dict[str, Decision], int]:
    """A whole sequential design on statistics drawn ahead for every look, as a simulation has them:
    `estimates[k - 1][name]` is the comparison's estimate at look k as if its arm trained to the cap. Look k
    analyses only the comparisons still open, with `decide_look`, as the runs do. Returns the decisions and the
    looks made (the baseline trains while any comparison is open)."""
    decided: dict[str, Decision] = {}
    history: list[dict[str, Estimate]] = []
    for look in estimates[:plan.looks]:
        open_ = [name for name in names if name not in decided]
        if not open_:
            break
        history.append({name: look[name] for name in open_})
        decided.update(decide_look(plan, history, names, margin, decided, spending))
    return decided, len(history)


def welch_estimate(base: np.ndarray, other: np.ndarray, term: float, higher_is_better: bool) -> Estimate:
    """The simulation's stand-in for the report's test: Welch over seeds, with a test-set term added to se²."""
    vb, vv = base.var(ddof=1) / len(base), other.var(ddof=1) / len(other)
    se = math.sqrt(vb + vv + term)
    df = (vb + vv) ** 2 / (vb ** 2 / (len(base) - 1) + vv ** 2 / (len(other) - 1)) if vb + vv > 0 else math.inf
    d = float(other.mean() - base.mean())
    p = float(2 * scipy_stats.t.sf(abs(d) / se, df)) if se > 0 else float(d == 0)
    return Estimate(d, se, df, p, higher_is_better)


def expected_runs(plan: SequentialPlan, looks: Sequence[Mapping[str, Estimate]], names: Sequence[str],
                  margin: float | None, baseline: Sequence[float], arms: Mapping[str, Sequence[float]],
                  terms: Mapping[str, float], rounds: Sequence[int], draws: int = 200,
                  seed: int = 0) -> float | None:
    """The runs a task's design is expected to train after the looks made so far (rounds len(looks) + 1 on; the
    caller adds the rounds those looks analysed): each arm's
    seeds drawn from a normal distribution with its observed mean and seed sd (the current estimates taken as the
    truth: a plug-in model), each comparison's test-set variance `terms` added to its se², every seed training
    (no stalls), and each simulated look decided by `decide_look`, the rule the runs use. `looks`: the real looks
    made so far; `baseline`, `arms`: the per-seed values of the last look; `rounds[r]`: the seeds of round r + 1.
    Returns the mean over `draws` simulated continuations (a fixed generator: the same forecast each time), or
    None where an arm with an open comparison has fewer than 2 values to draw from."""
    decided = decide(plan, looks, names, margin)
    open_ = [name for name in names if name in decided and not decided[name].decided]
    done = {name: d for name, d in decided.items() if d.decided}
    base = np.asarray(baseline, dtype=float)
    values = {name: np.asarray(arms.get(name, ()), dtype=float) for name in open_}
    if not open_ or len(looks) >= plan.looks:
        return 0.0
    if len(base) < 2 or any(len(v) < 2 for v in values.values()):
        return None
    higher = decided[open_[0]].estimate.higher_is_better
    rng = np.random.default_rng(seed)
    total = 0.0
    for _ in range(draws):
        sim_looks, sim_done, b, arm = list(looks), dict(done), base, dict(values)
        still = list(open_)
        for k in range(len(looks) + 1, plan.looks + 1):
            n = rounds[k - 1]
            total += n * (1 + len(still))
            b = np.concatenate([b, rng.normal(base.mean(), base.std(ddof=1), n)])
            for name in still:
                arm[name] = np.concatenate([arm[name], rng.normal(values[name].mean(), values[name].std(ddof=1), n)])
            sim_looks.append({name: welch_estimate(b, arm[name], terms.get(name, 0.0), higher) for name in still})
            sim_done.update(decide_look(plan, sim_looks, names, margin, sim_done))
            still = [name for name in still if name not in sim_done]
            if not still:
                break
    return total / draws
