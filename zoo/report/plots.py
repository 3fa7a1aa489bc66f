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
import pandas as pd  # noqa: E402

from zoo.experiment import Experiment  # noqa: E402
from zoo.experiment.config import TaskEntry  # noqa: E402
from zoo.report.collect import main_metric  # noqa: E402
from zoo.report.compare import complete, label, metric_columns  # noqa: E402
from zoo.report.stats import mean_ci  # noqa: E402

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
    """Validation metric and training loss against step, one line per variant."""
    metric = main_metric(task)
    colors = _colors(experiment)
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    rows = logged[logged.task == task.key]
    window = max(1, rows[rows.kind == "train"].step.nunique() // 50)  # smooth over ~2% of the logged steps
    for variant, color in colors.items():
        evals = rows[(rows.variant == variant) & (rows.kind == "eval")]
        if len(evals) and metric in evals:
            _band(left, evals.pivot_table(index="step", columns="seed", values=metric).sort_index(), color, variant,
                  _linestyle(experiment, variant))
        train = rows[(rows.variant == variant) & (rows.kind == "train")]
        if len(train):
            table = train.pivot_table(index="step", columns="seed", values="loss").sort_index()
            _band(right, table.rolling(window, min_periods=1).mean(), color, variant, _linestyle(experiment, variant))
    if task.threshold is not None:
        left.axhline(task.threshold, color="grey", linestyle="--", linewidth=1, label=f"threshold {task.threshold:g}")
    unit = " (BLEU points)" if metric == "bleu" else " (% of validation sequences)"
    left.set(title=f"validation {metric.replace('_', ' ')}", xlabel="training step (optimizer updates)",
             ylabel=f"validation {metric.replace('_', ' ')}{unit}")
    smoothing = f", rolling mean over {window} logged steps" if window > 1 else ""
    right.set(title=f"training loss{smoothing}", xlabel="training step (optimizer updates)",
              ylabel="loss per target token (nats; label-smoothed if configured)")
    for ax in (left, right):
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "no complete runs", ha="center", va="center", transform=ax.transAxes)
    fig.suptitle(f"{experiment.name} / {task.key}: learning curves (line: mean over seeds, band: min-max)")
    return _save(fig, path)


def metric_bars(experiment: Experiment, task: TaskEntry, frame: pd.DataFrame, path: Path) -> Path:
    """The task's test metric(s) per variant, with 95% CI error bars over seeds."""
    columns = metric_columns(task)
    colors = _colors(experiment)
    fig, axes = plt.subplots(1, len(columns), figsize=(max(5, 1.3 * len(colors)) * len(columns), 4.5), squeeze=False)
    for ax, column in zip(axes[0], columns):
        names, means, errors = [], [], []
        for variant in colors:
            estimate = mean_ci(complete(frame, task.key, variant)[column].astype(float).tolist())
            names.append(f"{variant}\n(n={estimate.n})")
            means.append(0.0 if math.isnan(estimate.mean) else estimate.mean)
            errors.append(0.0 if math.isnan(estimate.half_width) else estimate.half_width)
        ax.bar(names, means, yerr=errors, capsize=4, color=[colors[v] for v in colors])
        unit = "BLEU points" if column == "bleu" else "chrF points" if column == "chrf" else "% of test sequences"
        ax.set(title=label(column), ylabel=f"{label(column)} ({unit})", xlabel="variant (complete seeds)")
        ax.grid(axis="y", alpha=0.3)
        ax.tick_params(axis="x", labelsize=8)
    fig.suptitle(f"{experiment.name} / {task.key}: test metrics\n"
                 "bar: mean over seeds; error bar: 95% CI (none with n=1)", fontsize=10)
    return _save(fig, path)


def throughput(experiment: Experiment, frame: pd.DataFrame, path: Path) -> Path:
    """Training tokens/s against trainable parameters: one point per variant (and task), labelled."""
    colors = _colors(experiment)
    markers = "os^DvP*X"
    fig, ax = plt.subplots(figsize=(8, 5))
    largest = frame.parameters.astype(float).max()
    scale, unit = (1e6, "millions") if not largest < 1e6 else (1e3, "thousands")
    for t, task in enumerate(experiment.config.tasks):
        for variant, color in colors.items():
            rows = complete(frame, task.key, variant)
            if not len(rows):
                continue
            speed = mean_ci(rows.tok_per_s.astype(float).tolist())
            params = float(rows.parameters.astype(float).mean()) / scale
            error = 0.0 if math.isnan(speed.half_width) else speed.half_width
            ax.errorbar(params, speed.mean, yerr=error, fmt=markers[t % len(markers)], color=color, capsize=3,
                        label=f"{variant} on {task.key}")
            ax.annotate(variant, (params, speed.mean), textcoords="offset points", xytext=(5, 5), fontsize=8)
    ax.set(title=f"{experiment.name}: training throughput vs model size (mean over seeds, 95% CI)",
           xlabel=f"trainable parameters ({unit})", ylabel="training throughput (target tokens per second)")
    ax.grid(alpha=0.3)
    if ax.lines or ax.collections:
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no complete runs", ha="center", va="center", transform=ax.transAxes)
    return _save(fig, path)


def _save(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path
