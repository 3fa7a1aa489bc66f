"""The report's figures, PNG via matplotlib's Agg backend (no display needed).

Each figure is meant to be read without the text around it: a title naming the experiment and task,
axis labels with units, a legend, and what the band or error bar means written in the figure.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from zoo import metrics  # noqa: E402
from zoo.experiment import Experiment  # noqa: E402
from zoo.experiment.schema import TaskEntry  # noqa: E402
from zoo.report.analysis import Analyst, TaskAnalysis  # noqa: E402
from zoo.report.tables import ci, label, verdict_class, verdict_text  # noqa: E402
from zoo.stats.intervals import mean_half_width  # noqa: E402

DPI = 110


def file_stem(text: str) -> str:
    """A task key as a safe file name."""
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", text)


def _colors(experiment: Experiment) -> dict[str, tuple]:
    """One colour per variant: tab20's strong shades first, then its light ones (no repeats up to 20)."""
    palette = plt.get_cmap("tab20").colors
    order = list(palette[0::2]) + list(palette[1::2])
    return {v.label: order[i % len(order)] for i, v in enumerate(experiment.config.variants)}


def _linestyle(experiment: Experiment, variant: str) -> str:
    """Dashed for the variants past the tenth, whose light colours are the easiest to confuse."""
    return "-" if [v.label for v in experiment.config.variants].index(variant) < 10 else "--"


def _band(ax, table: pd.DataFrame, color: tuple, name: str, linestyle: str = "-") -> None:
    """Mean over seeds as a line, min-max over seeds as a shaded band (table: step x seed)."""
    ax.plot(table.index, table.mean(axis=1), color=color, linestyle=linestyle, label=f"{name} (n={table.shape[1]})")
    if table.shape[1] > 1:
        ax.fill_between(table.index, table.min(axis=1), table.max(axis=1), color=color, alpha=0.2, linewidth=0)


def learning_curves(experiment: Experiment, task: TaskEntry, logged: pd.DataFrame, path: Path) -> Path:
    """Validation metric and training NLL against step, one line per variant. The NLL, not the training
    objective: how label smoothing enters the objective depends on the output head (zoo/kernels/loss.py; the KL form
    sits about 1.15 nats below the cross-entropy form at eps 0.1 and vocabulary 4000), so objectives of
    variants with different heads are not comparable, and their NLLs are."""
    metric = task.primary_metric
    colors = _colors(experiment)
    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 4.5))
    rows = logged[logged.task == task.key]
    # training NLL as the mean over each 1% of the steps: smooth, and alike for runs logged at different intervals
    width = max(1, math.ceil(rows[rows.kind == "train"].step.max() / 100)) if (rows.kind == "train").any() else 1
    # split once: comparing the text columns row by row, per variant and kind, took 0.4 s a plot at 280k rows
    parts = {key: part for key, part in rows.groupby(["variant", "kind"], sort=False)}
    for variant, color in colors.items():
        evals = parts.get((variant, "eval"), rows.iloc[:0])
        if len(evals) and metric in evals:
            _band(left, evals.pivot_table(index="step", columns="seed", values=metric).sort_index(), color, variant,
                  _linestyle(experiment, variant))
        train = parts.get((variant, "train"), rows.iloc[:0])
        if len(train) and "nll" in train:  # records zoo's trainer writes log it; a hand-made one may not
            steps = ((train.step - 1) // width + 1) * width  # each row's bin, named by its last step
            table = train.assign(step=steps).pivot_table(index="step", columns="seed", values="nll").sort_index()
            _band(right, table, color, variant, _linestyle(experiment, variant))
    if task.threshold is not None:
        left.axhline(task.threshold, color="grey", linestyle="--", linewidth=1, label=f"threshold {task.threshold:g}")
    left.set(title=f"validation {metric.replace('_', ' ')}", xlabel="training step (optimizer updates)",
             ylabel=f"validation {metric.replace('_', ' ')} ({unit(metric)})")
    smoothing = f", mean over each {width} steps" if width > 1 else ""
    right.set(title=f"training NLL{smoothing}", xlabel="training step (optimizer updates)",
              ylabel="−log p(target) per target token (nats, no smoothing)")
    for ax in (left, right):
        ax.grid(alpha=0.3)
        if not ax.lines:
            ax.text(0.5, 0.5, "no complete runs", ha="center", va="center", transform=ax.transAxes)
    legend = dict(zip(*reversed(right.get_legend_handles_labels())))  # one legend for both, beside them, where
    legend.update(zip(*reversed(left.get_legend_handles_labels())))  # it hides no curve
    if legend:
        right.legend(legend.values(), legend.keys(), fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1))
    fig.suptitle(f"{experiment.name} / {task.key}: learning curves (line: mean over seeds, band: min-max)")
    return save(fig, path)


def unit(metric: str) -> str:
    return metrics.get(metric).unit


def seed_values(experiment: Experiment, analysis: TaskAnalysis, analyst: Analyst, path: Path) -> Path:
    """Each trained seed's test value of the primary metric as a dot, per variant, with the mean and
    its 95% CI beside them; seeds that stalled or diverged are drawn as crosses at the bottom."""
    task, metric = analysis.task, analysis.primary
    colors = _colors(experiment)
    fig, ax = plt.subplots(figsize=(max(7, 1.1 * len(colors) + 2), 4.5))
    for x, variant in enumerate(colors):
        values = analyst.values(task, variant, metric)
        jitter = [x + 0.08 * (i - (len(values) - 1) / 2) for i in range(len(values))]
        ax.scatter(jitter, values, color=colors[variant], zorder=3, s=22)
        if len(values) >= 2:
            mean = sum(values) / len(values)
            half = mean_half_width(np.asarray(values, dtype=float))
            ax.errorbar(x + 0.3, mean, yerr=half, fmt="_", color="black", capsize=4, markersize=12, zorder=4)
        unstable = [s for s, o in analysis.outcomes[variant].items() if o in ("stalled", "diverged")]
        if unstable:
            ax.scatter([x] * len(unstable), [0] * len(unstable), marker="x", color="red", zorder=3,
                       label="stalled or diverged seed" if x == 0 or not ax.get_legend_handles_labels()[1] else None)
    ax.set_xticks(range(len(colors)), [f"{v}\n({len(analyst.trained(task, v))} trained)" for v in colors], fontsize=8,
                  rotation=30, ha="right", rotation_mode="anchor")  # long names side by side would overlap
    ax.set(ylabel=f"test {label(metric)} ({unit(metric)})", xlabel="variant (seeds that trained)",
           title=f"{experiment.name} / {task.key}: test {label(metric)} per seed\n"
                 "dot: a seed that trained; bar: mean and 95% CI; red cross: a stalled or diverged seed")
    ax.grid(axis="y", alpha=0.3)
    if ax.get_legend_handles_labels()[1]:
        ax.legend(fontsize=8)
    return save(fig, path)


def effects(experiment: Experiment, analysis: TaskAnalysis, path: Path) -> Path:
    """Forest plots against the baseline: the primary metric's difference with its (1 - alpha) CI and the
    equivalence margin as a band (left); the difference in the share of unstable runs (right: its test and
    the odds-ratio interval that test inverts are in the outcomes table). Labels carry the verdicts."""
    task = analysis.task
    rows = list(analysis.comparisons.items())
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 1.6 + 0.5 * max(len(rows), 1)), sharey=True)
    for y, (variant, c) in enumerate(rows):
        r = c.result
        if math.isnan(r.difference):
            pass  # nothing trained on one side: no point to draw (its label says so)
        elif math.isnan(r.ci_low):
            left.scatter([r.difference], [y], marker="o", facecolors="none", edgecolors="grey")
        else:
            left.errorbar(r.difference, y, xerr=[[r.difference - r.ci_low], [r.ci_high - r.difference]], fmt="o",
                          color="black", capsize=3)
        test = analysis.failure_tests.get(variant)
        if test is not None and not math.isnan(test.difference):  # the interval that decides is the odds ratio's
            right.scatter([100 * test.difference], [y], marker="s", color="firebrick")
    band = ""
    if task.margin is not None:  # named in the axis label: a legend inside the axes can hide a point
        left.axvspan(-task.margin, task.margin, color="green", alpha=0.12)
        band = f"\ngreen band: the equivalence margin ±{task.margin:g}"
    settings = experiment.config.analysis
    left.set_yticks(range(len(rows)), [f"{v}: {verdict_text(c, settings.min_seeds, short=True)}" for v, c in rows],
                    fontsize=8)
    left.invert_yaxis()
    metric = analysis.primary
    left.set(xlabel=f"Δ test {label(metric)} vs {experiment.config.baseline_label} ({unit(metric)}){band}",
             title=f"quality of the runs that trained\n({ci(settings.alpha)}; hollow: no verdict)")
    right.set_xlim(-105, 105)  # the whole range a difference of shares can take: no difference reads as none
    right.set(xlabel=f"Δ share of unstable runs vs {experiment.config.baseline_label} (points)",
              title="instability: stalled + diverged\n(the tests and their intervals: the outcomes table)")
    for ax in (left, right):
        ax.axvline(0, color="grey", linewidth=1)
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle(f"{experiment.name} / {task.key}: effects against the baseline")
    return save(fig, path)


VERDICT_COLORS = {"better": "tab:green", "worse": "tab:red", "equivalent": "tab:blue", "undecided": "dimgrey",
                  "open": "dimgrey"}  # open: a sequential comparison a later look may decide


def effects_overview(experiment: Experiment, tasks: list[TaskAnalysis], titles: list[str], path: Path) -> Path:
    """Every task's effects side by side, one panel per task (each in its metric's units, titled by `titles`,
    which name the budget), the variants in the same rows: which factor matters where, at a glance. The colour
    is the verdict, the band the margin."""
    variants = [v.label for v in experiment.config.variants if v.label != experiment.config.baseline_label]
    fig, panels = _variant_panels(len(tasks), variants)
    for ax, analysis, title in zip(panels, tasks, titles):
        for y, variant in enumerate(variants):
            c = analysis.comparisons.get(variant)
            if c is None:
                continue
            r, kind = c.result, verdict_class(c)
            if math.isnan(r.difference):  # e.g. every run of one side stalled: the instability plot shows it
                ax.text(0.02, y, f"no point: {r.n_variant} v {r.n_baseline} trained seeds", fontsize=7,
                        color="grey", va="center", transform=ax.get_yaxis_transform())
                continue
            if kind == "no verdict" or math.isnan(r.ci_low):
                ax.scatter([r.difference], [y], marker="o", facecolors="none", edgecolors="grey")
            else:
                ax.errorbar(r.difference, y, xerr=[[r.difference - r.ci_low], [r.ci_high - r.difference]], fmt="o",
                            color=VERDICT_COLORS[kind], capsize=2, markersize=4)
        margin = analysis.task.margin
        if margin is not None:
            ax.axvspan(-margin, margin, color="green", alpha=0.10)
        ax.axvline(0, color="grey", linewidth=1)
        ax.grid(axis="x", alpha=0.3)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel(f"Δ test {label(analysis.primary)}" + (f" (band ±{margin:g})" if margin is not None else ""),
                      fontsize=8)
    fig.suptitle(f"{experiment.name}: effects against {experiment.config.baseline_label} per task "
                 f"({ci(experiment.config.analysis.alpha)})\n"
                 "colour: the verdict (green better, red worse, blue equivalent within the band, grey undecided; "
                 "hollow: no verdict)", fontsize=9)
    return save(fig, path)


def throughput(experiment: Experiment, frame: pd.DataFrame, path: Path) -> Path:
    """Training tokens/s per variant, one panel per task and device (tasks differ in sentence length, devices in
    speed, so their rates share no scale), the variants in the same rows: each complete seed a dot, the mean a
    black tick, and each variant's trainable parameters written at the panel's right edge, so speed and size read
    together. Many variants share a size, so a size axis would stack them on one another; rows keep every variant
    readable."""
    colors = _colors(experiment)
    variants = list(colors)
    complete = frame[frame.status.isin(("complete", "stalled"))]  # trained to the end
    devices = {task.key: sorted(set(complete[complete.task == task.key].device.astype(str))) or [""]
               for task in experiment.config.tasks}
    cells = [(task, device) for task in experiment.config.tasks for device in devices[task.key]]
    fig, panels = _variant_panels(len(cells), variants)
    for ax, (task, device) in zip(panels, cells):
        rows = complete[(complete.task == task.key) & (complete.device.astype(str) == device)]
        for y, variant in enumerate(variants):
            runs = rows[rows.variant == variant]
            if not len(runs):
                continue
            speed = runs.tok_per_s.astype(float) / 1000
            ax.scatter(speed, [y] * len(speed), color=colors[variant], s=16, alpha=0.8, zorder=3)
            ax.scatter([speed.mean()], [y], marker="|", color="black", s=160, zorder=4)
            ax.text(1.0, y, f" {_size(float(runs.parameters.astype(float).mean()))}", fontsize=7, color="grey",
                    va="center", transform=ax.get_yaxis_transform(), clip_on=False)
        if not len(rows):
            ax.text(0.5, 0.5, "no complete runs", ha="center", va="center", transform=ax.transAxes)
        fastest = float(rows.tok_per_s.astype(float).max()) / 1000 if len(rows) else math.nan
        ax.set_xlim(0, 1.05 * max(fastest, 1e-3) if math.isfinite(fastest) else 1)  # NaN: no run says its seconds
        ax.grid(axis="x", alpha=0.3)
        ax.set_title(task.key + (f" on {device}" if len(devices[task.key]) > 1 else ""), fontsize=9,
                     parse_math=False)  # a device name is a record's text, not TeX
        ax.xaxis.set_major_locator(plt.MaxNLocator(5))
        ax.set_xlabel("training throughput (thousand target tokens/s)", fontsize=8)
    split = "; a panel per device a task's runs trained on" if len(cells) > len(devices) else ""
    fig.suptitle(f"{experiment.name}: training throughput per variant (dot: a seed; tick: the mean; grey: trainable "
                 f"parameters{split})\nmeasured while runs shared the machine: not a speed comparison (zoo bench is)",
                 fontsize=9)
    return save(fig, path)


def _size(parameters: float) -> str:
    """A parameter count in the units a reader compares models in: 487,104 as 0.49M, 23,412 as 23.4k."""
    return f"{parameters / 1e6:.2f}M" if parameters >= 1e5 else f"{parameters / 1e3:.1f}k"


def instability(experiment: Experiment, tasks: list[TaskAnalysis], path: Path) -> Path:
    """Share of unstable (stalled + diverged) runs per variant with its 95% Clopper-Pearson interval and the
    count beside it, one panel per task, the variants in the same rows: where, across an experiment's tasks or
    training regimes, training fails."""
    colors = _colors(experiment)
    variants = list(colors)
    fig, panels = _variant_panels(len(tasks), variants)
    for ax, analysis in zip(panels, tasks):
        for y, variant in enumerate(variants):
            rate = analysis.instability[variant]
            if not rate.n:
                ax.text(1, y, "no finished run", fontsize=7, color="grey", va="center")
                continue
            ax.barh(y, 100 * rate.rate, height=0.6, color=colors[variant],
                    xerr=[[100 * (rate.rate - rate.ci_low)], [100 * (rate.ci_high - rate.rate)]], capsize=2,
                    error_kw={"elinewidth": 0.8, "alpha": 0.6})
            ax.text(100 * rate.ci_high + 2, y, f"{rate.count}/{rate.n}", fontsize=7, va="center")
        ax.set_xlim(0, 115)
        ax.set_xticks([0, 25, 50, 75, 100])
        ax.grid(axis="x", alpha=0.3)
        ax.set_title(analysis.task.key, fontsize=9)
        ax.set_xlabel("unstable runs (% of finished runs)", fontsize=8)
    fig.suptitle(f"{experiment.name}: unstable runs (stalled + diverged) per task\n"
                 "bar: share of finished runs; error bar: 95% Clopper-Pearson interval; text: unstable / finished",
                 fontsize=9)
    return save(fig, path)


def _variant_panels(count: int, variants: list[str]) -> tuple:
    """A figure of `count` panels, four to a row, each listing `variants` top to bottom in the same rows: the
    layout of every plot that sets variants side by side across tasks. Returns the figure and the panels to draw
    in (the grid's spare ones are hidden)."""
    columns = min(4, count)
    rows = math.ceil(count / columns)
    fig, axes = plt.subplots(rows, columns, sharey=True, squeeze=False,
                             figsize=(max(8.0, 2.4 + 3.4 * columns), rows * (1.6 + 0.32 * len(variants))))
    for ax in list(axes.flat)[count:]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_yticks(range(len(variants)), variants, fontsize=8)
    axes[0, 0].set_ylim(len(variants) - 0.5, -0.5)  # shared by every panel
    return fig, list(axes.flat)[:count]


def save(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI, metadata={"Software": None})  # no version stamp: regenerated plots stay equal
    plt.close(fig)
    return path
