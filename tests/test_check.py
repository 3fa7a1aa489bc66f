"""`zoo check`: the contracts of components, tasks and metrics on built-in entries and on a user's plugin, one line
per failure."""

from __future__ import annotations

import pytest

from zoo.cli import main
from zoo.registry import registry

LEAKY = """
from zoo import register
from zoo.components.ffn import FeedForward, FFNParams


@register("ffn", "leaky-check", params=FFNParams)
class Leaky(FeedForward):
    \"\"\"Adds the mean over all positions: every position sees the future, so the decoder is not causal.\"\"\"

    def __init__(self, d_model, d_ff, params, dropout):
        super().__init__(d_model, d_ff, params, dropout)
        from torch import nn
        self.w = nn.Linear(d_model, d_model)

    def forward(self, x):
        return self.w(x + x.mean(dim=1, keepdim=True))
"""


def test_built_in_entries_keep_every_contract(capsys):
    assert main(["check", "norm.*"]) == 0
    out = capsys.readouterr().out
    assert "norm.layernorm: passed" in out and "FAILED" not in out


def _check_failing_plugin(path, source: str, capsys) -> tuple[list[str], list[str]]:
    """Write a plugin whose entries break contracts, check it (exit 1); its output lines and the failed ones."""
    path.write_text(source)
    assert main(["check", str(path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    return lines, [line for line in lines if "FAILED" in line]


def test_a_broken_plugin_fails_with_one_line_per_contract(tmp_path, capsys):
    try:
        lines, failed = _check_failing_plugin(tmp_path / "leaky.py", LEAKY, capsys)
        assert failed and all(line.startswith("ffn.leaky-check: ") for line in failed)
        assert any("causal FAILED: positions before" in line for line in failed)
        assert lines[-1] == "0 of 1 entries keep every contract"
    finally:
        registry.unregister("ffn", "leaky-check")


def test_a_target_that_is_neither_a_component_nor_a_plugin_is_one_line(tmp_path, capsys):
    assert main(["check", str(tmp_path / "absent.py")]) == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.parametrize("target", ["nosuchslot.*", "ffn.nosuchname"])
def test_a_pattern_matching_nothing_is_one_line(target, capsys):
    assert main(["check", target]) == 2
    err = capsys.readouterr().err
    assert "matches nothing registered" in err and len(err.strip().splitlines()) == 1


BROKEN_TASK_AND_METRIC = """
from zoo.data import SyntheticTask, register_task
from zoo.metrics import Metric, register_metric


@register_task("overflow-check")
class Overflow(SyntheticTask):
    \"\"\"Targets use an id one past the vocabulary.\"\"\"

    def target(self, source):
        return [self.tgt_vocab for _ in source]


@register_metric("unbounded-check")
class Unbounded(Metric):
    \"\"\"Counts characters: the references do not score best, and scores leave the bounds.\"\"\"

    label, unit, stall_floor, effect = "characters", "characters", 1.0, 1.0

    def score(self, hypotheses, references):
        return float(sum(map(len, hypotheses)))
"""


def test_a_plugin_task_and_metric_are_checked_with_one_line_per_failure(tmp_path, capsys):
    from zoo import metrics
    from zoo.data import TASKS

    try:
        lines, failed = _check_failing_plugin(tmp_path / "broken_data.py", BROKEN_TASK_AND_METRIC, capsys)
        assert any(line.startswith("task.overflow-check: sequences FAILED: train: an id outside") for line in failed)
        assert any(line.startswith("metric.unbounded-check: best-on-refs FAILED") for line in failed)
        assert any(line.startswith("metric.unbounded-check: bounded FAILED") for line in failed)
        assert lines[-1] == "0 of 2 entries keep every contract"
    finally:
        TASKS.unregister("overflow-check")
        metrics.METRICS.unregister("unbounded-check")
        metrics.get.cache_clear()


def test_built_in_tasks_and_metrics_by_pattern(capsys):
    assert main(["check", "metric.exact_match"]) == 0
    assert main(["check", "task.sort"]) == 0
    out = capsys.readouterr().out
    assert "metric.exact_match: passed 5 contracts" in out and "task.sort: passed 7 contracts" in out
