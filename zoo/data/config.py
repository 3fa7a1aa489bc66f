"""TaskConfig: everything that defines a task's data, validated, with errors that name the field.

A task name is either one of the synthetic tasks (generated from the seed, no files) or
`CORPUS:SRC-TGT`, a folder of parallel text read by language codes. The name is checked here, so a
typo fails before any file is opened or any tokenizer is trained.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from zoo.config_io import Count, describe_error
from zoo.errors import DataError

SYNTHETIC = ("copy", "reverse", "sort", "long-copy")
# Corpus folder names may hold hyphens (wmt-ende-10k); language codes may not, the hyphen separates them.
_TEXT_NAME = re.compile(r"^(?P<corpus>[^:/\\\s]+):(?P<src>[A-Za-z0-9_]+)-(?P<tgt>[A-Za-z0-9_]+)$")


class TaskName(NamedTuple):
    """A parsed task name: `corpus`, `src` and `tgt` are empty for a synthetic task."""

    kind: Literal["synthetic", "text"]
    corpus: str = ""
    src: str = ""
    tgt: str = ""


def parse_name(name: str) -> TaskName:
    """'copy' -> synthetic; 'multi30k:de-en' -> text (corpus multi30k, de -> en)."""
    if name in SYNTHETIC:
        return TaskName("synthetic")
    match = _TEXT_NAME.match(name)
    if match:
        return TaskName("text", match["corpus"], match["src"], match["tgt"])
    close = difflib.get_close_matches(name, SYNTHETIC, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ValueError(
        f"name: {name!r} is not a task{hint} (allowed: {', '.join(SYNTHETIC)}, "
        "or CORPUS:SRC-TGT such as 'multi30k:de-en' or 'wmt-ende-10k:en-de')"
    )


class TaskConfig(BaseModel):
    """The data of one task. Synthetic tasks read the `synthetic` fields, text tasks the `text` ones.

    Constructing one with an invalid value raises DataError (not pydantic's ValidationError), so
    callers see one message naming the field, the value and what is allowed.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

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

    @field_validator("name")
    @classmethod
    def _known_name(cls, name: str) -> str:
        parse_name(name)
        return name

    @model_validator(mode="after")
    def _lengths(self) -> TaskConfig:
        if self.max_len < self.min_len:
            raise ValueError(f"max_len: {self.max_len} is shorter than min_len = {self.min_len}")
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
        """Shortest and longest synthetic sequence: long-copy doubles min_len and max_len."""
        scale = 2 if self.name == "long-copy" else 1
        return scale * self.min_len, scale * self.max_len

    @property
    def parsed(self) -> TaskName:
        return parse_name(self.name)

    @property
    def kind(self) -> Literal["synthetic", "text"]:
        return self.parsed.kind


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
