"""`zoo plan` recommends the [sequential] settings (zoo/stats/sequential_plan.py, zoo/report/plan.py): the cap
against a hand computation and a simulation of the fixed design, the test-set floor, monotonicity in the margin,
the round raised past 10 looks, the expected runs, and the lines `zoo plan` prints on the committed quickstart."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from zoo.cli import main
from zoo.experiment import Experiment, load_experiment
from zoo.experiment.schema import Sequential
from zoo.report import analyse
from zoo.report.plan import sequential_advice
from zoo.stats.sequential import SequentialPlan
from zoo.stats.sequential_plan import MAX_LOOKS, Arm, recommend

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "reports" / "quickstart"
DRAWS = 40  # the expected runs are not what most tests check: a few simulated designs keep them fast


def test_the_cap_is_the_normal_approximation_rounded_up_to_whole_rounds():
    """Equal seed sds 1, no test-set term, margin 1, one comparison at alpha 0.05: showing equivalence at a true
    difference 0 needs n = 2 (z_0.95 + z_0.9)² = 17.1 seeds an arm by the normal approximation (it binds: the
    difference test needs 2 (z_0.975 + z_0.8)² = 15.7); t quantiles and the last look's lower level add a seed or
    two, and the cap is whole rounds of 5, so it is within one round of 18."""
    z = stats.norm.ppf
    hand = math.ceil(2 * (z(0.95) + z(0.9)) ** 2)
    assert hand == 18 and 2 * (z(0.975) + z(0.8)) ** 2 < hand
    r = recommend(1.0, {"a": Arm(1.0)}, 1.0, draws=DRAWS)
    assert r.reason is None and r.limiting == "a" and r.round_seeds == 5
    assert r.max_seeds % 5 == 0 and hand <= r.max_seeds < hand + 5 and hand <= r.needed <= r.max_seeds
    assert r.looks == r.max_seeds // 5 and r.fixed_runs == 2 * r.max_seeds


def test_at_the_seeds_it_needs_the_fixed_design_has_the_power_and_one_seed_fewer_does_not():
    """The formula against a simulation of the test it stands for: Welch's TOST at the last look's one-sided level
    with the true difference 0 shows equivalence in at least 80% of 20,000 experiments at `needed` seeds an arm,
    and in fewer at one seed less. With the one-sided t_power in place of t_{(1+power)/2} the difference test would
    bind instead, at 18 seeds an arm, which show equivalence in some 77%."""
    r = recommend(1.0, {"a": Arm(1.0)}, 1.0, draws=DRAWS)
    plan = SequentialPlan(0.05, r.round_seeds, r.max_seeds)
    level = plan.equivalence_level_at(plan.looks)
    rng = np.random.default_rng(7)

    def shown(n: int) -> float:
        base, variant = rng.normal(0, 1, (20000, n)), rng.normal(0, 1, (20000, n))
        vb, vv = base.var(1, ddof=1) / n, variant.var(1, ddof=1) / n
        half = stats.t.ppf(1 - level, (vb + vv) ** 2 * (n - 1) / (vb ** 2 + vv ** 2)) * np.sqrt(vb + vv)
        difference = variant.mean(1) - base.mean(1)
        return float(np.mean((difference - half > -1) & (difference + half < 1)))

    assert shown(r.needed) >= 0.795 and shown(r.needed - 1) < 0.8


def test_a_test_set_term_beyond_the_margin_gets_no_cap_but_the_reason():
    """se never falls below sqrt(T): with (z_0.95 + z_0.9) sqrt(T) >= margin no number of seeds suffices. Just
    below that floor a cap exists, larger than without the term."""
    floor = (1.0 / (stats.norm.ppf(0.95) + stats.norm.ppf(0.9))) ** 2  # the largest T the margin 1 allows
    r = recommend(1.0, {"a": Arm(1.0), "b": Arm(1.0, term=1.01 * floor)}, 1.0, alpha=0.1, draws=DRAWS)
    assert r.max_seeds is None and r.limiting == "b" and "test-set term" in r.reason
    assert r.expected_null is r.expected_observed is r.fixed_runs is None
    below = recommend(1.0, {"a": Arm(1.0, term=0.5 * floor)}, 1.0, draws=DRAWS)
    assert below.reason is None and below.max_seeds > recommend(1.0, {"a": Arm(1.0)}, 1.0, draws=DRAWS).max_seeds


def test_more_than_the_ceiling_is_said_not_capped():
    r = recommend(1.0, {"a": Arm(1.0)}, 0.2, draws=DRAWS)
    assert r.max_seeds is None and r.reason == "it needs more than 100 seeds an arm"


@pytest.mark.parametrize("term", [0.0, 0.02])
def test_a_larger_margin_never_needs_more_seeds(term):
    """From margins no cap reaches (the ceiling, then with a term the floor) to one that 10 seeds decide, over 30
    margins: the cap and the seeds the limiting comparison needs only fall."""
    plans = [recommend(1.0, {"a": Arm(1.0, term), "b": Arm(1.5, term)}, margin, draws=1)
             for margin in np.linspace(0.35, 3.0, 30)]
    caps = [math.inf if r.max_seeds is None else r.max_seeds for r in plans]
    needed = [math.inf if r.needed is None else r.needed for r in plans]
    assert caps == sorted(caps, reverse=True) and needed == sorted(needed, reverse=True)
    assert caps[0] == math.inf and caps[-1] == 10 and len(set(caps)) > 8


def test_the_round_is_raised_so_that_the_cap_takes_at_most_ten_looks():
    """Margin 0.5 at sd 1 needs about 70 seeds an arm: 14 looks of 5, so the round grows until 10 looks or
    fewer hold the cap. A candidate round below the schema's 3 is raised to 3."""
    r = recommend(1.0, {"a": Arm(1.0)}, 0.5, draws=1)
    assert r.round_seeds > 5 and r.looks <= MAX_LOOKS and r.max_seeds == r.looks * r.round_seeds
    assert r.max_seeds - r.round_seeds < r.needed <= r.max_seeds
    kept = recommend(1.0, {"a": Arm(1.0)}, 1.0, draws=1)
    assert kept.round_seeds == 5 and kept.looks <= MAX_LOOKS
    assert recommend(1.0, {"a": Arm(1.0)}, 1.0, round_seeds=1, draws=1).round_seeds == 3


def test_the_expected_runs_follow_the_rule():
    """Five variants equal to the baseline stop early as equivalent: fewer runs than the fixed design. At
    observed differences of twice the margin they stop earlier still (better, at looks whose level is far
    below alpha). An arm with no seed sd counts in the family (a larger cap) and, never decided, keeps itself
    and the baseline going to the cap."""
    arms = {f"v{i}": Arm(1.0, difference=2.0) for i in range(5)}
    r = recommend(1.0, arms, 1.0, draws=100)
    assert r.expected_observed < r.expected_null < r.fixed_runs == 6 * r.max_seeds
    one = recommend(1.0, {"a": Arm(1.0)}, 1.0, draws=100)
    with_stalled = recommend(1.0, {"a": Arm(1.0), "stalled": Arm(math.nan)}, 1.0, draws=100)
    assert with_stalled.unsized == ("stalled",) and with_stalled.max_seeds >= one.max_seeds
    assert with_stalled.expected_null >= 2 * with_stalled.max_seeds + with_stalled.round_seeds


@pytest.fixture(scope="module")
def quickstart():
    experiment = load_experiment(ROOT / "experiments" / "quickstart.toml")
    return experiment, analyse(experiment, QUICKSTART / "records").tasks[0]


def test_zoo_plan_prints_the_sequential_snippet_for_the_quickstart(capsys, monkeypatch):
    """The quickstart's copy task has a margin (±5): `zoo plan` ends its table with the settings to paste. Its
    placebo's seeds spread by about 1 point, so one round of 5 decides it; post-norm's runs all stalled, so it
    is not sized and goes on to the cap."""
    from rich.console import Console

    from zoo.cli import experiment as cli_experiment

    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(cli_experiment, "console", Console(width=200))
    assert main(["plan", "experiments/quickstart.toml"]) == 0
    printed = capsys.readouterr().out
    assert '[sequential]\nround_seeds = 5\nmax_seeds = 5\nspending = "obrien-fleming"\n' in printed
    assert "pre-norm-conv1d sets the cap" in printed and "against 15 for the fixed design" in printed
    assert "post-norm: fewer than 2 trained seeds an arm, so not sized" in printed


def test_a_task_without_a_margin_gets_no_advice(quickstart):
    experiment, analysis = quickstart
    assert sequential_advice(experiment, analysis)
    assert sequential_advice(experiment, replace(analysis, task=analysis.task.model_copy(update={"margin": None}))
                             ) == []


def test_a_declared_plan_is_measured_against_the_recommendation_never_silently_changed(quickstart):
    """At a margin of ±1 the placebo needs some 20 seeds an arm: a declared cap of 30 reaches it, one of 10 does
    not, and then the lines say how many seeds it would need and that changing a declared plan makes the
    analysis a different one; no snippet to paste is offered for a declared experiment."""
    experiment, analysis = quickstart
    narrow = replace(analysis, task=analysis.task.model_copy(update={"margin": 1.0}))

    def declared(max_seeds: int) -> list[str]:
        config = experiment.config.model_copy(update={"sequential": Sequential(round_seeds=5, max_seeds=max_seeds)})
        return sequential_advice(Experiment(experiment.path, config, experiment.specs), narrow)

    undeclared = sequential_advice(experiment, narrow)
    recommended = int(next(line for line in undeclared if line.startswith("max_seeds = ")).split()[-1])
    assert 15 <= recommended <= 30
    assert "reaches the recommended cap" in declared(30)[-1] and "[sequential]" not in declared(30)
    short = declared(10)[-1]
    assert "is below the recommended cap: pre-norm-conv1d would need" in short
    assert "changing it once they have started makes the analysis a different one" in short
