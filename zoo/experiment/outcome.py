"""A record's outcome, in the one vocabulary results.csv, the Python API, `zoo run`'s table and the report share.

A record's own status says how its run ended: complete (trained to its last step), diverged or failed. A report
counts more than that: a complete run whose primary validation metric ended below its task's floor (or, with a
patience, gained nothing over its last evaluations) learned nothing usable, and is *stalled*: left out of quality
verdicts and counted as unstable. When `zoo run` and results.csv said "complete" for such a run while the report
said "stalled", one word meant two things; `outcome` is the one place that decides, so every view says the same.
"""

from __future__ import annotations

import math

from zoo import metrics
from zoo.experiment.record import Record
from zoo.experiment.schema import TaskEntry
from zoo.stats import outcomes as oc


def eval_curve(record: Record | None, metric: str) -> tuple[list, list]:
    """(steps, values) of `metric` at the record's validation evaluations, skipping those that logged none."""
    columns = record.curves.eval if record is not None and record.curves is not None else {}
    steps, values = columns.get("step") or [], columns.get(metric) or []
    pairs = [(s, float(v)) for s, v in zip(steps, values) if isinstance(v, (int, float))]
    return [s for s, _ in pairs], [v for _, v in pairs]


def stall_rule(task: TaskEntry) -> oc.StallRule:
    """The task's declared stall rule, directed by its primary metric."""
    return oc.StallRule(floor=task.stall_floor, patience=task.stall.patience,
                        higher_is_better=metrics.get(task.primary_metric).higher_is_better)


def outcome(record: Record, task: TaskEntry) -> tuple[str, str]:
    """(outcome, reason) of a record of `task`: its status, except that a complete run is 'stalled' under the
    task's stall rule (or 'diverged' where its final metric is not finite), with a reason that says why."""
    if record.status != oc.COMPLETE:
        return record.status, record.reason
    final = (record.final or {}).get(task.primary_metric)
    final = float(final) if isinstance(final, (int, float)) and not isinstance(final, bool) else math.nan
    rule = stall_rule(task)
    state = oc.classify_run(record.status, final, eval_curve(record, task.primary_metric)[1], rule)
    if state == oc.STALLED:
        label = metrics.get(task.primary_metric).label
        below = rule.floor is not None and \
            (final < rule.floor if rule.higher_is_better else final > rule.floor)
        return state, (f"trained to the end, but its validation {label} ended at {final:g}, "
                       f"{'below' if rule.higher_is_better else 'above'} the task's floor {rule.floor:g}" if below
                       else f"trained to the end, but its validation {label} gained nothing over its last "
                            f"{rule.patience} evaluations")
    if state == oc.DIVERGED:
        return state, f"its final validation {task.primary_metric} is not finite"
    return state, record.reason
