"""What the records say about each task: run outcomes, per-variant estimates, and comparisons.

The seed is the unit of evidence. For each task:

- every run gets an outcome (zoo/stats/outcomes.py): complete, stalled (trained to the end without
  learning: the primary validation metric ended below the task's floor, or did not improve for
  `patience` evaluations), diverged, failed; stale and missing cells count for nothing;
- instability (stalled + diverged among finished runs) per variant, with a Clopper–Pearson interval,
  compared with the baseline by Fisher's exact test;
- quality statistics use the complete runs only;
- variants whose logged metrics are bit-identical to another's at every step, for every seed, are
  collapsed into that variant's row: they are one set of numbers, not two samples;
- the primary metric gets a comparison per variant (zoo/stats/seeds.py for per-seed metrics,
  zoo/stats/corpus.py for corpus metrics, which adds test-sentence variation to seed variation),
  the other metrics a difference with its interval and nothing more.

Verdicts are only given after p-values are adjusted over the report's whole family (family.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from zoo import metrics
from zoo.experiment import Experiment
from zoo.experiment.outcome import eval_curve
from zoo.experiment.schema import TaskEntry
from zoo.report.collect import Records, sentence_stats
from zoo.report.fingerprint import fingerprint
from zoo.stats import FEW, POWER
from zoo.stats import outcomes as oc
from zoo.stats.aso import eps_min
from zoo.stats.corpus import SEEDS_AND_SENTENCES_PERMUTATION, compare_corpus, corpus_tost
from zoo.stats.noise import NoiseSplit
from zoo.stats.pooled import PooledComparison
from zoo.stats.power import Design, detectable_at, power_at, seeds_at
from zoo.stats.seeds import WELCH_PERMUTATION, Difference, compare_seeds, prob_better
from zoo.stats.stopping import Decision
from zoo.stats.tost import Equivalence, tost
from zoo.stats.welch import MIN_SEEDS, permutation_floor

PERMUTATION_CHECKED = (WELCH_PERMUTATION, SEEDS_AND_SENTENCES_PERMUTATION)  # tests whose p has a floor

# Which way is better, per results column that is not a metric; columns not listed (e.g. parameters) and not
# metrics are not compared. Metrics say it themselves (zoo/metrics.py), plugins' included.
OTHER_DIRECTIONS = {
    "tok_per_s": True, "valid_loss": False, "valid_nll": False, "valid_ppl": False, "test_nll": False,
    "test_ppl": False, "train_seconds": False, "curve_area": True,
}
OTHER_BOUNDS = {"tok_per_s": (0, math.inf), "valid_ppl": (1, math.inf), "test_ppl": (1, math.inf)}
# The machine's numbers, not the model's: a run's speed says as much about where it trained as about what trained,
# so these columns are summarised and compared only between runs on one device.
DEVICE_BOUND = ("tok_per_s", "train_seconds")
CURVE_SUMMARIES = {"curve_area": oc.curve_area, "late_change": oc.late_change}  # of the primary validation curve


def compared_columns() -> list[str]:
    """The results columns a comparison or a finding can be about: every metric, then the others."""
    return [*metrics.names(), *OTHER_DIRECTIONS]


def higher_is_better(column: str) -> bool:
    metric = metrics.find(column)
    return metric.higher_is_better if metric is not None else OTHER_DIRECTIONS[column]


def bounds(column: str) -> tuple[float, float]:
    """Where a column's values can lie; an interval is clipped to them."""
    metric = metrics.find(column)
    return metric.bounds if metric is not None else OTHER_BOUNDS.get(column, (-math.inf, math.inf))


@dataclass(frozen=True)
class Comparison:
    """One variant against a reference on one metric: the test result and the effect sizes around it."""

    task: str
    variant: str
    reference: str
    metric: str
    result: Difference  # seeds.SeedComparison or corpus.CorpusComparison
    prob_better: float
    eps_min: float
    mde: float  # the detectable difference at `level` (zoo/stats/power.py), set by at_level
    seeds_needed: int | None  # per arm, for the task's target effect at `level` and the report's power
    equivalence: Equivalence | None  # TOST against the task's margin (primary metric only)
    per_seed: tuple[tuple[float, ...], tuple[float, ...]]  # (reference, variant) values
    unreachable: float | None = None  # the corrected level, when no outcome of these runs can reach it
    level: float = math.nan  # the level `mde` and `seeds_needed` are at: alpha, or after the report's correction
    power: float = math.nan  # the power they are for
    pooled_arms: int = 0  # a pooled comparison's arms (zoo/report/pooling.py); 0: Welch on its two arms
    sequential: Decision | None = None  # with [sequential]: what the looks decided (zoo/report/sequential.py)

    @property
    def design(self) -> Design:
        """What this comparison's test sees, for power: the arms' seed spreads and sizes, and a corpus metric's
        test-set variance (the part of its standard error that more seeds do not shrink)."""
        base, other = self.per_seed
        r = self.result
        if isinstance(r, PooledComparison):  # one seed sd over every arm, the grid's df
            return Design(r.pooled_sd, r.pooled_sd, len(base), len(other), r.term, arms=self.pooled_arms,
                          other_df=r.pooled_df - len(base) - len(other) + 2)
        sd_b = float(np.std(base, ddof=1)) if len(base) > 1 else math.nan
        sd_v = float(np.std(other, ddof=1)) if len(other) > 1 else math.nan
        seed_se = getattr(r, "se_seeds", r.se)
        extra = max(0.0, r.se ** 2 - seed_se ** 2) if not math.isnan(r.se) else 0.0
        return Design(sd_b, sd_v, len(base), len(other), extra)

    def power_for(self, effect: float) -> float:
        """This design's power for a true difference `effect`, at the level of its verdict."""
        return 0.0 if self.unreachable is not None else power_at(self.design, effect, self.level)

    def seeds_for(self, effect: float) -> int | None:
        """Seeds per arm that would find a true difference `effect` at the level of its verdict."""
        return seeds_at(self.design, effect, self.level, self.power)

    @property
    def verdict(self) -> str:
        return self.result.verdict

    @property
    def undetectable(self) -> str | None:
        """Why this design detects no difference at all, or None when `mde` is one it detects. 'correction':
        with unequal seeds no outcome of these runs reaches the corrected level (`unreachable`; `mde` is then
        infinite). 'range': the detectable Δ exceeds the metric's whole span (3 v 3 seeds of a noisy arm on 0-100
        exact match can need 287 points), so "none larger than 287" would read as a bound where there is none.
        Every wording of the detectable Δ asks this one property, so the first reason always wins."""
        if self.unreachable is not None:
            return "correction"
        low, high = bounds(self.metric)
        return "range" if self.mde > high - low else None


def metric_range(comparison: Comparison) -> str:
    """'the metric's range (0–100)': what a design whose detectable Δ exceeds it cannot see a difference within."""
    low, high = bounds(comparison.metric)
    return f"the metric's range ({low:g}–{high:g})"


def detectable_phrase(comparison: Comparison, larger_than) -> str:
    """What no difference could be detected of, where the design detects some (`undetectable` is not
    'correction'): `larger_than(mde)` ('larger than 9.06', '> 9.06': the tables, the terminal and the findings
    word it differently), or 'within the metric's range (0–100)'."""
    return f"within {metric_range(comparison)}" if comparison.undetectable == "range" else larger_than(comparison.mde)


@dataclass
class TaskAnalysis:
    task: TaskEntry
    primary: str
    outcomes: dict[str, dict[int, str]]  # variant -> seed -> outcome
    collapsed: dict[str, str]  # variant -> the variant whose numbers it shares bit for bit
    instability: dict[str, oc.Rate] = field(default_factory=dict)
    failure_tests: dict[str, oc.FailureComparison] = field(default_factory=dict)
    failure_adjusted: dict[str, float] = field(default_factory=dict)  # variant -> p adjusted over the report
    comparisons: dict[str, Comparison] = field(default_factory=dict)  # variant -> primary vs baseline
    descriptive: dict[str, dict[str, Difference]] = field(default_factory=dict)  # variant -> metric -> result
    devices: list[str] = field(default_factory=list)  # where its trained runs ran
    # variant -> metric -> device -> result: the descriptive metrics that are DEVICE_BOUND, compared per device
    per_device: dict[str, dict[str, dict[str, Difference]]] = field(default_factory=dict)
    survival: dict[str, oc.Survival] = field(default_factory=dict)
    reach: dict[str, tuple[list[float], list[bool]]] = field(default_factory=dict)  # steps, reached?
    logrank: dict[str, float] = field(default_factory=dict)  # variant -> log-rank p against the baseline
    curve_area: dict[str, list[float]] = field(default_factory=dict)
    floors: dict[str, float] | None = None  # trivial system -> its test primary metric; None: no floor recorded
    below_floor: str = ""  # why the task gets no verdicts: its baseline does not clear a trivial floor
    noise: dict[str, NoiseSplit] = field(default_factory=dict)  # arm -> its seed variance split (zoo/report/noise.py)
    pooling: str = ""  # how the comparisons' seed variance was estimated, where the experiment pools (pooling.py)
    # arm -> the per-sentence statistics of the primary metric, one (N, K) array per trained seed in seed order (the
    # seeds its comparison's per-seed values come from), or None for a per-seed metric: what a transfer's
    # interaction resamples (zoo/report/transfer.py)
    sentences: Callable[[str], list[np.ndarray] | None] = lambda arm: None


class Analyst:
    """Builds TaskAnalysis objects from an experiment's records; shares per-run work between tasks and findings."""

    def __init__(self, experiment: Experiment, records: Records, frame: pd.DataFrame,
                 floors: dict[str, dict] | None = None):
        self.experiment, self.records, self.frame = experiment, records, frame
        self.floors = floors or {}  # task key -> its current floor file (zoo/experiment/floors.py)
        self.settings = experiment.config.analysis
        self.baseline = experiment.config.baseline_label
        self.labels = [v.label for v in experiment.config.variants]
        self._outcomes: dict[tuple[str, str, int], str] = {}  # asked for by every table, test and finding
        self._devices: dict[tuple[str, str, int], str] | None = None  # (variant, task, seed) -> device, once read

    # -- runs -------------------------------------------------------------------------------------
    def outcome(self, variant: str, task: TaskEntry, seed: int) -> str:
        key = (variant, task.key, seed)
        if key not in self._outcomes:
            self._outcomes[key] = self._classify(variant, task, seed)
        return self._outcomes[key]

    def _classify(self, variant: str, task: TaskEntry, seed: int) -> str:
        """The row's status: results.csv's, which already counts a stalled run as such (zoo/experiment/outcome.py)."""
        row = self.frame[(self.frame.variant == variant) & (self.frame.task == task.key) & (self.frame.seed == seed)]
        return str(row.status.iloc[0]) if len(row) else "missing"

    def eval_curve(self, variant: str, task: TaskEntry, seed: int, metric: str) -> tuple[list, list]:
        return eval_curve(self.records.get(variant, task.key, seed), metric)

    def trained(self, task: TaskEntry, variant: str, device: str | None = None) -> list[int]:
        """Seeds whose run completed and learned (outcome 'complete'), in seed order; with `device`, those of them
        that ran on it."""
        return [s for s in self.experiment.seeds_of(variant, task.key) if self.outcome(variant, task, s) == oc.COMPLETE
                and (device is None or self.device(task, variant, s) == device)]

    def device(self, task: TaskEntry, variant: str, seed: int) -> str:
        """Where the run of a cell trained, as its record names it ('' where it does not)."""
        if self._devices is None:
            self._devices = {(v, t, int(s)): str(d) for v, t, s, d in
                             zip(self.frame.variant, self.frame.task, self.frame.seed, self.frame.device)}
        return self._devices.get((variant, task.key, seed), "")

    def devices(self, task: TaskEntry) -> list[str]:
        """The devices `task`'s trained runs ran on, sorted."""
        return sorted({self.device(task, variant, seed) for variant in self.labels
                       for seed in self.trained(task, variant)})

    def values(self, task: TaskEntry, variant: str, metric: str, device: str | None = None) -> list[float]:
        """`metric` of each trained seed of `variant`, in seed order; with `device`, of those that ran on it."""
        seeds = self.trained(task, variant, device)
        if metric in CURVE_SUMMARIES:
            summary = CURVE_SUMMARIES[metric]
            return [summary(*self.eval_curve(variant, task, seed, task.primary_metric)) for seed in seeds]
        rows = self.frame[(self.frame.task == task.key) & (self.frame.variant == variant)].set_index("seed")
        return [float(rows.loc[s, metric]) for s in seeds]

    def finished_values(self, task: TaskEntry, variant: str, metric: str, device: str | None = None) -> list[float]:
        """`metric` of every run that trained to the end, stalled ones included (ASO compares whole score
        distributions, stall-or-succeed as they are); diverged runs have no test score. With `device`, of the
        runs on it."""
        rows = self.frame[(self.frame.task == task.key) & (self.frame.variant == variant)].set_index("seed")
        seeds = [s for s in self.experiment.seeds_of(variant, task.key)
                 if self.outcome(variant, task, s) in (oc.COMPLETE, oc.STALLED)
                 and (device is None or self.device(task, variant, s) == device)]
        values = [float(rows.loc[s, metric]) for s in seeds] if metric in rows else []
        return [v for v in values if not math.isnan(v)]

    def collapse(self, task: TaskEntry) -> dict[str, str]:
        """variant -> earlier variant (the baseline first) whose records are bit-identical for every seed of the
        variant's (where a sequential plan gave the other more seeds, on the seeds they share)."""
        order = [self.baseline] + [label for label in self.labels if label != self.baseline]
        prints: dict[str, dict[int, str]] = {}  # the first variant of each set of numbers: seed -> fingerprint
        collapsed = {}
        for variant in order:
            seeds = self.experiment.seeds_of(variant, task.key)
            seed_records = [self.records.get(variant, task.key, s) for s in seeds]
            if any(r is None or r.status == "failed" for r in seed_records):
                continue
            mine = {s: fingerprint(r) for s, r in zip(seeds, seed_records)}
            same = next((other for other, theirs in prints.items()
                         if all(theirs.get(s) == value for s, value in mine.items())), None)
            if same is not None:
                collapsed[variant] = same
            else:
                prints[variant] = mine
        return collapsed

    # -- comparisons ------------------------------------------------------------------------------
    def compare(self, task: TaskEntry, variant: str, reference: str, metric: str,
                device: str | None = None) -> Comparison:
        """`variant` against `reference` on `metric` over the seeds each trained (unadjusted p); with `device`,
        over those that trained on it (how a DEVICE_BOUND column is compared)."""
        higher = higher_is_better(metric)
        alpha, min_seeds = self.settings.alpha, self.settings.min_seeds
        stats_r, stats_v = (self.sentences(task, arm, metric, device) for arm in (reference, variant))
        scorer = metrics.find(metric)
        use_corpus = scorer is not None and scorer.sentence_level and stats_r is not None and stats_v is not None
        if use_corpus:
            result = compare_corpus(stats_r, stats_v, scorer.from_totals, higher_is_better=higher,
                                    vectorised=scorer.vectorised,
                                    alpha=alpha, min_seeds=min_seeds)
            base, other = result.baseline_scores, result.variant_scores
        else:
            base, other = self.values(task, reference, metric, device), self.values(task, variant, metric, device)
            result = compare_seeds(base, other, higher_is_better=higher, alpha=alpha, min_seeds=min_seeds)
        enough = result.verdict != FEW
        primary = metric == task.primary_metric
        equivalence = None
        if primary and task.margin is not None:
            equivalence = corpus_tost(result, task.margin) if use_corpus else tost(base, other, task.margin, alpha,
                                                                                    max(min_seeds, MIN_SEEDS))
        comparison = Comparison(task.key, variant, reference, metric, result,
                                prob_better(base, other, higher) if enough else math.nan,
                                eps_min(self.finished_values(task, variant, metric, device),
                                        self.finished_values(task, reference, metric, device), higher_is_better=higher)
                                if enough else math.nan,
                                math.nan, None, equivalence, (tuple(base), tuple(other)))
        return at_level(comparison, alpha, task.target_effect if primary else math.nan, self.settings.power)

    def sentences(self, task: TaskEntry, arm: str, metric: str, device: str | None = None) -> list[np.ndarray] | None:
        """The per-sentence statistics of `metric` for each trained seed of `arm` (on `device`, if given), in seed
        order, or None where there is no seed or any record has none (a per-seed metric)."""
        stats = [sentence_stats(self.records, arm, task.key, s, metric) for s in self.trained(task, arm, device)]
        return stats if stats and all(x is not None for x in stats) else None

    def below_floor(self, task: TaskEntry, floors: dict[str, float] | None) -> str:
        """Why `task` gets no verdicts, or '': its baseline's mean test primary metric over trained seeds does not
        clear the best trivial system (a comparison below what doing nothing scores says nothing of the variants)."""
        scores = self.values(task, self.baseline, task.primary_metric)
        if not floors or not scores:
            return ""
        higher = higher_is_better(task.primary_metric)
        system = (max if higher else min)(floors, key=floors.__getitem__)
        mean = float(np.mean(scores))
        if (mean > floors[system]) if higher else (mean < floors[system]):
            return ""
        seeds = f"{len(scores)} trained seed" + ("s" if len(scores) > 1 else "")
        return (f"the baseline's mean test {task.primary_metric} ({mean:.2f} over {seeds}) does "
                f"not clear the trivial floor {system} ({floors[system]:.2f})")

    def verdicts(self, task: TaskEntry) -> TaskAnalysis:
        """The part of `task`'s analysis the verdicts stand on: run outcomes, collapsed variants, the trivial floor
        and each variant's primary comparison with the baseline (unadjusted). A sequential look needs no more
        (zoo/report/sequential.py); `task` adds the rest."""
        labels = self.labels
        analysis = TaskAnalysis(task, task.primary_metric,
                                {v: {s: self.outcome(v, task, s) for s in self.experiment.seeds_of(v, task.key)}
                                 for v in labels}, self.collapse(task),
                                sentences=lambda arm: self.sentences(task, arm, task.primary_metric))
        floor = self.floors.get(task.key)
        if floor is not None:
            analysis.floors = {name: float(system["test"][task.primary_metric])
                            for name, system in floor["systems"].items() if task.primary_metric in system["test"]}
        analysis.below_floor = self.below_floor(task, analysis.floors)
        for variant in labels:
            if variant != self.baseline and variant not in analysis.collapsed and not analysis.below_floor:
                analysis.comparisons[variant] = self.compare(task, variant, self.baseline, task.primary_metric)
        return analysis

    def task(self, task: TaskEntry, descriptive_metrics: list[str]) -> TaskAnalysis:
        labels = self.labels
        analysis = self.verdicts(task)
        analysis.devices = self.devices(task)
        alpha = self.settings.alpha
        for variant in labels:
            outcomes = list(analysis.outcomes[variant].values())
            analysis.instability[variant] = oc.instability_rate(outcomes, alpha=alpha)
            steps, reached = [], []
            if task.threshold is not None:
                for seed in self.experiment.seeds_of(variant, task.key):
                    if analysis.outcomes[variant][seed] in oc.FINISHED:
                        step, hit = oc.first_reach(*self.eval_curve(variant, task, seed, task.primary_metric),
                                                   task.threshold, higher_is_better(task.primary_metric))
                        if not math.isnan(step):
                            steps.append(step)
                            reached.append(hit)
                analysis.survival[variant] = oc.time_to_threshold(steps, reached, alpha)
                analysis.reach[variant] = (steps, reached)
            analysis.curve_area[variant] = self.values(task, variant, "curve_area")
        base = analysis.instability[self.baseline]
        for variant in labels:
            if variant == self.baseline or variant in analysis.collapsed or analysis.below_floor:
                continue
            mine = analysis.instability[variant]
            analysis.failure_tests[variant] = oc.compare_failures(base.count, base.n, mine.count, mine.n, alpha)
            if task.threshold is not None:
                analysis.logrank[variant] = oc.logrank(*analysis.reach[self.baseline], *analysis.reach[variant])
            analysis.descriptive[variant] = {m: self.compare(task, variant, self.baseline, m).result
                                          for m in descriptive_metrics
                                          if m != task.primary_metric and m not in DEVICE_BOUND}
            analysis.per_device[variant] = {m: {d: self.compare(task, variant, self.baseline, m, d).result
                                                for d in analysis.devices}
                                            for m in descriptive_metrics if m in DEVICE_BOUND}
        return analysis


def at_level(comparison: Comparison, level: float, target: float, power: float = POWER) -> Comparison:
    """A comparison with its detectable Δ and its seeds for ±`target` at `level`: alpha where it is made, then
    the level one rejection needs after the report's correction (zoo/report/family.py). One model for every
    table and finding (zoo/stats/power.py, on the comparison's `design`): the test the verdict uses, its seed
    spread and a corpus metric's test-set variance."""
    if comparison.result.verdict == FEW:
        return replace(comparison, level=level, power=power)
    design = comparison.design
    needed = seeds_at(design, target, level, power) if not math.isnan(target) else None
    base, other = comparison.per_seed
    if comparison.result.method in PERMUTATION_CHECKED and permutation_floor(len(base), len(other)) >= level:
        # unequal seeds: p is at least the permutation p, which cannot fall below its floor
        return replace(comparison, mde=math.inf, seeds_needed=needed, unreachable=level, level=level, power=power)
    return replace(comparison, mde=detectable_at(design, level, power), seeds_needed=needed, unreachable=None,
                   level=level, power=power)
