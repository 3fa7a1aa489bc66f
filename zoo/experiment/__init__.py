"""Experiments: grids of variants x tasks x seeds (config), run into run directories (runner)."""

from zoo.experiment import slurm  # noqa: F401  (registers the slurm executor: executors in modules of their own)
from zoo.experiment.config import Experiment, ExperimentConfig, ExperimentError, load_experiment

__all__ = ["Experiment", "ExperimentConfig", "ExperimentError", "load_experiment"]
