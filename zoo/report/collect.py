"""Reading run directories into tables: one row per grid cell, and the learning curves.

A run directory is `RUNS/<variant>/<task key>/seed-<n>/` (see zoo/train/run.py for what it holds).
Nothing here trains, decodes or writes: the report is a pure function of what the runs left behind,
so it can be rebuilt at any time, also while some runs are still going.

Columns of `collect`'s table (and of results.csv):

    variant, task, seed, status, reason      status: complete | diverged | failed | incomplete | missing
    parameters, steps, tokens, train_seconds from summary.json (parameters: trainable ones)
    tok_per_s                                tokens / train_seconds: mean training throughput
    valid_loss, valid_nll, valid_ppl         the last evaluation row (validation set)
    bleu, bleu_lowercase, chrf,              from test.json: TEST-set metrics (text tasks)
    exact_match, token_accuracy              ... or synthetic tasks; NaN where not applicable
    test_nll, test_ppl                       teacher-forced test loss per token, perplexity
    steps_to_threshold                       first evaluation step where the task's main validation
                                             metric >= TaskEntry.threshold; NaN if never / no threshold
    device                                   where the run trained (summary.json)
    run_dir                                  the run directory
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from zoo.data import Task
from zoo.data.config import parse_name
from zoo.errors import ZooError
from zoo.experiment import Experiment
from zoo.experiment.config import TaskEntry
from zoo.train.run import read_metrics

TEST_METRICS = ("bleu", "bleu_lowercase", "chrf", "exact_match", "token_accuracy")
COLUMNS = ("variant", "task", "seed", "status", "reason", "parameters", "steps", "tokens", "train_seconds",
           "tok_per_s", "valid_loss", "valid_nll", "valid_ppl", *TEST_METRICS, "test_nll", "test_ppl",
           "steps_to_threshold", "device", "run_dir")
STATUSES = ("complete", "diverged", "failed", "incomplete", "missing")


class ReportError(ZooError):
    """A run directory or an experiment's findings cannot be read into a report; the message names the file."""


def task_kind(task: TaskEntry) -> str:
    """'text' or 'synthetic', from the task name alone (no data is read)."""
    return parse_name(task.name).kind


def main_metric(task: TaskEntry) -> str:
    """The column a task is judged by: BLEU for translation, exact match for synthetic tasks."""
    return "bleu" if task_kind(task) == "text" else "exact_match"


def run_path(runs_root: Path, variant: str, task: TaskEntry, seed: int) -> Path:
    return Path(runs_root) / variant / task.key / f"seed-{seed}"


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ReportError(f"{path}: cannot read ({err})") from None


def _number(value: Any) -> float:
    """JSON numbers as floats; None, strings ('nan', 'inf' from a diverged loss) and the rest as NaN."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return math.nan
    return float(value)


def steps_to_threshold(rows: list[dict[str, Any]], metric: str, threshold: float | None) -> float:
    """The first evaluation step whose `metric` reaches `threshold`; NaN if none does (or no threshold)."""
    if threshold is None:
        return math.nan
    for row in rows:
        if row.get("event") == "eval" and _number(row.get(metric)) >= threshold:
            return float(row["step"])
    return math.nan


def read_run(path: Path, task: TaskEntry) -> dict[str, Any]:
    """One row of the results table for the run directory `path` (which may not exist)."""
    row: dict[str, Any] = {column: math.nan for column in COLUMNS[5:]}
    row.update(status="missing", reason="no run directory", device="", run_dir=str(path))
    if not path.is_dir():
        return row
    if (path / "failed.json").exists():
        failed = read_json(path / "failed.json")
        reason = " ".join(str(failed.get("reason", "")).split())  # one line: it goes into tables and lists
        return {**row, "status": "failed", "reason": reason or "failed (no reason given)"}
    metrics = read_metrics(path / "metrics.jsonl")
    evals = [r for r in metrics if r.get("event") == "eval"]
    if not (path / "summary.json").exists():
        done = max((r.get("step", 0) for r in metrics), default=0)
        return {**row, "status": "incomplete", "steps": float(done),
                "reason": f"no summary.json: still running or stopped (last logged step {done})"}
    summary = read_json(path / "summary.json")
    status = summary.get("status", "")
    if status not in ("complete", "diverged"):
        raise ReportError(f"{path / 'summary.json'}: status {status!r} is not 'complete' or 'diverged'")
    final = summary.get("final") or (evals[-1] if evals else {})
    tokens, seconds = _number(summary.get("tokens")), _number(summary.get("train_seconds"))
    row.update(status=status, reason=summary.get("reason", ""), parameters=_number(summary.get("parameters")),
               steps=_number(summary.get("steps")), tokens=tokens, train_seconds=seconds,
               tok_per_s=tokens / seconds if seconds > 0 else math.nan, device=str(summary.get("device", "")),
               valid_loss=_number(final.get("valid_loss")), valid_nll=_number(final.get("valid_nll")),
               valid_ppl=_number(final.get("valid_ppl")),
               steps_to_threshold=steps_to_threshold(evals, main_metric(task), task.threshold))
    test_file = path / "test.json"
    if test_file.exists():
        test = read_json(test_file)
        row.update({name: _number(test.get(name)) for name in TEST_METRICS})
        row.update(test_nll=_number(test.get("nll")), test_ppl=_number(test.get("ppl")))
    elif status == "complete":
        row["reason"] = "no test.json yet: the test set has not been decoded (still evaluating, or stopped)"
    return row


def collect(experiment: Experiment, runs_root: str | Path) -> pd.DataFrame:
    """One row per grid cell (variant x task x seed), in grid order; see the module docstring."""
    rows = []
    for variant, task, seed in experiment.grid():
        row = read_run(run_path(Path(runs_root), variant, task, seed), task)
        rows.append({"variant": variant, "task": task.key, "seed": seed, **row})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def curves(frame: pd.DataFrame) -> pd.DataFrame:
    """Long table of the complete runs' logged rows: variant, task, seed, step, kind ('train'|'eval'),
    and the logged values (loss for training rows; valid_* and metrics for evaluation rows)."""
    rows = []
    for run in frame[frame.status == "complete"].itertuples():
        for logged in read_metrics(Path(run.run_dir) / "metrics.jsonl"):
            if logged.get("event") not in (None, "eval") or "step" not in logged:
                continue
            kind = "eval" if logged.get("event") == "eval" else "train"
            values = {k: _number(v) for k, v in logged.items() if k not in ("event", "step")}
            rows.append({"variant": run.variant, "task": run.task, "seed": run.seed, "step": logged["step"],
                         "kind": kind, **values})
    return pd.DataFrame(rows) if rows else pd.DataFrame(columns=["variant", "task", "seed", "step", "kind", "loss"])


def hypotheses(run_dir: str | Path) -> list[str] | None:
    """The run's detokenized test outputs (test.hyp, one per line), or None if it has none."""
    path = Path(run_dir) / "test.hyp"
    if not path.exists():
        return None
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")  # not splitlines(): a hypothesis may hold other line-breaking characters
    return lines[:-1] if text.endswith("\n") else lines if text else []


def references(run_dir: str | Path) -> list[str]:
    """The test references of the task saved in the run directory (Task.load(run/task))."""
    return Task.load(Path(run_dir) / "task").references("test")
