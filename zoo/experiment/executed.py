"""The modules a plugin imports when its code runs, rather than when it loads: part of what decides a cell's numbers.

A plugin's fingerprint (zoo/plugins.py) covers the modules first imported while it loaded. A helper it imports later,
inside `__init__` or `forward` (`from myhelpers import scale`), is first imported while zoo runs the plugin's code:
in a cell, or in the check of its components before a grid trains (zoo/testing/__init__.py, `preflight`). Editing that
helper changes the numbers and not the definition, so `watching` notes each module of the user's own (not the
standard library's, an installed package's or zoo's: `plugins.brought_in`) first imported inside it; the modules
a plugin brought in as it loaded were imported before, and are in its fingerprint. A cell's record keeps them in
`provenance.imported` ({module: 16 hex digits of its file's `plugins.fingerprint`}); the next `zoo run` or report
looks up the file each module imports from now and compares (`changes`): a file edited, or one no longer found,
makes the cell stale, naming the module.

Once a module is imported, which cell's code imported it cannot be told: a process that runs several cells (`zoo
run` itself, a worker) records in each cell of a plugin the modules noted in any of them, more stale cells rather
than fewer. A cell whose definition names no plugin runs no plugin's code, and records none.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.machinery import ModuleSpec
from pathlib import Path
from typing import Any

from zoo import plugins
from zoo.experiment import store

FIELD = "imported"  # the provenance field
_noted: dict[str, str] = {}  # module -> its hash, for every module noted in this process


def _hash(path: Path) -> str:
    return plugins.fingerprint([path])[:16]


@contextmanager
def watching() -> Iterator[None]:
    """Note the user's own modules first imported inside the block, also when it raises: a later cell of this
    process runs them without importing them again."""
    before = set(sys.modules)
    try:
        yield
    finally:
        _noted.update({name: _hash(path) for name, path in plugins.brought_in(before).items()})


def imported(definition: dict[str, Any]) -> dict[str, str]:
    """What a record of a cell of `definition` keeps in `provenance.imported`: {module: hash} of every module noted
    in this process, sorted; {} for a cell that runs no plugin."""
    return dict(sorted(_noted.items())) if definition.get("plugins") else {}


def _file(name: str) -> Path | None:
    """The file module `name` imports from now, as the import system finds it (sys.modules, then each finder on
    sys.meta_path), without importing it or its parents: their code would run."""
    module = sys.modules.get(name)
    if module is not None:
        origin = getattr(module, "__file__", None)
    else:
        spec = _spec(name)
        origin = spec.origin if spec is not None and spec.has_location else None
    return Path(origin).resolve() if origin else None


def _spec(name: str) -> ModuleSpec | None:
    """The spec of module `name`, not imported, found inside its parent package's folders."""
    parent = name.rpartition(".")[0]
    search = None
    if parent:
        above = sys.modules.get(parent)
        search = getattr(above, "__path__", None) if above is not None else getattr(
            _spec(parent), "submodule_search_locations", None)
        if not search:
            return None
    for finder in sys.meta_path:
        try:
            found = finder.find_spec(name, search) if hasattr(finder, "find_spec") else None
        except (ImportError, ValueError):
            continue
        if found is not None:
            return found
    return None


def current(name: str) -> str | None:
    """The hash of the file module `name` imports from now; None where there is none."""
    path = _file(name)
    return _hash(path) if path is not None and path.is_file() else None


def changes(provenance: dict[str, Any]) -> list[str]:
    """'imported module myhelpers: <hash> -> <hash>' for every module a record's `provenance` names whose file
    imports with another content now ('(absent)' where none is found)."""
    out = []
    for name, recorded in (provenance.get(FIELD) or {}).items():
        now = current(name)
        if now != recorded:
            out.append(f"imported module {name}: {recorded} -> {now or '(absent)'}")
    return out


def what_changed(record, definition: dict[str, Any]) -> list[str]:
    """What makes `record` (zoo.experiment.record.Record) stale under the cell's `definition` now: the fields of
    its definition that differ (store.changes), then the modules it imported whose files did."""
    return store.changes(record.definition, definition) + changes(record.provenance)
