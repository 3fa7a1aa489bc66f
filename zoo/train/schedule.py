"""Learning-rate schedules: lr(step) for step = 1, 2, ... (the step about to be taken)."""

from __future__ import annotations

import math

from zoo.train.config import TrainConfig


def learning_rate(step: int, config: TrainConfig, d_model: int) -> float:
    peak, warmup = config.peak_lr(d_model), config.warmup
    warm = min(1.0, step / warmup) if warmup else 1.0
    if config.schedule == "constant":
        return peak * warm
    if config.schedule == "linear-decay":
        if step <= warmup:
            return peak * warm
        return peak * max(0.0, (config.steps - step) / max(1, config.steps - warmup))
    # inverse-sqrt (the paper's): linear warmup to the peak, then proportional to step^-0.5
    return peak * (warm if step <= warmup else math.sqrt(max(warmup, 1) / step))
