"""zoo.data: synthetic tasks, corpus checks, tokenizers and their cache, batching, save/load.

Real-corpus tests read the development corpora (../shared/data beside the project root, or
$ZOO_DATA_DIR) through conftest's `corpora` fixture, which skips them where they are absent;
error cases write small fake corpora into tmp_path.
Tokenizers are trained into a per-session temporary cache with vocab 1000 (one test uses the
default 8000), so the file stays fast.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from zoo.data import DataError, Specials, TaskConfig, collate, load_saved, load_task, token_batches
from zoo.data import tokenizer as tokenizer_module
from zoo.errors import ZooError

SMALL = {"train_size": 300, "valid_size": 40, "test_size": 40}


@pytest.fixture(scope="session")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("tokenizer-cache")


@pytest.fixture(scope="session")
def multi30k(cache, corpora):
    return load_task("multi30k:de-en", data_dir=corpora("multi30k"), cache_dir=cache, vocab_size=1000)


def write_corpus(root: Path, corpus: str = "toy", langs=("xx", "yy"), n: int = 30) -> Path:
    """A tiny aligned corpus: line i of yy is line i of xx reversed word by word."""
    folder = root / corpus
    folder.mkdir(parents=True, exist_ok=True)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
    for split, count in (("train", n), ("valid", 5), ("test", 5)):
        sentences = [" ".join(words[(i + k) % len(words)] for k in range(1 + i % 5)) for i in range(count)]
        (folder / f"{split}.{langs[0]}").write_text("".join(s + "\n" for s in sentences), encoding="utf-8")
        (folder / f"{split}.{langs[1]}").write_text("".join(" ".join(s.split()[::-1]) + "\n" for s in sentences),
                                                   encoding="utf-8")
    return folder


def toy(root: Path, cache: Path, **overrides):
    return load_task("toy:xx-yy", data_dir=root, cache_dir=cache, **{"vocab_size": 60, **overrides})


# -- synthetic tasks -----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["copy", "reverse", "sort", "long-copy"])
def test_synthetic_task_rules(name):
    task = load_task(name, min_len=3, max_len=8, **SMALL)
    assert task.kind == "synthetic" and task.metrics[0] == "exact_match" and task.src_vocab == task.tgt_vocab == 24
    low, high = (6, 16) if name == "long-copy" else (3, 8)
    for split in ("train", "valid", "test"):
        pairs, sources, references = task.examples(split), task.sources(split), task.references(split)
        assert len(pairs) == len(sources) == len(references) == SMALL[f"{split}_size"]
        for (src, tgt), source, reference in zip(pairs, sources, references):
            tokens, target = src[:-1], tgt[1:-1]
            assert src[-1] == 3 and tgt[0] == 2 and tgt[-1] == 3
            assert low <= len(tokens) <= high and all(4 <= t < 24 for t in tokens)
            expected = {"reverse": tokens[::-1], "sort": sorted(tokens)}.get(name, tokens)
            assert target == expected
            assert source == " ".join(map(str, tokens)) and reference == " ".join(map(str, target))
            assert task.decode_target(tgt) == reference and task.encode_source(source) == src


def test_synthetic_is_deterministic_and_seeded():
    a, b = load_task("copy", **SMALL), load_task("copy", **SMALL)
    assert a.examples("train") == b.examples("train") and a.examples("test") == b.examples("test")
    assert load_task("copy", seed=1, **SMALL).examples("train") != a.examples("train")
    assert load_task("reverse", **SMALL).sources("test") == a.sources("test")  # same inputs, other rule


def test_synthetic_splits_are_disjoint_even_in_a_tiny_space():
    # 3 symbols, lengths 1..3: 39 distinct sequences, so without deduplication train would hit test.
    task = load_task("copy", symbols=3, min_len=1, max_len=3, train_size=500, valid_size=8, test_size=8)
    train, valid, test = (set(task.sources(split)) for split in ("train", "valid", "test"))
    assert not train & test and not train & valid and not valid & test


def test_synthetic_space_too_small_is_a_data_error():
    with pytest.raises(DataError, match="raise symbols or max_len"):
        load_task("copy", symbols=1, min_len=1, max_len=1, train_size=5, valid_size=1, test_size=1).examples("train")


def test_decode_target_cuts_at_first_eos_and_drops_bos_and_pad():
    task = load_task("copy", **SMALL)
    assert task.decode_target([2, 7, 0, 12, 5, 3, 9, 9, 0]) == "7 12 5"
    assert task.decode_target([2, 3, 7]) == ""
    with pytest.raises(DataError, match="symbol ids"):
        task.encode_source("7 x 5")


# -- special ids -----------------------------------------------------------------------------------
@pytest.mark.parametrize("pad_id, expected", [(0, (0, 1, 2, 3)), (3, (3, 0, 1, 2)), (1, (1, 0, 2, 3))])
def test_special_ids(pad_id, expected, tmp_path):
    specials = Specials.for_pad(pad_id)
    assert (specials.pad, specials.unk, specials.bos, specials.eos) == expected
    synthetic = load_task("copy", pad_id=pad_id, **SMALL)
    assert synthetic.specials == specials and synthetic.symbol_ids == list(range(4, 24))
    text = toy(write_corpus(tmp_path).parent, tmp_path / "cache", pad_id=pad_id)
    assert text.specials == specials
    for token, token_id in zip(("[PAD]", "[UNK]", "[BOS]", "[EOS]"), expected):
        assert text.src_tokenizer.token_to_id(token) == token_id
    src, tgt = text.examples("train")[0]
    assert src[-1] == specials.eos and tgt[0] == specials.bos and pad_id not in src + tgt


def test_pad_above_three_leaves_symbols_around_it():
    task = load_task("copy", pad_id=5, symbols=4, **SMALL)
    assert task.specials == Specials(pad=5, unk=0, bos=1, eos=2) and task.symbol_ids == [3, 4, 6, 7]
    assert task.src_vocab == 8
    with pytest.raises(DataError, match="pad_id"):
        Specials.for_pad(-1)


# -- config and name errors ------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["copyy", "multi30k", "multi30k:de", "multi30k:de-en-fr", ":de-en", "multi30k:de_en"])
def test_malformed_task_names(name):
    with pytest.raises(DataError, match="CORPUS:SRC-TGT") as err:
        load_task(name)
    assert isinstance(err.value, ZooError) and repr(name) in str(err.value)


def test_config_errors_name_the_field():
    with pytest.raises(DataError, match="did you mean 'symbols'"):
        load_task("copy", symbol=3)
    with pytest.raises(DataError, match="max_len: 2 is shorter than min_len = 5"):
        TaskConfig(name="copy", min_len=5, max_len=2)
    with pytest.raises(DataError, match="tokenizer"):
        load_task("copy", tokenizer="sentencepiece")
    with pytest.raises(DataError, match="split: 'dev'"):
        load_task("copy", **SMALL).examples("dev")


# -- corpus errors (fake corpora) ------------------------------------------------------------------
def _truncate(path: Path) -> None:
    path.write_text("one\ntwo\n", encoding="utf-8")


def _empty(path: Path) -> None:
    path.write_text("", encoding="utf-8")


def _bad_utf8(path: Path) -> None:
    path.write_bytes(b"fine\nstill fine\nbroken \xff here\nfine\nfine\n")


@pytest.mark.parametrize("name, damage, message", [
    ("valid.yy", _truncate, "valid.xx has 5 lines"),     # line counts differ: both files named
    ("test.yy", Path.unlink, "missing"),
    ("train.xx", _empty, "empty file"),
    ("test.yy", _bad_utf8, "line 3: not valid UTF-8"),
])
def test_corpus_errors_name_the_file(tmp_path, name, damage, message):
    folder = write_corpus(tmp_path)
    damage(folder / name)
    with pytest.raises(DataError, match=message) as err:
        toy(tmp_path, tmp_path / "cache")
    assert str(folder / name) in str(err.value)


def test_unknown_corpus_lists_the_corpora(tmp_path):
    write_corpus(tmp_path)
    write_corpus(tmp_path, "other")
    with pytest.raises(DataError, match=r"corpora found in .*: other, toy"):
        load_task("nope:xx-yy", data_dir=tmp_path)


def test_unknown_language_lists_the_languages(tmp_path):
    write_corpus(tmp_path)
    with pytest.raises(DataError, match=r"no target language 'fr' .*languages found: xx, yy"):
        load_task("toy:xx-fr", data_dir=tmp_path)


def test_data_dir_lookup(tmp_path, monkeypatch):
    write_corpus(tmp_path)
    with pytest.raises(DataError, match="is not a folder"):
        load_task("toy:xx-yy", data_dir=tmp_path / "absent")
    monkeypatch.setenv("ZOO_DATA_DIR", str(tmp_path))
    assert load_task("toy:xx-yy", cache_dir=tmp_path / "cache", vocab_size=60).examples("test")
    monkeypatch.delenv("ZOO_DATA_DIR")
    monkeypatch.chdir(tmp_path)  # tmp_path/../shared/data does not exist
    with pytest.raises(DataError, match="ZOO_DATA_DIR"):
        load_task("toy:xx-yy")


def test_lines_split_on_newline_only(tmp_path):
    folder = write_corpus(tmp_path)
    for lang in ("xx", "yy"):  # U+2028 inside a sentence and CRLF endings must not break alignment
        (folder / f"test.{lang}").write_text("a\u2028b\r\nc\r\nd\ne\nf\n", encoding="utf-8")
    task = toy(tmp_path, tmp_path / "cache")
    assert task.sources("test") == ["a\u2028b", "c", "d", "e", "f"]


# -- tokenizers and their cache --------------------------------------------------------------------
def test_cache_hit_does_not_retrain(tmp_path, monkeypatch):
    write_corpus(tmp_path)
    cache = tmp_path / "cache"
    first = toy(tmp_path, cache)
    (entry,) = cache.iterdir()
    mtime = entry.stat().st_mtime_ns

    def refuse(*args, **kwargs):
        raise AssertionError("retrained although the cache holds this tokenizer")

    monkeypatch.setattr(tokenizer_module, "train_tokenizer", refuse)
    second = toy(tmp_path, cache)
    assert entry.stat().st_mtime_ns == mtime and list(cache.iterdir()) == [entry]
    assert second.examples("train") == first.examples("train")
    assert load_task("toy:yy-xx", data_dir=tmp_path, cache_dir=cache, vocab_size=60).src_vocab == first.src_vocab


def test_cache_key_changes_with_settings_and_contents(tmp_path):
    folder = write_corpus(tmp_path)
    cache = tmp_path / "cache"
    keys = {toy(tmp_path, cache).tokenizer_keys["joint"]}
    for overrides in ({"vocab_size": 50}, {"lowercase": True}, {"tokenizer": "wordlevel"}, {"pad_id": 3}):
        keys.add(toy(tmp_path, cache, **overrides).tokenizer_keys["joint"])
    with (folder / "train.yy").open("a", encoding="utf-8") as f, (folder / "train.xx").open("a", encoding="utf-8") as g:
        f.write("omega\n"), g.write("omega\n")
    keys.add(toy(tmp_path, cache).tokenizer_keys["joint"])
    assert len(keys) == 6 and len(list(cache.glob("*.json"))) == 6
    assert not [p for p in cache.iterdir() if p.suffix == ".tmp"]  # atomic writes leave no temporaries


def test_separate_tokenizers(tmp_path):
    write_corpus(tmp_path)
    task = toy(tmp_path, tmp_path / "cache", joint=False)
    assert set(task.tokenizer_keys) == {"src", "tgt"} and task.src_tokenizer is not task.tgt_tokenizer
    joint = toy(tmp_path, tmp_path / "cache")
    assert joint.src_tokenizer is joint.tgt_tokenizer and joint.src_vocab == joint.tgt_vocab


def test_joint_and_separate_vocabularies_on_multi30k(multi30k, cache, corpora):
    assert multi30k.src_vocab == multi30k.tgt_vocab == 1000
    separate = load_task("multi30k:de-en", data_dir=corpora("multi30k"), cache_dir=cache, vocab_size=1000, joint=False)
    assert separate.src_vocab <= 1000 and separate.tgt_vocab <= 1000
    german, english = separate.src_tokenizer.get_vocab(), separate.tgt_tokenizer.get_vocab()
    assert "▁Mann" in german and "▁Mann" not in english and "▁man" in english


# -- the shipped corpora ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["multi30k:de-en", "multi30k:en-de", "wmt-ende-10k:en-de", "wmt-ende-10k:de-en"])
def test_shipped_corpora_load_in_both_directions(name, cache, corpora):
    corpus, pair = name.split(":")
    data = corpora(corpus)
    task = load_task(name, data_dir=data, cache_dir=cache, vocab_size=1000)
    src_lang, tgt_lang = pair.split("-")
    assert task.kind == "text" and task.metrics == ("bleu", "bleu_lowercase", "chrf")
    for split in ("train", "valid", "test"):
        pairs = task.examples(split)
        lines = (data / corpus / f"{split}.{src_lang}").read_text(encoding="utf-8").count("\n")
        assert pairs and len(pairs) == len(task.sources(split)) == len(task.references(split))
        assert len(pairs) == lines if split != "train" else 0.95 * lines <= len(pairs) <= lines
        for src, tgt in pairs:
            assert src[-1] == task.specials.eos and tgt[0] == task.specials.bos and tgt[-1] == task.specials.eos
            assert max(src) < task.src_vocab and max(tgt) < task.tgt_vocab
    first = (data / corpus / f"test.{tgt_lang}").read_text(encoding="utf-8").split("\n")[0].strip()
    assert task.references("test")[0] == first


def test_long_training_pairs_are_dropped_but_not_in_valid_or_test(cache, corpora):
    task = load_task("wmt-ende-10k:en-de", data_dir=corpora("wmt-ende-10k"), cache_dir=cache, vocab_size=1000,
                     max_tokens_per_sentence=30)
    train = task.examples("train")
    assert len(train) < 9000 and all(len(s) - 1 <= 30 and len(t) - 2 <= 30 for s, t in train)
    assert len(task.sources("train")) == len(task.references("train")) == len(train)
    assert task.encode_source(task.sources("train")[7]) == train[7][0]  # the views stay aligned
    assert len(task.examples("test")) == 500 and max(len(s) for s, _ in task.examples("test")) > 31


def test_round_trip_detokenization_on_multi30k(cache, corpora):
    task = load_task("multi30k:de-en", data_dir=corpora("multi30k"), cache_dir=cache)  # the default vocabulary, 8000
    assert 7000 < task.src_vocab <= 8000
    references, pairs = task.references("test"), task.examples("test")
    assert len(references) == 1000
    for reference, (_, tgt) in zip(references, pairs):  # every one (tokenizer.py's docstring says so)
        assert task.decode_target(tgt) == reference
    for source in task.sources("valid")[:20]:  # joint: the source side decodes the same way
        assert task.decode_target(task.encode_source(source)) == source
    assert task.decode_target([task.specials.bos, *task.encode_source("Ein Hund."), 17, 17]) == "Ein Hund."


def test_wordlevel_lowercase_as_in_writeup_003(cache, corpora):
    task = load_task("multi30k:en-de", data_dir=corpora("multi30k"), cache_dir=cache, tokenizer="wordlevel",
                     lowercase=True, vocab_size=20000)
    references = task.references("test")
    assert references[0] == references[0].lower() and not any("ä" in r for r in references)
    decoded = [task.decode_target(tgt) for _, tgt in task.examples("test")]
    mismatched = [text for text, reference in zip(decoded, references) if text != reference]
    assert len(mismatched) < 0.5 * len(references)
    assert all("[UNK]" in text for text in mismatched)  # a word unseen in training (punctuation stays attached)


# -- batching --------------------------------------------------------------------------------------
def _lengths(n: int = 400, seed: int = 0) -> list[tuple[int, int]]:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(2, 40, (n,), generator=g)
    return [(int(s), int(s) + int(d)) for s, d in zip(src, torch.randint(-1, 4, (n,), generator=g))]


def test_token_batches_invariants():
    lengths = _lengths() + [(300, 5)]  # one example longer than max_tokens on its own
    batches = token_batches(lengths, 256, seed=0, epoch=0)
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    for batch in batches:
        cost = len(batch) * max(max(lengths[i]) for i in batch)
        assert cost <= 256 or batch == [len(lengths) - 1]
    assert [len(lengths) - 1] in batches
    # Length bucketing: batches are runs of the sorted order, so their source-length ranges only
    # touch at the ends, and padding is a small fraction of the source tokens.
    ranges = sorted((min(lengths[i][0] for i in b), max(lengths[i][0] for i in b)) for b in batches)
    assert all(high <= next_low for (_, high), (next_low, _) in zip(ranges, ranges[1:]))
    real = sum(s for s, _ in lengths)
    padded = sum(len(b) * max(lengths[i][0] for i in b) for b in batches)
    assert real / padded > 0.9


def test_token_batches_determinism():
    lengths = _lengths()
    epoch0 = token_batches(lengths, 256, seed=0, epoch=0)
    assert token_batches(lengths, 256, seed=0, epoch=0) == epoch0
    assert token_batches(lengths, 256, seed=0, epoch=1) != epoch0
    assert token_batches(lengths, 256, seed=1, epoch=0) != epoch0
    ordered = token_batches(lengths, 256, seed=0, epoch=0, shuffle=False)
    assert ordered == token_batches(lengths, 256, seed=5, epoch=9, shuffle=False)
    flat = [i for batch in ordered for i in batch]
    assert flat == sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    assert token_batches([], 256, seed=0, epoch=0) == []
    with pytest.raises(DataError, match="max_tokens"):
        token_batches(lengths, 0, seed=0, epoch=0)


def test_collate_shapes_and_padding():
    examples = [([5, 6, 7, 3], [2, 8, 9, 3]), ([5, 3], [2, 8, 9, 10, 11, 3])]
    src, tgt_in, tgt_out = collate(examples, pad=0)
    assert src.dtype == tgt_in.dtype == torch.long
    assert src.tolist() == [[5, 6, 7, 3], [5, 3, 0, 0]]
    assert tgt_in.tolist() == [[2, 8, 9, 3, 0], [2, 8, 9, 10, 11]]
    assert tgt_out.tolist() == [[8, 9, 3, 0, 0], [8, 9, 10, 11, 3]]
    src, tgt_in, tgt_out = collate(examples, pad=7)
    assert src[1, 2:].tolist() == [7, 7] and tgt_out.shape == tgt_in.shape == (2, 5)


# -- save and load ---------------------------------------------------------------------------------
def test_synthetic_save_and_load(tmp_path):
    task = load_task("sort", pad_id=3, **SMALL)
    task.save(tmp_path / "run")
    loaded = load_saved(tmp_path / "run")
    assert loaded.config == task.config and loaded.specials == task.specials
    assert loaded.examples("test") == task.examples("test")


def test_text_save_and_load_without_retraining(tmp_path, monkeypatch):
    write_corpus(tmp_path)
    task = toy(tmp_path, tmp_path / "cache", joint=False, pad_id=3)
    task.save(tmp_path / "run")
    monkeypatch.setattr(tokenizer_module, "train_tokenizer", lambda *a, **k: pytest.fail("retrained"))
    loaded = load_saved(tmp_path / "run")
    assert json.loads((tmp_path / "run" / "task.json").read_text())["kind"] == "text"
    assert (loaded.src_vocab, loaded.tgt_vocab, loaded.specials) == (task.src_vocab, task.tgt_vocab, task.specials)
    assert loaded.examples("valid") == task.examples("valid") and loaded.references("test") == task.references("test")
    assert loaded.encode_source("alpha beta") == task.encode_source("alpha beta")
    with pytest.raises(DataError, match="no saved task"):
        load_saved(tmp_path / "nowhere")


def test_multi30k_save_and_load_gives_identical_encodings(multi30k, tmp_path):
    multi30k.save(tmp_path)
    loaded = load_saved(tmp_path)
    sentences = multi30k.sources("test")[:100]
    assert [loaded.encode_source(s) for s in sentences] == [multi30k.encode_source(s) for s in sentences]
    assert loaded.examples("valid") == multi30k.examples("valid")


def test_moses_detokenization_scores_plain_text(tmp_path, corpora):
    """wmt-ende-10k is Moses-tokenized: with detokenize = "moses" references lose the escapes and the
    spaces before punctuation, and a decoded reference is scored as the same plain text."""
    task = load_task(TaskConfig(name="wmt-ende-10k:en-de", data_dir=corpora("wmt-ende-10k"), vocab_size=1000,
                                detokenize="moses"), cache_dir=tmp_path)
    references = task.references("test")
    assert references[0] == ("Wie Herr Schleicher schon sagte, es ist ein stiller Datenfriedhof, und das reicht nun "
                             "wirklich nicht aus.")
    assert references[38].startswith('Maj Britt Theorin hat auf die in Schweden als "Sommerferienverstümmelung"')
    assert not any("&apos;" in r or "&quot;" in r or " ." in r for r in references[:50])
    for index in (0, 38):
        _, target = task.examples("test")[index]
        assert task.decode_target(target) == references[index]
