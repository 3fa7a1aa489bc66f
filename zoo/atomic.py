"""Atomic file writes: a reader (or a second process filling the same cache) never sees half a file."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

TEMP_SUFFIX = ".tmp"  # temporary files are ".<name>.<random>.tmp" beside their target


def write_atomic(path: Path, write: Callable[[Path], None]) -> None:
    """Call `write(tmp)` on a temporary file next to `path`, then rename it over `path`.

    The temporary file sits in the same folder so that os.replace is a rename, atomic on POSIX.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMP_SUFFIX)
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
