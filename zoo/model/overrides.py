"""Dotted overrides ('ffn.kind=conv1d', 'lr=3e-4') applied to a nested config: `--set`, a variant's `set`
and `train`, and a preset's `extends`.

A config of its own, not a private helper of spec.py: the model spec, the training config and the presets
all apply overrides the same way, and presets.py, which spec.py reads presets with, must not import spec.py.
It knows the component registry only to switch a slot cleanly (see `apply_overrides`).
"""

from __future__ import annotations

import json
from typing import Any

from zoo.errors import SpecError
from zoo.registry import registry


def _is_switch(dotted: str) -> bool:
    parts = dotted.split(".")
    return len(parts) == 2 and parts[0] in registry.slots() and parts[1] == registry.slot(parts[0]).key


def apply_overrides(data: dict[str, Any], overrides: dict[str, Any] | None) -> dict[str, Any]:
    """Set dotted keys ('ffn.kind') in a nested spec dict; a copy is returned.

    Switching a slot's implementation (`attention.kind=torch-mha`) drops the options the new
    implementation does not have; switches apply first, so options given with them are kept.
    """
    data = json.loads(json.dumps(data))
    ordered = sorted((overrides or {}).items(), key=lambda item: not _is_switch(item[0]))
    for dotted, value in ordered:
        parts = dotted.split(".")
        node = data
        for i, part in enumerate(parts[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise SpecError(f"{dotted}: {'.'.join(parts[: i + 1])} is a value, not a table of options")
            node = child
        if _is_switch(dotted) and value in registry.names(parts[0]):
            accepted = set(registry.get(parts[0], value).config.model_fields)
            for stale in [key for key in node if key not in accepted]:
                del node[stale]
        node[parts[-1]] = value
    return data
