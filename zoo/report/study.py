"""The analysis of a whole experiment, everything report.md says computed once: each task's analysis, the
equivalence matrix, the findings, transfers and placebo pairs, with p-values adjusted over the report's
families (zoo/report/family.py). report.py only writes it; the CLI prints its tables too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pandas as pd

from zoo.experiment import Experiment
from zoo.experiment.schema import Transfer
from zoo.report import findings as fnd
from zoo.report import sequential as seq
from zoo.report.analysis import Analyst, TaskAnalysis
from zoo.report.collect import Records, collect, current_floors, load_records
from zoo.report.equiv import Matrix, equivalence_matrix
from zoo.report.family import Placebo, adjust_instability, adjust_verdicts
from zoo.report.noise import arm_noise
from zoo.report.pooling import pool
from zoo.report.tables import descriptive_metrics
from zoo.report.transfer import TransferAnalysis, analyse_transfer


@dataclass
class Report:
    """Everything the markdown says, computed once (the CLI prints its tables too)."""

    experiment: Experiment
    frame: pd.DataFrame
    analyst: Analyst
    tasks: list[TaskAnalysis]
    matrix: Matrix
    checks: list[fnd.Check]
    placebos: list[Placebo] = field(default_factory=list)
    transfers: list[TransferAnalysis] = field(default_factory=list)
    family: int = 0  # difference tests adjusted together (comparisons, findings, interactions)
    equivalence_family: int = 0  # equivalence tests (TOSTs) adjusted together
    rejected_at: float = math.nan  # the largest raw p the differences family rejected (nan: none)
    failure_family: int = 0
    sequential: seq.SequentialState | None = None  # with [sequential]: the looks, what they decided, the calls
    # another experiment a transfer reads -> its analysis, made once: a report recomputed from other records
    # (zoo/report/left_out.py) reuses it
    others: dict[str, Report] = field(default_factory=dict, repr=False)


def analyse(experiment: Experiment, records_root: Path, records: Records | None = None,
            others: dict[str, Report] | None = None, matrix: Matrix | None = None) -> Report:
    """The experiment's analysis from its records, every verdict settled on adjusted p-values; with [sequential],
    over the seeds each arm was called for, and its primary verdicts the looks' decisions (zoo/report/sequential.py).
    `records` in place of those in `records_root` (the same analysis of other records: zoo/report/left_out.py), and
    `others`, the analyses of other experiments a transfer reads, where they are made already, and `matrix`, an
    equivalence matrix made already, used where it was made from the same specs."""
    state = None
    if experiment.config.sequential is not None:
        if records is not None:
            raise ValueError("a sequential experiment's records are read from its looks, not given")
        state = seq.read(experiment, records_root)
        experiment = experiment.with_calls(state.calls())
        records = seq.called_records(state, experiment)
    elif records is None:
        records = load_records(experiment, records_root)
    frame = collect(experiment, records)
    floors = current_floors(experiment, Path(records_root))
    analyst = Analyst(experiment, records, frame, floors)
    tasks = [analyst.task(task, descriptive_metrics(task)) for task in experiment.config.tasks]
    for analysis in tasks:
        pool(analysis, experiment.config.analysis)  # before the findings, which share its comparisons
        arms = [label for label in analyst.labels if label not in analysis.collapsed]
        analysis.noise = arm_noise(analyst, analysis.task, arms, experiment.config.analysis.alpha)
    matrix = equivalence_matrix(experiment, records, known=matrix)
    checks = fnd.check(experiment, analyst, matrix, tasks)
    report = Report(experiment, frame, analyst, tasks, matrix, checks)
    settings = experiment.config.analysis
    own = {analysis.task.key: analysis for analysis in tasks}
    others = {} if others is None else others  # another experiment, analysed once however many transfers read it
    report.others = others
    report.transfers = [_transfer(experiment, transfer, own, Path(records_root), others)
                        for transfer in experiment.config.transfers]
    looks_decide = None if state is None else partial(
        seq.decided_by_looks, state, experiment.config.baseline_label)
    report.family, report.equivalence_family, report.rejected_at, report.placebos = adjust_verdicts(
        tasks, checks, _placebos(report), report.transfers, settings, looks_decide)
    report.failure_family = adjust_instability(tasks, checks, settings)
    if state is not None:
        report.sequential = state
        seq.settle_report(report, state)
    report.checks = [fnd.settle(check, settings.alpha) for check in checks]
    return report


def _transfer(experiment: Experiment, transfer: Transfer, own: dict[str, TaskAnalysis],
              records_root: Path, others: dict[str, Report]) -> TransferAnalysis:
    """A declared transfer's analysis. A first task of another experiment is that experiment's own analysis,
    verdicts as its report gives them, from its records in the report folder beside this one's
    (reports/<its name>/records)."""
    settings, second = experiment.config.analysis, own[transfer.tasks[1]]
    if transfer.experiment is None:
        first, names = own[transfer.tasks[0]], transfer.tasks
    else:
        other = experiment.others[transfer.experiment]
        names = (f"{other.name}/{transfer.tasks[0]}", transfer.tasks[1])
        other_root = records_root.parent.parent / other.name / records_root.name
        if not other_root.is_dir():
            return TransferAnalysis(transfer, None, second, names, skipped=f"no records of `{other.name}` in "
                                    f"{other_root.as_posix()} (its report folder beside this one)")
        if other.name not in others:
            others[other.name] = analyse(other, other_root)
        first = {analysis.task.key: analysis for analysis in others[other.name].tasks}[transfer.tasks[0]]
    return analyse_transfer(transfer, first, second, names, settings.alpha, settings.min_seeds)


def _placebos(report: Report) -> list[Placebo]:
    """Pairs that compute one function and train alike: their differences are the experiment's noise."""
    placebos = []
    for analysis in report.tasks:
        for a, b in report.matrix.equivalent_pairs():
            if not report.matrix.alike(a, b):
                continue
            if analysis.collapsed.get(b) == a or analysis.collapsed.get(a) == b:
                placebos.append((analysis.task.key, a, b, None))
                continue
            if a in analysis.collapsed or b in analysis.collapsed:
                continue  # the same numbers as its representative's pair
            baseline = report.experiment.config.baseline_label
            if baseline in (a, b) and (b if a == baseline else a) in analysis.comparisons:
                comparison = analysis.comparisons[b if a == baseline else a]
            else:
                comparison = report.analyst.compare(analysis.task, b, a, analysis.primary)
            placebos.append((analysis.task.key, a, b, comparison))
    return placebos
