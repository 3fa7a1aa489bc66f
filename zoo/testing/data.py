"""Contract tests for tasks and metrics: what every registered one must do, runnable on a user's own.

zoo's own suite parametrises these over the task and metric registries (tests/test_metrics.py,
tests/test_tasks.py), and `zoo check task.NAME`, `zoo check metric.NAME` or `zoo check PLUGIN` runs
them on a user's entries, so a plugin's task or metric is held to the standard of the built-ins. Each
contract raises AssertionError saying what is wrong.

Metrics (scored on a fixed set of references and corrupted outputs):
    declared        label and unit are words; bounds, stall floor and effect are finite, the floor in bounds
    best-on-refs    the references themselves score the best bound (100 for BLEU, 0 for an error rate)
    bounded         corrupted outputs score a finite number within the bounds, the same number twice
    totals          (sentence-level metrics) one JSON-able entry per sentence, whose sums give the corpus
                    score through from_totals, as the report's bootstrap computes it
    vectorised      (vectorised metrics) from_totals on stacked totals equals it row by row

Tasks (loaded small: 6 symbols, lengths 2..5, 60 training pairs):
    metrics         names registered metrics, at least one (the first is the default primary metric)
    sequences       every split's pairs are source + [eos] and [bos] + target + [eos], ids inside the vocab,
                    aligned with sources() and references()
    text-view       decoding a target's ids gives its reference text; encoding a source gives its ids
    seeded          the same seed draws the same data, and loading leaves the global RNG alone
    held-out        no test or valid source is also a training source
    floors          trivial outputs line up with the references and score within every metric's bounds
    save-restore    a task saved into a run directory loads back with the same examples and references

A family task (`CORPUS:SRC-TGT`) needs a corpus to load, so only its metrics are checked here; zoo's
test suite runs the rest on the corpora it reads.
"""

from __future__ import annotations

import json
import math
import random
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from zoo import metrics
from zoo.data import TASKS, load_saved, load_task
from zoo.data.task import SPLITS, Task
from zoo.testing import failure

SMALL = {"symbols": 6, "min_len": 2, "max_len": 5, "train_size": 60, "valid_size": 12, "test_size": 12}
TOLERANCE = 1e-6

_WORDS = "the a cat dog sat on mat under red blue big small runs sleeps near house".split()


def _references() -> list[str]:
    rng = random.Random("zoo-contract-references")
    return [" ".join(rng.choices(_WORDS, k=rng.randint(5, 11))) for _ in range(16)]


def _corrupted(references: list[str]) -> list[str]:
    """Each reference with a different damage: a word dropped, replaced, moved; one left intact; one empty."""
    rng = random.Random("zoo-contract-outputs")
    outputs = []
    for i, ref in enumerate(references):
        words = ref.split()
        damage = i % 5
        if damage == 0:
            del words[rng.randrange(len(words))]
        elif damage == 1:
            words[rng.randrange(len(words))] = rng.choice(_WORDS)
        elif damage == 2:
            words.insert(rng.randrange(len(words)), words.pop())
        elif damage == 4:
            words = [] if i % 2 else words[:2]
        outputs.append(" ".join(words))
    return outputs


# -- metrics ------------------------------------------------------------------------------------------
def declared(metric: metrics.Metric) -> None:
    for field in ("label", "unit"):
        value = getattr(metric, field, None)
        assert isinstance(value, str) and value.strip(), f"{field} must be a non-empty string, got {value!r}"
    low, high = metric.bounds
    assert math.isfinite(low) and math.isfinite(high) and low < high, \
        f"bounds must be finite with low < high, got {(low, high)}"
    for field in ("stall_floor", "effect"):
        value = getattr(metric, field, None)
        assert isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value), \
            f"{field} must be a finite number, got {value!r}"
    assert low <= metric.stall_floor <= high, f"stall_floor {metric.stall_floor} is outside the bounds {(low, high)}"
    assert metric.effect > 0, f"effect must be positive, got {metric.effect}"


def best_on_references(metric: metrics.Metric) -> None:
    references = _references()
    best = metric.bounds[1] if metric.higher_is_better else metric.bounds[0]
    score = float(metric.score(references, references))
    assert abs(score - best) <= TOLERANCE, f"the references score {score}, not the best bound {best}"


def bounded(metric: metrics.Metric) -> None:
    references = _references()
    outputs = _corrupted(references)
    score = float(metric.score(outputs, references))
    low, high = metric.bounds
    assert math.isfinite(score) and low - TOLERANCE <= score <= high + TOLERANCE, \
        f"corrupted outputs score {score}, outside the bounds {(low, high)}"
    assert float(metric.score(outputs, references)) == score, "the same outputs score differently twice"


def totals(metric: metrics.Metric) -> None:
    references = _references()
    outputs = _corrupted(references)
    rows = json.loads(json.dumps(metric.sentence_statistics(outputs, references)))  # as a record stores them
    assert len(rows) == len(references), f"{len(rows)} sentence statistics for {len(references)} sentences"
    summed = float(np.asarray(metric.from_totals(metric.as_array(rows).sum(axis=0))))
    score = float(metric.score(outputs, references))
    assert abs(summed - score) <= TOLERANCE, f"from_totals of the summed statistics gives {summed}, score {score}"


def vectorised(metric: metrics.Metric) -> None:
    references = _references()
    array = metric.as_array(metric.sentence_statistics(_corrupted(references), references))  # (N, k)
    halves = np.stack([array[::2].sum(axis=0), array[1::2].sum(axis=0)])  # (2, k)
    together = np.asarray(metric.from_totals(halves), dtype=float)
    apart = np.array([float(metric.from_totals(row)) for row in halves])
    assert together.shape == (2,) and np.allclose(together, apart), \
        f"from_totals on (2, k) totals gives {together}, row by row {apart}"


# -- tasks --------------------------------------------------------------------------------------------
def _load(name: str, **overrides) -> Task:
    return load_task(name, **{**SMALL, **overrides})


def task_metrics(name: str) -> None:
    task = TASKS.get(name)
    assert task.metrics, "a task names at least one metric (the first is its default primary metric)"
    unknown = [m for m in task.metrics if m not in metrics.METRICS]
    assert not unknown, f"metrics {unknown} are not registered (registered: {', '.join(metrics.names())})"


def sequences(name: str) -> None:
    task = _load(name)
    s = task.specials
    for split in SPLITS:
        pairs, sources, references = task.examples(split), task.sources(split), task.references(split)
        assert pairs, f"{split}: no examples"
        assert len(pairs) == len(sources) == len(references), \
            f"{split}: {len(pairs)} pairs, {len(sources)} sources, {len(references)} references"
        for src, tgt in pairs:
            assert src[-1] == s.eos and tgt[0] == s.bos and tgt[-1] == s.eos, \
                f"{split}: a pair is not (tokens + [eos], [bos] + tokens + [eos]): {src}, {tgt}"
            assert max(src) < task.src_vocab and max(tgt) < task.tgt_vocab and min(src + tgt) >= 0, \
                f"{split}: an id outside the vocabulary ({task.src_vocab}, {task.tgt_vocab}): {src}, {tgt}"
            assert s.pad not in src and s.pad not in tgt, f"{split}: a pair holds the pad id {s.pad}"


def text_view(name: str) -> None:
    task = _load(name)
    for (src, tgt), source, reference in zip(task.examples("test"), task.sources("test"), task.references("test")):
        assert task.decode_target(tgt) == reference, f"decoding {tgt} gives {task.decode_target(tgt)!r}, " \
                                                     f"not its reference {reference!r}"
        assert task.encode_source(source) == src, f"encoding {source!r} gives {task.encode_source(source)}, not {src}"


def seeded(name: str) -> None:
    state = random.getstate()
    first, again = _load(name, seed=3), _load(name, seed=3)
    assert first.examples("test") == again.examples("test") and first.examples("train") == again.examples("train"), \
        "the same seed draws different data"
    assert random.getstate() == state, "loading the task moved Python's global random state"


def held_out(name: str) -> None:
    task = _load(name)
    train = {tuple(src) for src, _ in task.examples("train")}
    for split in ("valid", "test"):
        seen = sum(tuple(src) in train for src, _ in task.examples(split))
        assert not seen, f"{seen} {split} sources are also training sources"


def floors(name: str) -> None:
    task = _load(name)
    references = task.references("test")
    for system, outputs in task.trivial_outputs("test").items():
        assert len(outputs) == len(references), f"floor {system!r}: {len(outputs)} outputs, {len(references)} refs"
        for metric_name in task.metrics:
            metric = metrics.get(metric_name)
            score = float(metric.score(outputs, references))
            low, high = metric.bounds
            assert low - TOLERANCE <= score <= high + TOLERANCE, f"floor {system!r} scores {metric_name} {score}"


def save_restore(name: str) -> None:
    task = _load(name)
    with tempfile.TemporaryDirectory() as folder:
        task.save(Path(folder))
        restored = load_saved(Path(folder))
    assert type(restored) is type(task), f"restored as {type(restored).__name__}, saved as {type(task).__name__}"
    for split in SPLITS:
        assert restored.examples(split) == task.examples(split), f"{split}: examples differ after a restore"
        assert restored.references(split) == task.references(split), f"{split}: references differ after a restore"


@dataclass(frozen=True)
class Contract:
    name: str
    check: Callable[[object], None]
    applies: Callable[[object], bool]


def _loadable(name: str) -> bool:
    """A task that loads from its name alone (not a family that needs a corpus)."""
    return TASKS.get(name).family is None


METRIC_CONTRACTS = (
    Contract("declared", declared, lambda m: True),
    Contract("best-on-refs", best_on_references, lambda m: True),
    Contract("bounded", bounded, lambda m: True),
    Contract("totals", totals, lambda m: m.sentence_level),
    Contract("vectorised", vectorised, lambda m: m.sentence_level and m.vectorised),
)
TASK_CONTRACTS = (
    Contract("metrics", task_metrics, lambda n: True),
    Contract("sequences", sequences, _loadable),
    Contract("text-view", text_view, _loadable),
    Contract("seeded", seeded, _loadable),
    Contract("held-out", held_out, _loadable),
    Contract("floors", floors, _loadable),
    Contract("save-restore", save_restore, _loadable),
)


def metric_contracts(name: str) -> list[Contract]:
    metric = metrics.get(name)
    return [c for c in METRIC_CONTRACTS if c.applies(metric)]


def task_contracts(name: str) -> list[Contract]:
    return [c for c in TASK_CONTRACTS if c.applies(name)]


def _run(contracts: list[Contract], subject: object) -> list[tuple[str, str]]:
    return [(c.name, reason) for c in contracts if (reason := failure(lambda c=c: c.check(subject)))]


def check_metric(name: str) -> list[tuple[str, str]]:
    """Every contract that applies to metric `name`: [(contract, what failed)], empty when it passes all."""
    return _run(metric_contracts(name), metrics.get(name))


def check_task(name: str) -> list[tuple[str, str]]:
    """Every contract that applies to task `name`: [(contract, what failed)], empty when it passes all."""
    return _run(task_contracts(name), name)
