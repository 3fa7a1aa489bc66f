"""Small runs for the end-to-end tests of the store, the runner and the `zoo` command.

A tiny `zoo train` command line, the smoke experiment (experiments/smoke.toml) copied with edits, the `zoo run`
command that trains it in a child process, and its records compared without what legitimately differs between
two runs of one cell. Children run on one thread (`ENV`): two of them at once must not fight over the cores.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from zoo.experiment import load_experiment, store
from zoo.experiment.runner import run_grid

ROOT = Path(__file__).resolve().parent.parent
SMOKE = (ROOT / "experiments" / "smoke.toml").read_text()
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
TIMINGS = {"tok_per_s", "seconds", "train_seconds", "finished"}
TRAINED = "stalled"  # a smoke run trains to its end and learns nothing: below the copy task's floor

TRAIN = [sys.executable, "-m", "zoo", "train", "paper-base", "--task", "copy", "--no-progress",
         "--set", "d_model=16", "--set", "n_heads=2", "--set", "d_ff=32",
         "--set", "encoder_layers=1", "--set", "decoder_layers=1",
         "--task-set", "symbols=8", "--task-set", "min_len=3", "--task-set", "max_len=6",
         "--task-set", "train_size=300", "--task-set", "valid_size=30", "--task-set", "test_size=30",
         "--train", "batch_tokens=256", "--train", "warmup=10", "--train", "lr=0.003", "--train", "device='cpu'",
         "--train", "eval_interval=40", "--train", "eval_sentences=20", "--train", "checkpoint_interval=10",
         "--train", "threads=1"]


def experiment_file(folder: Path, text: str = SMOKE, **replace: str) -> Path:
    """folder/smoke.toml: `text` with each `old=new` of `replace` made (each `old` must be there)."""
    for old, new in replace.items():
        assert old in text
        text = text.replace(old, new)
    path = folder / "smoke.toml"
    path.write_text(text)
    return path


def zoo_run(path: Path, root: Path, *extra: str) -> list[str]:
    """The `zoo run` command line for the experiment at `path`, its runs in root/runs, its records in
    root/out/records."""
    return [sys.executable, "-m", "zoo", "run", str(path), "--runs", str(root / "runs"), "--out", str(root / "out"),
            "--no-live", *extra]


def run(path: Path, root: Path) -> dict:
    """The grid at `path` run in this process: runs in root/runs, records in root/records."""
    return run_grid(load_experiment(path), root / "runs", root / "records", live=False)


def comparable(value):
    """A record without what legitimately differs between two runs of it: timings and provenance, and the digest
    of its content, which holds them."""
    if isinstance(value, dict):
        return {k: comparable(v) for k, v in value.items() if k not in TIMINGS and k not in ("provenance", "digest")}
    if isinstance(value, list):
        return [comparable(v) for v in value]
    return value


def all_records(root: Path) -> dict[str, dict]:
    """{path under root: comparable record} for every current record under `root` (stale ones left out)."""
    return {p.relative_to(root).as_posix(): comparable(json.loads(p.read_text()))
            for p in sorted(root.rglob("seed-*.json")) if store.STALE not in p.parts}
