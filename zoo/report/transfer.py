"""Transfer between tasks, the analysis: for each declared pair of tasks ([[transfers]] in the experiment
file), each variant's effect on both, the interaction with its interval and test (zoo/stats/transfer.py),
and the rank correlation of the effects (written by sections/transfers.py).

The per-seed values are those of each task's own primary comparison (for corpus metrics, the per-seed
corpus scores), so the interaction is tested on exactly the numbers the task sections show. It adds no
test-sentence variance: the four arms are scored on one test set, whose sampling moves a variant's
effect alike on both tasks and so largely cancels in a difference of differences. A task with
no verdicts (below its trivial floor) gives no transfer row either.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from zoo.experiment.schema import Transfer
from zoo.report.analysis import TaskAnalysis
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
        analysis.rows[variant] = compare_interaction(base_a, var_a, base_b, var_b, margin=margin,
                                                     alpha=alpha, min_seeds=min_seeds)
    analysis.correlation = rank_correlation(*(_arms(side, list(analysis.rows)) for side in (first, second)))
    return analysis


def _arms(side: TaskAnalysis, variants: list[str]):
    """A side's per-seed primary scores: its baseline's, and each variant's (those of its own comparisons)."""
    baseline = side.comparisons[variants[0]].per_seed[0] if variants else ()
    return baseline, {v: side.comparisons[v].per_seed[1] for v in variants}
