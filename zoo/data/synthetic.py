"""Synthetic tasks: copy, reverse, sort and long-copy, generated from (seed, split) with no files.

Each is a SyntheticTask with its own target rule (`target`), registered here (zoo/data/tasks.py); a
plugin adds a task the same way, by subclassing SyntheticTask and registering it. They isolate what a
variant can learn from what the data allows: a correct model reaches 100% exact match, so a variant that does
not has a bug or a real weakness. long-copy draws lengths between 2 x min_len and 2 x max_len, so
cross-attention must find its place in long inputs.

Symbols are the first `symbols` ids the specials do not take (4, 5, ... for pad_id 0). The test
split is drawn first, then valid avoiding test, then train avoiding both: a held-out source never
appears in training, and copy, reverse and sort share their sources for the same seed (only the
target rule differs), so their results compare like with like.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from zoo.data.task import Specials, Task
from zoo.data.tasks import register_task
from zoo.errors import DataError

if TYPE_CHECKING:
    from zoo.data.config import TaskConfig


class SyntheticTask(Task):
    """Sequences of symbol ids; text is the ids joined by spaces ('7 12 5'), scored by exact match.

    A subclass gives the target rule (`target`), and may lengthen the sequences (`length_scale`, applied to
    min_len and max_len) or say that its target is its source (`source_is_target`: no identity floor)."""

    kind = "synthetic"
    metrics = ("exact_match", "token_accuracy")
    length_scale: ClassVar[int] = 1
    source_is_target: ClassVar[bool] = False

    def target(self, source: tuple[int, ...]) -> list[int]:
        """The target sequence of a source sequence."""
        raise NotImplementedError

    def __init__(self, config: TaskConfig, specials: Specials):
        taken = {specials.pad, specials.unk, specials.bos, specials.eos}
        self.symbol_ids = [i for i in range(specials.span + config.symbols) if i not in taken][: config.symbols]
        vocab = max(self.symbol_ids[-1], specials.span - 1) + 1
        super().__init__(config, specials, vocab, vocab)
        self._sources: dict[str, list[tuple[int, ...]]] | None = None  # drawn on first use

    @classmethod
    def _create(cls, config: TaskConfig, specials: Specials, cache_dir: Path | None) -> SyntheticTask:
        return cls(config, specials)

    @classmethod
    def _restore(cls, config: TaskConfig, specials: Specials, folder: Path, state: dict[str, Any]) -> SyntheticTask:
        return cls(config, specials)

    # -- generation ------------------------------------------------------------------------------
    def _draw(self, split: str, count: int, exclude: set[tuple[int, ...]]) -> list[tuple[int, ...]]:
        """`count` random sequences not in `exclude`, from a generator seeded by (seed, split) alone."""
        rng = random.Random(f"zoo-synthetic:{self.config.seed}:{split}")  # str seeds hash with sha512: stable
        low, high = self.config.sequence_lengths()
        drawn: list[tuple[int, ...]] = []
        for _ in range(100 * count + 10_000):
            seq = tuple(rng.choices(self.symbol_ids, k=rng.randint(low, high)))
            if seq not in exclude:
                drawn.append(seq)
                if len(drawn) == count:
                    return drawn
        raise DataError(
            f"task {self.config.name!r}: cannot draw {count} {split} sequences that avoid the {len(exclude)} "
            f"held-out ones with symbols = {self.config.symbols} and lengths {low}..{high}; "
            "raise symbols or max_len, or lower valid_size/test_size"
        )

    def _split_sources(self, split: str) -> list[tuple[int, ...]]:
        if self._sources is None:
            test = self._draw("test", self.config.test_size, set())
            valid = self._draw("valid", self.config.valid_size, set(test))
            train = self._draw("train", self.config.train_size, set(test) | set(valid))
            self._sources = {"train": train, "valid": valid, "test": test}
        return self._sources[self._check_split(split)]

    # -- the Task interface ----------------------------------------------------------------------
    def examples(self, split: str) -> list[tuple[list[int], list[int]]]:
        eos, bos = self.specials.eos, self.specials.bos
        return [([*seq, eos], [bos, *self.target(seq), eos]) for seq in self._split_sources(split)]

    def sources(self, split: str) -> list[str]:
        return [_text(seq) for seq in self._split_sources(split)]

    def references(self, split: str) -> list[str]:
        return [_text(self.target(seq)) for seq in self._split_sources(split)]

    def trivial_outputs(self, split: str) -> dict[str, list[str]]:
        """identity: the source itself (left out where the task's target IS the source: copy and long-copy, whose
        answer it is); majority: at each position the target symbol most frequent there in training, as long as
        the source (a system that reads only the input's length)."""
        sources = self._split_sources(split)
        outputs = {} if self.source_is_target else {"identity": [_text(seq) for seq in sources]}
        counts: list[dict[int, int]] = []
        for seq in self._split_sources("train"):
            for position, symbol in enumerate(self.target(seq)):
                if position == len(counts):
                    counts.append({})
                counts[position][symbol] = counts[position].get(symbol, 0) + 1
        majority = [max(sorted(c), key=c.__getitem__) for c in counts]  # ties: the lowest id
        outputs["majority"] = [_text(majority[: len(seq)]) for seq in sources]
        return outputs

    def encode_source(self, text: str) -> list[int]:
        allowed = set(self.symbol_ids)
        try:
            ids = [int(token) for token in text.split()]
        except ValueError:
            ids = [-1]
        if not all(i in allowed for i in ids):
            raise DataError(
                f"task {self.config.name!r}: source {text!r} must be symbol ids separated by spaces "
                f"(symbols: {_describe_ids(self.symbol_ids)})"
            )
        return [*ids, self.specials.eos]

    def decode_target(self, ids: list[int]) -> str:
        return _text(self._target_tokens(ids))


def _describe_ids(ids: list[int]) -> str:
    """'4..23' for a contiguous run, else the list (pad_id > 3 leaves a gap at the pad id)."""
    return f"{ids[0]}..{ids[-1]}" if ids[-1] - ids[0] == len(ids) - 1 else ", ".join(map(str, ids))


def _text(ids) -> str:
    return " ".join(str(i) for i in ids)



@register_task("copy")
class Copy(SyntheticTask):
    """The target is the source."""

    source_is_target = True

    def target(self, source: tuple[int, ...]) -> list[int]:
        return list(source)


@register_task("reverse")
class Reverse(SyntheticTask):
    """The source backwards."""

    def target(self, source: tuple[int, ...]) -> list[int]:
        return list(reversed(source))


@register_task("sort")
class Sort(SyntheticTask):
    """The source's symbols in ascending order (ascending ids)."""

    def target(self, source: tuple[int, ...]) -> list[int]:
        return sorted(source)


@register_task("long-copy")
class LongCopy(Copy):
    """Copy with lengths doubled (2 x min_len .. 2 x max_len): cross-attention must find its place."""

    length_scale = 2
