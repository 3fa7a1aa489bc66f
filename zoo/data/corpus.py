"""Reading a parallel corpus folder: `DATA_DIR/CORPUS/{train,valid,test}.{LANG}`, aligned by line.

Every way such a folder can be wrong is a DataError naming the file (and the line, for invalid
UTF-8), because a silently misaligned corpus trains a model that looks merely bad. Lines are split
on "\\n" only (str.splitlines would also split on U+2028 or U+0085 inside a sentence and break the
alignment) and stripped of surrounding whitespace, a trailing "\\r" included.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from zoo.data.task import SPLITS
from zoo.errors import DataError

if TYPE_CHECKING:
    from zoo.data.config import TaskConfig

DATA_ENV = "ZOO_DATA_DIR"
LAYOUT = "DATA_DIR/CORPUS/{train,valid,test}.LANG, UTF-8, one sentence per line, aligned by line"


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
                f"does not exist; set data_dir in the task config or ${DATA_ENV} to a folder laid out as {LAYOUT}"
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


def decode_utf8(data: bytes, where: str, rule: str) -> str:
    """`data` as text, or a DataError naming `where` and the line of the first invalid byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise DataError(f"{where}: line {line}: not valid UTF-8 ({err.reason}); {rule}") from None


def read_text_file(path: Path) -> TextFile:
    """The stripped lines of a UTF-8 file; DataError if it is missing, unreadable, empty or not UTF-8."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: missing; each language needs train, valid and test files ({LAYOUT})") from None
    except OSError as err:
        raise DataError(f"{path}: cannot read ({err.strerror})") from None
    text = decode_utf8(data, str(path), "corpus files must be UTF-8").removeprefix("\ufeff")
    if not text.strip():
        raise DataError(f"{path}: empty file; expected one sentence per line")
    lines = text.split("\n")
    if lines[-1] == "":  # the final newline ends the last line; it does not start another
        lines.pop()
    return TextFile(path, [line.strip() for line in lines], hashlib.sha256(data).hexdigest())


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


def check_corpus_files(data_dir: Path, corpus: str, src: str, tgt: str) -> Path:
    """The corpus folder, once every file the task will read is known to exist; nothing is read, so
    `zoo train` and experiment validation fail in a moment on a missing corpus, not after a tokenizer
    is trained or half a grid has run."""
    folder = corpus_folder(data_dir, corpus)
    available = languages(folder)
    for role, lang in (("source", src), ("target", tgt)):
        if lang not in available:
            raise DataError(f"{folder}: no {role} language {lang!r} (no {{train,valid,test}}.{lang} files; "
                            f"languages found: {', '.join(available) or 'none'})")
        for split in SPLITS:
            if not (folder / f"{split}.{lang}").is_file():
                raise DataError(f"{folder / f'{split}.{lang}'}: missing; each language needs train, valid and test "
                                f"files ({LAYOUT})")
    return folder


def check_files(config: TaskConfig) -> None:
    """A text task's corpus folder and six files exist (nothing is read); a synthetic task needs none.
    For `zoo train` and `zoo run` before anything trains; not for `zoo report`, which needs no data."""
    if config.kind == "text":
        name = config.parsed
        check_corpus_files(resolve_data_dir(config.data_dir), name.corpus, name.src, name.tgt)


@dataclass(frozen=True)
class ParallelSplit:
    src: TextFile
    tgt: TextFile


def read_corpus(data_dir: Path, corpus: str, src: str, tgt: str) -> dict[str, ParallelSplit]:
    """Every split of `corpus` in direction src -> tgt, checked for alignment."""
    folder = check_corpus_files(data_dir, corpus, src, tgt)
    splits = {}
    for split in SPLITS:
        pair = ParallelSplit(read_text_file(folder / f"{split}.{src}"), read_text_file(folder / f"{split}.{tgt}"))
        if len(pair.src.lines) != len(pair.tgt.lines):
            raise DataError(
                f"{pair.src.path} has {len(pair.src.lines)} lines but {pair.tgt.path} has {len(pair.tgt.lines)}; "
                "line N of one must be the translation of line N of the other"
            )
        splits[split] = pair
    return splits
