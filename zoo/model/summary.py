"""Plain-data views of specs and models for people: flattened fields, spec diffs, parameter counts."""

from __future__ import annotations

from collections import Counter
from typing import Any

from torch import nn

from zoo.model.spec import ModelSpec

DESCRIPTIVE = ("name", "description", "notes")


def flatten(spec: ModelSpec) -> dict[str, Any]:
    """{'d_model': 512, 'ffn.kind': 'linear', ...}: every model-defining field, dotted."""
    flat: dict[str, Any] = {}
    for key, value in spec.model_dump(mode="json", exclude=set(DESCRIPTIVE)).items():
        if isinstance(value, dict):
            for sub, sub_value in value.items():
                flat[f"{key}.{sub}"] = sub_value
        else:
            flat[key] = value
    return flat


def diff(a: ModelSpec, b: ModelSpec) -> list[tuple[str, Any, Any]]:
    """(field, value in a, value in b) for every model-defining field that differs."""
    flat_a, flat_b = flatten(a), flatten(b)
    keys = list(flat_a) + [k for k in flat_b if k not in flat_a]
    missing = "—"
    return [(k, flat_a.get(k, missing), flat_b.get(k, missing)) for k in keys
            if flat_a.get(k, missing) != flat_b.get(k, missing)]


def _component(name: str) -> str:
    parts = name.split(".")
    if parts[0] in ("src_embed", "tgt_embed"):
        side = "source" if parts[0] == "src_embed" else "target"
        return {"tokens": "embedding tables", "positions": "positional", "norm": "input norm"}[parts[1]] + (
            "" if parts[1] == "tokens" else f" ({side})")
    if parts[0] in ("encoder", "decoder"):
        if parts[1] == "final_norm":
            return f"{parts[0]} norms"
        sub = parts[3]
        if sub.startswith("res_"):
            return f"{parts[0]} norms"
        return f"{parts[0]} {sub.replace('_', '-')}"
    return parts[0]


def parameter_breakdown(model: nn.Module) -> list[tuple[str, int]]:
    """Trainable parameters per component; a shared tensor counts once, where it is first used."""
    counts: Counter[str] = Counter()
    for name, param in model.named_parameters():  # deduplicated by PyTorch
        if param.requires_grad:
            counts[_component(name)] += param.numel()
    return list(counts.items())
