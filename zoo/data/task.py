"""Task: one translation task's splits as token ids, plus the text views a metric needs.

A Task turns a TaskConfig into (src ids, tgt ids) pairs and back into text. Sequences follow one
convention everywhere, so training and decoding code never look at the task kind:

    source: tokens + [eos]            target: [bos] + tokens + [eos]

Two kinds implement it: SyntheticTask (zoo/data/synthetic.py, generated from the seed, scored by
exact match) and TextTask (zoo/data/text.py, parallel text through trained tokenizers, scored by
BLEU and chrF). Tasks are registered by name in zoo/data/tasks.py's registry, each next to its code,
as a plugin registers its own. `Task.save` writes what a run directory needs to decode again without
the cache (task.json + tokenizer files); `load_saved` (zoo/data/config.py) reads it back without retraining.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

from zoo.atomic import write_text_atomic
from zoo.errors import DataError

SPLITS = ("train", "valid", "test")
DEFAULT_TEST_SETS = ("test",)  # the test split is the corpus's `test` files, unless a task names more sets
TASK_FILE = "task.json"
FORMAT = 1  # bump when task.json changes incompatibly


@dataclass(frozen=True)
class Specials:
    """Special token ids, shared by source and target.

    pad is the model spec's pad_id; unk, bos and eos take the lowest other ids in that order
    (pad 0 -> unk 1, bos 2, eos 3; pad 3 -> unk 0, bos 1, eos 2), so pad_id = 0 gives the
    [PAD] [UNK] [BOS] [EOS] order most writeups use.
    """

    pad: int
    unk: int
    bos: int
    eos: int

    @classmethod
    def for_pad(cls, pad_id: int) -> Specials:
        if isinstance(pad_id, bool) or not isinstance(pad_id, int) or pad_id < 0:
            raise DataError(f"pad_id: expected a non-negative integer (the model spec's pad_id), got {pad_id!r}")
        free = (i for i in itertools.count() if i != pad_id)
        return cls(pad=pad_id, unk=next(free), bos=next(free), eos=next(free))

    @property
    def span(self) -> int:
        """Ids below this are reserved for specials (and, when pad_id > 3, unused fillers)."""
        return max(self.pad, self.unk, self.bos, self.eos) + 1


class TaskName(NamedTuple):
    """A parsed task name: `corpus`, `src` and `tgt` are empty but for a parallel-text task."""

    kind: str  # the task class's family kind: 'synthetic', 'text', or a plugin's
    corpus: str = ""
    src: str = ""
    tgt: str = ""


class Task:
    """A task's splits as id pairs and text. Build one with `load_task`; see the module docstring.

    `config` is the TaskConfig (zoo/data/config.py) the task is made from. It is named in words only here:
    TaskConfig checks a task name against the registry of Task classes, so this module, which every task
    class and that registry import, must not import it back (tests/test_imports.py counts annotations too).
    """

    registry_name: ClassVar[str]  # set by zoo.data.tasks.register_task
    kind: ClassVar[str]  # the family: 'synthetic' (generated, TaskConfig's synthetic fields) or 'text' (a corpus)
    metrics: ClassVar[tuple[str, ...]]  # names in zoo.metrics it is scored by; the first is the default primary

    family: ClassVar[str | None] = None  # the task names it answers to instead of its registered one, in words

    @classmethod
    def claims(cls, name: str) -> bool:
        """Whether `name` is one of the family's task names (only asked of a class with a `family`)."""
        return False

    @classmethod
    def parse_name(cls, name: str) -> TaskName:
        """What the name says beyond the class (a parallel-text task: the corpus and languages)."""
        return TaskName(cls.kind)

    def __init__(self, config, specials: Specials, src_vocab: int, tgt_vocab: int):
        self.config = config
        self.specials = specials
        self.src_vocab = src_vocab  # sizes including the special ids
        self.tgt_vocab = tgt_vocab
        self.positions: int | None = None  # the model's positional table length, once limit_lengths is called
        self.shortened: dict[str, int] = {}  # per split: sentences truncated or skipped (config.long_sentences)
        self.dropped: dict[str, int] = {}  # per split: pairs over the task's own length limit (max_tokens_per_sentence)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.config.name!r}, src_vocab={self.src_vocab}, "
                f"tgt_vocab={self.tgt_vocab}, pad={self.specials.pad})")

    # -- the interface each kind implements ------------------------------------------------------
    def examples(self, split: str) -> list[tuple[list[int], list[int]]]:
        """(tokens + [eos], [bos] + tokens + [eos]) pairs, aligned with sources() and references()."""
        raise NotImplementedError

    def sources(self, split: str) -> list[str]:
        """Raw source text of `split`."""
        raise NotImplementedError

    def references(self, split: str) -> list[str]:
        """Raw target text of `split`: what decoded output is scored against."""
        raise NotImplementedError

    def encode_source(self, text: str) -> list[int]:
        """Tokens + [eos] for one source sentence (the same ids examples() gives)."""
        raise NotImplementedError

    def test_sets(self) -> list[tuple[str, int]]:
        """(name, sentences) of each set the test split is made of, in order: examples("test") holds the first
        set's sentences, then the next set's. One set, "test", unless the task reads several."""
        return [(DEFAULT_TEST_SETS[0], len(self.examples("test")))]

    def decode_target(self, ids: list[int]) -> str:
        """Text of a decoded target, comparable to references()."""
        raise NotImplementedError

    def trivial_outputs(self, split: str) -> dict[str, list[str]]:
        """What systems that learn nothing would output on `split`, by name, aligned with references(): the
        floor a trained model has to clear (copying the source, for translation). Scored like a model's outputs."""
        raise NotImplementedError

    @classmethod
    def _create(cls, config, specials: Specials, cache_dir: Path | None) -> Task:
        raise NotImplementedError

    def _save_files(self, folder: Path) -> dict[str, Any]:
        """Write kind-specific files into `folder`; return what task.json must record about them."""
        return {}

    @classmethod
    def _restore(cls, config, specials: Specials, folder: Path, state: dict[str, Any]) -> Task:
        raise NotImplementedError

    # -- shared helpers --------------------------------------------------------------------------
    @staticmethod
    def _check_split(split: str) -> str:
        if split not in SPLITS:
            raise DataError(f"split: {split!r} is not a split (allowed: {', '.join(SPLITS)})")
        return split

    def _target_tokens(self, ids: list[int]) -> list[int]:
        """Everything before the first eos, without bos and pad: the tokens a hypothesis consists of."""
        ids = [int(i) for i in ids]
        if self.specials.eos in ids:
            ids = ids[: ids.index(self.specials.eos)]
        return [i for i in ids if i not in (self.specials.bos, self.specials.pad)]

    def limit_lengths(self, positions: int | None) -> None:
        """Fit every split to a model whose positional table has `positions` rows, now, so that a sentence
        too long for it fails (or is truncated or skipped, per config.long_sentences) before training, not
        at the first evaluation. None: the model has no such limit."""
        self.positions = positions
        for split in SPLITS:
            self.examples(split)

    # -- persistence -----------------------------------------------------------------------------
    def save(self, folder: Path) -> None:
        """Write task.json (config, pad id, sizes) and the kind's own files (tokenizers) into `folder`."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        state = self._save_files(folder)
        record = {
            "format": FORMAT,
            "kind": self.kind,
            "config": self.config.model_dump(mode="json"),
            "pad_id": self.specials.pad,
            "src_vocab": self.src_vocab,
            "tgt_vocab": self.tgt_vocab,
            "positions": self.positions,
            "long_sentences": {"policy": self.config.long_sentences, "shortened": self.shortened},
            "dropped": self.dropped,
            **state,
        }
        write_text_atomic(folder / TASK_FILE, json.dumps(record, indent=2, ensure_ascii=False) + "\n")

