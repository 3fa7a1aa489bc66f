"""Reading a parallel corpus folder: `DATA_DIR/CORPUS/{train,valid,test}.{LANG}`, aligned by line.

Every way such a folder can be wrong is a DataError naming the file (and the line), because a silently
misaligned corpus trains a model that looks merely bad. Lines are split on "\\n" only (str.splitlines
would also split on U+2028 or U+0085 inside a sentence and break the alignment) and stripped of
surrounding whitespace, a trailing "\\r" included. Files are read a line at a time, and each line is
checked as it is read, so a hostile file costs at most MAX_LINE_BYTES of memory before it is refused:

- a line longer than MAX_LINE_BYTES (64 KiB; a file without line breaks, or not text at all);
- a line that is not valid UTF-8;
- a NUL byte anywhere (binary data, or UTF-16 text);
- a byte order mark (U+FEFF) anywhere but at the very start of the file, where it is dropped;
- a "\\r" inside a line (the file uses old Mac CR line endings, so it reads as one line);
- a file with no sentence at all, and two files of a pair with different line counts.

A line blank on both sides, or on one side only, is read as it is (wmt-ende-10k's train.en line 5 is
blank against a German sentence, and its records were trained so); lines blank on one side only are
counted on stderr, once per pair of files.
"""

from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from zoo.data.task import DEFAULT_TEST_SETS, SPLITS
from zoo.errors import DataError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from zoo.data.config import TaskConfig

DATA_ENV = "ZOO_DATA_DIR"
# What a corpus folder may be called: its name is the CORPUS of task names CORPUS:SRC-TGT (zoo/data/text.py).
# Hyphens are fine (wmt-ende-10k).
CORPUS_NAME = r"[^:/\\\s]+"
LAYOUT = "DATA_DIR/CORPUS/{train,valid,test}.LANG, UTF-8, one sentence per line, aligned by line"
MAX_LINE_BYTES = 64 * 1024  # a sentence is far shorter: a longer line is a file without "\n" breaks, or not text
BLOCK_BYTES = 64 * 1024  # files are read this much at a time
BOM = "\ufeff"
# Characters no stripped line may hold, and why (a BOM is dropped from the start of a file before this).
FORBIDDEN = {
    "\0": "holds a NUL byte (binary data, or UTF-16 text?); corpus files must be UTF-8",
    BOM: "holds a byte order mark (U+FEFF), allowed only at the start of a file",
    "\r": "holds a carriage return (\\r) inside the line: the file seems to use CR line endings; convert them to \\n",
}


def resolve_data_dir(data_dir: Path | None) -> Path:
    """The folder holding corpus folders: `data_dir`, else $ZOO_DATA_DIR, else ../shared/data from the CWD."""
    if data_dir is not None:
        where, folder = "data_dir", Path(data_dir)
    elif os.environ.get(DATA_ENV):
        where, folder = f"${DATA_ENV}", Path(os.environ[DATA_ENV])
    else:
        folder = Path.cwd().parent / "shared" / "data"
        if not folder.is_dir():
            raise DataError(
                f"data_dir: not set, ${DATA_ENV} is not set and {folder} (../shared/data from the current folder) "
                f"does not exist; fetch the corpus (`zoo data get CORPUS` puts it in data/; `zoo data list`), then "
                f"set ${DATA_ENV}=data, or `data_dir` in the experiment file (or `zoo train --data-dir`): a folder "
                f"laid out as {LAYOUT}"
            )
        return folder.resolve()
    if not folder.is_dir():
        raise DataError(f"{where}: {folder} is not a folder (expected one laid out as {LAYOUT})")
    return folder.resolve()


@dataclass(frozen=True)
class TextFile:
    """One file's sentences and the sha256 of its bytes (the tokenizer cache key hashes these)."""

    path: Path
    lines: list[str]
    sha256: str


def decode_utf8(data: bytes, where: str, rule: str, first_line: int = 1) -> str:
    """`data` as text, or a DataError naming `where` and the line of the first invalid byte (`data` starts
    at line `first_line`)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = first_line + data.count(b"\n", 0, err.start)
        raise DataError(f"{where}: line {line}: not valid UTF-8 ({err.reason}); {rule}") from None


def _too_long(path: Path, number: int) -> DataError:
    """The error for a long line, whole in a run of lines or still growing at the end of what was read."""
    return DataError(f"{path}: line {number}: longer than {MAX_LINE_BYTES} bytes; expected one sentence per line "
                     "(is the file text with \\n line breaks?)")


def _check_lengths(run: bytes, path: Path, number: int) -> None:
    """No line of `run` (whose first line is line `number`) is longer than MAX_LINE_BYTES."""
    parts = run.split(b"\n")
    if max(map(len, parts)) > MAX_LINE_BYTES:
        raise _too_long(path, number + next(i for i, part in enumerate(parts) if len(part) > MAX_LINE_BYTES))


def _line_runs(stream: BinaryIO, path: Path) -> Iterator[tuple[int, bytes]]:
    """(number of its first line, bytes) for runs of whole lines of `stream`, each ending in "\\n" but the
    file's last. Read BLOCK_BYTES at a time, so the checks run over many lines at once, and a line longer
    than MAX_LINE_BYTES is refused as soon as that many bytes of it are in: a 1 GB file without line
    breaks costs one block, not 1 GB."""
    number, tail = 1, b""
    while block := stream.read(BLOCK_BYTES):
        tail += block
        cut = tail.rfind(b"\n") + 1
        if cut:
            run, tail = tail[:cut], tail[cut:]
            _check_lengths(run, path, number)
            yield number, run
            number += run.count(b"\n")
        if len(tail) > MAX_LINE_BYTES:
            raise _too_long(path, number)
    if tail:
        yield number, tail


def _first_problem(lines: list[str]) -> tuple[int, str] | None:
    """(index, what is wrong) of the first of these stripped lines that holds a FORBIDDEN character."""
    joined = "\n".join(lines)  # one search per character, not one per line
    found = [(joined.count("\n", 0, at), problem) for char, problem in FORBIDDEN.items()
             if (at := joined.find(char)) >= 0]
    return min(found, default=None)


def _checked_lines(run: bytes, path: Path, number: int) -> list[str]:
    """The stripped lines of `run`, which starts at line `number` of `path`; a DataError naming the file and
    the line if one breaks a rule of the module docstring."""
    text = decode_utf8(run, str(path), "corpus files must be UTF-8", first_line=number)
    if number == 1:
        text = text.removeprefix(BOM)
    lines = [line.strip() for line in text.split("\n")]
    if text.endswith("\n"):  # the final newline ends the last line; it does not start another
        lines.pop()
    problem = _first_problem(lines)
    if problem:
        raise DataError(f"{path}: line {number + problem[0]}: {problem[1]}")
    return lines


def read_text_file(path: Path) -> TextFile:
    """The stripped lines of a UTF-8 file, read and checked a block at a time (the rules are in the module
    docstring); DataError if it is missing, unreadable, empty or breaks a rule."""
    digest, lines = hashlib.sha256(), []
    try:
        with path.open("rb") as stream:
            for number, run in _line_runs(stream, path):
                digest.update(run)
                lines += _checked_lines(run, path, number)
    except FileNotFoundError:
        raise DataError(f"{path}: missing; each language needs train, valid and test files ({LAYOUT})") from None
    except OSError as err:
        raise DataError(f"{path}: cannot read ({err.strerror})") from None
    if not any(lines):
        raise DataError(f"{path}: empty file; expected one sentence per line")
    return TextFile(path, lines, digest.hexdigest())


def corpus_folder(data_dir: Path, corpus: str) -> Path:
    """`data_dir/corpus`, or a DataError listing the corpora that are there."""
    folder = data_dir / corpus
    if not folder.is_dir():
        corpora = sorted(p.name for p in data_dir.iterdir() if p.is_dir() and not p.name.startswith("."))
        raise DataError(f"{folder}: no such corpus folder "
                        f"(corpora found in {data_dir}: {', '.join(corpora) or 'none'})")
    return folder


def languages(folder: Path) -> list[str]:
    """Language codes with at least one split file in `folder` (train.de -> de)."""
    return sorted({p.suffix[1:] for p in folder.iterdir() if p.is_file() and p.stem in SPLITS and p.suffix[1:]})


def corpus_files(src: str, tgt: str, test_sets: tuple[str, ...] = DEFAULT_TEST_SETS) -> list[str]:
    """The file names a task in direction src -> tgt reads: train, valid and each test set, both languages."""
    return [f"{stem}.{lang}" for stem in ("train", "valid", *test_sets) for lang in (src, tgt)]


def check_corpus_files(data_dir: Path, corpus: str, src: str, tgt: str,
                       test_sets: tuple[str, ...] = DEFAULT_TEST_SETS) -> Path:
    """The corpus folder, once every file the task will read is known to exist; nothing is read, so
    `zoo train` and experiment validation fail in a moment on a missing corpus, not after a tokenizer
    is trained or half a grid has run."""
    folder = corpus_folder(data_dir, corpus)
    available = languages(folder)
    for role, lang in (("source", src), ("target", tgt)):
        if lang not in available:
            raise DataError(f"{folder}: no {role} language {lang!r} (no {{train,valid,test}}.{lang} files; "
                            f"languages found: {', '.join(available) or 'none'})")
    for name in corpus_files(src, tgt, test_sets):
        if not (folder / name).is_file():
            extra = "" if name.split(".")[0] in SPLITS else "; it is a test set the task's test_sets names"
            raise DataError(f"{folder / name}: missing; each language needs train, valid and test files "
                            f"({LAYOUT}){extra}")
    return folder


def check_files(config: TaskConfig) -> None:
    """A text task's corpus folder and six files exist (nothing is read); a synthetic task needs none.
    For `zoo train` and `zoo run` before anything trains; not for `zoo report`, which needs no data."""
    if config.kind == "text":
        name = config.parsed
        check_corpus_files(resolve_data_dir(config.data_dir), name.corpus, name.src, name.tgt, config.test_sets)


@dataclass(frozen=True)
class ParallelSplit:
    src: TextFile
    tgt: TextFile


def read_corpus(data_dir: Path, corpus: str, src: str, tgt: str,
                test_sets: tuple[str, ...] = DEFAULT_TEST_SETS) -> dict[str, ParallelSplit]:
    """train, valid and each of `test_sets` of `corpus` in direction src -> tgt, by file stem, each checked
    for alignment."""
    folder = check_corpus_files(data_dir, corpus, src, tgt, test_sets)
    splits = {}
    for stem in ("train", "valid", *test_sets):
        pair = ParallelSplit(read_text_file(folder / f"{stem}.{src}"), read_text_file(folder / f"{stem}.{tgt}"))
        _check_aligned(pair)
        _note_one_sided_blanks(pair)
        splits[stem] = pair
    return splits


_noted: set[tuple[str, str]] = set()


def one_sided_blanks(pair: ParallelSplit) -> list[int]:
    """The line numbers (from 1) where one file of the pair is blank and the other holds a sentence."""
    return [number for number, (a, b) in enumerate(zip(pair.src.lines, pair.tgt.lines), 1) if bool(a) != bool(b)]


def _note_one_sided_blanks(pair: ParallelSplit) -> None:
    """Say, once per pair of files in a process, how many lines are blank on one side only. Such a pair is kept
    as it is (the shipped WMT sample has one, and its records were trained with it), but not silently: it
    teaches the model to translate a sentence into nothing, or nothing into a sentence."""
    lines = one_sided_blanks(pair)
    key = (pair.src.sha256, pair.tgt.sha256)
    if lines and key not in _noted:
        _noted.add(key)
        sys.stderr.write(f"zoo: note: {pair.src.path} / {pair.tgt.path}: {len(lines)} line(s) blank on one side only "
                         f"(first: line {lines[0]}); kept as pairs with an empty sentence\n")


def _check_aligned(pair: ParallelSplit) -> None:
    """Both files of a pair have as many lines, or a DataError naming both, their counts and the first line
    of the longer one without a counterpart."""
    src, tgt = len(pair.src.lines), len(pair.tgt.lines)
    if src != tgt:
        longer = pair.src.path if src > tgt else pair.tgt.path
        raise DataError(f"{pair.src.path} has {src} lines but {pair.tgt.path} has {tgt}: line {min(src, tgt) + 1} "
                        f"of {longer.name} has no counterpart; line N of one must translate line N of the other")
