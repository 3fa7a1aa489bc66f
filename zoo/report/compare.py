"""What a report says about each task: per-variant estimates, tests against the baseline, findings.

Only complete runs count. Diverged, failed, incomplete and missing runs are listed in the grid
status and left out of every mean and test (a diverged run has no meaningful final numbers, and
counting it as zero would mix "unstable" with "bad").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np
import pandas as pd

from zoo.errors import DataError
from zoo.experiment import Experiment
from zoo.experiment.config import Finding, TaskEntry
from zoo.report.collect import ReportError, hypotheses, main_metric, references, task_kind
from zoo.report.stats import (BETTER, FEW, HIGHER_IS_BETTER, SAME, WORSE, Estimate, Test, mean_ci,
                              paired_bootstrap, sentence_stats, welch)

LABELS = {
    "parameters": "trainable parameters", "tok_per_s": "training tokens/s", "valid_loss": "valid loss",
    "valid_ppl": "valid perplexity", "valid_nll": "valid NLL", "bleu": "test BLEU", "bleu_lowercase": "test BLEU (lowercased)",
    "chrf": "test chrF", "exact_match": "test exact match %", "token_accuracy": "test token accuracy %",
    "test_nll": "test NLL", "test_ppl": "test perplexity", "steps_to_threshold": "steps to threshold",
    "train_seconds": "training seconds",
}
FEW_REACHED = "not enough seeds reached the threshold"
DECIMALS = {"parameters": 0, "tok_per_s": 0, "valid_loss": 3, "valid_nll": 3, "valid_ppl": 2, "test_nll": 3,
            "test_ppl": 2, "steps_to_threshold": 0, "train_seconds": 0}


def metric_columns(task: TaskEntry) -> list[str]:
    """The task's own metrics in the tables: BLEU and chrF for translation, exact match otherwise."""
    return ["bleu", "chrf"] if task_kind(task) == "text" else ["exact_match"]


def measures(task: TaskEntry) -> list[str]:
    """Table columns, in order; steps to threshold only when the task sets a threshold."""
    steps = ["steps_to_threshold"] if task.threshold is not None else []
    return ["parameters", "tok_per_s", "valid_loss", "valid_ppl", *metric_columns(task), *steps]


def label(column: str, task: TaskEntry | None = None) -> str:
    if column == "steps_to_threshold" and task is not None and task.threshold is not None:
        return f"steps to valid {main_metric(task).replace('_', ' ')} ≥ {task.threshold:g}"
    return LABELS.get(column, column)


def fmt(value: float, column: str) -> str:
    if value is None or math.isnan(value):
        return "—"
    decimals = DECIMALS.get(column, 2)
    return f"{value:,.{decimals}f}"


def fmt_difference(value: float, column: str) -> str:
    """Signed difference; one that the column's format would round to zero keeps two significant
    digits, so a tested difference never reads as '+0.00' next to a verdict of better/worse."""
    if math.isnan(value):
        return "—"
    text = fmt(value, column)
    if value != 0 and float(text.replace(",", "")) == 0:
        text = f"{value:.2g}"
    return ("+" if value > 0 else "") + text


def fmt_estimate(estimate: Estimate, column: str) -> str:
    """'2.00 ± 2.48'; one seed: '2.00 (n=1)'; constant over seeds (parameter counts): the value."""
    if estimate.n == 0:
        return "—"
    if estimate.n == 1:
        return f"{fmt(estimate.mean, column)} (n=1)"
    if estimate.half_width == 0:
        return fmt(estimate.mean, column)
    return f"{fmt(estimate.mean, column)} ± {fmt(estimate.half_width, column)}"


def complete(frame: pd.DataFrame, task: str, variant: str | None = None) -> pd.DataFrame:
    rows = frame[(frame.task == task) & (frame.status == "complete")]
    return rows if variant is None else rows[rows.variant == variant]


def estimates(frame: pd.DataFrame, task: TaskEntry, variant: str) -> dict[str, Estimate]:
    rows = complete(frame, task.key, variant)
    return {column: mean_ci(rows[column].astype(float).tolist()) for column in measures(task)}


def results_rows(frame: pd.DataFrame, experiment: Experiment, task: TaskEntry) -> tuple[list[str], list[list[str]]]:
    """Header and rows of a task's results table (mean ± 95% CI over complete seeds), for any renderer."""
    header = ["variant", "complete seeds", *(label(c, task) for c in measures(task))]
    rows = []
    planned = len(experiment.config.seeds)
    for variant in (v.label for v in experiment.config.variants):
        found = estimates(frame, task, variant)
        cells = [fmt_estimate(found[c], c) for c in measures(task)]
        if task.threshold is not None:
            reached = found["steps_to_threshold"].n
            done = len(complete(frame, task.key, variant))
            cells[-1] = "never" if done and not reached else cells[-1]
            cells[-1] += f" ({reached}/{done} reached)" if done else ""
        baseline = " (baseline)" if variant == experiment.config.baseline_label else ""
        rows.append([variant + baseline, f"{len(complete(frame, task.key, variant))}/{planned}", *cells])
    return header, rows


@dataclass(frozen=True)
class Comparison:
    task: str
    variant: str
    metric: str
    test: Test


class Comparer:
    """Tests variant vs baseline, per task and metric; BLEU by paired bootstrap, the rest by Welch.

    Sentence statistics are computed once per run directory and references once per task, so the
    comparisons of all variants and the findings share them.
    """

    def __init__(self, experiment: Experiment, frame: pd.DataFrame,
                 load_references: Callable[[str], list[str]] = references):
        self.experiment, self.frame, self.load_references = experiment, frame, load_references
        self.baseline = experiment.config.baseline_label
        self._stats: dict[str, np.ndarray | None] = {}
        self._references: dict[str, list[str]] = {}
        self._done: dict[tuple[str, str, str, str], Test] = {}
        self.notes: dict[str, list[str]] = {}  # task -> what the reader should know about its tests

    def _task(self, key: str) -> TaskEntry:
        return next(t for t in self.experiment.config.tasks if t.key == key)

    def _sentence_stats(self, task: str, run_dir: str) -> np.ndarray | None:
        if run_dir not in self._stats:
            hyps = hypotheses(run_dir)
            if not hyps:  # no test.hyp (or an empty one): this seed has no outputs to resample
                self._stats[run_dir] = None
                return None
            if task not in self._references:
                self._references[task] = self.load_references(run_dir)
            refs = self._references[task]
            if len(hyps) > len(refs):
                raise ReportError(f"{run_dir}/test.hyp: {len(hyps)} lines, but the test set has {len(refs)} sentences")
            self._stats[run_dir] = sentence_stats(hyps, refs[: len(hyps)])
        return self._stats[run_dir]

    def _bootstrap(self, task: str, variant: str, reference: str) -> Test:
        """Over the seeds both variants completed with test outputs of the same length."""
        def by_seed(label: str) -> dict[int, np.ndarray]:
            rows = complete(self.frame, task, label)
            found = {int(r.seed): self._sentence_stats(task, r.run_dir) for r in rows.itertuples()}
            return {seed: stats for seed, stats in found.items() if stats is not None}

        base, other = by_seed(reference), by_seed(variant)
        seeds = sorted(set(base) & set(other))
        lengths = {base[s].shape[0] for s in seeds} | {other[s].shape[0] for s in seeds}
        if len(lengths) > 1:
            raise ReportError(f"runs of task {task}: test.hyp files differ in length ({sorted(lengths)}); "
                              "every run must decode the same test sentences")
        return paired_bootstrap([base[s] for s in seeds], [other[s] for s in seeds])

    def _welch(self, task: str, variant: str, metric: str, reference: str) -> Test:
        def values(label: str) -> list[float]:
            return complete(self.frame, task, label)[metric].astype(float).tolist()

        test = welch(values(reference), values(variant), HIGHER_IS_BETTER[metric])
        if metric == "steps_to_threshold" and test.verdict == FEW:  # runs that never reach it have no value
            test = replace(test, verdict=FEW_REACHED)
        return test

    def compare(self, task: str, variant: str, metric: str, against: str | None = None) -> Test:
        """`variant` against `against` (default: the baseline); the Test's 'baseline' side is the reference."""
        reference = against or self.baseline
        key = (task, variant, metric, reference)
        if key in self._done:
            return self._done[key]
        if metric == "bleu" and task_kind(self._task(task)) == "text" and task not in self.notes:
            try:
                self._done[key] = self._bootstrap(task, variant, reference)
                return self._done[key]
            except DataError as err:  # the corpus moved: the seeds' BLEU scores are still in test.json
                self.notes[task] = [f"BLEU is compared by Welch's t-test over seeds, not by the paired bootstrap, "
                                    f"because the test references cannot be read: {err}"]
        self._done[key] = self._welch(task, variant, metric, reference)
        return self._done[key]

    def task_comparisons(self, task: TaskEntry) -> list[Comparison]:
        """Every non-baseline variant against the baseline on every compared measure of the table."""
        columns = [c for c in measures(task) if c in HIGHER_IS_BETTER]
        return [Comparison(task.key, v.label, c, self.compare(task.key, v.label, c))
                for v in self.experiment.config.variants if v.label != self.baseline for c in columns]


def fmt_p(p: float) -> str:
    if math.isnan(p):
        return "—"
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def comparison_rows(comparisons: list[Comparison], task: TaskEntry) -> tuple[list[str], list[list[str]]]:
    header = ["variant", "measure", "difference (variant − baseline)", "test", "p", "verdict", "seeds (baseline, variant)"]
    rows = [[c.variant, label(c.metric, task), fmt_difference(c.test.difference, c.metric), c.test.method,
             fmt_p(c.test.p_value), c.test.verdict, f"{c.test.n_baseline}, {c.test.n_variant}"] for c in comparisons]
    return header, rows


@dataclass(frozen=True)
class FindingCheck:
    finding: Finding
    task: str
    metric: str
    outcome: str  # agrees | disagrees | inconclusive (...)
    test: Test | None


def outcome(expect: str, found: str) -> str:
    """A finding's expectation against the verdict of the data."""
    if found in (BETTER, WORSE):
        return "agrees" if found == expect else "disagrees"
    if found == SAME:
        return "agrees (no detectable difference)" if expect == "no difference" else "inconclusive (no detectable difference)"
    return f"inconclusive ({found})"


def check_findings(experiment: Experiment, comparer: Comparer) -> list[FindingCheck]:
    """One check per finding and matching task (a finding without a task applies to every task)."""
    checks = []
    for i, finding in enumerate(experiment.config.findings):
        if finding.metric is not None and finding.metric not in HIGHER_IS_BETTER:
            raise ReportError(f"{experiment.path}: findings[{i}].metric: {finding.metric!r} is not a compared results "
                              f"column; allowed: {', '.join(HIGHER_IS_BETTER)}")
        for task in experiment.config.tasks:
            if finding.task is not None and finding.task != task.key:
                continue
            metric = finding.metric or main_metric(task)
            if finding.variant == (finding.against or comparer.baseline):
                checks.append(FindingCheck(finding, task.key, metric, "inconclusive (the variant is its own reference)",
                                           None))
                continue
            test = comparer.compare(task.key, finding.variant, metric, finding.against)
            said = outcome(finding.expect, test.verdict)
            if not (test.n_baseline and test.n_variant):
                said = f"inconclusive (no complete runs with {metric} on both sides)"
            checks.append(FindingCheck(finding, task.key, metric, said, test))
    return checks
