"""Training: the recipe (TrainConfig), the resumable loop (Trainer) and run directories."""

from zoo.train.config import TrainConfig, load_train_config
from zoo.train.loop import Trainer
from zoo.train.run import RunError, load_run

__all__ = ["RunError", "TrainConfig", "Trainer", "load_run", "load_train_config"]
