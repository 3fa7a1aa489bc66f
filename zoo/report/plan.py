"""`zoo plan`'s table and notes: per comparison, the seeds it has, the spread they show, what the design detects
now, and how many seeds per arm would detect a given effect (zoo/stats/power.py); formatted like the report's
tables (tables.py). For a task with a margin, the `[sequential]` settings that would decide its comparisons
(zoo/stats/sequential_plan.py)."""

from __future__ import annotations

import math

import numpy as np

from zoo.experiment import Experiment
from zoo.report.analysis import Comparison, TaskAnalysis
from zoo.report.noise import term_of
from zoo.report.tables import fmt, fmt_detectable
from zoo.stats.noise import comparison_noise
from zoo.stats.sequential_plan import ROUND_SEEDS, Arm, Recommendation, recommend


def plan_rows(experiment: Experiment, analysis: TaskAnalysis, effect: float) -> tuple[list[str], list[list[str]]]:
    """Per variant: the seeds it has, the spread they show, and the seeds per arm needed to detect `effect` on
    the primary metric with the report's power at the level its verdict is decided at (what one rejection needs
    after the report's correction), under the report's own variance model (zoo/stats/power.py)."""
    header = ["variant", "trained seeds (baseline, variant)", "seed sd (baseline, variant)",
              "detectable Δ now (80% power)", f"seeds per arm for ±{effect:g}"]
    if analysis.noise:
        header += ["detectable with any seeds on this test set", "more of: seeds or test sentences"]
    rows = []
    for variant, c in analysis.comparisons.items():
        base, other = c.per_seed
        if min(len(base), len(other)) < 2:
            failing = failing_arm(analysis, c)
            rows.append([variant, f"{len(base)}, {len(other)}", "—", "—",
                         "none: failure rates only (below)" if failing else "run at least 2 seeds of each first",
                         "—", "—"][:len(header)])
            continue
        sd_b, sd_v = float(np.std(base, ddof=1)), float(np.std(other, ddof=1))
        needed = c.seeds_for(effect)  # at the level its verdict is decided at (`level`)
        now = "none yet: unequal seeds (below)" if c.undetectable == "correction" else fmt_detectable(c)
        rows.append([variant, f"{len(base)}, {len(other)}", f"{fmt(sd_b)}, {fmt(sd_v)}", now,
                     str(needed) if needed else "more than 100", *spending(analysis, c)][:len(header)])
    return header, rows


def spending(analysis: TaskAnalysis, comparison: Comparison) -> list[str]:
    """What this test set allows any number of seeds to detect, and whether doubling the seeds or doubling the test
    sentences would detect a smaller difference (zoo/stats/noise.py), at the comparison's level and power."""
    base, mine = analysis.noise.get(comparison.reference), analysis.noise.get(comparison.variant)
    term = term_of(comparison)
    if base is None or mine is None or term != term:  # NaN: a per-seed metric
        return ["—", "—"]
    noise = comparison_noise(base, mine, term)
    n = min(len(comparison.per_seed[0]), len(comparison.per_seed[1]))
    doubling = noise.buys_more(n, comparison.level, comparison.power)
    return [fmt(noise.floor(comparison.level, comparison.power)),
            f"{doubling.better} (2x seeds: {fmt(doubling.seeds)}; 2x sentences: {fmt(doubling.sentences)})"]


def failing_arm(analysis: TaskAnalysis, comparison: Comparison) -> str | None:
    """The arm of `comparison` whose runs (two or more) all stalled or diverged, if one did; else None."""
    for arm in (comparison.reference, comparison.variant):
        rate = analysis.instability[arm]
        if rate.n >= 2 and rate.count == rate.n:
            return arm
    return None


def plan_notes(analysis: TaskAnalysis) -> list[str]:
    """What `zoo plan` says under its table: of each arm whose runs all stalled or diverged, and, once, why arms
    with unequal seeds detect nothing yet. A failed arm has no quality to compare, so "run more seeds first"
    would mislead: its comparisons are of failure rates, and more seeds would only compare the few runs that
    happen to train (survivors, not the variant)."""
    arms = dict.fromkeys(arm for c in analysis.comparisons.values() if (arm := failing_arm(analysis, c)))
    notes = [f"{arm}: all {analysis.instability[arm].n} runs stalled or diverged, so its {analysis.primary} is "
             "undefined and its comparison is of failure rates (the outcomes table of zoo report), not of quality; "
             "no number of seeds changes that." for arm in arms]
    blocked = [c for c in analysis.comparisons.values() if c.undetectable == "correction"]
    if blocked:
        notes.append(f"none yet ({', '.join(c.variant for c in blocked)}): with unequal seed counts the test's p "
                     "is also an exact permutation p, which cannot fall below 1 / (the ways to split the seeds); "
                     f"for these arms that floor is at or above {blocked[0].unreachable:.2g}, the level one "
                     "rejection needs after the correction, which no outcome of these runs can reach. Train the "
                     "missing seeds (`zoo run --dry-run` lists them); the seeds per arm assume equal arms.")
    return notes


def sequential_advice(experiment: Experiment, analysis: TaskAnalysis) -> list[str]:
    """What `zoo plan` says under a task's table of the `[sequential]` settings that would decide its comparisons
    (zoo/stats/sequential_plan.py): a TOML snippet to paste, the runs the plan is expected to take against the fixed
    design at its cap, and which comparison sets the cap. Nothing for a task without a margin (seeds until decided
    would have no equivalence to stop on) or without comparisons. Each comparison is read through its `design`,
    what its test sees: the arms' seed spreads and the test-set term. Where the experiment declares
    [sequential], it says whether the declared cap reaches the recommended one, never advising a change without
    saying that a plan is declared before its runs."""
    task, settings = analysis.task, experiment.config.analysis
    if task.margin is None or not analysis.comparisons:
        return []
    declared = experiment.config.sequential
    designs = {variant: c.design for variant, c in analysis.comparisons.items()}
    arms = {variant: Arm(d.sd_variant if d.testable else math.nan, d.extra,
                         analysis.comparisons[variant].result.difference) for variant, d in designs.items()}
    baseline_sd = next((d.sd_baseline for d in designs.values() if d.testable), math.nan)
    r = recommend(baseline_sd, arms, task.margin, settings.alpha, settings.power,
                  declared.round_seeds if declared else ROUND_SEEDS)
    goal = (f"Seeds until decided, to decide each of the {len(arms)} comparisons on {task.primary_metric} (equivalent "
            f"within ±{task.margin:g}, or a difference of ±{task.margin:g} found) with {settings.power:.0%} power at "
            f"alpha {settings.alpha:g}")
    if r.limiting is None:
        return [f"{goal}: nothing to size yet, {r.reason}."]
    if r.max_seeds is None:
        lines = [f"{goal}: no cap suffices: {r.limiting}: {r.reason}."]
    elif declared is None:
        lines = [f"{goal}; declare before the runs:", "[sequential]", f"round_seeds = {r.round_seeds}",
                 f"max_seeds = {r.max_seeds}", 'spending = "obrien-fleming"']
        first = list(range(experiment.config.seeds[0], experiment.config.seeds[0] + r.round_seeds))
        if list(experiment.config.seeds) != first:
            lines.append(f"With it, the experiment's `seeds` are its first round: seeds = {first}.")
    else:
        lines = [f"{goal}, recommended: round_seeds = {r.round_seeds}, max_seeds = {r.max_seeds}."]
    if r.max_seeds is not None:
        lines.append(f"Expected runs: {r.expected_null:.0f} if every variant equals the baseline and "
                     f"{r.expected_observed:.0f} at the observed differences, against {r.fixed_runs} for the fixed "
                     f"design ({len(arms) + 1} arms x {r.max_seeds} seeds); {r.limiting} sets the cap, needing "
                     f"{r.needed} seeds an arm at the last look's levels ({r.looks} look{'s' * (r.looks > 1)}).")
    if r.unsized:
        lines.append(f"{', '.join(r.unsized)}: fewer than 2 trained seeds an arm, so not sized; the rule has no "
                     "estimate to decide it on, so it and the baseline go on to the cap.")
    if declared is not None:
        lines.append(_declared(declared.round_seeds, declared.max_seeds, r))
    return lines


def _declared(round_seeds: int, max_seeds: int, r: Recommendation) -> str:
    """Whether the declared cap reaches the recommended one. A plan is declared before its runs (its looks were
    tested at its levels), so a shortfall is said with what changing it would mean, not as advice to change it."""
    plan = f"The declared [sequential] (round_seeds = {round_seeds}, max_seeds = {max_seeds})"
    if r.max_seeds is not None and max_seeds >= r.max_seeds:
        return f"{plan} reaches the recommended cap."
    short = (f"is below the recommended cap: {r.limiting} would need {r.needed} seeds an arm"
             if r.max_seeds is not None else f"cannot decide {r.limiting} ({r.reason})")
    return (f"{plan} {short}, so it may end undecided at the cap. The plan is declared before the runs: changing it "
            "once they have started makes the analysis a different one (its looks are tested at the declared plan's "
            "levels), to be reported as such; the recommendation suits a new experiment.")
