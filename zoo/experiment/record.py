"""The compact record of one cell: everything the report needs, small enough to commit.

    {
      "format": 1,
      "cell": {"experiment", "variant", "task", "seed"},
      "definition": {...}, "definition_digest": "...",      what decided its numbers (store.definition)
      "status": "complete" | "diverged" | "failed", "reason": "...",
      "summary": {parameters, steps, epochs, tokens, train_seconds, device, precision, spec_digest},
      "spec": {...},                                         the spec as trained (vocabulary fitted to the task)
      "final": {...},                                        the last validation evaluation
      "curves": {"train": {column: [...]}, "eval": {column: [...]}},   every logged row, by column
      "test": {...},                                         test-set metrics (test.json)
      "hypotheses": [...],                                   the decoded test set
      "sentences": {"bleu": [[...]], "chrf": [[...]]}        per-sentence sacreBLEU statistics (text), or
                   {"exact_match": [0, 1, ...]}             per-sentence exact match (synthetic)
      "signatures": {"bleu": "...", "chrf": "..."},          sacreBLEU signatures of the test metrics
      "provenance": {zoo version and commit, torch, python, cpu, concurrent runs, finished}
    }

The report reads records alone: no checkpoint, no run directory, no reference file. Sentence
statistics are what a seed-aware bootstrap over test sentences needs (sacreBLEU's own sufficient
statistics, so every resampled score is sacreBLEU's). A record never exceeds MAX_BYTES.
"""

from __future__ import annotations

import json
import platform
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from zoo.rundir import (
    METRICS,
    SPEC,
    SUMMARY,
    TASK,
    TEST,
    RunError,
    atomic_write,
    read_hypotheses,
    read_metrics,
    read_table,
)

FORMAT = 1
MAX_BYTES = 2 * 1024 * 1024
TRAIN_COLUMNS = ("step", "epoch", "loss", "nll", "lr", "grad_norm", "tokens", "tok_per_s", "seconds")


def _columns(rows: list[dict[str, Any]], names: list[str]) -> dict[str, list[Any]]:
    return {name: [row.get(name) for row in rows] for name in names}


def curves(rows: list[dict[str, Any]]) -> dict[str, dict[str, list[Any]]]:
    """The logged rows as columns: training rows at the log interval, evaluation rows."""
    train = [r for r in rows if "event" not in r]
    evals = [r for r in rows if r.get("event") == "eval"]
    eval_names = sorted({k for r in evals for k in r if k != "event"}, key=lambda k: (k != "step", k))
    return {"train": _columns(train, [c for c in TRAIN_COLUMNS if any(c in r for r in train)]),
            "eval": _columns(evals, eval_names)}


def sentence_statistics(kind: str, hypotheses: list[str], references: list[str]) -> tuple[dict, dict]:
    """Per-sentence statistics and the metrics' signatures, for the seed-aware bootstrap."""
    if len(hypotheses) != len(references):
        raise RunError(f"{len(hypotheses)} test outputs for {len(references)} references")
    if kind != "text":
        return {"exact_match": [int(h == r) for h, r in zip(hypotheses, references)]}, {}
    from sacrebleu.metrics import BLEU, CHRF

    stats, signatures = {}, {}
    for name, metric in (("bleu", BLEU()), ("chrf", CHRF())):
        stats[name] = [[int(x) for x in row] for row in metric._extract_corpus_statistics(hypotheses, [references])]
        metric.corpus_score(hypotheses[:1], [references[:1]])  # a signature needs the number of references
        signatures[name] = str(metric.get_signature())
    return stats, signatures


def zoo_commit() -> str:
    """The git commit of the zoo source in use, or 'unknown'. '+dirty' when the code itself (zoo/,
    registry/, pyproject.toml) has uncommitted changes; records and reports being written beside it
    do not count, or every report made in a checkout would call its own code dirty."""
    source = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(["git", "-C", str(source), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                                text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(source), "status", "--porcelain", "--untracked-files=no", "--",
                                "zoo", "registry", "pyproject.toml"], capture_output=True, text=True,
                               timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return commit + ("+dirty" if dirty else "")


def provenance(concurrent: int, commit: str = "", plugins: dict[str, str] | None = None) -> dict[str, Any]:
    """Where a record was made. `commit`: the code's commit when its grid started (a worker loads the
    code once; commits made while a grid runs are not what it runs); looked up now when not given.
    `plugins`: the definition's plugins ({name: sha256}), recorded with their versions."""
    import torch

    from zoo import __version__
    from zoo.machine import cpu_model
    from zoo.plugins import loaded

    where = {"zoo": __version__, "commit": commit or zoo_commit(), "torch": torch.__version__,
             "python": platform.python_version(), "cpu": cpu_model(),
             # the instruction set PyTorch's CPU kernels use: with the CPU model and torch, what decides the floats
             "cpu_capability": torch.backends.cpu.get_cpu_capability(), "concurrent_runs": concurrent,
             "finished": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    if plugins:
        where["plugins"] = [{"name": p.name, "version": p.version, "sha256": p.sha256} for p in loaded()
                            if p.name in plugins]
    return where


def base(cell: dict[str, Any], definition: dict[str, Any], digest: str, concurrent: int,
         commit: str = "") -> dict[str, Any]:
    return {"format": FORMAT, "cell": cell, "definition": definition, "definition_digest": digest,
            "provenance": provenance(concurrent, commit, definition.get("plugins"))}


def from_run(run_dir: Path, head: dict[str, Any]) -> dict[str, Any]:
    """The record of a finished (complete and evaluated, or diverged) run directory."""
    from zoo.data import Task

    summary = read_table(run_dir / SUMMARY)
    rows = read_metrics(run_dir / METRICS)
    record = {**head, "status": summary["status"], "reason": summary.get("reason", ""),
              "summary": {k: summary.get(k) for k in ("parameters", "steps", "epochs", "tokens", "train_seconds",
                                                      "device", "precision", "spec_digest")},
              "spec": read_table(run_dir / SPEC)["spec"], "final": summary.get("final"), "curves": curves(rows)}
    if summary["status"] == "complete":
        task = Task.load(run_dir / TASK)
        hypotheses = read_hypotheses(run_dir, TEST) or []
        record["test"] = read_table(run_dir / f"{TEST}.json")
        record["hypotheses"] = hypotheses
        record["sentences"], record["signatures"] = sentence_statistics(task.config.kind, hypotheses,
                                                                        task.references("test"))
    return record


def failed(head: dict[str, Any], reason: str, trace: str) -> dict[str, Any]:
    return {**head, "status": "failed", "reason": reason, "traceback": trace[-4000:]}


def write(path: Path, record: dict[str, Any]) -> None:
    text = json.dumps(record, sort_keys=True, separators=(",", ":"), allow_nan=True) + "\n"
    if len(text.encode()) > MAX_BYTES:
        raise RunError(f"{path}: the record would be {len(text.encode()):,} bytes, over {MAX_BYTES:,}; "
                       "decode a smaller test set or log less often")
    atomic_write(path, text)


def read(path: Path) -> dict[str, Any]:
    """A record, checked for its format; RunError naming the file otherwise."""
    record = read_table(path)
    if record.get("format") != FORMAT or not isinstance(record.get("definition"), dict) or \
            record.get("status") not in ("complete", "diverged", "failed"):
        raise RunError(f"{path}: not a zoo record of format {FORMAT} (format, definition or status missing)")
    return record
