"""One task: its budget and trivial floors, run outcomes, quality, the verdicts against the baseline, plots."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from zoo.experiment import Experiment
from zoo.report import noise, plots
from zoo.report.analysis import TaskAnalysis
from zoo.report.collect import curves
from zoo.report.paths import shown
from zoo.report.sections.grid import interim
from zoo.report.sections.sequential import design_lines
from zoo.report.study import Report
from zoo.report.tables import (
    ci,
    comparison_rows,
    descriptive_metrics,
    descriptive_rows,
    label,
    md_table,
    md_text,
    outcome_rows,
    quality_rows,
    task_metrics,
)


@dataclass
class TaskSection:
    analysis: TaskAnalysis

    def title(self, report: Report) -> str:
        return f"Task `{self.analysis.task.key}`"

    def render(self, report: Report, out_dir: Path) -> list[str]:
        return task_section(report, self.analysis, out_dir)


def stall_rule(task, primary: str) -> str:
    """When a complete run of `task` counts as stalled, in words."""
    parts = [f"the final validation {label(primary)} < {task.stall_floor:g}"] if task.stall_floor is not None else []
    if task.stall.patience:
        parts.append(f"no gain in {task.stall.patience} evaluations")
    if not parts:
        return "no stall rule (every complete run counts in quality, at its score)"
    return "stalled = complete but " + " or ".join(parts)


def device_note(analysis: TaskAnalysis) -> str:
    """Why the speed columns are split by device, where the task's runs trained on more than one."""
    if len(analysis.devices) < 2:
        return ""
    return (f" The runs trained on {len(analysis.devices)} devices ({', '.join(md_text(d) for d in analysis.devices)}),"
            " and a speed belongs to its machine: train tok/s is summarised, and compared with the baseline, over "
            "each device's seeds apart (Provenance says which seeds trained where).")


def task_section(report: Report, analysis: TaskAnalysis, out_dir: Path) -> list[str]:
    """The task's section under its heading: budget and floors, outcomes, quality, the verdicts, its plots."""
    experiment, task = report.experiment, analysis.task
    settings = experiment.config.analysis
    metrics = task_metrics(task)
    kind = {"text": "translation"}.get(task.task_class.kind, task.task_class.kind)
    own, differ = budgets(experiment, task)
    lines = [f"`{task.name}` ({kind}). Primary metric: **test {label(analysis.primary)}**; "
             + stall_rule(task, analysis.primary)
             + (f"; equivalence margin ±{task.margin:g}" if task.margin is not None else "; no equivalence margin")
             + f". Baseline: **{experiment.config.baseline_label}**. Trained at {own}"
             + (f" ({experiment.config.baseline_label}'s budget; {', '.join(differ)})" if differ else "")
             + ", each budget with its own schedule: every verdict below holds at this budget only.", "",
             *floor_lines(report, analysis),
             "### Outcomes", "", md_table(*outcome_rows(experiment, analysis)), "",
             "### Quality (trained seeds only)", "",
             f"Mean [95% CI over seeds]; fewer than {settings.min_seeds} trained seeds show each seed's value. "
             "* = interval clipped to the metric's range." + device_note(analysis), "",
             md_table(*quality_rows(experiment, analysis, report.frame, metrics, report.analyst)), ""]
    collapsed = [f"{v} ≡ {w}" for v, w in analysis.collapsed.items()]
    if collapsed:
        lines += ["Bit-identical at every logged step and in every test output, for every seed (one set of numbers, "
                  "not a second sample; not tested against each other): " + "; ".join(collapsed) + ".", ""]
    if analysis.comparisons:
        lines += [f"### Against {experiment.config.baseline_label} on {label(analysis.primary)}"
                  + ("" if differ else f" at {own}") + " (the verdicts)", ""]
        note = interim(report.frame, task.key, report.sequential is not None)
        if note:
            lines += [f"**Interim:** {note} (see Grid status).", ""]
        if analysis.pooling:
            lines += [f"Seed variance: {analysis.pooling}.", ""]
        lines += design_lines(report, analysis)  # with [sequential]: the looks, which decide the verdicts
        lines += [md_table(*comparison_rows(experiment, analysis)), "", *confound_lines(report, analysis)]
        lines += [f"Other metrics, descriptive (difference [{ci(settings.alpha)}], no verdicts):", "",
                  md_table(*descriptive_rows(analysis, descriptive_metrics(task), settings.alpha)), ""]
    lines += noise_lines(experiment, analysis)
    if not ((report.frame.task == task.key) & report.frame.status.isin(("complete", "stalled", "diverged"))).any():
        return lines  # nothing finished yet: the grid status says so, and an empty plot would look like a result
    stem = plots.file_stem(task.key)
    figures = [("test metric per seed", plots.seed_values(experiment, analysis, report.analyst,
                                                          out_dir / "plots" / f"{stem}-seeds.png"))]
    if analysis.comparisons:
        figures.append(("effects", plots.effects(experiment, analysis, out_dir / "plots" / f"{stem}-effects.png")))
    logged = curves(report.analyst.records, task.key, only=(task.primary_metric, "nll"))  # what the plot draws
    figures.append(("learning curves", plots.learning_curves(experiment, task, logged,
                                                             out_dir / "plots" / f"{stem}-curves.png")))
    for title, png in figures:
        lines += [f"![{task.key}: {title}]({png.relative_to(out_dir).as_posix()})", ""]
    return lines


def noise_lines(experiment: Experiment, analysis: TaskAnalysis) -> list[str]:
    """The noise split (zoo/report/noise.py): per arm, then per comparison; nothing for a per-seed metric."""
    if not analysis.noise:
        return []
    alpha, primary = experiment.config.analysis.alpha, label(analysis.primary)
    sentences = next(iter(analysis.noise.values())).sentences
    median = noise.median_share(analysis)
    lines = ["### Noise: seeds and test sentences", "",
             f"Each arm's seed-to-seed spread of test {primary} on these {sentences:,} sentences, split into the "
             "model part (different seeds train different models; more test sentences do not shrink it) and the "
             "seed × sentence part (each model's own luck with the sentences drawn, halved by a test set twice as "
             f"large), as standard deviations in {primary} points with {ci(alpha)}s over seeds (chi-square; the "
             "seed × sentence part, averaged over every sentence and seed, taken as known)."
             + (f" In the median arm the seed × sentence part is {median:.0%} of the seed variance."
                if median == median else ""), "", md_table(*noise.arm_rows(analysis)), ""]
    header, rows = noise.comparison_rows(analysis, experiment.config.baseline_label)
    if rows:
        lines += ["Each comparison's test-set term (the sentence × variant variance of its difference, which no "
                  "number of seeds removes), the smallest difference any number of seeds could detect on this test "
                  "set, and what doubling the seeds or the test sentences would let it detect (normal "
                  "approximation, at its verdict's level and power; the test-set term and the seed × sentence parts "
                  "halve with twice the sentences, the model parts with twice the seeds):", "",
                  md_table(header, rows), ""]
    return lines


def confound_lines(report: Report, analysis: TaskAnalysis) -> list[str]:
    """Variants whose trainable parameter count differs from the baseline's: their verdicts compare capacity too."""
    rows = report.frame[(report.frame.task == analysis.task.key) & report.frame.parameters.notna()]
    counts = rows.groupby("variant").parameters.median()
    baseline = counts.get(report.experiment.config.baseline_label)
    if baseline is None or not baseline:
        return []
    differ = [f"{variant} {int(n - baseline):+,} ({(n - baseline) / baseline:+.1%})"
              for variant, n in counts.items() if variant in analysis.comparisons and n != baseline]
    if not differ:
        return []
    return [f"Parameter confounds (trainable parameters against {report.experiment.config.baseline_label}'s "
            f"{int(baseline):,}): " + "; ".join(differ) + ". Their verdicts compare a change of capacity as well.", ""]


def _budget(config) -> str:
    """A training config's budget in words: what every verdict on the task is conditional on."""
    parts = [f"{config.steps:,} steps" if config.steps else "", f"{config.epochs:g} epochs" if config.epochs else "",
             f"{config.minutes:g} minutes" if config.minutes else ""]
    return " / ".join(p for p in parts if p)


def budgets(experiment: Experiment, task) -> tuple[str, list[str]]:
    """The baseline's budget on `task` ('4,000 steps'), and 'variant at its budget' for every variant that differs."""
    seed, baseline = experiment.config.seeds[0], experiment.config.baseline_label
    own = _budget(experiment.train_config(task, seed, baseline))
    others = {v.label: _budget(experiment.train_config(task, seed, v.label)) for v in experiment.config.variants}
    return own, [f"{variant} at {b}" for variant, b in others.items() if b != own]


def floor_lines(report: Report, analysis: TaskAnalysis) -> list[str]:
    """The task's trivial floors, and the line that replaces its verdicts when the baseline does not clear them."""
    if analysis.floors is None:
        return [f"Trivial floors: none recorded (`zoo floors {shown(report.experiment.path)}` scores "
                "them), so the verdicts are not checked against what doing nothing scores.", ""]
    scores = ", ".join(f"{name} {value:.2f}" for name, value in analysis.floors.items())
    lines = [f"Trivial floors (systems that learn nothing, scored like the models on test "
             f"{label(analysis.primary)}): {scores}."]
    if analysis.below_floor:
        lines[0] += f" **No verdicts on this task**: {analysis.below_floor}."
    return [*lines, ""]
