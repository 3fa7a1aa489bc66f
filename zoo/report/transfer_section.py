"""The report's transfer section: for each declared pair of tasks ([[transfers]] in the experiment file),
each variant's effect on both, the interaction with its interval and test (zoo/stats/transfer.py), and
the rank correlation of the effects, with a plot of effect on the second task against effect on the first.

The per-seed values are those of each task's own primary comparison (for corpus metrics, the per-seed
corpus scores), so the interaction is tested on exactly the numbers the task sections show. It adds no
test-sentence variance: the four arms are scored on one test set, whose sampling moves a variant's
effect alike on both tasks and so largely cancels in a difference of differences. A task with
no verdicts (below its trivial floor) gives no transfer row either.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from zoo.experiment.config import Transfer
from zoo.report.analysis import TaskAnalysis
from zoo.report.plots import file_stem, plt, save
from zoo.report.tables import fmt_effect, fmt_p, label, md_table, verdict_text
from zoo.stats.transfer import CHANGES, HOLDS, Interaction, RankCorrelation, compare_interaction, rank_correlation


@dataclass
class TransferAnalysis:
    transfer: Transfer
    first: TaskAnalysis
    second: TaskAnalysis
    rows: dict[str, Interaction] = field(default_factory=dict)  # variant -> its interaction
    correlation: RankCorrelation | None = None
    skipped: str = ""  # why there is no table


def analyse_transfer(transfer: Transfer, tasks: dict[str, TaskAnalysis], alpha: float,
                     min_seeds: int) -> TransferAnalysis:
    first, second = (tasks[key] for key in transfer.tasks)
    analysis = TransferAnalysis(transfer, first, second)
    if first.primary != second.primary:
        analysis.skipped = f"the tasks' primary metrics differ ({first.primary}, {second.primary})"
        return analysis
    for side in (first, second):
        if side.below_floor:
            analysis.skipped = f"`{side.task.key}` gets no verdicts: {side.below_floor}"
            return analysis
    margin = second.task.margin if second.task.margin is not None else first.task.margin
    for variant in [v for v in first.comparisons if v in second.comparisons]:
        (base_a, var_a), (base_b, var_b) = first.comparisons[variant].per_seed, second.comparisons[variant].per_seed
        analysis.rows[variant] = compare_interaction(base_a, var_a, base_b, var_b, margin=margin or math.inf,
                                                     alpha=alpha, min_seeds=min_seeds)
    analysis.correlation = rank_correlation([i.effect_a for i in analysis.rows.values()],
                                            [i.effect_b for i in analysis.rows.values()])
    return analysis


def _transfer_verdict(interaction: Interaction) -> str:
    if interaction.verdict == CHANGES:
        return f"**changes** ({fmt_effect(interaction.difference, math.nan, math.nan)})"
    if interaction.verdict == HOLDS:
        return f"**holds** within ±{interaction.margin:g}"
    return interaction.verdict


def transfer_rows(analysis: TransferAnalysis, min_seeds: int) -> tuple[list[str], list[list[str]]]:
    a, b = analysis.transfer.tasks
    metric = analysis.first.primary
    header = ["variant", f"Δ on {a} [CI]", f"verdict on {a}", f"Δ on {b} [CI]", f"verdict on {b}",
              f"Δ({b}) − Δ({a}) [CI]", "p", "adjusted p", "TOST p (adjusted)", "transfer"]
    rows = []
    for variant, i in analysis.rows.items():
        first, second = analysis.first.comparisons[variant], analysis.second.comparisons[variant]
        rows.append([variant, fmt_effect(first.result.difference, first.result.ci_low, first.result.ci_high, metric),
                     verdict_text(first, min_seeds, short=True),
                     fmt_effect(second.result.difference, second.result.ci_low, second.result.ci_high, metric),
                     verdict_text(second, min_seeds, short=True), fmt_effect(i.difference, i.ci_low, i.ci_high, metric),
                     fmt_p(i.p_value), fmt_p(i.p_adjusted), fmt_p(i.tost_adjusted), _transfer_verdict(i)])
    return header, rows


def transfer_plot(analysis: TransferAnalysis, experiment_name: str, path: Path) -> Path:
    """Effect on the second task against effect on the first, with each task's 95% CI; on the diagonal the
    effect transfers unchanged."""
    a, b = analysis.transfer.tasks
    fig, ax = plt.subplots(figsize=(6.5, 6))
    points = []
    for variant in analysis.rows:
        first, second = analysis.first.comparisons[variant].result, analysis.second.comparisons[variant].result
        if math.isnan(first.ci_low) or math.isnan(second.ci_low):
            continue
        ax.errorbar(first.difference, second.difference,
                    xerr=[[first.difference - first.ci_low], [first.ci_high - first.difference]],
                    yerr=[[second.difference - second.ci_low], [second.ci_high - second.difference]],
                    fmt="o", capsize=2, alpha=0.8)
        ax.annotate(variant, (first.difference, second.difference), fontsize=7, xytext=(4, 4),
                    textcoords="offset points")
        points += [first.ci_low, first.ci_high, second.ci_low, second.ci_high]
    if points:
        low, high = min(points), max(points)
        ax.plot([low, high], [low, high], color="grey", linestyle="--", linewidth=1, label="the same effect on both")
        ax.legend(fontsize=8, loc="upper left")
    ax.axhline(0, color="grey", linewidth=0.5)
    ax.axvline(0, color="grey", linewidth=0.5)
    unit = label(analysis.first.primary)
    ax.set(xlabel=f"Δ test {unit} on {a} (95% CI)", ylabel=f"Δ test {unit} on {b} (95% CI)",
           title=f"{experiment_name}: effects against the baseline, {a} → {b}")
    ax.grid(alpha=0.3)
    return save(fig, path)


def transfer_section(analyses: list[TransferAnalysis], experiment_name: str, min_seeds: int, out_dir: Path,
                     correction: str) -> list[str]:
    lines = []
    for analysis in analyses:
        a, b = analysis.transfer.tasks
        lines += [f"### `{a}` → `{b}`", ""]
        if analysis.transfer.question:
            lines += [analysis.transfer.question, ""]
        if analysis.skipped:
            lines += [f"No transfer table: {analysis.skipped}.", ""]
            continue
        lines += ["Each variant's effect against the baseline on both tasks (each task's own comparison), and the "
                  f"interaction Δ({b}) − Δ({a}): Welch over the four arms' per-seed scores (one test set for all four, "
                  "so no sentence variance is added), two-sided, adjusted by "
                  f"the report's correction ({correction}) with its other tests, as is its TOST within the margin. "
                  "**changes**: the interaction is significant; **holds**: it is shown to lie within the margin; "
                  "undetermined: neither (the interval says how large a change the data allow).", "",
                  md_table(*transfer_rows(analysis, min_seeds)), ""]
        c = analysis.correlation
        if c is not None and not math.isnan(c.rho):
            lines += [f"Spearman's rank correlation of the {c.n} effects between the tasks: ρ = {c.rho:+.2f} "
                      f"(p {fmt_p(c.p_value)}, descriptive).", ""]
        stem = file_stem(f"transfer-{a}-{b}")
        png = transfer_plot(analysis, experiment_name, out_dir / "plots" / f"{stem}.png")
        lines += [f"![{a} → {b}: effects]({png.relative_to(out_dir).as_posix()})", ""]
    return lines
