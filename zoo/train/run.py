"""Loading a trained run back: its model, task and training config (file names in zoo/rundir.py)."""

from __future__ import annotations

from pathlib import Path

import torch

from zoo.data import Task, load_saved
from zoo.model.build import build
from zoo.model.seq2seq import Seq2Seq
from zoo.model.spec import validate_spec
from zoo.rundir import SPEC, TASK, TRAIN, RunError, read_table
from zoo.train import checkpoint
from zoo.train.config import TrainConfig


def load_run(run_dir: str | Path, device: str | torch.device = "cpu") -> tuple[Seq2Seq, Task, TrainConfig]:
    """The trained model (weights of the last checkpoint), its task and its training config."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunError(f"{run_dir}: no such folder; give the --out folder of a `zoo train` run")
    for name in (SPEC, TRAIN):
        if not (run_dir / name).exists():
            raise RunError(f"{run_dir}: no {name}; is this a run directory written by `zoo train`?")
    spec = validate_spec(read_table(run_dir / SPEC)["spec"], source=str(run_dir / SPEC))
    config = TrainConfig.model_validate(read_table(run_dir / TRAIN))
    task = load_saved(run_dir / TASK)
    path = checkpoint.find(run_dir)
    if path is None:
        raise RunError(f"{run_dir}: no {checkpoint.FILE}; is this a run directory written by `zoo train`?")
    state = checkpoint.load(path)
    if state.format > 1 and not state.intact:  # format 1 carries no hash: an older run is evaluated as it is
        raise RunError(f"{path}: its tensors or metadata do not match its content hash (damaged or edited since it "
                       "was written); no model is evaluated from it: train the run again")
    model = build(spec, seed=config.seed)
    checkpoint.restore(state, model)
    return model.to(device).eval(), task, config
