"""Training: the recipe (TrainConfig), the resumable loop (Trainer) and run directories."""

from zoo.rundir import RunError, save_evaluation
from zoo.train.config import TrainConfig, load_train_config
from zoo.train.fit import check_fits, fit_to_task
from zoo.train.loop import Trainer
from zoo.train.run import load_run

__all__ = ["RunError", "TrainConfig", "Trainer", "check_fits", "fit_to_task", "load_run", "load_train_config",
           "save_evaluation"]
