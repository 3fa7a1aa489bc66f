"""Where a task's noise comes from: each arm's seed variance on the primary metric split into the model part and the
seed x sentence part, and each comparison's test-set term, with what more seeds or more test sentences would buy
(zoo/stats/noise.py holds the statistics; this module feeds it the records and writes its tables).

Only for a corpus metric with per-sentence statistics (BLEU, chrF): a per-seed metric has no test sentences to
resample. The resamples are the ones every comparison of the report draws (zoo/stats/resample.py), so the parts
here add up to the standard errors in the verdict table.
"""

from __future__ import annotations

import math

import numpy as np

from zoo import metrics
from zoo.report.analysis import Comparison, TaskAnalysis
from zoo.report.collect import sentence_stats
from zoo.report.tables import fmt, fmt_interval
from zoo.stats.corpus import resampled_scores
from zoo.stats.noise import NoiseSplit, comparison_noise, sentence_term, split_arm
from zoo.stats.resample import resample_counts


def arm_noise(analyst, task, variants: list[str], alpha: float) -> dict[str, NoiseSplit]:
    """variant -> its noise split on `task`'s primary metric over its trained seeds; {} where the metric has no
    per-sentence statistics."""
    scorer = metrics.find(task.primary_metric)
    if scorer is None or not scorer.sentence_level:
        return {}
    out = {}
    for variant in variants:
        stats = [sentence_stats(analyst.records, variant, task.key, seed, task.primary_metric)
                 for seed in analyst.trained(task, variant)]
        if len(stats) < 2 or any(s is None for s in stats):
            continue
        counts = resample_counts(len(stats[0]))
        full, boot = resampled_scores(stats, scorer.from_totals, counts, scorer.vectorised)
        out[variant] = split_arm(full, boot, len(stats[0]), alpha)
    return out


def term_of(comparison: Comparison) -> float:
    """A corpus comparison's test-set term (its sentence x variant variance), NaN for a per-seed one."""
    result = comparison.result
    if not hasattr(result, "se_within"):
        return math.nan
    return sentence_term(result.se_sentences, result.se_within)


def _sd(value: float) -> float:
    return math.sqrt(value) if value >= 0 else math.nan


def arm_rows(analysis: TaskAnalysis) -> tuple[list[str], list[list[str]]]:
    """Per arm: seeds, the sd of its per-seed scores and of each part, and the share a larger test set shrinks."""
    header = ["arm", "seeds", "seed sd [CI]", "model sd [CI]", "seed × sentence sd", "test-set share [CI]"]
    rows = []
    for arm, split in analysis.noise.items():
        share = "—" if math.isnan(split.share) else f"{split.share:.0%} [{split.share_low:.0%}, {split.share_high:.0%}]"
        rows.append([arm, str(split.seeds),
                     f"{fmt(_sd(split.total))} {fmt_interval(_sd(split.total_low), _sd(split.total_high))}",
                     f"{fmt(_sd(split.model))} {fmt_interval(_sd(split.model_low), _sd(split.model_high))}",
                     fmt(_sd(split.seed_sentence)), share])
    return header, rows


def comparison_rows(analysis: TaskAnalysis, baseline: str) -> tuple[list[str], list[list[str]]]:
    """Per comparison with the baseline: its test-set term, the smallest difference any number of seeds could
    detect on this test set, and whether doubling the seeds or doubling the test set detects more, each at the
    level and power of its verdict."""
    header = ["variant", "test-set term sd", "detectable with any seeds", "2x seeds → Δ", "2x sentences → Δ",
              "buys more"]
    rows = []
    base = analysis.noise.get(baseline)
    for variant, c in analysis.comparisons.items():
        mine, term = analysis.noise.get(variant), term_of(c)
        if base is None or mine is None or math.isnan(term) or math.isnan(c.level):
            continue
        noise = comparison_noise(base, mine, term)
        n = min(len(c.per_seed[0]), len(c.per_seed[1]))
        doubling = noise.buys_more(n, c.level, c.power)
        rows.append([variant, fmt(math.sqrt(term)), fmt(noise.floor(c.level, c.power)), fmt(doubling.seeds),
                     fmt(doubling.sentences), doubling.better])
    return header, rows


def median_share(analysis: TaskAnalysis) -> float:
    """The median arm's test-set share of its seed variance (NaN where no arm has one): the sentence above the
    table; a median, as one arm whose seeds stall or spread widely would swing a pooled share."""
    shares = [split.share for split in analysis.noise.values() if not np.isnan(split.share)]
    return float(np.median(shares)) if shares else math.nan
