"""Corpora a careless or hostile user may hand zoo, fuzzed: random bytes, text in other encodings (latin-1,
cp1252, UTF-16 with and without a BOM), "\\n", "\\r\\n" and "\\r" line endings mixed, BOMs, NULs, long lines,
empty files, line counts that differ. Every corpus folder loads or is one ZooError line naming one of its
files; nothing else is raised and nothing hangs. What loads is what the rules of zoo/data/corpus.py say of
the whole file at once (`whole_file_rules` below), at any block size: streaming changes how a file is read,
never what it says. 640 cases in a few seconds."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from zoo.data import corpus, load_task
from zoo.data.corpus import BOM, FORBIDDEN, read_corpus, read_text_file
from zoo.data.task import SPLITS
from zoo.errors import DataError, ZooError


def many(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


PIECES = ["ein Haus", "größe", " ", "\t", "\u00a0", "\u2028", "\x85", BOM, "\0", "\r", "€", "日本", "😀", ""]
ENCODINGS = ["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "latin-1", "cp1252"]
WORDS = ["ein", "Haus", "zwei", "Hunde", "größe", "日本", "😀", ".", "a\tb", "\u00a0x", "y\u2028z", "\x85"]
words = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)
careless = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=6)), max_size=4).map("".join)


@st.composite
def text_files(draw, count: int | None = None, sentences=careless, endings=("\n", "\r\n", "\r"),
               encodings=ENCODINGS) -> bytes:
    """`count` (else 0 to 6) `sentences`, each with its own line ending, the last maybe without one, encoded."""
    lines = draw(st.lists(sentences, min_size=count or 0, max_size=6 if count is None else count))
    ends = draw(st.lists(st.sampled_from(endings), min_size=len(lines), max_size=len(lines)))
    text = "".join(line + end for line, end in zip(lines, ends))
    if lines and draw(st.booleans()):
        text = text.removesuffix(ends[-1])
    return text.encode(draw(st.sampled_from(encodings)), errors="replace")


def good_files(count: int | None = None) -> st.SearchStrategy[bytes]:
    """Files that load: UTF-8 sentences (tabs, U+2028 and the like inside), \\n or \\r\\n, maybe a BOM first."""
    return text_files(count, words, ("\n", "\r\n"), ["utf-8", "utf-8-sig"])


def long_lines(longest: int) -> st.SearchStrategy[bytes]:
    """A few lines, one of them maybe longer than `longest` bytes, maybe without a line break at all."""
    return st.tuples(st.integers(0, 3), st.integers(longest - 2, longest + 2), st.booleans()).map(
        lambda t: b"short\n" * t[0] + b"x" * t[1] + (b"\n" if t[2] else b""))


@st.composite
def flawed_files(draw) -> bytes:
    """A good file with a NUL, a BOM, a CR or a CR line ending put in somewhere."""
    content = draw(good_files())
    at = draw(st.integers(0, len(content)))
    flaw = draw(st.sampled_from([b"\0", BOM.encode(), b"\r", b"x\ry"]))
    return content[:at] + flaw + content[at:]


def bad_files(longest: int) -> st.SearchStrategy[bytes]:
    """Files a careless or hostile user may write; many are refused, some load."""
    return st.one_of(flawed_files(), text_files(), st.binary(max_size=40), long_lines(longest), st.just(b""))


def whole_file_rules(data: bytes, longest: int) -> list[str] | set[int]:
    """The stripped lines of `data` under zoo/data/corpus.py's rules, applied to the whole file at once; or
    the numbers of the lines that break one."""
    raw = data.split(b"\n")
    if raw[-1] == b"":
        raw.pop()
    bad, kept = set(), []
    for number, line in enumerate(raw, 1):
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            bad.add(number)
            continue
        text = (text.removeprefix(BOM) if number == 1 else text).strip()
        if len(line) > longest or any(char in text for char in FORBIDDEN):
            bad.add(number)
        kept.append(text)
    return bad or kept


AFTER_WHERE = re.compile(r": (?:line \d+: )?")  # a message names the file (and line), then the rule


def one_line(err: ZooError, folder: Path) -> str:
    """The message of `err`, once it is known to be one line naming `folder` or a file in it."""
    message = str(err)
    assert message and "\n" not in message and "Traceback" not in message, message
    assert str(folder) in message, message
    event("refused: " + AFTER_WHERE.split(message, maxsplit=1)[-1][:30])  # see --hypothesis-show-statistics
    return message


@pytest.mark.timeout(300)
@many(400)
@given(data=st.integers(4, 40).flatmap(
    lambda longest: st.tuples(st.just(longest), st.one_of(good_files(), bad_files(longest)))), block=st.integers(1, 12))
def test_a_file_reads_as_the_rules_say_of_it_whole_at_any_block_size(tmp_path, data, block):
    longest, content = data
    path = tmp_path / "train.xx"
    path.write_bytes(content)
    expected = whole_file_rules(content, longest)
    with pytest.MonkeyPatch.context() as patch:  # tiny blocks and bounds, so that lines span blocks
        patch.setattr(corpus, "BLOCK_BYTES", block)
        patch.setattr(corpus, "MAX_LINE_BYTES", longest)
        try:
            read = read_text_file(path)
        except DataError as err:
            message = one_line(err, path)
            if isinstance(expected, set):  # the line named is one that breaks a rule
                assert int(re.match(rf"{re.escape(str(path))}: line (\d+): ", message)[1]) in expected, message
            else:
                assert not any(expected) and message == f"{path}: empty file; expected one sentence per line"
            return
    event("read")
    assert isinstance(expected, list) and any(expected) and read.lines == expected
    assert read.sha256 == hashlib.sha256(content).hexdigest()


@st.composite
def corpus_folders(draw) -> dict[str, bytes]:
    """Six files of `count` good lines, but for one file, maybe: a bad one, or one with a line more."""
    count = draw(st.integers(1, 4))
    names = [f"{split}.{lang}" for split in SPLITS for lang in ("xx", "yy")]
    odd = draw(st.sampled_from([None, *names]))
    files = {name: draw(good_files(count)) for name in names}
    if odd:
        files[odd] = draw(st.one_of(bad_files(corpus.MAX_LINE_BYTES), good_files(count + 1)))
    return files


@pytest.mark.timeout(300)
@many(200)
@given(files=corpus_folders())
def test_a_corpus_folder_loads_aligned_or_is_one_line_naming_a_file(tmp_path, files):
    folder = tmp_path / "toy"
    folder.mkdir(exist_ok=True)
    for name, content in files.items():
        (folder / name).write_bytes(content)
    try:
        splits = read_corpus(tmp_path, "toy", "xx", "yy")
    except ZooError as err:
        one_line(err, folder)
        return
    event("read")
    for pair in splits.values():
        assert len(pair.src.lines) == len(pair.tgt.lines)
        for file in (pair.src, pair.tgt):
            assert file.lines == whole_file_rules(files[file.path.name], corpus.MAX_LINE_BYTES) and any(file.lines)


VOCABULARY = st.lists(st.sampled_from(["ein", "Haus", "zwei", "Hunde", "a", "bb", "ccc", "."]), max_size=5)


@pytest.mark.timeout(300)
@many(40)
@given(pairs=st.lists(st.tuples(VOCABULARY, VOCABULARY), min_size=1, max_size=4), limit=st.integers(1, 6))
def test_a_small_corpus_trains_a_tokenizer_and_gives_pairs_or_names_the_limit(tmp_path, pairs, limit):
    folder = tmp_path / "toy"
    folder.mkdir(exist_ok=True)
    for split in SPLITS:
        for side, lang in enumerate(("xx", "yy")):
            (folder / f"{split}.{lang}").write_text("".join(" ".join(p[side]) + "\n" for p in pairs), "utf-8")
    try:
        task = load_task("toy:xx-yy", data_dir=tmp_path, cache_dir=tmp_path / "cache", vocab_size=40,
                         max_tokens_per_sentence=limit)
        assert task.examples("train")
        event("read")
    except ZooError as err:
        message = one_line(err, folder)
        assert message.endswith(f"longer than max_tokens_per_sentence = {limit} tokens on one side or both, so no "
                                "training pair is left") or "empty file" in message, message
