"""One vocabulary for a run's outcome: results.csv, `study.records()`, `zoo run`'s table and the report say the same.

A run that trained to its end below its task's floor is counted by the report as stalled (left out of quality
verdicts, counted as unstable); results.csv and the Python API called it "complete" until they took the word from
the same place (zoo/experiment/outcome.py).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

import zoo
from zoo.experiment import load_experiment
from zoo.experiment.outcome import outcome
from zoo.report.collect import load_records

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "experiments" / "quickstart.toml"


def test_the_api_and_results_csv_say_stalled_where_the_report_does():
    study = zoo.study(QUICKSTART)
    frame = study.records()
    analysis = study.analyse()
    said = {(v, t.task.key, s): o for t in analysis.tasks for v, by_seed in t.outcomes.items()
            for s, o in by_seed.items()}
    stalled = frame[frame.status == "stalled"]
    assert len(stalled) > 0  # quickstart's post-norm copy seeds stall: the case that read "complete" before
    assert all(said[(r.variant, r.task, r.seed)] == r.status for r in frame.itertuples() if r.status != "missing")
    assert all(reason.startswith("trained to the end, but its validation") for reason in stalled.reason)
    committed = pd.read_csv(ROOT / "reports" / "quickstart" / "results.csv")
    assert list(committed.status) == list(frame.status)


def test_a_complete_record_below_its_floor_is_stalled_and_above_it_complete():
    """Known answers from a committed record: its final validation metric against a floor on either side of it."""
    experiment = load_experiment(QUICKSTART)
    records = load_records(experiment, ROOT / "reports" / "quickstart" / "records")
    tasks = {t.key: t for t in experiment.config.tasks}
    (task, record), *_ = [(tasks[k[1]], r) for k, r in records.by_cell.items() if r.status == "complete"
                          and r.final[tasks[k[1]].primary_metric] > 1]
    final = float(record.final[task.primary_metric])
    above = task.model_copy(update={"stall": task.stall.model_copy(update={"floor": final + 1})})
    below = task.model_copy(update={"stall": task.stall.model_copy(update={"floor": final - 1})})
    assert outcome(record, above)[0] == "stalled" and f"ended at {final:g}" in outcome(record, above)[1]
    assert outcome(record, below) == ("complete", record.reason)
