"""Fitting a model spec to a task: the task's tokenizer fixes the vocabulary sizes.

Used by `zoo train`, by experiment validation (before anything trains) and by the runner, so the
rule lives in one place.
"""

from __future__ import annotations

from zoo.data import Task, TaskConfig
from zoo.errors import SpecError
from zoo.spec import ModelSpec


def check_fits(spec: ModelSpec, task: TaskConfig) -> None:
    """Refuse, before any data is read, a spec whose tied embeddings need a joint tokenizer it will not get."""
    if spec.embedding.sharing != "none" and task.kind == "text" and not task.joint:
        raise SpecError(f'embedding.sharing: "{spec.embedding.sharing}" ties source and target tables, which needs '
                        f"a joint tokenizer; task {task.name!r} has joint = false (set joint = true)")


def fit_to_task(spec: ModelSpec, task: Task) -> ModelSpec:
    """`spec` with src_vocab / tgt_vocab set to the task's vocabulary sizes."""
    check_fits(spec, task.config)
    return spec.with_overrides({"src_vocab": task.src_vocab, "tgt_vocab": task.tgt_vocab})
