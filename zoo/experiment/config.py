"""Experiment files: a grid of variants x tasks x seeds, validated before anything trains.

    name = "quickstart"
    description = "..."
    seeds = [0, 1, 2]
    baseline = "post-norm"                   # the label others are compared against
    shared = {d_model = 64, n_heads = 4}     # spec overrides applied to every variant

    [[variants]]
    label = "post-norm"
    base = "paper-base"                      # preset name or spec file (relative to the experiment file)
    [[variants]]
    label = "pre-norm"
    base = "paper-base"
    set = {"residual.kind" = "pre-norm"}
    train = {lr = 3e-3, warmup = 0}          # TrainConfig overrides for this variant only

    [[tasks]]
    name = "copy"
    options = {symbols = 20, min_len = 5, max_len = 20}  # TaskConfig fields
    train = {steps = 800}                                 # TrainConfig overrides for this task
    threshold = 90.0                                      # "steps to reach" this value of the task's metric

    [train]                                  # TrainConfig fields for every run (task, then variant override)
    batch_tokens = 2048
    [decode]                                 # how test sets are decoded for the final metrics
    beam = 1
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from zoo.config_io import Count, Number, describe_error, read_config_file
from zoo.data import TaskConfig, check_files
from zoo.decode import MAX_RATIO
from zoo.errors import DataError, SpecError, ZooError
from zoo.spec import ModelSpec, load_spec
from zoo.train import TrainConfig, check_fits

LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")


class ExperimentError(ZooError):
    """An experiment file is invalid; the message names the field."""


class Variant(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    label: str = Field(description="short name, used in tables, plots and run directories")
    base: str = Field(description="preset name or spec file path")
    set: dict[str, Any] = Field(default_factory=dict, description="dotted spec overrides")
    train: dict[str, Any] = Field(default_factory=dict, description="TrainConfig overrides for this variant (e.g. lr)")

    @field_validator("label")
    @classmethod
    def _label(cls, value: str) -> str:
        if not LABEL.match(value):
            raise ValueError(f"{value!r} must be letters, digits and _ . + - (it names a folder)")
        return value


class TaskEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(description="copy | reverse | sort | long-copy | CORPUS:SRC-TGT")
    label: str | None = Field(None, description="name in reports and run directories (default: the task name)")
    options: dict[str, Any] = Field(default_factory=dict, description="TaskConfig fields")
    train: dict[str, Any] = Field(default_factory=dict, description="TrainConfig overrides for this task")
    threshold: Number | None = Field(None, description="report the steps needed to reach this metric value")

    @property
    def key(self) -> str:
        return self.label or self.name.replace(":", "-")


class DecodeSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    beam: Count = Field(1, gt=0)
    alpha: Number = Field(0.6, ge=0)
    max_ratio: Number = Field(1.5, gt=0, le=MAX_RATIO)
    max_extra: Count = Field(10, ge=0)


class Finding(BaseModel):
    """A published claim the report checks: variant vs baseline (or another variant) on a metric, expected direction."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    variant: str = Field(description="variant label compared with the baseline (or with `against`)")
    against: str | None = Field(None, description="variant label it is compared with instead of the baseline, for "
                                                  "claims about a pair (e.g. post-norm vs pre-norm, both without warmup)")
    task: str | None = Field(None, description="task label (default: every task)")
    metric: str | None = Field(None, description="results column (default: the task's main metric)")
    expect: Literal["better", "worse", "no difference"]
    claim: str = Field(description="the finding in plain words")
    source: str = Field(description="citation, e.g. 'Xiong et al. 2020, On Layer Normalization in the Transformer'")


class ExperimentConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    description: str = ""
    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1)
    baseline: str | None = Field(None, description="label of the variant others are compared against (default: the first)")
    shared: dict[str, Any] = Field(default_factory=dict, description="spec overrides applied to every variant")
    variants: list[Variant] = Field(min_length=1)
    tasks: list[TaskEntry] = Field(min_length=1)
    train: dict[str, Any] = Field(default_factory=dict, description="TrainConfig fields for every run")
    decode: DecodeSettings = Field(default_factory=DecodeSettings)
    data_dir: str | None = Field(None, description="folder of parallel corpora (default: $ZOO_DATA_DIR or ../shared/data)")
    findings: list[Finding] = Field(default_factory=list, description="published claims the report checks")

    @model_validator(mode="after")
    def _consistent(self) -> "ExperimentConfig":
        labels = [v.label for v in self.variants]
        duplicates = sorted({label for label in labels if labels.count(label) > 1})
        if duplicates:
            raise ValueError(f"variants: labels must be unique; repeated: {', '.join(duplicates)}")
        if self.baseline is not None and self.baseline not in labels:
            raise ValueError(f"baseline: {self.baseline!r} is not a variant label; labels: {', '.join(labels)}")
        keys = [t.key for t in self.tasks]
        if len(set(keys)) != len(keys):
            raise ValueError("tasks: two tasks share a name; give them distinct `label`s")
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError("seeds: repeated seed")
        for i, finding in enumerate(self.findings):
            if finding.variant not in labels:
                raise ValueError(f"findings[{i}].variant: {finding.variant!r} is not a variant label")
            if finding.against is not None and finding.against not in labels:
                raise ValueError(f"findings[{i}].against: {finding.against!r} is not a variant label")
            if finding.task is not None and finding.task not in keys:
                raise ValueError(f"findings[{i}].task: {finding.task!r} is not a task label; tasks: {', '.join(keys)}")
        return self

    @property
    def baseline_label(self) -> str:
        return self.baseline or self.variants[0].label


class Experiment:
    """A validated experiment: its file, config, and every variant's resolved spec (vocab excluded)."""

    def __init__(self, path: Path, config: ExperimentConfig, specs: dict[str, ModelSpec]):
        self.path, self.config, self.specs = path, config, specs

    @property
    def name(self) -> str:
        return self.config.name

    def train_config(self, task: TaskEntry, seed: int, variant: str | None = None) -> TrainConfig:
        """Experiment-wide fields, then the task's overrides, then the variant's, then the seed."""
        own = next((v.train for v in self.config.variants if v.label == variant), {})
        return TrainConfig.model_validate({**self.config.train, **task.train, **own, "seed": seed})

    def task_config(self, task: TaskEntry) -> TaskConfig:
        options = dict(task.options)
        if self.config.data_dir and "data_dir" not in options:
            options["data_dir"] = str((self.path.parent / self.config.data_dir).resolve())
        return TaskConfig(name=task.name, **options)

    def check_data(self) -> None:
        """Every task's corpus files exist (not read): `zoo run` fails at once, not in the grid's first text cell."""
        for i, task in enumerate(self.config.tasks):
            try:
                check_files(self.task_config(task))
            except DataError as err:
                raise ExperimentError(f"{self.path}: tasks[{i}] ({task.name}): {err}") from None

    def grid(self) -> list[tuple[str, TaskEntry, int]]:
        return [(v.label, t, s) for t in self.config.tasks for v in self.config.variants for s in self.config.seeds]


def _resolve_base(base: str, folder: Path) -> str:
    candidate = folder / base
    return str(candidate) if candidate.suffix in (".toml", ".yaml", ".yml", ".json") and candidate.exists() else base


def load_experiment(path: str | Path) -> Experiment:
    """Read and validate an experiment file; every variant's spec, every task and every training
    config is validated here, so an invalid grid is rejected before anything trains."""
    path = Path(path)
    if not path.exists() and (Path("experiments") / f"{path}.toml").exists():
        path = Path("experiments") / f"{path}.toml"  # `zoo run quickstart`
    data = read_config_file(path)
    try:
        config = ExperimentConfig.model_validate(data)
    except ValidationError as err:
        raise ExperimentError(f"{path}: " + "; ".join(describe_error(e, ExperimentConfig)
                                                      for e in err.errors())) from None
    specs = {}
    for i, variant in enumerate(config.variants):
        try:
            specs[variant.label] = load_spec(_resolve_base(variant.base, path.parent), {**config.shared, **variant.set})
        except SpecError as err:
            raise ExperimentError(f"{path}: variants[{i}] ({variant.label}): {err}") from None
    experiment = Experiment(path, config, specs)
    for i, task in enumerate(config.tasks):
        try:
            task_config = experiment.task_config(task)
            for variant in config.variants:
                experiment.train_config(task, config.seeds[0], variant.label)
                check_fits(specs[variant.label], task_config)
        except SpecError as err:
            raise ExperimentError(f"{path}: tasks[{i}] ({task.name}): {err}") from None
        except (DataError, ValidationError) as err:
            message = err if isinstance(err, DataError) else "; ".join(
                describe_error(e, TrainConfig) for e in err.errors())
            raise ExperimentError(f"{path}: tasks[{i}] ({task.name}): {message}") from None
    return experiment


def describe(experiment: Experiment) -> str:
    """The experiment file's contents, for reports."""
    return json.dumps(experiment.config.model_dump(mode="json"), indent=2)
