"""Downloads for `zoo data get`: checksummed, resumable, with a progress bar, and one line when they fail.

A file is fetched into `PATH.part`, from where the last try stopped (an HTTP Range request), then its checksum
is checked and it is renamed to PATH, so PATH is only ever a whole, verified file; a file already there is checked
again and used. A transfer that breaks off is resumed at once, up to RETRIES times; after that, or after a
Ctrl-C, the `.part` stays and the same command resumes it. A wrong checksum deletes the `.part` (resuming it
would only grow a wrong file) and is a DataError, as are an unreachable host and an HTTP error: one line each.

$ZOO_DATA_MIRROR (e.g. http://127.0.0.1:8000) replaces the scheme and host of every URL, keeping the host as the
first folder: https://www.statmt.org/wmt13/x.tgz is fetched from http://127.0.0.1:8000/www.statmt.org/wmt13/x.tgz,
the layout `wget -x URL` leaves. For a local mirror, a machine without internet, and the offline tests.
"""

from __future__ import annotations

import hashlib
import http.client
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.error import HTTPError, URLError
from urllib.parse import urlsplit
from urllib.request import Request, urlopen

from rich.progress import Progress, TaskID

from zoo.errors import DataError

MIRROR_ENV = "ZOO_DATA_MIRROR"
SCHEMES = ("http", "https", "ftp")  # what urllib fetches from a host
RETRIES = 3  # fresh requests after a transfer broke off, each resuming where the last one stopped
TIMEOUT_S = 60  # a silent connection is a broken one
CHUNK = 1 << 20


@dataclass(frozen=True)
class Source:
    """One file to fetch and the checksum it must have: `algorithm` is 'sha256', or 'md5' where that is all the
    publisher gives (sacreBLEU's test sets)."""

    url: str
    digest: str
    algorithm: str = "sha256"


def mirrored(url: str) -> str:
    """`url`, or its copy under $ZOO_DATA_MIRROR when that is set (see the module docstring)."""
    mirror = os.environ.get(MIRROR_ENV, "").rstrip("/")
    if not mirror:
        return url
    if urlsplit(mirror).scheme not in SCHEMES or not urlsplit(mirror).netloc:
        raise DataError(f"${MIRROR_ENV}: {mirror!r} is not a URL zoo can fetch from; give one such as "
                        "http://127.0.0.1:8000 (schemes: " + ", ".join(SCHEMES) + ")")
    parts = urlsplit(url)
    return f"{mirror}/{parts.netloc}{parts.path}"


def cached_name(url: str) -> Path:
    """Where a download cache keeps `url`: host/path, so that two files of one name never meet."""
    parts = urlsplit(url)
    return Path(parts.netloc, *parts.path.strip("/").split("/"))


def fetch(source: Source, path: Path, progress: Progress | None = None) -> Path:
    """`path`, holding the file `source` names with its checksum: downloaded (or its `.part` resumed) unless
    it is there already. A DataError of one line if it cannot be."""
    if path.is_file():
        if _digest(path, source.algorithm) == source.digest:
            return path
        path.unlink()  # changed since it was checked: fetched again, like a file never fetched
    part = path.with_name(path.name + ".part")
    part.parent.mkdir(parents=True, exist_ok=True)
    url = mirrored(source.url)
    task = progress.add_task(path.name, total=None) if progress is not None else None
    for attempt in range(RETRIES + 1):
        try:
            _transfer(url, part, progress, task)
            break
        except BrokenOff as err:
            if attempt == RETRIES:
                have = part.stat().st_size if part.exists() else 0
                raise DataError(f"{url}: the download broke off after {have:,} bytes ({err}); run the same command "
                                f"again to resume it from {part}") from None
    got = _digest(part, source.algorithm)
    if got != source.digest:
        part.unlink()
        raise DataError(f"{url}: {source.algorithm} checksum mismatch (got {got}, expected {source.digest}); the "
                        "download was deleted: run again to fetch it anew, or, if the file changed at its source, "
                        "the dataset entry needs the new checksum")
    part.replace(path)
    return path


class BrokenOff(Exception):
    """The body of a response stopped arriving (a reset, a timeout, fewer bytes than announced): worth a retry."""


def _transfer(url: str, part: Path, progress: Progress | None, task: TaskID | None) -> None:
    """Append the rest of `url` to `part`. Refusals (no such host, HTTP errors) are DataErrors at once, a body
    that stops arriving is BrokenOff; an error writing `part` (a full disk) is the OSError it is."""
    have = part.stat().st_size if part.exists() else 0
    request = Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    try:
        response = urlopen(request, timeout=TIMEOUT_S)
    except HTTPError as err:
        if err.code == 416 and have:  # the .part is whole already: its checksum decides
            return
        raise DataError(f"{url}: HTTP {err.code} {err.reason}") from None
    except (URLError, OSError) as err:
        hint = (f"is the mirror in ${MIRROR_ENV} up?" if os.environ.get(MIRROR_ENV)
                else f"check the network, or set ${MIRROR_ENV} to a mirror that holds the file")
        raise DataError(f"{url}: cannot reach it ({_reason(err)}); {hint}") from None
    with response:
        if have and response.status != 206:  # the server ignored the Range request and sends the whole file
            have = 0
        length = int(response.headers.get("Content-Length") or -1)
        if progress is not None:
            progress.update(task, total=have + length if length >= 0 else None, completed=have)
        received = 0
        with part.open("ab" if have else "wb") as out:
            while chunk := _read(response):
                out.write(chunk)
                received += len(chunk)
                if progress is not None:
                    progress.advance(task, len(chunk))
    if received < length:  # http.client ends a body cut short without an error
        raise BrokenOff(f"the connection closed {length - received:,} bytes early")


def _read(response: http.client.HTTPResponse) -> bytes:
    try:
        return response.read(CHUNK)
    except (OSError, http.client.HTTPException) as err:
        raise BrokenOff(_reason(err)) from None


def _digest(path: Path, algorithm: str) -> str:
    digest = hashlib.new(algorithm)
    with path.open("rb") as stream:
        while block := stream.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _reason(err: BaseException) -> str:
    reason = getattr(err, "reason", None) or err
    return " ".join(f"{type(err).__name__}: {reason}".split())
