"""Transfer between tasks, the analysis: for each declared pair of tasks ([[transfers]] in the experiment
file), each variant's effect on both, the interaction with its interval and test (zoo/stats/transfer.py),
and the rank correlation of the effects (written by sections/transfers.py).

The per-seed values are those of each task's own primary comparison (for corpus metrics, the per-seed
corpus scores), so the interaction is tested on exactly the numbers the task sections show, and it carries
the test-set term its comparisons carry: the paired sentence bootstrap of the whole contrast over the four
arms (zoo/stats/corpus.py `contrast_term`), sentence i of one task drawn with sentence i of the other. Where
both score the same sentences (every transfer zoo's studies declare: one corpus, its test set, at two budgets,
widths or rates) that is the pairing the truth has, and the sentences that move a variant's effect alike on
both tasks cancel; where two test sets of equal size are unrelated, the pairing is arbitrary and their
estimated covariance is noise about its expectation, 0, so the term is about the two comparisons' terms added.
Test sets of different sizes cannot be paired: the two comparisons' terms are added. A task with no verdicts
(below its trivial floor) gives no transfer row either.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from zoo import metrics
from zoo.experiment.schema import Transfer
from zoo.report.analysis import TaskAnalysis
from zoo.report.noise import term_of
from zoo.stats.corpus import contrast_term
from zoo.stats.transfer import Interaction, RankCorrelation, compare_interaction, rank_correlation


@dataclass
class TransferAnalysis:
    transfer: Transfer
    first: TaskAnalysis | None  # None: the other experiment's records are not there
    second: TaskAnalysis
    names: tuple[str, str]  # the two sides as tables name them: task labels, 'experiment/task' for another's
    rows: dict[str, Interaction] = field(default_factory=dict)  # variant -> its interaction
    correlation: RankCorrelation | None = None
    skipped: str = ""  # why there is no table


def analyse_transfer(transfer: Transfer, first: TaskAnalysis, second: TaskAnalysis, names: tuple[str, str],
                     alpha: float, min_seeds: int) -> TransferAnalysis:
    """The interaction of every variant both sides compare with their baseline (matched by label)."""
    analysis = TransferAnalysis(transfer, first, second, names)
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
        analysis.rows[variant] = compare_interaction(base_a, var_a, base_b, var_b, margin=margin, alpha=alpha,
                                                     min_seeds=min_seeds, term=_term(first, second, variant))
    analysis.correlation = rank_correlation(*(_arms(side, list(analysis.rows)) for side in (first, second)))
    return analysis


def _term(first: TaskAnalysis, second: TaskAnalysis, variant: str) -> float:
    """The interaction's test-set variance (module docstring); NaN for a per-seed metric, where each comparison's
    seeds carry all of it."""
    pair = (first.comparisons[variant], second.comparisons[variant])
    terms = [term_of(c) for c in pair]
    if any(math.isnan(t) for t in terms):
        return math.nan
    arms = [side.sentences(arm) for side in (second, first) for arm in (variant, side.comparisons[variant].reference)]
    if None in arms or len({stats.shape[0] for arm in arms for stats in arm}) > 1:
        return sum(terms)
    scorer = metrics.find(first.primary)
    term = contrast_term(arms, (1.0, -1.0, -1.0, 1.0), scorer.from_totals, vectorised=scorer.vectorised)
    return term if not math.isnan(term) else sum(terms)


def _arms(side: TaskAnalysis, variants: list[str]):
    """A side's per-seed primary scores: its baseline's, and each variant's (those of its own comparisons)."""
    baseline = side.comparisons[variants[0]].per_seed[0] if variants else ()
    return baseline, {v: side.comparisons[v].per_seed[1] for v in variants}
