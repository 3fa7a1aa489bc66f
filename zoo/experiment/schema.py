"""The tables of an experiment file ([[variants]], [[tasks]], [analysis], [[findings]], [[transfers]]), each a
pydantic model that names the field and the allowed values when it is wrong. zoo/experiment/config.py assembles
them into an ExperimentConfig and loads the file."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from zoo import metrics
from zoo.config_io import Count, Number
from zoo.data import Task, task_class
from zoo.experiment.store import check_name
from zoo.stats import ALPHA


class Variant(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    label: str = Field(description="short name, used in tables, plots and run directories")
    base: str = Field(description="preset name or spec file path")
    set: dict[str, Any] = Field(default_factory=dict, description="dotted spec overrides")
    train: dict[str, Any] = Field(default_factory=dict, description="TrainConfig overrides for this variant (e.g. lr)")

    @field_validator("label")
    @classmethod
    def _label(cls, value: str) -> str:
        return check_name(value, "label")


class StallSettings(BaseModel):
    """When a complete run counts as *stalled*: trained to the end without learning the task."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    floor: Number | None = Field(None, ge=0, description="final primary validation metric below this ⇒ stalled "
                                                        "(default: 1 BLEU, 10 chrF, 5% exact match, 20% token "
                                                        "accuracy; 0: no floor, every complete run counts in quality)")
    patience: Count | None = Field(None, ge=1, description="no improvement over the last N evaluations "
                                                                      "⇒ stalled (default: not used)")


class TaskEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    name: str = Field(description="copy | reverse | sort | long-copy | CORPUS:SRC-TGT")
    label: str | None = Field(None, description="name in reports and run directories (default: the task name)")
    options: dict[str, Any] = Field(default_factory=dict, description="TaskConfig fields")
    train: dict[str, Any] = Field(default_factory=dict, description="TrainConfig overrides for this task")
    threshold: Number | None = Field(None, description="report the steps needed to reach this validation value "
                                                      "of the primary metric")
    primary: str | None = Field(
        None, description="the one metric verdicts are given on, one of the task's metrics (default: the task's "
                          "first: bleu for translation, exact_match for synthetic tasks); every other metric is "
                          "descriptive")
    margin: Number | None = Field(None, gt=0, description="equivalence margin on the primary metric, in its units: "
                                                         "a variant is 'equivalent within ±margin' only by TOST")
    detect: Number | None = Field(None, gt=0, description="the difference `zoo plan` sizes seeds for (default: "
                                                         "the margin, else 1 BLEU / 1 chrF / 5 points)")
    stall: StallSettings = Field(default_factory=StallSettings)
    below_plateau: str | None = Field(
        None, description="evidence that this task's budget ends before the plateau, e.g. 'doubling the steps added "
                          "+2.54 BLEU (experiments/budget-pilot.toml)': findings that need convergence are then not "
                          "testable on this task, with this as the reason. The last-quarter rule cannot see it under "
                          "a schedule that decays to zero")
    at_plateau: str | None = Field(
        None, description="evidence that this task's budget reaches the plateau, e.g. 'twice the steps add +0.1 "
                          "[-0.3, +0.5] BLEU (experiments/my-pilot.toml)': under a schedule that decays the rate to 0 "
                          "the last quarter is flat by construction, so findings that need convergence are testable "
                          "there only with it")

    @field_validator("options")
    @classmethod
    def _no_name_in_options(cls, value: dict[str, Any]) -> dict[str, Any]:
        """`options = {name = ...}` would clash with the task's own name when the TaskConfig is built."""
        if "name" in value:
            raise PydanticCustomError("zoo_option", "'name' is not a task option; the task is named by its own "
                                      "`name` field")
        return value

    @property
    def key(self) -> str:
        return self.label or self.name.replace(":", "-")

    @property
    def task_class(self) -> type[Task]:
        return task_class(self.name)

    @property
    def primary_metric(self) -> str:
        return self.primary or self.task_class.metrics[0]

    @property
    def stall_floor(self) -> float | None:
        """The floor in force: the declared one, else the primary metric's default; None for a floor of 0."""
        floor = self.stall.floor if self.stall.floor is not None else metrics.get(self.primary_metric).stall_floor
        return floor or None

    @property
    def target_effect(self) -> float:
        return self.detect or self.margin or metrics.get(self.primary_metric).effect

    @model_validator(mode="after")
    def _safe_key(self) -> "TaskEntry":
        check_name(self.key, "label" if self.label is not None else "name")
        if self.primary is not None and self.primary not in self.task_class.metrics:
            raise ValueError(f"primary: {self.primary!r} is not a metric of task {self.name!r} (allowed: "
                             f"{', '.join(self.task_class.metrics)})")
        return self


class Analysis(BaseModel):
    """How the report judges: the significance level, the correction and the least seeds for a verdict."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    alpha: Number = Field(ALPHA, gt=0, lt=0.5, description="significance level of the verdicts: with holm the "
                                                          "family-wise error rate, with benjamini-hochberg the "
                                                          "false discovery rate")
    correction: Literal["holm", "benjamini-hochberg"] = Field(
        "holm", description="holm controls the chance of any false verdict; benjamini-hochberg the expected share")
    min_seeds: Count = Field(3, ge=3, description="complete seeds per arm below which no verdict is "
                                                             "given (per-seed values are shown instead)")
    power: Number = Field(0.8, gt=0, lt=1, description="power for the minimum detectable effect and `zoo plan`")
    pool: Literal["none", "many-to-one"] = Field(
        "none", description="none: each variant against the baseline by Welch's test on their two arms; many-to-one: "
                            "the seed variance pooled over every arm of the task (Dunnett's many-to-one setting), so "
                            "each comparison has the degrees of freedom of the whole grid, unless the arms' spreads "
                            "differ (`pool_alpha`): then Welch, said in the table")
    pool_alpha: Number = Field(0.05, gt=0, lt=1, description="pool unless the Brown-Forsythe test rejects equal seed "
                                                            "variances across the task's arms at this level "
                                                            "(declared before the runs)")


class Sequential(BaseModel):
    """Seeds until decided (`zoo run --until-decided`): the experiment's `seeds` are the first round; after each
    round every comparison with the baseline is analysed, and only arms whose comparison is still undecided (not
    better, worse, nor equivalent within the task's margin) get the next round's seeds, until `max_seeds`. The
    error is spent over the looks (Lan-DeMets, O'Brien-Fleming type), so looking after every round does not
    inflate it. Declared before the runs: changing it makes the analysis a different one."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    round_seeds: Count = Field(5, ge=3, description="seeds an undecided arm gets per round; the experiment's `seeds` "
                                                   "are the first round, round k trains the next round_seeds seeds")
    max_seeds: Count = Field(30, ge=3, description="the most seeds an arm may get; a comparison still undecided "
                                                  "there is reported with the seeds it would need")
    spending: Literal["obrien-fleming"] = Field(
        "obrien-fleming", description="the alpha-spending function over the looks (Lan & DeMets 1983)")

    @model_validator(mode="after")
    def _cap(self) -> "Sequential":
        if self.max_seeds < self.round_seeds:
            raise ValueError(f"max_seeds: {self.max_seeds} is fewer than one round (round_seeds = {self.round_seeds})")
        return self

    def round_of(self, first_seed: int, round_index: int) -> list[int]:
        """The seeds of round `round_index` (from 0) of an experiment whose first seed is `first_seed`."""
        start = first_seed + round_index * self.round_seeds
        return list(range(start, min(start + self.round_seeds, first_seed + self.max_seeds)))


class Regime(BaseModel):
    """Where a published finding applies; the report checks it before testing the finding."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    min_seeds: Count = Field(5, ge=1, description="complete seeds per arm")
    converged: bool = Field(False, description="both arms' primary validation metric must have flattened: its mean "
                                               "over seeds changed by less than `tolerance` over the last quarter "
                                               "of training")
    tolerance: Number = Field(1.0, gt=0, description="see `converged`, in the metric's units")
    single_factor: bool = Field(True, description="the two variants differ in one spec field or training setting")


EXPECTATIONS = {
    "direction": ("better", "worse"),
    "equivalence": ("equivalent",),
    "failure-rate": ("more failures", "fewer failures"),
    "same-function": ("same function", "different function"),
}


class Finding(BaseModel):
    """A published claim the report checks where its regime applies: confirmed, contradicted,
    inconclusive (with the power this design had for the published effect) or not testable here."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    kind: Literal["direction", "equivalence", "failure-rate", "same-function"] = Field(
        description="direction: variant better/worse on a metric; equivalence: no difference beyond the task's "
                    "margin; failure-rate: more/fewer stalled or diverged runs; same-function: answered by the "
                    "equivalence check, not by training")
    variant: str = Field(description="variant label compared with the baseline (or with `against`)")
    against: str | None = Field(None, description="variant label it is compared with instead of the baseline, "
                                                  "for claims about a pair (e.g. post-norm vs pre-norm, both without "
                                                  "warmup)")
    task: str | None = Field(None, description="task label (default: every task)")
    metric: str | None = Field(None, description="results column (default: the task's primary metric)")
    expect: str = Field(description="direction: better | worse; equivalence: equivalent; failure-rate: more "
                                    "failures | fewer failures; same-function: same function | different function")
    claim: str = Field(description="the finding in plain words")
    source: str = Field(description="citation, e.g. 'Xiong et al. 2020, On Layer Normalization in the Transformer'")
    published: str = Field("", description="the published effect size as the paper gives it, with where "
                                           "(e.g. 'Table 3 row (A): 25.7 vs 25.8 BLEU')")
    effect: Number | None = Field(None, description="the published effect in this metric's units, signed as the "
                                                   "claim expects; the report gives the power this design had for it")
    regime: Regime = Field(default_factory=Regime)

    @model_validator(mode="after")
    def _expectation(self) -> "Finding":
        allowed = EXPECTATIONS[self.kind]
        if self.expect not in allowed:
            raise ValueError(f"expect: {self.expect!r} is not an expectation of a {self.kind} finding; "
                             f"allowed: {', '.join(allowed)}")
        return self


class Transfer(BaseModel):
    """The same variants on two tasks (two budgets, directions or corpora): does each variant's effect on
    the first task hold on the second? The report tests the interaction Δ(second) − Δ(first) per variant."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    tasks: tuple[str, str] = Field(description="two task labels: the effect is measured on the first, then on the "
                                               "second, e.g. [\"multi30k-de-en\", \"multi30k-de-en-8000\"]")
    question: str = Field("", description="what the pair asks, in plain words (shown above its table)")
    experiment: str | None = Field(None, description="another experiment file (relative to this one) whose task is "
                                   "the first of `tasks`, read from that experiment's own records: a transfer across "
                                   "experiments, e.g. the same factors at another model size; variants are matched "
                                   "by label")
