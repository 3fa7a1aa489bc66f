"""Seeds until decided, in a task's section: the design in one paragraph, and what each look saw and decided
(zoo/report/sequential.py reads the looks from the records; zoo/stats/stopping.py is the rule)."""

from __future__ import annotations

import math

from zoo.report.analysis import TaskAnalysis
from zoo.report.decisions import words
from zoo.report.study import Report
from zoo.report.tables import label, md_table
from zoo.stats.sequential import equivalence_levels, nominal_levels


def _levels(values) -> str:
    return ", ".join(f"{v:.2g}" for v in values)


def design_lines(report: Report, analysis: TaskAnalysis) -> list[str]:
    """The paragraph naming the design, then the table of the looks; nothing for an experiment without
    [sequential]."""
    state = report.sequential
    if state is None:
        return []
    looks, plan = state.tasks[analysis.task.key], state.plan
    experiment, task = report.experiment, analysis.task
    baseline, m = experiment.config.baseline_label, max(len(looks.names), 1)
    seeds = [plan.seeds_at(k) for k in range(1, plan.looks + 1)]
    fractions = plan.fractions(plan.looks)
    first = state.seeds(1)
    text = (f"**Seeds until decided** (`[sequential]`, declared before the runs): round 1 is seeds {first[0]}–"
            f"{first[-1]} of every arm, and each round adds {plan.round_seeds} seeds to the arms still undecided "
            f"and to the baseline{'' if baseline == 'baseline' else f' ({baseline})'}, up to {plan.max_seeds} "
            f"seeds an arm: {plan.looks} looks, at "
            f"{', '.join(map(str, seeds))} seeds an arm (information fractions {_levels(fractions)}). At each "
            "look every comparison still open is made as below, on the seeds each arm was called for. "
            "**Better/worse**: rejected by the sequential Holm procedure (Maurer & Bretz 2013) over this task's "
            f"{len(looks.names)} comparisons, on the p of every look made, each look's two-sided nominal level "
            f"from Lan–DeMets O'Brien–Fleming alpha spending at {plan.alpha:g} (with all {m} open: "
            f"{_levels(nominal_levels(fractions, plan.alpha / m))}; with one: "
            f"{_levels(nominal_levels(fractions, plan.alpha))}).")
    if task.margin is not None:
        text += (f" **Equivalent** within ±{task.margin:g}: TOST at the look's one-sided O'Brien–Fleming level, "
                 f"alpha split (Bonferroni) over the comparisons not yet shown equivalent (all {m}: "
                 f"{_levels(equivalence_levels(fractions, plan.alpha / m))}).")
    text += (" An arm decided at a look gets no more seeds; the baseline goes on while any comparison is open. The "
             "verdicts below are these decisions; the table's Δ, interval and p are fixed-sample over every seed "
             "called and only describe (the looks, not they, are the test).")
    made = f"Looks made: {len(looks.looks)} of {plan.looks}"
    if looks.waiting:
        made += f"; look {len(looks.looks) + 1} waits for {len(looks.waiting)} cells ({waiting(looks.waiting)})"
    lines = [text, "", made + ".", ""]
    if looks.looks:
        lines += [md_table(*look_rows(report, analysis)), ""]
    return lines


def waiting(cells: list[str]) -> str:
    """What a look waits for: the missing cells counted (a round called and not trained yet), the failed and stale
    ones named (they need a rerun), at most six."""
    missing = [cell for cell in cells if cell.endswith("(missing)")]
    named = [cell for cell in cells if cell not in missing]
    parts = ([f"{len(missing)} not run yet"] if missing else []) + named[:6]
    return ", ".join(parts) + (f" and {len(named) - 6} more" if len(named) > 6 else "")


def look_rows(report: Report, analysis: TaskAnalysis) -> tuple[list[str], list[list[str]]]:
    """Per comparison: its decision, and at each look made the difference, its se and p it was judged on."""
    looks, plan = report.sequential.tasks[analysis.task.key], report.sequential.plan
    header = ["variant", "decision", *(f"look {k} ({plan.seeds_at(k)} seeds an arm): Δ {label(analysis.primary)} "
                                       "(se), p" for k in range(1, len(looks.looks) + 1))]
    rows = []
    for variant in looks.names:
        c = analysis.comparisons.get(variant)
        cells = []
        for made in looks.looks:
            e = made.get(variant)
            cells.append("—" if e is None else "too few seeds" if math.isnan(e.p) else
                         f"{e.difference:+.3g} ({e.se:.2g}), {e.p:.2g}")
        rows.append([variant, words(c) if c is not None and c.sequential is not None else "—", *cells])
    for variant, (other, k) in looks.same.items():
        rows.append([variant, f"stopped at look {k}: the same numbers as {other}, bit for bit",
                     *(["—"] * len(looks.looks))])
    return header, rows


def called_line(report: Report) -> str:
    """Grid status's first words for a sequential experiment: the runs called so far, and the most there can be."""
    state = report.sequential
    arms = len(report.experiment.config.variants) * len(report.experiment.config.tasks)
    return (f"{len(report.frame)} runs called for so far by the sequential plan (at most {arms * state.plan.max_seeds}"
            f", every arm to the cap of {state.plan.max_seeds} seeds)")
