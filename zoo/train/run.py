"""A run directory: everything one training run writes, each file written atomically.

    RUN_DIR/spec.json       the resolved model spec and its digest
    RUN_DIR/train.json      the training config
    RUN_DIR/task/           task.json and the trained tokenizer (the run is self-contained)
    RUN_DIR/metrics.jsonl   one JSON object per logged step and per evaluation
    RUN_DIR/checkpoint.safetensors   model, optimizer, position in the data and RNG state (zoo/train/checkpoint.py)
    RUN_DIR/summary.json    final status ("complete" or "diverged"), reason and last metrics
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from zoo.atomic import write_atomic
from zoo.build import build
from zoo.data import Task
from zoo.errors import RunError
from zoo.model import Seq2Seq
from zoo.spec import validate_spec
from zoo.train import checkpoint
from zoo.train.config import TrainConfig


def atomic_write(path: Path, data: bytes | str) -> None:
    """Readers (and a run killed mid-write) see the old file or the new one, never half of one."""
    payload = data.encode() if isinstance(data, str) else data
    write_atomic(path, lambda tmp: tmp.write_bytes(payload))


def write_json(path: Path, value: Any) -> None:
    atomic_write(path, json.dumps(value, indent=2, sort_keys=True) + "\n")


def save_evaluation(run_dir: Path, name: str, metrics: dict[str, Any], hypotheses: list[str]) -> None:
    """RUN_DIR/<name>.hyp (one output per line), then RUN_DIR/<name>.json: the JSON's presence means both are whole."""
    atomic_write(run_dir / f"{name}.hyp", "".join(h + "\n" for h in hypotheses))
    write_json(run_dir / f"{name}.json", metrics)


def read_metrics(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut short by a kill: everything after it is lost anyway
            break
    return rows


def load_run(run_dir: str | Path, device: str | torch.device = "cpu") -> tuple[Seq2Seq, Task, TrainConfig]:
    """The trained model (weights of the last checkpoint), its task and its training config."""
    run_dir = Path(run_dir)
    for name in ("spec.json", "train.json"):
        if not (run_dir / name).exists():
            raise RunError(f"{run_dir}: no {name}; is this a run directory written by `zoo train`?")
    spec = validate_spec(json.loads((run_dir / "spec.json").read_text())["spec"], source=str(run_dir / "spec.json"))
    config = TrainConfig.model_validate(json.loads((run_dir / "train.json").read_text()))
    task = Task.load(run_dir / "task")
    path = checkpoint.find(run_dir)
    if path is None:
        raise RunError(f"{run_dir}: no {checkpoint.FILE}; is this a run directory written by `zoo train`?")
    model = build(spec, seed=config.seed)
    checkpoint.restore(checkpoint.load(path), model)
    return model.to(device).eval(), task, config
