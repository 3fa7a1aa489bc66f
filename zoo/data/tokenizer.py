"""Training Hugging Face tokenizers, and caching them on disk by what determines them.

Two kinds, both with [PAD] [UNK] [BOS] [EOS] at the task's Specials ids:

- bpe: NFKC, then Metaspace pre-tokenization, so spaces become part of the tokens and
  `decoders.Metaspace` restores the text as NFKC left it (no detokenizer heuristics between the model's
  output and BLEU): Multi30k's test references round-trip exactly; a few characters elsewhere do not
  (a non-breaking space becomes a space, `²` becomes `2`), and one never seen in training decodes as
  [UNK]. With lowercase=True it also applies writeup 003's NFD + strip accents + lowercase.
- wordlevel: writeup 003's WordLevel on WhitespaceSplit; NFD + strip accents + lowercase when
  lowercase=True, else NFKC. Decoding joins words with single spaces.

The cache key is a sha256 over the training files' bytes and every setting that changes the
result (kind, vocab size, lowercasing, special ids, tokenizers version), so a changed file or
setting retrains and an unchanged one never does. Files are written atomically.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import tokenizers
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from zoo.atomic import write_atomic
from zoo.data.corpus import TextFile
from zoo.data.task import Specials
from zoo.errors import DataError

if TYPE_CHECKING:
    from zoo.data.config import TaskConfig

CACHE_ENV = "ZOO_CACHE"
KEY_FORMAT = 1  # bump when the tokenizer pipeline below changes, so stale cache entries are not reused


def cache_root() -> Path:
    """The root of zoo's caches (tokenizers here, downloads in zoo/data/datasets.py): $ZOO_CACHE, else
    ~/.cache/zoo."""
    root = os.environ.get(CACHE_ENV)
    return Path(root) if root else Path.home() / ".cache" / "zoo"


def default_cache_dir() -> Path:
    """$ZOO_CACHE/tokenizers if ZOO_CACHE is set, else ~/.cache/zoo/tokenizers."""
    return cache_root() / "tokenizers"


def special_tokens(specials: Specials) -> list[str]:
    """Token strings for ids 0 .. span-1: the four specials, and unused fillers if pad_id > 3."""
    names = {specials.pad: "[PAD]", specials.unk: "[UNK]", specials.bos: "[BOS]", specials.eos: "[EOS]"}
    return [names.get(i, f"[RESERVED{i}]") for i in range(specials.span)]


def _normalizer(kind: str, lowercase: bool) -> normalizers.Normalizer:
    lower = [normalizers.NFD(), normalizers.StripAccents(), normalizers.Lowercase()]
    if kind == "wordlevel":
        return normalizers.Sequence(lower) if lowercase else normalizers.NFKC()
    return normalizers.Sequence([normalizers.NFKC(), *lower]) if lowercase else normalizers.NFKC()


def _untrained(config: TaskConfig) -> tuple[Tokenizer, type]:
    if config.tokenizer == "bpe":
        tokenizer = Tokenizer(models.BPE(unk_token="[UNK]"))
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
        tokenizer.decoder = decoders.Metaspace()
        trainer_cls = trainers.BpeTrainer
    else:
        tokenizer = Tokenizer(models.WordLevel(unk_token="[UNK]"))
        tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        trainer_cls = trainers.WordLevelTrainer
    tokenizer.normalizer = _normalizer(config.tokenizer, config.lowercase)
    return tokenizer, trainer_cls


def train_tokenizer(config: TaskConfig, specials: Specials, files: list[TextFile]) -> Tokenizer:
    """A tokenizer trained on the lines of `files`, in the order given (callers fix that order)."""
    tokenizer, trainer_cls = _untrained(config)
    trainer = trainer_cls(vocab_size=config.vocab_size, special_tokens=special_tokens(specials), show_progress=False)
    lines = [line for file in files for line in file.lines]
    tokenizer.train_from_iterator(lines, trainer=trainer, length=len(lines))
    return _ready(tokenizer, specials, "a freshly trained tokenizer")


def _ready(tokenizer: Tokenizer, specials: Specials, where: str) -> Tokenizer:
    """Check the special ids and treat '[UNK]' typed in a sentence as text, not as the special token."""
    for token_id, token in enumerate(special_tokens(specials)):
        if tokenizer.token_to_id(token) != token_id:
            raise DataError(f"{where}: token {token} has id {tokenizer.token_to_id(token)}, expected {token_id}")
    if hasattr(tokenizer, "encode_special_tokens"):  # tokenizers >= 0.16
        tokenizer.encode_special_tokens = True
    return tokenizer


def load_tokenizer(path: Path, specials: Specials) -> Tokenizer:
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except FileNotFoundError:
        raise DataError(f"{path}: missing tokenizer file") from None
    except Exception as err:  # the Rust side raises plain Exception for malformed JSON
        raise DataError(f"{path}: not a tokenizer file ({err})") from None
    return _ready(tokenizer, specials, str(path))


def cache_key(config: TaskConfig, specials: Specials, files: list[TextFile]) -> str:
    """sha256 of the training files' contents and every setting that changes the trained tokenizer."""
    payload = {
        "format": KEY_FORMAT,
        "tokenizers": tokenizers.__version__,
        "kind": config.tokenizer,
        "vocab_size": config.vocab_size,
        "lowercase": config.lowercase,
        "specials": [specials.pad, specials.unk, specials.bos, specials.eos],
        "files": [file.sha256 for file in files],
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def cached_tokenizer(config: TaskConfig, specials: Specials, files: list[TextFile],
                     cache_dir: Path) -> tuple[Tokenizer, str]:
    """The tokenizer for these files and settings from `cache_dir`, trained and stored on a miss."""
    key = cache_key(config, specials, files)
    path = cache_dir / f"{config.tokenizer}-{key[:24]}.json"
    if path.is_file():
        try:
            return load_tokenizer(path, specials), key
        except DataError:
            pass  # a damaged entry is retrained and replaced below
    tokenizer = train_tokenizer(config, specials, files)
    try:
        write_atomic(path, lambda tmp: tokenizer.save(str(tmp)))
    except OSError as err:
        raise DataError(
            f"{cache_dir}: cannot write the tokenizer cache ({err.strerror}); pass cache_dir or set ${CACHE_ENV}"
        ) from None
    return tokenizer, key
