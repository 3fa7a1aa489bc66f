"""zoo/stats/stopping.py: the seeds-until-decided rule look by look (sequential Holm for differences, spent and
Bonferroni'd TOSTs for equivalence), on hand-made estimates whose decisions are known, and the runs forecast."""

from __future__ import annotations

import math

import numpy as np
import pytest

from zoo.stats.sequential import SequentialPlan, equivalence_levels, holm_rejections, nominal_levels, sequential_holm
from zoo.stats.stopping import CAP, EQUIVALENT, OPEN, Estimate, decide, expected_runs

PLAN = SequentialPlan(alpha=0.05, round_seeds=5, max_seeds=30)  # six looks


def est(difference: float, p: float, se: float = 1.0, df: float = 20.0) -> Estimate:
    return Estimate(difference, se, df, p)


def test_a_p_below_alpha_but_above_the_spent_level_decides_nothing_at_the_first_look():
    """Look 1 of 6 spends almost nothing (O'Brien–Fleming): p = 0.01 is no decision there, and p = 1e-9 is."""
    level = nominal_levels(PLAN.fractions(1), 0.05)[0]
    assert level < 1e-6
    assert decide(PLAN, [{"a": est(3.0, 0.01)}], ["a"], None)["a"].kind == OPEN
    decision = decide(PLAN, [{"a": est(3.0, 1e-9)}], ["a"], None)["a"]
    assert (decision.kind, decision.look, decision.level) == ("better", 1, pytest.approx(level))


def test_the_direction_follows_the_metric():
    worse = decide(PLAN, [{"a": Estimate(3.0, 1.0, 20.0, 1e-9, higher_is_better=False)}], ["a"], None)["a"]
    assert worse.kind == "worse"


def test_a_rejection_frees_its_share_for_the_others_at_earlier_looks_too():
    """B's look-1 p lies between look 1's level at alpha/2 and at alpha: not rejected while A is open, rejected
    (on its look-1 p, in that look's direction) at the look where A is, as Maurer & Bretz's sequential Holm does."""
    fractions = PLAN.fractions(2)
    halved, whole = nominal_levels(fractions, 0.025), nominal_levels(fractions, 0.05)
    between = math.sqrt(halved[0] * whole[0])
    looks = [{"a": est(2.0, 0.5), "b": est(1.0, between)}, {"a": est(4.0, 1e-12), "b": est(-0.5, 0.6)}]
    first = decide(PLAN, looks[:1], ["a", "b"], None)
    assert first["b"].kind == OPEN
    decisions = decide(PLAN, looks, ["a", "b"], None)
    assert (decisions["a"].kind, decisions["a"].look) == ("better", 2)
    b = decisions["b"]
    assert (b.kind, b.look, b.crossed, b.p) == ("better", 2, 1, between)
    assert b.level == pytest.approx(whole[0])
    assert holm_rejections([[0.5, 1e-12], [between]], fractions)[1].share == 1
    assert sequential_holm([[0.5, 1e-12], [between]], fractions) == [2, 2]


def test_equivalence_is_split_over_the_comparisons_not_yet_shown_equivalent():
    """At look 2, with two comparisons and none shown equivalent, the TOST level is the one-sided spent level at
    alpha/2; once one is equivalent the other's is at alpha/1. An arm decided better keeps its share (its own
    equivalence null was not rejected)."""
    fractions = PLAN.fractions(2)
    at_half, at_whole = (equivalence_levels(fractions, a)[-1] for a in (0.025, 0.05))
    tight = est(0.0, 0.9, se=0.1, df=30)  # well inside ±1 at any level of look 2
    better = decide(PLAN, [{"a": est(5.0, 1e-12), "b": est(0.0, 0.9, se=3)}, {"b": tight}], ["a", "b"], 1.0)
    assert better["a"].kind == "better" and better["b"].kind == EQUIVALENT
    assert better["b"].equivalence_level == pytest.approx(at_half)
    shown = decide(PLAN, [{"a": tight, "b": est(0.0, 0.9, se=3)}, {"b": tight}], ["a", "b"], 1.0)
    assert (shown["a"].kind, shown["a"].look) == (EQUIVALENT, 1)
    assert shown["b"].equivalence_level == pytest.approx(at_whole)


def test_both_claims_at_one_look_give_the_difference_and_say_the_equivalence_too():
    d = decide(PLAN, [{"a": est(0.3, 1e-12, se=0.01)}], ["a"], 1.0)["a"]
    assert d.kind == "better" and d.also_equivalent


def test_undecided_comparisons_are_open_before_the_last_look_and_at_the_cap_after_it():
    looks = [{"a": est(0.0, 0.5, se=5)} for _ in range(PLAN.looks)]
    assert decide(PLAN, looks[:3], ["a"], 1.0)["a"].kind == OPEN
    cap = decide(PLAN, looks, ["a"], 1.0)["a"]
    assert (cap.kind, cap.look, cap.seeds, cap.cap) == (CAP, 6, 30, 30)
    assert decide(PLAN, [], ["a"], 1.0) == {}  # no look made: nothing decided, nothing open yet
    assert decide(PLAN, [{"a": est(1.0, math.nan, se=math.nan, df=math.nan)}], ["a"], 1.0)["a"].kind == OPEN


def test_the_forecast_counts_what_the_rule_would_still_call():
    """No open comparison: nothing more. A huge effect: decided at the next look (one round for the arm and the
    baseline). No effect and wide noise with no margin: every round to the cap. The same draws every time."""
    plan = SequentialPlan(alpha=0.05, round_seeds=3, max_seeds=9)
    rounds = [3, 3, 3]
    base = [50.0, 51.0, 49.0]
    big = {"a": [90.0, 91.0, 89.0]}
    look = [{"a": est(40.0, 1e-3, se=0.8, df=4)}]
    assert expected_runs(plan, look, ["a"], None, base, big, {}, rounds) == pytest.approx(6)
    noisy = {"a": [20.0, 80.0, 50.0]}
    flat = [{"a": est(0.0, 1.0, se=17.0, df=2)}]
    assert expected_runs(plan, flat, ["a"], None, base, noisy, {}, rounds) == pytest.approx(12)
    some = {"a": [52.0, 60.0, 47.0]}
    mid = [{"a": est(2.7, 0.5, se=3.8, df=2.3)}]
    first = expected_runs(plan, mid, ["a"], 5.0, base, some, {}, rounds)
    assert 6 <= first <= 12 and first == expected_runs(plan, mid, ["a"], 5.0, base, some, {}, rounds)
    decided = [{"a": est(40.0, 1e-12, se=0.8, df=4)}]
    assert expected_runs(plan, decided, ["a"], None, base, big, {}, rounds) == 0
    assert expected_runs(plan, flat, ["a"], None, base, {"a": [50.0]}, {}, rounds) is None  # nothing to draw from
    assert np.isfinite(first)
