"""Transfer between tasks: each variant's effect on both tasks of a declared pair, the interaction and its
verdict, the rank correlation, and a plot of effect on the second task against effect on the first
(the analysis: zoo/report/transfer.py)."""

from __future__ import annotations

import math
from pathlib import Path

from zoo.experiment.schema import Analysis as AnalysisConfig
from zoo.report.plots import file_stem, plt, save
from zoo.report.study import Report
from zoo.report.tables import ci, fmt, fmt_effect, fmt_p, label, md_table, verdict_class, verdict_text
from zoo.report.transfer import TransferAnalysis
from zoo.stats import ALPHA
from zoo.stats.transfer import CHANGES, HOLDS, Interaction


class Transfers:
    def title(self, report: Report) -> str:
        return "Transfer between tasks"

    def render(self, report: Report, out_dir: Path) -> list[str] | None:
        if not report.transfers:
            return None
        config = report.experiment.config
        return transfer_section(report.transfers, config.name, config.analysis, out_dir)


def _transfer_verdict(interaction: Interaction) -> str:
    if interaction.verdict == CHANGES:
        return f"**changes** ({fmt_effect(interaction.difference, math.nan, math.nan)})"
    if interaction.verdict == HOLDS:
        return f"**holds** within ±{interaction.margin:g}"
    return interaction.verdict


def _verdicts(first: str, second: str) -> str:
    return f"same: {first}" if first == second else f"{first} → {second}"


def transfer_rows(analysis: TransferAnalysis, settings: AnalysisConfig) -> tuple[list[str], list[list[str]]]:
    a, b = analysis.names
    metric = analysis.first.primary
    header = ["variant", f"Δ on {a} [CI]", f"verdict on {a}", f"Δ on {b} [CI]", f"verdict on {b}",
              f"Δ({b}) − Δ({a}) [CI]", "test-set sd", "p", "adjusted p", "TOST p (adjusted)", "transfer", "verdicts"]
    rows = []
    for variant, i in analysis.rows.items():
        first, second = analysis.first.comparisons[variant], analysis.second.comparisons[variant]
        rows.append([variant, fmt_effect(first.result.difference, first.result.ci_low, first.result.ci_high, metric),
                     verdict_text(first, settings.min_seeds, short=True),
                     fmt_effect(second.result.difference, second.result.ci_low, second.result.ci_high, metric),
                     verdict_text(second, settings.min_seeds, short=True),
                     fmt_effect(i.difference, i.ci_low, i.ci_high, metric),
                     "—" if math.isnan(i.term) else fmt(math.sqrt(i.term)),
                     fmt_p(i.p_value, settings.alpha), fmt_p(i.p_adjusted, settings.alpha),
                     fmt_p(i.tost_adjusted, settings.alpha), _transfer_verdict(i),
                     _verdicts(verdict_class(first), verdict_class(second))])
    return header, rows


def transfer_plot(analysis: TransferAnalysis, experiment_name: str, path: Path) -> Path:
    """Effect on the second task against effect on the first, with each task's interval; on the diagonal the
    effect transfers unchanged."""
    a, b = analysis.names
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
    level_a, level_b = (ci(next((side.comparisons[v].result.alpha for v in analysis.rows), ALPHA))
                        for side in (analysis.first, analysis.second))  # each side's own experiment's alpha
    ax.set(xlabel=f"Δ test {unit} on {a} ({level_a})", ylabel=f"Δ test {unit} on {b} ({level_b})",
           title=f"{experiment_name}: effects against the baseline\n{a} → {b}")
    ax.grid(alpha=0.3)
    return save(fig, path)


def transfer_section(analyses: list[TransferAnalysis], experiment_name: str, settings: AnalysisConfig,
                     out_dir: Path) -> list[str]:
    lines = []
    for analysis in analyses:
        a, b = analysis.names
        lines += [f"### `{a}` → `{b}`", ""]
        if analysis.transfer.question:
            lines += [analysis.transfer.question, ""]
        if analysis.skipped:
            lines += [f"No transfer table: {analysis.skipped}.", ""]
            continue
        margins = {row.margin for row in analysis.rows.values()}
        tost = ("as is its TOST within the margin. **changes**: the interaction is significant; **holds**: it is "
                "shown to lie within the margin; " if margins != {None} else
                "with no TOST: neither task declares a margin, and equivalence cannot be shown without one. "
                "**changes**: the interaction is significant; ")
        lines += ["Each variant's effect against the baseline on both tasks (each task's own comparison), and the "
                  f"interaction Δ({b}) − Δ({a}): Welch over the four arms' per-seed scores plus, for a corpus metric, "
                  "the test-set variance of the contrast (**test-set sd**: a paired sentence bootstrap over the four "
                  "arms where both tasks score one test set, as each comparison adds its own), two-sided, adjusted by "
                  f"the report's correction ({settings.correction}) with its other tests, {tost}"
                  "undetermined: neither (the interval says how large a change the data allow). **verdicts**: "
                  "each task's own verdict, in one word, compared; the effect can change size under the same "
                  "verdict, and a verdict can change while the effect holds.", "",
                  md_table(*transfer_rows(analysis, settings)), ""]
        c = analysis.correlation
        if c is not None and not math.isnan(c.rho):
            lines += [f"Spearman's rank correlation of the {c.n} effects between the tasks: ρ = {c.rho:+.2f}, 95% "
                      f"interval [{c.ci_low:+.2f}, {c.ci_high:+.2f}] from resampling the seeds of every arm "
                      "(descriptive: the effects are estimates, and the factors were not chosen at random).", ""]
        stem = file_stem(f"transfer-{a}-{b}")
        png = transfer_plot(analysis, experiment_name, out_dir / "plots" / f"{stem}.png")
        lines += [f"![{a} → {b}: effects]({png.relative_to(out_dir).as_posix()})", ""]
    return lines
