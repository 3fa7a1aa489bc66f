"""Runs left out: trained runs of a study that its records do not hold, each with the rule that left it out, and the
report's verdicts recomputed with them kept (report.md's "Runs left out": zoo/report/sections/left_out.py).

A study's report folder may hold `left-out/` beside `records/`:

    left-out/ARM/TASK/seed-N.json   a record as it was committed before its removal (restored byte for byte:
                                    git show COMMIT^:reports/NAME/records/ARM/TASK/seed-N.json), read by the
                                    records' own reader (zoo/experiment/record.py: types, consistency, digest)
    left-out/reasons.toml           every run left out and the rule that left it out:

        [rules.kernels]                          # one table per rule, named as the runs name it
        text = "the grid amended from ... "      # the rule in a sentence
        declared = {commit = "2fc63dc", date = "2026-11-27 15:08 UTC"}

        [[runs]]
        cell = "baseline/multi30k-de-en/seed-0"  # ARM/TASK/seed-N; its record, if it has one, is left-out/CELL.json
        rule = "kernels"
        recorded = {commit = "d8700d4", date = "2026-11-27 07:23 UTC"}  # the commit that added its record
        removed = {commit = "2fc63dc", date = "2026-11-27 15:08 UTC"}   # and the one that removed it

    A run known only from a log has no record: its `device`, its test primary metric as the log gives it (`value`)
    and the log (`source`) stand in its entry, without `recorded` or `removed`. It is listed, and cannot enter the
    sensitivity analysis, which recomputes from records only.

The sensitivity analysis is the report's own (zoo/report/study.py `analyse`) on the kept records with each left-out
record put in place of the kept record of its cell (a cell with no kept record gains it; a seed the arm was not run
for is added to that arm): once with every left-out record, and once per rule where there are several. It says which
verdicts change (the primary comparisons, their failure-rate tests, the findings, the transfers' interactions) and
how far the primary estimates move. Without a left-out/ folder there is nothing to say, and report.md has no section.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from zoo.errors import RunError
from zoo.experiment import Experiment
from zoo.experiment import record as record_file
from zoo.experiment.record import Record
from zoo.report.collect import ReportError, record_path
from zoo.report.study import Report, analyse
from zoo.report.tables import verdict_class

FOLDER, REASONS = "left-out", "reasons.toml"


class Event(BaseModel):
    """A commit and its date, as the report quotes them (it never asks git: a report is a function of its files)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    commit: str = Field(min_length=1)
    date: str = Field(min_length=1)

    def __str__(self) -> str:
        return f"{self.commit} ({self.date})"


class Rule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    text: str = Field(min_length=1, description="the rule, in a sentence")
    declared: Event = Field(description="the commit that declared the rule, and its date")


class Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    cell: str = Field(description="ARM/TASK/seed-N")
    rule: str
    recorded: Event | None = Field(None, description="the commit that added its record")
    removed: Event | None = Field(None, description="the commit that removed its record")
    device: str | None = Field(None, description="a run with no record: where it trained")
    value: float | None = Field(None, description="a run with no record: its test primary metric, as `source` gives")
    source: str | None = Field(None, description="a run with no record: where its number is found")


class Reasons(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    rules: dict[str, Rule]
    runs: list[Entry] = Field(min_length=1)


@dataclass(frozen=True)
class Run:
    """One trained run left out of the records."""

    variant: str
    task: str
    seed: int
    rule: str
    entry: Entry
    record: Record | None  # None: known from a log alone

    @property
    def key(self) -> tuple[str, str, int]:
        return self.variant, self.task, self.seed

    @property
    def device(self) -> str:
        if self.record is None:
            return self.entry.device or "unknown"
        return str(self.record.summary.device) if self.record.summary and self.record.summary.device else "unknown"

    def value(self, metric: str) -> float:
        """The run's test `metric` (the task's primary): its record's, else the log's."""
        if self.record is None:
            return self.entry.value if self.entry.value is not None else math.nan
        found = (self.record.test or {}).get(metric)
        return float(found) if isinstance(found, (int, float)) else math.nan


@dataclass
class LeftOut:
    folder: Path
    rules: dict[str, Rule]
    runs: list[Run]

    @property
    def recorded(self) -> list[Run]:
        return [run for run in self.runs if run.record is not None]


@dataclass
class Sensitivity:
    """The report's verdicts recomputed with `runs`' records in place of the kept ones."""

    runs: list[Run]
    changed: list[tuple[str, str, str]] = field(default_factory=list)  # what, its verdict kept, with the runs
    moves: list[tuple[str, str, float, float]] = field(default_factory=list)  # task, variant, estimate kept, with
    metric: dict[str, str] = field(default_factory=dict)  # task -> its primary metric
    unchanged: int = 0  # verdicts compared that stay


def folder_of(records_root: Path) -> Path:
    return Path(records_root).parent / FOLDER


def read(experiment: Experiment, records_root: Path) -> LeftOut | None:
    """The runs left out of the study whose records are in `records_root` (module docstring), None where its report
    folder has no left-out/; ReportError naming the file where reasons.toml or a record is wrong or missing."""
    folder = folder_of(records_root)
    if not folder.is_dir():
        return None
    path = folder / REASONS
    reasons = _reasons(path)
    arms = {v.label for v in experiment.config.variants}
    tasks = {t.key for t in experiment.config.tasks}
    runs, seen = [], set()
    for i, entry in enumerate(reasons.runs):
        where = f"{path}: runs[{i}] ({entry.cell})"
        parts = entry.cell.split("/")
        if len(parts) != 3 or not parts[2].startswith("seed-") or not parts[2][5:].isdigit():
            raise ReportError(f"{where}: a cell is ARM/TASK/seed-N")
        variant, task, seed = parts[0], parts[1], int(parts[2][5:])
        if variant not in arms or task not in tasks:
            raise ReportError(f"{where}: {variant if variant not in arms else task} is not an arm or task of "
                              f"{experiment.name}")
        if entry.rule not in reasons.rules:
            raise ReportError(f"{where}: rule {entry.rule!r} is not one of [rules]: {', '.join(reasons.rules)}")
        if (variant, task, seed) in seen:
            raise ReportError(f"{where}: listed twice")
        seen.add((variant, task, seed))
        file = record_path(folder, variant, task, seed)
        record = None
        if file.exists():
            try:
                record = record_file.read(file)
            except RunError as err:
                raise ReportError(str(err)) from None
            if entry.value is not None or entry.source is not None or entry.device is not None:
                raise ReportError(f"{where}: its record is {file.name}; value, device and source are a run's "
                                  "with no record")
            if (record.cell.variant, record.cell.task, record.cell.seed) != (variant, task, seed):
                raise ReportError(f"{file}: the record of {record.cell.variant}/{record.cell.task}/seed-"
                                  f"{record.cell.seed}, not of the cell its path names")
        elif entry.value is None or not entry.source:
            raise ReportError(f"{where}: no record at {file.relative_to(folder).as_posix()}, and no value and "
                              "source for a run known from a log alone")
        runs.append(Run(variant, task, seed, entry.rule, entry, record))
    unnamed = sorted(p.relative_to(folder).as_posix() for p in folder.glob("*/*/seed-*.json")
                     if p.relative_to(folder).with_suffix("").as_posix() not in {e.cell for e in reasons.runs})
    if unnamed:
        raise ReportError(f"{path}: no entry for {', '.join(unnamed)}: every record left out names its rule")
    return LeftOut(folder, dict(reasons.rules), runs)


def _reasons(path: Path) -> Reasons:
    """A left-out/ folder's reasons.toml, validated; ReportError naming the file and the problem otherwise."""
    try:
        return Reasons.model_validate(tomllib.loads(path.read_text()))
    except FileNotFoundError:
        raise ReportError(f"{path.parent}: no {REASONS}: every run left out names the rule that left it out") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ReportError(f"{path}: cannot read ({err})") from None
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ReportError(f"{path}: {where}: {first['msg']}") from None


def substituted(report: Report, runs: list[Run]) -> Report:
    """The report's own analysis of its records with `runs`' records in place of the kept ones of their cells; a
    seed an arm was not run for is added to that arm."""
    if report.sequential is not None:
        raise ValueError("a sequential study's seeds are its looks'")
    kept = report.analyst.records
    records = replace(kept, by_cell=dict(kept.by_cell), stale=dict(kept.stale), refused=dict(kept.refused),
                      unchecked_data=set(kept.unchecked_data))
    experiment, calls = report.experiment, dict(report.experiment.calls)
    for run in runs:
        records.by_cell[run.key] = run.record
        records.stale.pop(run.key, None)
        records.refused.pop(run.key, None)
        seeds = list(calls.get((run.variant, run.task), experiment.seeds_of(run.variant, run.task)))
        if run.seed not in seeds:
            calls[(run.variant, run.task)] = tuple(sorted([*seeds, run.seed]))
    if calls != experiment.calls:
        experiment = experiment.with_calls(calls)
    return analyse(experiment, kept.root, records=records, others=report.others, matrix=report.matrix)


def verdicts(report: Report) -> dict[str, str]:
    """Every verdict the report gives, by what it is about: the primary comparisons and their failure-rate tests,
    the findings' outcomes and the transfers' interactions."""
    alpha = report.experiment.config.analysis.alpha
    found = {}
    for analysis in report.tasks:
        key = analysis.task.key
        for variant, comparison in analysis.comparisons.items():
            found[f"{variant} on {key}"] = verdict_class(comparison)
        for variant, test in analysis.failure_tests.items():
            adjusted = analysis.failure_adjusted.get(variant, math.nan)
            if test is not None and not math.isnan(adjusted):
                found[f"{variant}'s unstable runs on {key}"] = (
                    ("more unstable" if test.difference > 0 else "less unstable") if adjusted < alpha
                    else "no detectable difference")
    for i, check in enumerate(report.checks):
        task = f" on {check.task}" if check.task in {a.task.key for a in report.tasks} else ""
        found[f"finding {i + 1} ({check.finding.variant}: {check.finding.claim}){task}"] = check.outcome
    for transfer in report.transfers:
        for variant, row in transfer.rows.items():
            found[f"{variant}'s interaction, {transfer.names[0]} → {transfer.names[1]}"] = row.verdict
    return found


def sensitivity(report: Report, runs: list[Run]) -> Sensitivity:
    """Which of the report's verdicts change, and how far its primary estimates move, with `runs`' records kept."""
    other = substituted(report, [run for run in runs if run.record is not None])
    result = Sensitivity(runs, metric={a.task.key: a.primary for a in report.tasks})
    before, after = verdicts(report), verdicts(other)
    for what, verdict in before.items():
        now = after.get(what, "none")
        if now != verdict:
            result.changed.append((what, verdict, now))
        else:
            result.unchanged += 1
    result.changed += [(what, "none", verdict) for what, verdict in after.items() if what not in before]
    again = {analysis.task.key: analysis for analysis in other.tasks}
    for analysis in report.tasks:
        for variant, comparison in analysis.comparisons.items():
            then = again[analysis.task.key].comparisons.get(variant)
            if then is not None:
                result.moves.append((analysis.task.key, variant, comparison.result.difference,
                                     then.result.difference))
    result.moves.sort(key=lambda m: -abs(m[3] - m[2]) if not math.isnan(m[3] - m[2]) else 0.0)
    return result
