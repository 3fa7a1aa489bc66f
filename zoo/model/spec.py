"""ModelSpec: the pydantic-validated description of one model, and load_spec to read one.

Each component slot is a table whose discriminator (`kind`, or `convention` for `mask`) names a
registered implementation; its other keys are validated against that implementation's own params
model. Components registered after import are picked up: nothing here lists them.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, SerializeAsAny, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from zoo.config_io import Count, Label, Number, describe_error, read_config_file
from zoo.errors import IncompatibleComponents, RegistryError, SpecError
from zoo.model.overrides import apply_overrides
from zoo.model.presets import preset_data, with_base
from zoo.registry import SlotParams, registry

SLOTS = ("residual", "norm", "ffn", "attention", "mask", "embedding", "positional", "output", "init")


def _slot_validator(slot: str):
    def validate(value: Any) -> SlotParams:
        if isinstance(value, SlotParams):
            value = value.model_dump()
        if value is None:
            value = {}
        if not isinstance(value, dict):
            message = f"{slot}: expected a table of options such as {{kind = ...}}, got {value!r}"
            raise PydanticCustomError("zoo_slot", message)
        key = registry.slot(slot).key
        name = value.get(key, registry.slot(slot).default)
        try:
            entry = registry.get(slot, name)
        except RegistryError as err:
            raise PydanticCustomError("zoo_slot", str(err)) from None
        try:
            return entry.config.model_validate({**value, key: name})
        except ValidationError as err:
            message = "; ".join(describe_error(e, entry.config, prefix=(slot,)) for e in err.errors())
            raise PydanticCustomError("zoo_slot", message) from None

    return validate


def _slot_field(slot: str):
    return Annotated[SerializeAsAny[SlotParams], BeforeValidator(_slot_validator(slot))]


class ModelSpec(BaseModel):
    """A complete encoder-decoder Transformer: sizes plus one chosen implementation per slot."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Label = "custom"
    description: str = ""
    notes: str = Field("", description="how the preset reproduces its source, and what it could not")
    # Upper bounds far above any model a zoo comparison trains, so that a typo (d_model=1518500250) is an
    # error naming the field, not an allocation that overflows or exhausts memory.
    d_model: Count = Field(512, gt=0, le=65536)
    n_heads: Count = Field(8, gt=0, le=1024)
    d_ff: Count = Field(2048, gt=0, le=262144)
    encoder_layers: Count = Field(6, gt=0, le=1024)
    decoder_layers: Count = Field(6, gt=0, le=1024)
    dropout: Number = Field(0.1, ge=0, lt=1)
    src_vocab: Count = Field(32000, gt=0, le=2**24)
    tgt_vocab: Count = Field(32000, gt=0, le=2**24)
    pad_id: Count = Field(0, ge=0, le=2**24)

    residual: _slot_field("residual") = Field(default_factory=dict, validate_default=True)  # type: ignore[valid-type]
    norm: _slot_field("norm") = Field(default_factory=dict, validate_default=True)  # type: ignore[valid-type]
    ffn: _slot_field("ffn") = Field(default_factory=dict, validate_default=True)  # type: ignore[valid-type]
    attention: _slot_field("attention") = Field(default_factory=dict, validate_default=True)  # type: ignore[valid-type]
    mask: _slot_field("mask") = Field(default_factory=dict, validate_default=True)  # type: ignore[valid-type]
    embedding: _slot_field("embedding") = Field(default_factory=dict, validate_default=True)  # type: ignore[valid-type]
    positional: _slot_field("positional") = Field(default_factory=dict, validate_default=True)  # type: ignore[valid-type]
    output: _slot_field("output") = Field(default_factory=dict, validate_default=True)  # type: ignore[valid-type]
    init: _slot_field("init") = Field(default_factory=dict, validate_default=True)  # type: ignore[valid-type]

    @model_validator(mode="after")
    def _consistent(self) -> ModelSpec:
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model: {self.d_model} is not divisible by n_heads = {self.n_heads}")
        sharing = self.embedding.sharing
        if sharing != "none" and self.src_vocab != self.tgt_vocab:
            raise ValueError(
                f'embedding.sharing: "{sharing}" needs src_vocab == tgt_vocab '
                f"(got {self.src_vocab} and {self.tgt_vocab}); "
                'use sharing = "none" or equal vocabularies'
            )
        if sharing == "all" and self.embedding.extra_rows:
            raise ValueError('embedding.extra_rows: must be 0 with sharing = "all" '
                             "(the output projection has tgt_vocab rows)")
        if self.pad_id >= min(self.src_vocab, self.tgt_vocab):
            raise ValueError(f"pad_id: {self.pad_id} is outside the vocabulary "
                             f"(src_vocab {self.src_vocab}, tgt_vocab {self.tgt_vocab})")
        check_compatible(self)
        return self

    # -- derived values ------------------------------------------------------------------------
    def rate(self, slot: str) -> float:
        """The dropout rate a slot uses: its own `dropout` if set, else the spec's."""
        own = getattr(getattr(self, slot), "dropout", None)
        return self.dropout if own is None else own

    def impl(self, slot: str) -> type:
        value = getattr(self, slot)
        return registry.get(slot, getattr(value, registry.slot(slot).key)).impl

    def digest(self) -> str:
        """Stable 12-hex-digit hash of everything that defines the model (not name/description/notes)."""
        payload = self.model_dump(mode="json", exclude={"name", "description", "notes"})
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]

    def with_overrides(self, overrides: dict[str, Any]) -> ModelSpec:
        return validate_spec(apply_overrides(self.model_dump(mode="json"), overrides), source=self.name)

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The schema with each slot as a oneOf over its registered implementations' options."""
        schema = super().model_json_schema(*args, **kwargs)
        for slot in SLOTS:
            key = registry.slot(slot).key
            variants = []
            for name in registry.names(slot):
                sub = registry.get(slot, name).config.model_json_schema()
                schema.setdefault("$defs", {}).update(sub.pop("$defs", {}))
                variants.append(sub)
            schema["properties"][slot] = {
                "title": slot.capitalize(),
                "description": registry.slot(slot).doc,
                "oneOf": variants,
                "discriminator": {"propertyName": key},
            }
        return schema


def check_compatible(spec: ModelSpec) -> None:
    """Refuse pairings a component declares it cannot honour, instead of computing something else."""
    attention, mask = spec.impl("attention"), spec.impl("mask")
    if mask.rezero and not attention.supports_rezero:
        raise IncompatibleComponents(
            f"attention.kind: {spec.attention.kind!r} cannot honour mask.convention {spec.mask.convention!r} "
            "(it cannot zero blocked weights after the softmax); use attention.kind 'sdpa' or 'matmul'"
        )
    positional = spec.impl("positional")
    d_head = spec.d_model // spec.n_heads
    if d_head % positional.head_dim_multiple:
        raise IncompatibleComponents(
            f"positional.kind: {spec.positional.kind!r} needs d_model / n_heads to be a multiple of "
            f"{positional.head_dim_multiple} (it rotates pairs of a head's dimensions); got {spec.d_model} / "
            f"{spec.n_heads} = {d_head}"
        )
    if positional.relative_positions and not attention.supports_relative_positions:
        raise IncompatibleComponents(
            f"attention.kind: {spec.attention.kind!r} cannot honour positional.kind {spec.positional.kind!r} "
            "(it has no hook to rotate queries and keys or bias their scores); use attention.kind 'sdpa' or 'matmul'"
        )


# -- errors ----------------------------------------------------------------------------------------
def format_validation_error(err: ValidationError, source: str = "") -> str:
    where = f"{source}: " if source else ""
    return where + "; ".join(describe_error(e, ModelSpec) for e in err.errors())


def validate_spec(data: dict[str, Any], source: str = "") -> ModelSpec:
    try:
        return ModelSpec.model_validate(data)
    except ValidationError as err:
        causes = [e.get("ctx", {}).get("error") for e in err.errors()]
        kind = IncompatibleComponents if any(isinstance(c, IncompatibleComponents) for c in causes) else SpecError
        raise kind(format_validation_error(err, source)) from None


def load_spec(name_or_path: str | Path | ModelSpec, overrides: dict[str, Any] | None = None) -> ModelSpec:
    """A preset name ('paper-base') or a spec file path, with dotted overrides applied, validated."""
    if isinstance(name_or_path, ModelSpec):
        return name_or_path.with_overrides(overrides or {}) if overrides else name_or_path
    path = Path(name_or_path)
    if path.suffix in (".toml", ".yaml", ".yml", ".json") or path.exists():
        data, source = with_base(read_config_file(path), source=str(path)), str(path)
    else:
        data, source = preset_data(str(name_or_path)), str(name_or_path)
    return validate_spec(apply_overrides(data, overrides), source=source)
