"""Catalogue: a name -> class registry for one kind of pluggable thing (tasks, metrics, executors).

The component registry (zoo/registry.py) has slots and typed options; the other open registries need
less: a name, a base class the entry must derive from, and a clear error for a name that is taken or
unknown. Entries register next to their code, and a plugin registers its own the same way:

    @metrics.register("ter")
    class TER(Metric): ...
"""

from __future__ import annotations

import inspect
import re
from typing import Callable, Generic, TypeVar

from zoo.errors import RegistryError, not_found

T = TypeVar("T", bound=type)


def describe(doc: str | None, full: bool = False) -> str:
    """What an entry is, from its docstring, as `zoo list` shows it: the first paragraph on one line (cutting at
    the first line of the source cut sentences in half), or with `full` every paragraph, each on one line."""
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", inspect.cleandoc(doc or ""))]
    return "\n\n".join(paragraphs if full else paragraphs[:1])


class Catalogue(Generic[T]):
    def __init__(self, what: str, base: type) -> None:
        self.what = what  # 'task', 'metric', ...: how messages name an entry
        self.base = base
        self._entries: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Class decorator adding an entry under `name`; refuses a taken name and a class of another base."""

        def decorator(entry: T) -> T:
            if name in self._entries:
                raise RegistryError(f"{self.what} {name!r} is already registered "
                                    f"(by {self._entries[name].__module__}.{self._entries[name].__qualname__})")
            if not (isinstance(entry, type) and issubclass(entry, self.base)):
                raise RegistryError(f"{self.what} {name!r}: {entry!r} must derive from "
                                    f"{self.base.__module__}.{self.base.__qualname__}")
            self._entries[name] = entry
            entry.registry_name = name
            return entry

        return decorator

    def unregister(self, name: str) -> None:
        """Remove an entry (a test's, or a notebook cell's about to register it again)."""
        self.get(name)
        del self._entries[name]

    def get(self, name: str) -> T:
        try:
            return self._entries[name]
        except (KeyError, TypeError):  # TypeError: a list or table where a name belongs
            raise RegistryError(f"unknown {self.what} {name!r}{not_found(name, self.names())}") from None

    def names(self) -> list[str]:
        """Names in registration order: zoo's own first, then plugins' in the order they loaded."""
        return list(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries
