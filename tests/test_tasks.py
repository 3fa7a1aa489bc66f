"""The task registry: every registered task keeps the task contracts, a family claims its names, and a plugin's task
is found by name like zoo's own."""

from __future__ import annotations

import pytest

from zoo.data import TASKS, SyntheticTask, load_task, register_task, task_class
from zoo.data.text import TextTask
from zoo.errors import DataError, RegistryError
from zoo.testing.data import check_task, task_contracts


@pytest.mark.parametrize("name", TASKS.names())
def test_every_task_keeps_its_contracts(name):
    assert check_task(name) == []


def test_a_family_is_found_by_its_names_and_checked_without_a_corpus():
    assert task_class("multi30k:de-en") is TextTask and task_class("wmt-ende-10k:en-de") is TextTask
    assert [c.name for c in task_contracts("parallel-text")] == ["metrics"]


@pytest.fixture
def registered():
    names = []
    yield names
    for name in names:
        TASKS.unregister(name)


def test_a_registered_task_loads_by_name(registered):
    @register_task("swap-ends-check")
    class SwapEnds(SyntheticTask):
        metrics = ("exact_match",)

        def target(self, source):
            return [source[-1], *source[1:-1], source[0]] if len(source) > 1 else list(source)

    registered.append("swap-ends-check")
    task = load_task("swap-ends-check", symbols=6, min_len=2, max_len=4, train_size=20, valid_size=5, test_size=5)
    assert isinstance(task, SwapEnds) and task.config.kind == "synthetic"
    assert check_task("swap-ends-check") == []


def test_a_task_with_a_target_outside_the_vocabulary_fails_the_contract(registered):
    @register_task("overflow-task-check")
    class Overflow(SyntheticTask):
        def target(self, source):
            return [self.tgt_vocab]

    registered.append("overflow-task-check")
    assert "sequences" in dict(check_task("overflow-task-check"))


def test_a_task_naming_an_unregistered_metric_fails_the_contract(registered):
    @register_task("unscored-check")
    class Unscored(SyntheticTask):
        metrics = ("no-such-metric",)

        def target(self, source):
            return list(source)

    registered.append("unscored-check")
    assert "not registered" in dict(check_task("unscored-check"))["metrics"]


def test_the_registry_refuses_a_taken_name_and_an_unknown_one():
    with pytest.raises(RegistryError, match="task 'copy' is already registered"):
        register_task("copy")(SyntheticTask)
    with pytest.raises(DataError, match=r"'copt' is not a task; did you mean 'copy'\? \(allowed: copy, reverse"):
        load_task("copt")


def test_zoo_list_shows_tasks_with_their_metrics(capsys):
    from zoo.cli import main

    assert main(["list", "task.*"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "reverse" in out and "token_accuracy" in out and "parallel-text" in out and "chrf" in out
