"""How a `zoo` process meets the world outside its commands: signals that stop it (SIGTERM and SIGHUP end it
as Ctrl-C does, with one line saying how to resume), and an OS that refuses a write (a read-only folder, a full
disk, a file where a folder must be, an output that cannot encode a character): one line naming the path,
never a traceback. zoo/cli/__init__.py's `main` and `run` use these; they hold no command of their own. (The one
form a warning takes, `warn`, is zoo/terminal.py's: training warns too.)"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import errno
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from zoo.atomic import TEMP_SUFFIX


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP (a scheduler's stop, a closed terminal), raised where Ctrl-C raises KeyboardInterrupt, so
    that it ends a command the same way: one line saying how to resume, exit 128 + the signal's number."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


STOPS = (signal.SIGTERM, signal.SIGHUP)
WRITE_ERRORS = {errno.EROFS, errno.ENOSPC, errno.EDQUOT}  # errors only a write can meet: "cannot write PATH"


def terminate(signum: int, frame: object) -> None:
    raise Terminated(signum)


@contextlib.contextmanager
def stops_as_interrupts() -> Iterator[None]:
    """While a command runs, SIGTERM and SIGHUP raise Terminated (in the main thread, where signals are handled);
    one ignored by whoever started zoo (`nohup` ignores SIGHUP) stays ignored. The handlers before are restored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {signum: signal.getsignal(signum) for signum in STOPS}
    for signum, handler in before.items():
        if handler is not signal.SIG_IGN:
            signal.signal(signum, terminate)
    try:
        yield
    finally:
        for signum, handler in before.items():
            if handler is not None:  # None: set outside Python, cannot be restored from here
                signal.signal(signum, handler)


def stopped(err: KeyboardInterrupt, args: argparse.Namespace) -> tuple[str, int]:
    """The line for a Ctrl-C, SIGTERM or SIGHUP, and the exit code (128 + the signal's number); `zoo run` and
    `zoo train` say how to resume from the checkpoints they keep."""
    signum = err.signum if isinstance(err, Terminated) else signal.SIGINT
    line = "zoo: interrupted" if signum == signal.SIGINT else f"zoo: terminated ({signal.Signals(signum).name})"
    again = {"run": "running the same command again resumes",
             "train": "running the same command again" + (" continues" if getattr(args, "resume", False)
                                                             else " with --resume continues")}
    if args.command in again:
        line += f"; checkpoints and finished results are kept: {again[args.command]} from the last checkpoint"
    elif args.command == "data" and getattr(args, "data_command", None) == "get":
        line += "; partial downloads are kept: running the same command again resumes them"
    return line, 128 + signum


class OutputError(OSError):
    """Standard output cannot be written (`zoo list > /dev/full`): not a file's error, and said once, by run()."""


class Output:
    """sys.stdout while `zoo` runs: its write errors, but a reader leaving (BrokenPipeError), are raised as
    OutputError, so that a full disk behind `>` is not taken for a file zoo writes."""

    def __init__(self, stream: Any):
        self.stream = stream

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)

    def _call(self, method: Callable, *args: Any) -> Any:
        try:
            return method(*args)
        except BrokenPipeError:
            raise
        except OSError as err:
            raise OutputError(err.errno, err.strerror) from None

    def write(self, text: str) -> int:
        return self._call(self.stream.write, text)

    def flush(self) -> None:
        self._call(self.stream.flush)


def os_error(err: OSError) -> str:
    """One line for an OSError that ended a command (a read-only folder, a full disk, a file where a folder must
    be): the path and what is wrong with it."""
    what = err.strerror or str(err)
    if err.filename is None:
        return what
    path = Path(os.fsdecode(err.filename))
    if path.name.startswith(".") and path.name.endswith(TEMP_SUFFIX):  # an atomic write's temporary file:
        path = path.parent  # the folder it was to be written in is the place to name
    if isinstance(err, (NotADirectoryError, FileExistsError)):
        blocking = next((p for p in (path, *path.parents) if p.exists() and not p.is_dir()), None)
        if blocking is not None:
            return f"{path}: {'' if blocking == path else f'{blocking} '}is a file, not a folder"
    also = f" -> {os.fsdecode(err.filename2)}" if err.filename2 else ""
    return f"{'cannot write ' if err.errno in WRITE_ERRORS else ''}{path}{also}: {what}"


def replace_unencodable() -> None:
    """Where stdout or stderr cannot encode every character (PYTHONIOENCODING=ascii), print what it cannot as '?'
    rather than fail on a table's first '—' or 'Δ'."""
    for stream in (sys.stdout, sys.stderr):
        encoding = getattr(stream, "encoding", None)
        if (encoding and not codecs.lookup(encoding).name.startswith("utf") and hasattr(stream, "reconfigure")
                and getattr(stream, "errors", None) == "strict"):
            stream.reconfigure(errors="replace")


def drop_output() -> None:
    """Point stdout at /dev/null: what it still holds cannot be written, and must not fail again at exit."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def add_plugin_option(parser: argparse.ArgumentParser, default: Any = None) -> None:
    """`--plugin PATH_OR_MODULE` (repeatable) on a command: every command loads a user's plugins before it validates
    anything. `default`: [] on a command; argparse.SUPPRESS on a sub-command, so that the option given before the
    sub-command's name (`zoo data --plugin P get`) is not reset by the sub-command's default."""
    parser.add_argument("--plugin", metavar="PATH_OR_MODULE", action="append",
                        default=[] if default is None else default,
                        help="load a plugin (a .py file, a folder with __init__.py, or a module) before anything is "
                        "validated; repeatable. Also: $ZOO_PLUGINS, entry points in the group 'zoo.plugins', an "
                        "experiment file's `plugins`")


def positive_number(text: str) -> float:
    """An argparse type for a size or a tolerance: a finite number above 0, else one line and exit 2."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed; expected a number above 0")
    return value
