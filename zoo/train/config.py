"""TrainConfig: the training recipe, validated like the model spec (unknown keys are errors).

Defaults are the paper's recipe (Vaswani et al. 2017, section 5.3-5.4): Adam (0.9, 0.98, 1e-9),
inverse-square-root schedule with linear warmup, peak d_model^-0.5 * warmup^-0.5, label smoothing 0.1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from zoo.config_io import Count, Number, describe_error, read_config_file
from zoo.errors import SpecError
from zoo.model.overrides import apply_overrides

# Adam's running-average coefficients: each in [0, 1) (torch raises a traceback otherwise).
Beta = Annotated[Number, Field(ge=0, lt=1)]


class TrainConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # budget: training stops at whichever is reached first (at least one is required)
    steps: Count | None = Field(None, gt=0, description="optimizer steps")
    epochs: Number | None = Field(None, gt=0, description="passes over the training data")
    minutes: Number | None = Field(None, gt=0, description="training time, evaluation excluded, summed over resumes")

    batch_tokens: Count = Field(4096, gt=0, description="padded tokens per batch (max(src, tgt) length x sentences)")
    accumulate: Count = Field(1, gt=0, description="batches per optimizer step (gradient accumulation)")
    lr: Number | None = Field(None, gt=0, description="peak learning rate; None = d_model^-0.5 * warmup^-0.5")
    schedule: Literal["inverse-sqrt", "constant", "linear-decay"] = "inverse-sqrt"
    warmup: Count = Field(4000, ge=0, description="steps of linear warmup")
    betas: tuple[Beta, Beta] = (0.9, 0.98)
    eps: Number = Field(1e-9, gt=0)
    weight_decay: Number = Field(0.0, ge=0)
    label_smoothing: Number = Field(0.1, ge=0, lt=1)
    clip_norm: Number | None = Field(1.0, ge=0, description="clip the gradient norm (not in the paper; "
                                                           "0 or None = off, 0 being what TOML can say)")

    eval_interval: Count = Field(1000, gt=0, description="steps between validation passes")
    eval_sentences: Count | None = Field(500, gt=0,
                                         description="validation sentences decoded (greedy) at each pass; None = all")
    checkpoint_interval: Count = Field(500, gt=0, description="steps between checkpoints")
    log_interval: Count = Field(10, gt=0, description="steps between metric lines (each the mean over its steps; "
                                                      "a line at every evaluation and checkpoint as well)")

    seed: Count = 0
    device: Literal["auto", "cpu", "cuda"] = "auto"
    precision: Literal["fp32", "bf16"] = Field("fp32", description="bf16 = bfloat16 autocast (CPU and GPU)")
    kernels: Literal["reference", "fast", "fast-attention"] = Field(
        "reference", description="fast = the output projection fused with the loss and its gradient, a chunk of "
        "tokens at a time (zoo/kernels/loss_fused.py): the same function to float tolerance, about 1.5x the training "
        "tokens/s at the studies' size, and on a CUDA GPU the whole step replayed from CUDA graphs "
        "(zoo/train/graphs.py); fast-attention = fast, and bf16 training on the CPU takes attention's backward "
        "recomputed from the softmax (zoo/kernels/attention_recompute.py) instead of the CPU flash kernel's slower one "
        "(elsewhere it is fast); reference = the model's scores and zoo/kernels/loss.py, as every record before them")
    threads: Count | None = Field(None, gt=0, description="torch CPU threads; None = PyTorch's default")

    @model_validator(mode="after")
    def _budget(self) -> TrainConfig:
        if self.steps is None and self.epochs is None and self.minutes is None:
            raise ValueError("steps: give a budget: steps, epochs or minutes (any combination; the first reached "
                             "ends training), e.g. steps = 2000 in the config, or zoo train --train steps=2000")
        if self.schedule == "linear-decay" and self.steps is None:
            raise ValueError("schedule: 'linear-decay' decays to 0 at `steps`, so it needs steps")
        return self

    def peak_lr(self, d_model: int) -> float:
        return self.lr if self.lr is not None else d_model ** -0.5 * max(self.warmup, 1) ** -0.5

    def fraction_done(self, step: int, epochs_done: float, seconds: float) -> float:
        """The share of the budget a run has used after `step` optimizer steps, `epochs_done` passes over the
        data and `seconds` of training: the largest of its budgets' shares, as training stops at whichever is
        reached first, capped at 1. The loop stops at 1; `zoo run`'s live view shows it, read from the run's files."""
        parts = [step / self.steps if self.steps else 0.0, epochs_done / self.epochs if self.epochs else 0.0,
                 seconds / (60 * self.minutes) if self.minutes else 0.0]
        return min(1.0, max(parts))


def load_train_config(path: str | Path | None = None,
                      overrides: dict[str, Any] | None = None) -> tuple[TrainConfig, dict[str, Any]]:
    """A TrainConfig from a TOML/YAML/JSON file (optional) plus overrides; also returns the file's
    [task] table (task options kept beside the recipe), if any."""
    data = read_config_file(Path(path)) if path is not None else {}
    task = data.pop("task", {}) if isinstance(data.get("task", {}), dict) else {}
    data = apply_overrides(data, overrides)
    try:
        return TrainConfig.model_validate(data), task
    except ValidationError as err:
        where = f"{path}: " if path else "training config: "
        raise SpecError(where + "; ".join(describe_error(e, TrainConfig) for e in err.errors())) from None
