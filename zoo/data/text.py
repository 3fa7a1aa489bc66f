"""Parallel text tasks: `CORPUS:SRC-TGT` read from a corpus folder through trained tokenizers.

load_task reads and checks every split at once (so a broken test file fails before training, not
after it), trains or fetches the tokenizers from the cache, and tokenizes each split on first use
with `encode_batch` (multi30k's 29k pairs take about a second). A task restored with load_saved
reads its text only when examples, sources or references are first asked for.

Training pairs with more than max_tokens_per_sentence tokens on either side are dropped (counted in
`dropped` and task.json, and said by `zoo train`), and
sources("train") / references("train") drop the same lines, so index i means the same pair in
all three views. valid and test are not filtered by that limit (every reference is scored), only by
the model's positional table, as `long_sentences` says (Task.limit_lengths). If these limits leave
no training pair, asking for the training examples is a DataError naming the files and the limit.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from tokenizers import Tokenizer

from zoo.atomic import write_atomic
from zoo.data.corpus import CORPUS_NAME, ParallelSplit, read_corpus, resolve_data_dir
from zoo.data.task import Specials, Task, TaskName
from zoo.data.tasks import register_task
from zoo.data.tokenizer import cached_tokenizer, default_cache_dir, load_tokenizer
from zoo.errors import DataError

if TYPE_CHECKING:
    from zoo.data.config import TaskConfig

# Language codes may not hold hyphens (corpus names may): the hyphen separates them.
TEXT_NAME = re.compile(rf"^(?P<corpus>{CORPUS_NAME}):(?P<src>[A-Za-z0-9_]+)-(?P<tgt>[A-Za-z0-9_]+)$")
JOINT_FILE = "tokenizer.json"
SIDE_FILES = {"src": "tokenizer.src.json", "tgt": "tokenizer.tgt.json"}


@register_task("parallel-text")
class TextTask(Task):
    """Sentences of a parallel corpus as subword (or word) ids, scored by BLEU and chrF."""

    kind = "text"
    metrics = ("bleu", "bleu_lowercase", "chrf")
    family = "CORPUS:SRC-TGT such as 'multi30k:de-en' or 'wmt-ende-10k:en-de'"

    @classmethod
    def claims(cls, name: str) -> bool:
        return TEXT_NAME.match(name) is not None

    @classmethod
    def parse_name(cls, name: str) -> TaskName:
        match = TEXT_NAME.match(name)
        return TaskName(cls.kind, match["corpus"], match["src"], match["tgt"])

    def __init__(self, config: TaskConfig, specials: Specials, src_tokenizer: Tokenizer, tgt_tokenizer: Tokenizer,
                 data_dir: Path | None, corpus: dict[str, ParallelSplit] | None = None,
                 keys: dict[str, str] | None = None):
        super().__init__(config, specials, src_tokenizer.get_vocab_size(), tgt_tokenizer.get_vocab_size())
        self.src_tokenizer = src_tokenizer
        self.tgt_tokenizer = tgt_tokenizer  # the same object when config.joint
        self.data_dir = data_dir
        self.tokenizer_keys = dict(keys or {})
        self._corpus = corpus
        self._views: dict[str, tuple[list[str], list[str], list[tuple[list[int], list[int]]]]] = {}
        self._set_sizes: list[tuple[str, int]] = []  # the test split's sets and their kept sentences, once read
        self._detokenizer = None  # sacremoses, made when first needed

    @classmethod
    def _create(cls, config: TaskConfig, specials: Specials, cache_dir: Path | None) -> TextTask:
        name = config.parsed
        data_dir = resolve_data_dir(config.data_dir)
        corpus = read_corpus(data_dir, name.corpus, name.src, name.tgt, config.test_sets)
        cache = cache_dir if cache_dir is not None else default_cache_dir()
        train = corpus["train"]
        if config.joint:
            # Both directions of a corpus train on the same lines in the same order, so de-en and
            # en-de share one cache entry and one vocabulary.
            by_lang = {name.src: train.src, name.tgt: train.tgt}
            joint, key = cached_tokenizer(config, specials, [by_lang[lang] for lang in sorted(by_lang)], cache)
            return cls(config, specials, joint, joint, data_dir, corpus, {"joint": key})
        src, src_key = cached_tokenizer(config, specials, [train.src], cache)
        tgt, tgt_key = cached_tokenizer(config, specials, [train.tgt], cache)
        return cls(config, specials, src, tgt, data_dir, corpus, {"src": src_key, "tgt": tgt_key})

    # -- persistence -----------------------------------------------------------------------------
    def _save_files(self, folder: Path) -> dict[str, Any]:
        if self.config.joint:
            files = {"joint": JOINT_FILE}
            write_atomic(folder / JOINT_FILE, lambda tmp: self.src_tokenizer.save(str(tmp)))
        else:
            files = dict(SIDE_FILES)
            write_atomic(folder / files["src"], lambda tmp: self.src_tokenizer.save(str(tmp)))
            write_atomic(folder / files["tgt"], lambda tmp: self.tgt_tokenizer.save(str(tmp)))
        return {"tokenizer_files": files, "tokenizer_keys": self.tokenizer_keys, "data_dir": str(self.data_dir)}

    @classmethod
    def _restore(cls, config: TaskConfig, specials: Specials, folder: Path, state: dict[str, Any]) -> TextTask:
        if config.joint:
            src = tgt = load_tokenizer(folder / JOINT_FILE, specials)
        else:
            src = load_tokenizer(folder / SIDE_FILES["src"], specials)
            tgt = load_tokenizer(folder / SIDE_FILES["tgt"], specials)
        saved = Path(state.get("data_dir") or ".")
        # The folder the task was built from, if it is still there; else the usual lookup, lazily.
        data_dir = saved if saved.is_dir() else config.data_dir
        return cls(config, specials, src, tgt, data_dir, None, state.get("tokenizer_keys"))

    # -- text and ids ----------------------------------------------------------------------------
    def _split(self, split: str) -> tuple[list[str], list[str], list[tuple[list[int], list[int]]]]:
        split = self._check_split(split)
        if split not in self._views:
            if self._corpus is None:
                name = self.config.parsed
                self._corpus = read_corpus(resolve_data_dir(self.data_dir), name.corpus, name.src, name.tgt,
                                           self.config.test_sets)
            # the test split is its sets one after the other, in the order the config names them
            pairs = [self._corpus[stem] for stem in (self.config.test_sets if split == "test" else (split,))]
            sources = [line for pair in pairs for line in pair.src.lines]
            references = [line for pair in pairs for line in pair.tgt.lines]
            src_ids, tgt_ids = _encode(self.src_tokenizer, sources), _encode(self.tgt_tokenizer, references)
            keep = range(len(sources))
            if split == "train":
                pair = pairs[0]
                limit = self.config.max_tokens_per_sentence
                keep = [i for i in keep if len(src_ids[i]) <= limit and len(tgt_ids[i]) <= limit]
                self.dropped[split] = len(sources) - len(keep)
                _require_pairs(pair, keep, len(sources),
                               f"longer than max_tokens_per_sentence = {limit} tokens on one side or both")
            fitted = self._fit_positions(split, pairs, keep, src_ids, tgt_ids)
            if split == "train":
                _require_pairs(pairs[0], fitted, len(keep), f"longer than positional.max_len = {self.positions} "
                                                            "allows on one side or both, and long_sentences = "
                                                            "\"skip\" drops them")
            keep = fitted
            if split == "test":
                starts = np.cumsum([0] + [len(pair.src.lines) for pair in pairs])
                kept = np.bincount(np.searchsorted(starts, keep, side="right") - 1, minlength=len(pairs))
                self._set_sizes = list(zip(self.config.test_sets, map(int, kept)))
            if self.config.lowercase:  # score lowercased output against lowercased references
                normalize = self.tgt_tokenizer.normalizer.normalize_str
                references = [normalize(line) for line in references]
            eos, bos = self.specials.eos, self.specials.bos
            self._views[split] = (
                [sources[i] for i in keep],
                [references[i] for i in keep],
                [([*src_ids[i], eos], [bos, *tgt_ids[i], eos]) for i in keep],
            )
        return self._views[split]

    def test_sets(self) -> list[tuple[str, int]]:
        self._split("test")
        return list(self._set_sizes)

    def _fit_positions(self, split: str, pairs: list[ParallelSplit], keep, src_ids: list[list[int]],
                       tgt_ids: list[list[int]]) -> list[int]:
        """Apply config.long_sentences to the lines `keep` of `split` (the lines of `pairs`, one file pair after
        the other); truncation edits the id lists in place.

        A source takes tokens + eos positions and the decoder input bos + tokens, so each side may hold
        positions - 1 tokens."""
        keep = list(keep)
        if self.positions is None:
            return keep
        limit, policy, kept, shortened = self.positions - 1, self.config.long_sentences, [], 0
        for i in keep:
            if len(src_ids[i]) <= limit and len(tgt_ids[i]) <= limit:
                kept.append(i)
                continue
            if policy == "error":
                pair, line = _locate(pairs, i)
                path, ids = (pair.src.path, src_ids[i]) if len(src_ids[i]) > limit else (pair.tgt.path, tgt_ids[i])
                raise DataError(f"{path}:{line}: {len(ids)} tokens, longer than positional.max_len = "
                                f"{self.positions} allows ({limit} + eos/bos); set long_sentences = \"truncate\" "
                                "or \"skip\"")
            shortened += 1
            if policy == "truncate":
                src_ids[i], tgt_ids[i] = src_ids[i][:limit], tgt_ids[i][:limit]
                kept.append(i)
        self.shortened[split] = shortened
        return kept

    def limit_lengths(self, positions: int | None) -> None:
        self._views.clear()  # views built before the limit was known are rebuilt under it
        super().limit_lengths(positions)

    def examples(self, split: str) -> list[tuple[list[int], list[int]]]:
        return list(self._split(split)[2])  # copies: a caller shuffling them must not reorder the cache

    def sources(self, split: str) -> list[str]:
        return list(self._split(split)[0])

    def references(self, split: str) -> list[str]:
        return [self._scorable(line) for line in self._split(split)[1]]

    def trivial_outputs(self, split: str) -> dict[str, list[str]]:
        """copy-source: the source sentence unchanged, as the target side is scored (Moses-detokenized when the
        task detokenizes). Related languages share names, numbers and punctuation, so this scores well above 0."""
        return {"copy-source": [self._scorable(line) for line in self.sources(split)]}

    def encode_source(self, text: str) -> list[int]:
        return [*self.src_tokenizer.encode(text.strip(), add_special_tokens=False).ids, self.specials.eos]

    def decode_target(self, ids: list[int]) -> str:
        """Detokenized text; an [UNK] stays visible as '[UNK]' rather than silently vanishing."""
        return self._scorable(self.tgt_tokenizer.decode(self._target_tokens(ids), skip_special_tokens=False))

    def _scorable(self, text: str) -> str:
        """Target text as it is scored: with `detokenize = "moses"`, Moses-detokenized (sacremoses), so
        outputs and references are compared as plain text; otherwise as it is."""
        if self.config.detokenize == "none":
            return text
        if self._detokenizer is None:
            from sacremoses import MosesDetokenizer

            self._detokenizer = MosesDetokenizer(lang=self.config.parsed.tgt)
        return self._detokenizer.detokenize(text.split())


def _locate(pairs: list[ParallelSplit], index: int) -> tuple[ParallelSplit, int]:
    """The file pair and line number (from 1) of line `index` of `pairs` read one after the other."""
    for pair in pairs:
        if index < len(pair.src.lines):
            return pair, index + 1
        index -= len(pair.src.lines)
    raise IndexError(index)


def _require_pairs(pair: ParallelSplit, kept: list[int], count: int, rule: str) -> None:
    """A DataError naming the files and `rule` when `rule` dropped all `count` training pairs it saw:
    training on none would fail later, in the training loop, with no word about why."""
    if not kept:
        raise DataError(f"{pair.src.path} / {pair.tgt.path}: all {count} pairs are {rule}, so no training pair is left")


def _encode(tokenizer: Tokenizer, lines: list[str]) -> list[list[int]]:
    encode = getattr(tokenizer, "encode_batch_fast", tokenizer.encode_batch)  # _fast skips offsets (>= 0.20)
    return [encoding.ids for encoding in encode(lines, add_special_tokens=False)]
