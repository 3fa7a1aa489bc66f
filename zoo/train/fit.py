"""Fitting a model spec to a task: the task's tokenizer fixes the vocabulary sizes, and the spec's
positional table bounds the sentence lengths every split may hold.

Used by `zoo train`, by experiment validation (before anything trains) and by the runner, so the
rule lives in one place.
"""

from __future__ import annotations

from zoo.data import DataError, Task, TaskConfig
from zoo.errors import SpecError
from zoo.model.spec import ModelSpec


def max_positions(spec: ModelSpec) -> int | None:
    """Rows of the spec's positional table (its max_len); None for a positional kind without a table."""
    return getattr(spec.positional, "max_len", None)


def check_fits(spec: ModelSpec, task: TaskConfig) -> None:
    """Refuse, from the configs alone, what cannot work: tied embeddings without a joint tokenizer, or
    synthetic sequences longer than the positional table (zoo.data.check_files looks for the data)."""
    if spec.embedding.sharing != "none" and task.kind == "text" and not task.joint:
        raise SpecError(f'embedding.sharing: "{spec.embedding.sharing}" ties source and target tables, which needs '
                        f"a joint tokenizer; task {task.name!r} has joint = false (set joint = true)")
    positions = max_positions(spec)
    if task.kind == "synthetic" and positions is not None and task.sequence_lengths()[1] + 1 > positions:
        longest = task.sequence_lengths()[1]
        raise DataError(f"task {task.name!r}: max_len: sequences of up to {longest} tokens need {longest + 1} "
                        f"positions (with eos or bos), more than positional.max_len = {positions}; lower max_len "
                        "or raise positional.max_len")


def fit_to_task(spec: ModelSpec, task: Task) -> ModelSpec:
    """`spec` with src_vocab / tgt_vocab set to the task's vocabulary sizes; every split of `task` is
    fitted to the spec's positional table (Task.limit_lengths)."""
    check_fits(spec, task.config)
    task.limit_lengths(max_positions(spec))
    return spec.with_overrides({"src_vocab": task.src_vocab, "tgt_vocab": task.tgt_vocab})
