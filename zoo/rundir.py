"""The run directory: what one training run writes, under which names, and what state it is in.

    RUN/definition.json   what defines the run, when an experiment started it (see zoo/experiment/store.py)
    RUN/spec.json         the resolved model spec and its digest
    RUN/train.json        the training config
    RUN/task/             task.json and the trained tokenizer (the run is self-contained)
    RUN/metrics.jsonl     one JSON object per logged step and per evaluation
    RUN/checkpoint.*      model, optimizer, position in the data and RNG state (zoo/train/checkpoint.py)
    RUN/summary.json      final status ("complete" or "diverged"), reason and last metrics
    RUN/test.hyp          decoded test outputs, one per line, and
    RUN/test.json         their metrics: its presence marks the run finished
    RUN/failed.json       why the last attempt raised (the next `zoo run` retries it)

Every module that reads or writes a run directory goes through the names and functions here, so the
contract between training, the runner, `zoo evaluate` and the records lives in one place. Each file
is written atomically (a kill leaves the old file or the new one, never half of one); the temporary
files a kill can leave behind are removed by `clean_temporaries` when the run is next opened.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from zoo.atomic import TEMP_SUFFIX, write_atomic
from zoo.errors import RunError

DEFINITION = "definition.json"
SPEC = "spec.json"
TRAIN = "train.json"
TASK = "task"
METRICS = "metrics.jsonl"
SUMMARY = "summary.json"
FAILED = "failed.json"
TEST = "test"  # the evaluation the runner makes: test.hyp + test.json

def atomic_write(path: Path, data: bytes | str) -> None:
    """Readers (and a run killed mid-write) see the old file or the new one, never half of one."""
    payload = data.encode() if isinstance(data, str) else data
    write_atomic(path, lambda tmp: tmp.write_bytes(payload))


def write_json(path: Path, value: Any) -> None:
    atomic_write(path, json.dumps(value, indent=2, sort_keys=True) + "\n")


def read_json(path: Path) -> Any:
    """The parsed file; RunError naming it when it cannot be read or is not JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise RunError(f"{path}: cannot read ({getattr(err, 'strerror', None) or err})") from None


def read_table(path: Path) -> dict[str, Any]:
    """A JSON file that must hold an object (summary, definition, evaluation metrics)."""
    value = read_json(path)
    if not isinstance(value, dict):
        raise RunError(f"{path}: expected a JSON object, found {type(value).__name__}")
    return value


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """The logged rows. A last line cut short by a kill is dropped (it is replayed on resume); a line
    that is not a JSON object anywhere else means the file is corrupt, and the error names the line."""
    if not path.exists():
        return []
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as err:
        raise RunError(f"{path}: cannot read ({getattr(err, 'strerror', None) or err})") from None
    while lines and not lines[-1].strip():
        lines.pop()
    rows = []
    for number, line in enumerate(lines, start=1):
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            row = None
        if not isinstance(row, dict) or not isinstance(row.get("step"), int):
            if number == len(lines):
                break
            raise RunError(f"{path}:{number}: not a logged row ({line[:60]!r}); the learning curve cannot be read")
        rows.append(row)
    return rows


def save_evaluation(run_dir: Path, name: str, metrics: dict[str, Any], hypotheses: list[str]) -> None:
    """RUN_DIR/<name>.hyp (one output per line), then RUN_DIR/<name>.json: the JSON's presence means both are whole."""
    atomic_write(run_dir / f"{name}.hyp", "".join(h + "\n" for h in hypotheses))
    write_json(run_dir / f"{name}.json", metrics)


def read_hypotheses(run_dir: Path, name: str = TEST) -> list[str] | None:
    """The outputs saved by `save_evaluation`, or None if there are none."""
    path = Path(run_dir) / f"{name}.hyp"
    if not path.exists():
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise RunError(f"{path}: cannot read ({getattr(err, 'strerror', None) or err})") from None
    lines = text.split("\n")  # not splitlines(): a hypothesis may hold other line-breaking characters
    return lines[:-1] if text.endswith("\n") else lines if text else []


def status(run_dir: Path) -> str:
    """pending | started | evaluating | complete | diverged | failed, from the files alone; never raises
    (a summary that cannot be read makes the run 'failed', and reading it again says why)."""
    if (run_dir / FAILED).exists():
        return "failed"
    if (run_dir / SUMMARY).exists():
        try:
            state = read_table(run_dir / SUMMARY).get("status")
        except RunError:
            return "failed"
        if state == "complete":
            return "complete" if (run_dir / f"{TEST}.json").exists() else "evaluating"
        return "diverged" if state == "diverged" else "failed"
    return "started" if (run_dir / METRICS).exists() else "pending"


def clean_temporaries(run_dir: Path, pattern: str = f".*{TEMP_SUFFIX}") -> list[Path]:
    """Remove the temporary files of atomic writes that a kill interrupted; returns what was removed.
    Only call this while holding the run's lock: a live writer's temporary file looks the same.
    `pattern`: which temporaries (a cell's record shares its folder with other cells' records)."""
    removed = []
    if run_dir.is_dir():
        for path in run_dir.rglob(pattern):
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed
