"""TaskConfig: everything that defines a task's data, validated, with errors that name the field.

A task name is a registered task (zoo/data/tasks.py: the synthetic tasks, generated from the seed with
no files, and any a plugin registers) or `CORPUS:SRC-TGT`, a folder of parallel text read by language
codes. The name is checked here, so a typo fails before any file is opened or any tokenizer is trained.
`load_task` makes a Task from a config, `load_saved` restores one a run directory saved.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from zoo.config_io import Count, describe_error
from zoo.data.task import DEFAULT_TEST_SETS, FORMAT, TASK_FILE, Specials, Task, TaskName
from zoo.data.tasks import task_class
from zoo.errors import DataError

TEST_SET_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


class TaskConfig(BaseModel):
    """The data of one task. Synthetic tasks read the `synthetic` fields, text tasks the `text` ones.

    Constructing one with an invalid value raises DataError (not pydantic's ValidationError), so
    callers see one message naming the field, the value and what is allowed.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    SYNTHETIC: ClassVar[tuple[str, ...]] = ("symbols", "min_len", "max_len", "train_size", "valid_size", "test_size",
                                            "seed")
    TEXT: ClassVar[tuple[str, ...]] = ("data_dir", "tokenizer", "vocab_size", "joint", "lowercase", "detokenize",
                                       "max_tokens_per_sentence", "test_sets", "long_sentences")

    name: str
    data_dir: Path | None = Field(None, description="folder holding CORPUS/ folders; "
                                                    "default $ZOO_DATA_DIR, else ../shared/data")
    # synthetic
    symbols: Count = Field(20, ge=1, description="alphabet size of synthetic tasks")
    min_len: Count = Field(5, ge=1)
    max_len: Count = Field(20, ge=1)
    train_size: Count = Field(20000, ge=1)
    valid_size: Count = Field(500, ge=1)
    test_size: Count = Field(500, ge=1)
    seed: Count = Field(0)
    # text
    tokenizer: Literal["bpe", "wordlevel"] = "bpe"
    vocab_size: Count = Field(8000, gt=4, description="per side if not joint, including special tokens")
    joint: bool = Field(True, description="one tokenizer for both languages (needed when src/tgt embeddings are tied)")
    lowercase: bool = Field(False, description="NFD + strip accents + lowercase (writeup 003's word-level setting)")
    detokenize: Literal["none", "moses"] = Field(
        "none", description="scoring only: Moses-detokenize references and outputs (unescaping &apos; and the like) "
                            "before sacreBLEU, for Moses-tokenized corpora such as wmt-ende-10k, so BLEU and chrF are "
                            "on plain text as published sacreBLEU scores are; training still sees the corpus as is")
    max_tokens_per_sentence: Count = Field(256, ge=1, description="longer training pairs are dropped")
    test_sets: tuple[str, ...] = Field(
        DEFAULT_TEST_SETS, min_length=1,
        description="the files the test split is made of, in this order: one name per set, each a SET.LANG pair of "
                    "the corpus folder (multi30k: test, test_2017_flickr, test_2018_flickr). The test metrics are one "
                    "corpus score over their union; each set's own score is kept in the record beside it")
    long_sentences: Literal["error", "truncate", "skip"] = Field(
        "error", description="a sentence of any split with more tokens than the model's positional table covers "
        "(positional.max_len - 1: one position goes to eos or bos): 'error' names its file and line; 'truncate' "
        "keeps its first tokens (the reference text is still scored whole); 'skip' drops the pair from that split. "
        "The task records how many sentences of each split were truncated or skipped")

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as err:
            raise DataError(format_errors(err, data)) from None

    @field_validator("test_sets")
    @classmethod
    def _set_names(cls, sets: tuple[str, ...]) -> tuple[str, ...]:
        for name in sets:
            if not TEST_SET_NAME.match(name) or name in ("train", "valid"):
                raise ValueError(f"test_sets: {name!r} is not a test set name (a file stem of the corpus folder, "
                                 "letters, digits, '_' and '-', not train or valid; e.g. test, test_2017_flickr)")
        if len(set(sets)) < len(sets):
            raise ValueError(f"test_sets: a test set is named twice ({', '.join(sets)})")
        return sets

    @field_validator("name")
    @classmethod
    def _known_name(cls, name: str) -> str:
        task_class(name)  # ValueError naming the valid names
        return name

    @model_validator(mode="after")
    def _lengths(self) -> TaskConfig:
        if self.max_len < self.min_len:
            raise ValueError(f"max_len: {self.max_len} is shorter than min_len = {self.min_len}")
        if self.kind != "text" and self.test_sets != DEFAULT_TEST_SETS:
            raise ValueError(f"test_sets: only a parallel-text task reads test sets from files; {self.name!r} "
                             f"generates its test split (allowed: {list(DEFAULT_TEST_SETS)})")
        if self.kind == "synthetic":
            low, high = self.sequence_lengths()
            needed = self.valid_size + self.test_size
            if _distinct_sequences(self.symbols, low, high, above=needed) <= needed:
                raise ValueError(
                    f"symbols: {self.symbols} with lengths {low}..{high} gives too few distinct sequences for held-out "
                    f"splits that never meet training (needs more than valid_size + test_size = {needed}); "
                    "raise symbols or max_len, or lower valid_size/test_size")
        return self

    def sequence_lengths(self) -> tuple[int, int]:
        """Shortest and longest synthetic sequence: the task's length_scale (long-copy: 2) times min_len, max_len."""
        scale = getattr(self.task_class, "length_scale", 1)
        return scale * self.min_len, scale * self.max_len

    @property
    def task_class(self) -> type[Task]:
        return task_class(self.name)

    @property
    def parsed(self) -> TaskName:
        """'copy' -> TaskName('synthetic'); 'multi30k:de-en' -> TaskName('text', 'multi30k', 'de', 'en')."""
        return self.task_class.parse_name(self.name)

    @property
    def kind(self) -> str:
        return self.task_class.kind

    def used(self) -> dict[str, Any]:
        """The settings this task's kind reads, as JSON values (the others keep defaults nothing reads: a copy
        task's vocab_size): what a tracker logs as the task's parameters."""
        fields = self.SYNTHETIC if self.kind == "synthetic" else self.TEXT
        return {"name": self.name, **{k: v for k, v in self.model_dump(mode="json").items() if k in fields}}


def _distinct_sequences(symbols: int, low: int, high: int, above: int) -> int:
    """How many sequences of lengths low..high over `symbols` symbols exist, counted until it exceeds `above`."""
    if symbols == 1:
        return high - low + 1
    total = 0
    for length in range(low, high + 1):
        total += symbols**length
        if total > above:
            break
    return total


def format_errors(err: ValidationError, data: dict[str, Any]) -> str:
    """One line: 'task NAME: field: what is wrong (got value); ...'."""
    where = f"task {data.get('name')!r}: " if isinstance(data.get("name"), str) else "task: "
    return where + "; ".join(describe_error(e, TaskConfig) for e in err.errors())


def make_config(config: TaskConfig | str | dict[str, Any], overrides: dict[str, Any] | None = None) -> TaskConfig:
    """A TaskConfig from a config, a task name or a dict, with `overrides` applied and re-validated."""
    if isinstance(config, TaskConfig):
        data = config.model_dump()
    elif isinstance(config, str):
        data = {"name": config}
    elif isinstance(config, dict):
        data = dict(config)
    else:
        raise DataError(f"task: expected a task name or a TaskConfig, got {type(config).__name__}")
    return TaskConfig(**{**data, **(overrides or {})})


def load_task(config: TaskConfig | str, *, pad_id: int = 0, cache_dir: Path | None = None, **overrides: Any) -> Task:
    """A Task from a config or a task name, with TaskConfig field overrides.

    `pad_id` must be the model spec's pad_id. `cache_dir` holds trained tokenizers (default
    $ZOO_CACHE/tokenizers, else ~/.cache/zoo/tokenizers); synthetic tasks do not use it.

        load_task("copy", symbols=10)                    # exact-match task, vocab 4 + 10
        load_task("multi30k:de-en", vocab_size=8000)     # BLEU task, joint BPE
    """
    config = make_config(config, overrides)
    specials = Specials.for_pad(pad_id)
    return config.task_class._create(config, specials, Path(cache_dir) if cache_dir is not None else None)


def load_saved(folder: Path) -> Task:
    """The task Task.save wrote into `folder`, without retraining; text is read lazily from the data folder."""
    path = Path(folder) / TASK_FILE
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path}: no saved task here (Task.save writes {TASK_FILE})") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DataError(f"{path}: cannot read saved task ({err})") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT or not isinstance(record.get("config"), dict):
        raise DataError(f"{path}: not a task file of format {FORMAT} (format or config missing)")
    config = make_config(record["config"])
    if record.get("kind") != config.kind:
        raise DataError(f"{path}: the saved task is of kind {record.get('kind')!r}, but {config.name!r} is a "
                        f"{config.kind} task here (was its plugin changed or not loaded?)")
    specials = Specials.for_pad(record.get("pad_id", 0))
    task = config.task_class._restore(config, specials, Path(folder), record)
    task.positions = record.get("positions")  # examples() applies the same length policy as in training
    return task
