"""The component registry's machinery: slot -> name -> implementation.

Each slot file in `zoo/components/` declares its slot once (`define_slot`) with the base class every
implementation must derive from, and registers implementations next to their code:

    @register("ffn", "conv1d", params=FFNParams)
    class Conv1dFFN(FeedForward): ...

`params` is a pydantic model of the implementation's own typed options (extra keys forbidden). The
registry derives from it the config class used in specs, which adds the slot's discriminator field
(`kind`, or `convention` for masks) fixed to the registered name. Registering a duplicate name or a
class that does not derive from the slot's base class is refused, so a new variant is one new
decorated class in one file and nothing else.

Look components up through zoo/registry.py, which hands out this registry with zoo's own components
registered; the slot files import this module, which imports none of them.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, create_model

from zoo.catalogue import describe
from zoo.errors import RegistryError, not_found


class SlotParams(BaseModel):
    """Base of every implementation's typed options. Unknown keys are errors, never silently dropped."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class Slot:
    name: str
    base: type
    key: str  # discriminator field in the spec: "kind" for most slots, "convention" for masks
    default: str
    doc: str


@dataclass(frozen=True)
class Entry:
    slot: str
    name: str
    impl: type
    config: type[SlotParams]  # params model + discriminator fixed to `name`
    doc: str  # the docstring's first paragraph, on one line
    capabilities: dict[str, Any] = field(default_factory=dict)

    @property
    def qualified(self) -> str:
        return f"{self.slot}.{self.name}"


class Registry:
    def __init__(self) -> None:
        self._slots: dict[str, Slot] = {}
        self._entries: dict[str, dict[str, Entry]] = {}

    # -- declaring -----------------------------------------------------------------------------
    def define_slot(self, name: str, *, base: type, default: str, key: str = "kind", doc: str = "") -> None:
        if name in self._slots:
            raise RegistryError(f"slot '{name}' is already defined")
        self._slots[name] = Slot(name, base, key, default, doc)
        self._entries[name] = {}

    def register(self, slot: str, name: str, *, params: type[SlotParams] = SlotParams, **capabilities: Any):
        """Class decorator adding `impl` to `slot` under `name`; refuses duplicates and wrong base classes."""
        spec_slot = self.slot(slot)

        def decorator(impl: type) -> type:
            if name in self._entries[slot]:
                raise RegistryError(f"{slot}.{name} is already registered "
                                    f"(by {self._entries[slot][name].impl.__qualname__})")
            if not (isinstance(impl, type) and issubclass(impl, spec_slot.base)):
                raise RegistryError(f"{slot}.{name}: {impl!r} must derive from {spec_slot.base.__qualname__}")
            if not issubclass(params, SlotParams):
                raise RegistryError(f"{slot}.{name}: params must derive from zoo.registry.SlotParams")
            doc = describe(impl.__doc__)
            config = create_model(
                f"{_camel(slot)}{_camel(name)}Config",
                __base__=params,
                __doc__=doc,
                **{spec_slot.key: (Literal[name], name)},  # type: ignore[dict-item]
            )
            self._entries[slot][name] = Entry(slot, name, impl, config, doc, dict(capabilities))
            impl.registry_name = name
            return impl

        return decorator

    def unregister(self, slot: str, name: str) -> None:
        """Remove an entry (e.g. before re-running a notebook cell that registers it again)."""
        self.get(slot, name)
        del self._entries[slot][name]

    # -- looking up ----------------------------------------------------------------------------
    def slot(self, name: str) -> Slot:
        try:
            return self._slots[name]
        except KeyError:
            raise RegistryError(f"unknown slot '{name}'{not_found(name, list(self._slots))}") from None

    def slots(self) -> list[str]:
        return list(self._slots)

    def get(self, slot: str, name: str) -> Entry:
        entries = self._entries[self.slot(slot).name]
        try:
            return entries[name]
        except (KeyError, TypeError):  # TypeError: a list or table where a name belongs
            key = self._slots[slot].key
            raise RegistryError(
                f"{slot}.{key}: unknown {slot} {name!r}{not_found(name, sorted(entries))}"
            ) from None

    def names(self, slot: str) -> list[str]:
        return sorted(self._entries[self.slot(slot).name])

    def entries(self, pattern: str = "*") -> list[Entry]:
        """All entries whose 'slot.name' matches a shell-style wildcard, e.g. 'attention.*' or '*norm*'."""
        entries = [e for slot in self._entries.values() for e in slot.values()]
        return sorted((e for e in entries if fnmatch.fnmatchcase(e.qualified, pattern)), key=lambda e: e.qualified)

    def list(self, pattern: str = "*") -> list[str]:
        """Qualified names ('slot.name') matching `pattern`, like timm's list_models."""
        return [e.qualified for e in self.entries(pattern)]


def _camel(text: str) -> str:
    return "".join(part.capitalize() for part in text.replace("-", "_").split("_"))


registry = Registry()
register = registry.register
