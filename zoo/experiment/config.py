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
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from zoo.config_io import Count, describe_error, read_config_file
from zoo.data import TaskConfig, check_files
from zoo.errors import DataError, SpecError, ZooError, closest
from zoo.experiment.schema import Analysis, Finding, Sequential, TaskEntry, Transfer, Variant
from zoo.experiment.store import check_name
from zoo.model.decode import DecodeSettings
from zoo.model.spec import ModelSpec, load_spec
from zoo.plugins import PluginError, load_all
from zoo.train import TrainConfig, check_fits


class ExperimentError(ZooError):
    """An experiment file is invalid; the message names the field."""


class ExperimentConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(description="names runs/<name>/ and reports/<name>/")
    description: str = ""
    seeds: list[Count] = Field(default_factory=lambda: [0], min_length=1)
    baseline: str | None = Field(None, description="label of the variant others are compared against "
                                                   "(default: the first)")
    shared: dict[str, Any] = Field(default_factory=dict, description="spec overrides applied to every variant")
    plugins: list[str] = Field(default_factory=list, description="plugin files, folders or modules to load before "
                                                                 "anything else is validated (paths relative to "
                                                                 "this file)")
    variants: list[Variant] = Field(min_length=1)
    tasks: list[TaskEntry] = Field(min_length=1)
    train: dict[str, Any] = Field(default_factory=dict, description="TrainConfig fields for every run")
    decode: DecodeSettings = Field(default_factory=DecodeSettings)
    data_dir: str | None = Field(None, description="folder of parallel corpora "
                                                   "(default: $ZOO_DATA_DIR or ../shared/data)")
    findings: list[Finding] = Field(default_factory=list, description="published claims the report checks")
    analysis: Analysis = Field(default_factory=Analysis)
    transfers: list[Transfer] = Field(default_factory=list, description="pairs of tasks whose effects the report "
                                                                        "compares (budget or task transfer)")
    sequential: Sequential | None = Field(None, description="seeds until decided (`zoo run --until-decided`): "
                                                            "rounds of seeds per still-undecided arm, up to a cap")

    @field_validator("name")
    @classmethod
    def _safe_name(cls, value: str) -> str:
        return check_name(value, "name")

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
        if self.sequential is not None and self.seeds != self.sequential.round_of(self.seeds[0], 0):
            raise ValueError(f"seeds: with [sequential], the seeds are its first round, "
                             f"{self.sequential.round_of(self.seeds[0], 0)} (round_seeds = "
                             f"{self.sequential.round_seeds}); got {self.seeds}")
        for i, finding in enumerate(self.findings):
            if finding.variant not in labels:
                raise ValueError(f"findings[{i}].variant: {finding.variant!r} is not a variant label")
            if finding.against is not None and finding.against not in labels:
                raise ValueError(f"findings[{i}].against: {finding.against!r} is not a variant label")
            if finding.task is not None and finding.task not in keys:
                raise ValueError(f"findings[{i}].task: {finding.task!r} is not a task label; tasks: {', '.join(keys)}")
        for i, transfer in enumerate(self.transfers):
            own = transfer.tasks[1:] if transfer.experiment else transfer.tasks  # the first is the other's
            unknown = [label for label in own if label not in keys]
            if unknown or (transfer.experiment is None and transfer.tasks[0] == transfer.tasks[1]):
                raise ValueError(f"transfers[{i}].tasks: {list(transfer.tasks)!r} must be two different task labels; "
                                 f"tasks: {', '.join(keys)}")
        return self

    @property
    def baseline_label(self) -> str:
        return self.baseline or self.variants[0].label


class Experiment:
    """A validated experiment: its file, config, and every variant's resolved spec (vocab excluded)."""

    def __init__(self, path: Path, config: ExperimentConfig, specs: dict[str, ModelSpec],
                 calls: dict[tuple[str, str], tuple[int, ...]] | None = None):
        self.path, self.config, self.specs = path, config, specs
        self.others: dict[str, Experiment] = {}  # a cross-experiment transfer's file -> that experiment
        # (variant, task key) -> the seeds a sequential plan has called that arm for (zoo/report/sequential.py);
        # an arm not in it has the experiment's `seeds` (with [sequential]: the first round)
        self.calls = dict(calls or {})

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

    def check_data(self, tasks: list[TaskEntry] | None = None) -> None:
        """Every task's (or `tasks`') corpus files exist (not read): `zoo run` fails at once, not in the grid's
        first text cell."""
        for i, task in enumerate(self.config.tasks):
            if tasks is not None and task not in tasks:
                continue
            try:
                check_files(self.task_config(task))
            except DataError as err:
                raise ExperimentError(f"{self.path}: tasks[{i}] ({task.name}): {err}") from None

    def grid(self) -> list[tuple[str, TaskEntry, int]]:
        """Every cell: each variant on each task with the seeds it is called for (`seeds_of`)."""
        return [(v.label, t, s) for t in self.config.tasks for v in self.config.variants
                for s in self.seeds_of(v.label, t.key)]

    def seeds_of(self, variant: str, task: str) -> list[int]:
        """The seeds of `variant` on task `task` (a key): the experiment's `seeds`, or with [sequential] the rounds
        its plan has called that arm for (`with_calls`), which a report and a run read from the records."""
        return list(self.calls.get((variant, task), self.config.seeds))

    def plan_seeds(self) -> list[int]:
        """Every seed an arm may ever train, in order: the `seeds`, and with [sequential] every round's up to the
        cap (seeds a part of the grid, `--seeds`, may name)."""
        plan = self.config.sequential
        if plan is None:
            return list(self.config.seeds)
        return list(range(self.config.seeds[0], self.config.seeds[0] + plan.max_seeds))

    def with_calls(self, calls: dict[tuple[str, str], tuple[int, ...]]) -> Experiment:
        """This experiment with each arm's called seeds: (variant, task key) -> seeds (`seeds_of`)."""
        called = Experiment(self.path, self.config, self.specs, calls)
        called.others = self.others
        return called


class _Plugins(BaseModel):
    """The `plugins` field alone, validated as ExperimentConfig validates it, to load them before the rest."""

    plugins: list[str] = ExperimentConfig.model_fields["plugins"]


def _resolve_base(base: str, folder: Path) -> str:
    candidate = folder / base
    return str(candidate) if candidate.suffix in (".toml", ".yaml", ".yml", ".json") and candidate.exists() else base


def load_experiment(path: str | Path) -> Experiment:
    """Read and validate an experiment file; every variant's spec, every task and every training
    config is validated here, so an invalid grid is rejected before anything trains. The corpora are
    not looked for (a report is made from records, also where the data is not): `Experiment.check_data`."""
    path = Path(path)
    if not path.exists() and (Path("experiments") / f"{path}.toml").exists():
        path = Path("experiments") / f"{path}.toml"  # `zoo run quickstart`
    if not path.exists() and path.suffix == "" and Path("experiments").is_dir():  # a name mistyped: name the close
        hint = closest(path, [p.stem for p in Path("experiments").glob("*.toml")])
        if hint:
            raise ExperimentError(f"{path}: no such experiment file, nor experiments/{path}.toml{hint}")
    data = read_config_file(path)
    try:
        # plugins first: the tasks and metrics the rest of the file names may be theirs
        plugins = _Plugins.model_validate({"plugins": data.get("plugins", [])} if isinstance(data, dict) else {})
        load_all(plugins.plugins, base=path.parent, environment=False, entry_points=False)
        config = ExperimentConfig.model_validate(data)
    except ValidationError as err:
        raise ExperimentError(f"{path}: " + "; ".join(describe_error(e, ExperimentConfig)
                                                      for e in err.errors())) from None
    except PluginError as err:
        raise ExperimentError(f"{path}: plugins: {err}") from None
    specs = {}
    for i, variant in enumerate(config.variants):
        try:
            specs[variant.label] = load_spec(_resolve_base(variant.base, path.parent), {**config.shared, **variant.set})
        except SpecError as err:
            raise ExperimentError(f"{path}: variants[{i}] ({variant.label}): {err}") from None
    experiment = Experiment(path, config, specs)
    for i, task in enumerate(config.tasks):
        where = f"tasks[{i}] ({task.name})"
        try:
            task_config = experiment.task_config(task)
            for j, variant in enumerate(config.variants):
                try:
                    experiment.train_config(task, config.seeds[0], variant.label)
                except ValidationError as err:  # said where the bad value was written
                    raise ExperimentError(f"{path}: " + "; ".join(
                        f"{_train_source(e, config, where, task, f'variants[{j}] ({variant.label})', variant)}: "
                        f"{describe_error(e, TrainConfig)}" for e in err.errors())) from None
                check_fits(specs[variant.label], task_config)
        except (SpecError, DataError) as err:
            raise ExperimentError(f"{path}: {where}: {err}") from None
    _load_others(experiment)
    return experiment


def _train_source(error: dict, config: ExperimentConfig, where: str, task: TaskEntry, variant_where: str,
                  variant: Variant) -> str:
    """Which table set the training field an error is about: the variant's train, the task's, the file's [train];
    a field none of them set (a missing budget) is the task's to give."""
    field = str(error["loc"][0]) if error.get("loc") else ""
    if field in variant.train:
        return f"{variant_where}: train"
    if field in task.train:
        return f"{where}: train"
    return "[train]" if field in config.train else where


_LOADING: set[Path] = set()  # the experiment files whose transfers are being loaded (a circle would not end)


def _load_others(experiment: Experiment) -> None:
    """The experiments a cross-experiment transfer reads its first task from, each checked to have that task."""
    _LOADING.add(experiment.path.resolve())
    try:
        _load_each(experiment)
    finally:
        _LOADING.discard(experiment.path.resolve())


def _load_each(experiment: Experiment) -> None:
    for i, transfer in enumerate(experiment.config.transfers):
        if transfer.experiment is None:
            continue
        if transfer.experiment not in experiment.others:
            other_path = experiment.path.parent / transfer.experiment
            if other_path.resolve() == experiment.path.resolve() or not other_path.is_file():
                raise ExperimentError(f"{experiment.path}: transfers[{i}].experiment: {transfer.experiment!r} is not "
                                      "another experiment file (a path relative to this file)")
            if other_path.resolve() in _LOADING:
                raise ExperimentError(f"{experiment.path}: transfers[{i}].experiment: {transfer.experiment!r} "
                                      "reads this file's tasks in turn; a transfer's experiments cannot refer to "
                                      "each other in a circle")
            try:
                experiment.others[transfer.experiment] = load_experiment(other_path)
            except ExperimentError as err:
                raise ExperimentError(f"{experiment.path}: transfers[{i}].experiment: {err}") from None
        _check_task(experiment, i, experiment.others[transfer.experiment])


def _check_task(experiment: Experiment, i: int, other: Experiment) -> None:
    first, keys = experiment.config.transfers[i].tasks[0], [t.key for t in other.config.tasks]
    if first not in keys:
        raise ExperimentError(f"{experiment.path}: transfers[{i}].tasks: {first!r} is not a task of "
                              f"{other.path}; its tasks: {', '.join(keys)}")


def describe(experiment: Experiment) -> str:
    """The experiment file's contents, for reports."""
    return json.dumps(experiment.config.model_dump(mode="json"), indent=2)
