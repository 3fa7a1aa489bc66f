"""ModelSpec: validation messages, overrides, digests and the JSON schema."""

from __future__ import annotations

import json
import re

import pytest

import zoo
from zoo.model.spec import SLOTS, ModelSpec
from zoo.registry import registry

SIZE_FIELDS = ("d_model", "n_heads", "d_ff", "encoder_layers", "decoder_layers", "src_vocab", "tgt_vocab")
DROPOUT_PATHS = ("dropout", "attention.dropout", "ffn.dropout", "positional.dropout", "residual.dropout")


def spec_error(tiny, **overrides) -> str:
    """The message of the SpecError that `tiny(**overrides)` raises (it must raise one)."""
    with pytest.raises(zoo.SpecError) as info:
        tiny(**overrides)
    assert isinstance(info.value, zoo.ZooError)
    assert isinstance(info.value, ValueError)
    return str(info.value)


# -- validation rules -------------------------------------------------------------------------------
def test_tiny_spec_is_valid(tiny):
    spec = tiny()
    assert (spec.d_model, spec.n_heads, spec.d_ff) == (32, 4, 64)
    assert (spec.encoder_layers, spec.decoder_layers) == (2, 2)
    assert spec.src_vocab == spec.tgt_vocab == 40
    assert spec.embedding.sharing == "all"


def test_d_model_must_divide_by_n_heads(tiny):
    message = spec_error(tiny, d_model=30)
    assert "d_model" in message and "n_heads" in message and "30" in message
    assert tiny(d_model=36, n_heads=6).d_model == 36


@pytest.mark.parametrize("sharing", ["all", "src-tgt"])
def test_sharing_needs_equal_vocabularies(tiny, sharing):
    message = spec_error(tiny, **{"embedding.sharing": sharing, "tgt_vocab": 41})
    assert "embedding.sharing" in message
    assert "41" in message and sharing in message
    # the same vocabularies without sharing are fine
    spec = tiny(**{"embedding.sharing": "none", "tgt_vocab": 41})
    assert (spec.src_vocab, spec.tgt_vocab) == (40, 41)


@pytest.mark.parametrize("slot", SLOTS)
def test_unknown_component_lists_valid_names(tiny, slot):
    key = registry.slot(slot).key
    message = spec_error(tiny, **{f"{slot}.{key}": "no-such-impl"})
    assert f"{slot}.{key}" in message
    assert "no-such-impl" in message
    assert ", ".join(registry.names(slot)) in message


def test_unknown_ffn_kind_message(tiny):
    message = spec_error(tiny, **{"ffn.kind": "conv2d"})
    assert "ffn.kind" in message and "conv2d" in message
    # the valid names, sorted: "conv1d, linear" for the built-ins (plus any registered since)
    assert ", ".join(registry.names("ffn")) in message
    if set(registry.names("ffn")) == {"conv1d", "linear"}:
        assert "valid: conv1d, linear" in message


@pytest.mark.parametrize("value", [0, -1])
@pytest.mark.parametrize("field", SIZE_FIELDS)
def test_sizes_must_be_positive(tiny, field, value):
    overrides = {field: value}
    if field in ("src_vocab", "tgt_vocab"):
        overrides["embedding.sharing"] = "none"
    message = spec_error(tiny, **overrides)
    assert re.search(rf"(^|\W){field}: ", message), message
    assert "greater than 0" in message


@pytest.mark.parametrize("value", [-0.1, 1.0, 1.5])
@pytest.mark.parametrize("path", DROPOUT_PATHS)
def test_dropout_outside_unit_interval(tiny, path, value):
    message = spec_error(tiny, **{path: value})
    assert re.search(rf"(^|\W){re.escape(path)}: ", message), message
    assert str(value) in message


@pytest.mark.parametrize("value", [0.0, 0.5, 0.999])
@pytest.mark.parametrize("path", DROPOUT_PATHS)
def test_dropout_inside_unit_interval(tiny, path, value):
    spec = tiny(**{path: value})
    slot = path.split(".")[0]
    assert (spec.dropout if path == "dropout" else spec.rate(slot)) == value


def test_slot_dropout_defaults_to_spec_dropout(tiny):
    spec = tiny(**{"dropout": 0.3, "residual.dropout": None, "positional.dropout": None})
    assert spec.rate("residual") == 0.3 and spec.rate("positional") == 0.3
    assert tiny(**{"dropout": 0.3, "positional.dropout": 0.0}).rate("positional") == 0.0


def test_unknown_top_level_key_suggests(tiny):
    message = spec_error(tiny, d_modle=32)
    assert "d_modle" in message
    assert "did you mean 'd_model'" in message


def test_unknown_nested_key_suggests(tiny):
    message = spec_error(tiny, **{"ffn.activaton": "gelu"})
    assert "ffn.activaton" in message
    assert "did you mean 'ffn.activation'" in message


def test_unknown_key_without_close_match_lists_valid_keys(tiny):
    message = spec_error(tiny, **{"ffn.zzzzzz": 1})
    assert "ffn.zzzzzz" in message and "did you mean" not in message
    assert "activation" in message and "dropout" in message


def test_option_of_another_implementation_is_unknown(tiny):
    message = spec_error(tiny, **{"attention.kind": "torch-mha", "attention.qkv": "fused"})
    assert "attention.qkv" in message and "unknown key" in message


def test_incompatible_pairing_is_refused(tiny):
    message = spec_error(tiny, **{"attention.kind": "torch-mha", "mask.convention": "bool-blocked-rezero"})
    assert "attention.kind" in message
    assert "torch-mha" in message and "bool-blocked-rezero" in message


def test_incompatible_pairing_raises_incompatible_components(tiny):
    with pytest.raises(zoo.IncompatibleComponents, match="attention.kind"):
        tiny(**{"attention.kind": "torch-mha", "mask.convention": "bool-blocked-rezero"})


def test_build_refuses_incompatible_pairing_built_without_validation(tiny):
    bad = tiny(**{"attention.kind": "torch-mha"}).model_copy(
        update={"mask": registry.get("mask", "bool-blocked-rezero").config()}
    )
    with pytest.raises(zoo.IncompatibleComponents, match="attention.kind"):
        zoo.build(bad)


def test_pad_id_must_be_inside_vocabulary(tiny):
    message = spec_error(tiny, pad_id=40)
    assert "pad_id" in message and "40" in message
    assert "pad_id" in spec_error(tiny, **{"pad_id": 45, "embedding.sharing": "none", "tgt_vocab": 50})
    assert "pad_id" in spec_error(tiny, pad_id=-1)
    assert tiny(pad_id=39).pad_id == 39


def test_extra_rows_refused_with_sharing_all(tiny):
    message = spec_error(tiny, **{"embedding.extra_rows": 1})
    assert "embedding.extra_rows" in message
    assert tiny(**{"embedding.extra_rows": 1, "embedding.sharing": "none"}).embedding.extra_rows == 1


def test_slot_value_must_be_a_table(tiny):
    message = spec_error(tiny, ffn="linear")
    assert "ffn" in message and "table" in message


def test_slot_value_not_a_table_message_shows_the_value(tiny):
    message = spec_error(tiny, ffn="linear")
    assert "{value" not in message
    assert "'linear'" in message


def test_unknown_preset_suggests(tiny):
    with pytest.raises(zoo.SpecError, match="did you mean 'paper-base'"):
        zoo.load_spec("paper-bse")


# -- overrides ---------------------------------------------------------------------------------------
def test_dotted_overrides(tiny):
    spec = tiny(**{"ffn.kind": "conv1d", "ffn.activation": "gelu", "norm.eps": 1e-3, "n_heads": 8})
    assert spec.ffn.kind == "conv1d" and spec.ffn.activation == "gelu"
    assert spec.norm.eps == 1e-3 and spec.n_heads == 8
    # overriding a loaded ModelSpec
    again = zoo.load_spec(spec, {"ffn.kind": "linear"})
    assert again.ffn.kind == "linear" and again.ffn.activation == "gelu" and again.norm.eps == 1e-3
    assert zoo.load_spec(spec) is spec


def test_switching_to_torch_mha_drops_options_it_lacks(tiny):
    spec = tiny(**{"attention.qkv": "fused", "attention.out_bias": False, "attention.dropout": 0.2})
    switched = zoo.load_spec(spec, {"attention.kind": "torch-mha"})
    assert switched.attention.kind == "torch-mha"
    dumped = switched.attention.model_dump()
    assert "qkv" not in dumped and "out_bias" not in dumped
    assert switched.attention.dropout == 0.2  # an option torch-mha has is kept


def test_switch_applies_before_options_given_with_it(tiny):
    # the option comes first in the dict, yet survives the switch
    spec = tiny(**{"attention.dropout": 0.3, "attention.kind": "torch-mha"})
    assert spec.attention.kind == "torch-mha" and spec.attention.dropout == 0.3


def test_switching_preset_with_many_options(tiny):
    spec = tiny("writeup-004", **{"attention.kind": "torch-mha"})
    assert spec.attention.kind == "torch-mha"
    assert not hasattr(spec.attention, "unused_projection")


def test_override_through_a_value_is_refused(tiny):
    with pytest.raises(zoo.SpecError, match="d_model"):
        tiny(**{"d_model.x": 1})


def test_parse_assignments():
    from zoo.config_io import parse_assignments

    parsed = parse_assignments(["ffn.kind=conv1d", "d_model=128", "dropout=0.1", "embedding.scale=false",
                                "residual.dropout_on=[\"ffn\"]"])
    assert parsed == {"ffn.kind": "conv1d", "d_model": 128, "dropout": 0.1, "embedding.scale": False,
                      "residual.dropout_on": ["ffn"]}
    with pytest.raises(zoo.SpecError, match="KEY=VALUE"):
        parse_assignments(["d_model"])


# -- digest ------------------------------------------------------------------------------------------
def test_digest_is_stable(tiny, tmp_path):
    spec = tiny()
    digest = spec.digest()
    assert re.fullmatch(r"[0-9a-f]{12}", digest)
    assert spec.digest() == digest
    assert tiny().digest() == digest
    assert ModelSpec.model_validate(spec.model_dump()).digest() == digest
    reloaded = ModelSpec.model_validate(json.loads(spec.model_dump_json()))
    assert reloaded == spec and reloaded.digest() == digest
    path = tmp_path / "dumped.json"
    path.write_text(spec.model_dump_json())
    assert zoo.load_spec(path).digest() == digest


def test_digest_ignores_name_description_notes(tiny):
    spec = tiny()
    renamed = zoo.load_spec(spec, {"name": "something-else", "description": "other words", "notes": "more notes"})
    assert renamed.name == "something-else"
    assert renamed.digest() == spec.digest()


TOP_LEVEL_CHANGES = {
    "d_model": 64, "n_heads": 8, "d_ff": 128, "encoder_layers": 3, "decoder_layers": 1, "dropout": 0.25,
    "src_vocab": 41, "tgt_vocab": 42, "pad_id": 3,
}
OPTION_CHANGES = [
    {"ffn.activation": "gelu"}, {"ffn.dropout": 0.3}, {"attention.qkv": "fused"}, {"attention.bias": False},
    {"attention.out_bias": False}, {"attention.unused_projection": True}, {"attention.share_self_cross": True},
    {"attention.dropout": 0.3}, {"embedding.scale": False}, {"embedding.sharing": "src-tgt"},
    {"embedding.padding_idx": True}, {"embedding.norm": True}, {"norm.eps": 1e-3},
    {"positional.max_len": 100}, {"positional.dropout": 0.3}, {"output.bias": True},
    {"init.identical_layers": True}, {"residual.norms": "per-block"}, {"residual.final_norm": True},
    {"residual.dropout_on": ["ffn"]}, {"residual.dropout": 0.3},
]


def test_top_level_change_list_covers_every_field():
    slot_fields = set(SLOTS)
    informational = {"name", "description", "notes"}
    assert set(TOP_LEVEL_CHANGES) == set(ModelSpec.model_fields) - slot_fields - informational


@pytest.mark.parametrize("field, value", TOP_LEVEL_CHANGES.items(), ids=list(TOP_LEVEL_CHANGES))
def test_digest_changes_with_top_level_field(tiny, field, value):
    overrides = {field: value}
    if field in ("src_vocab", "tgt_vocab"):
        overrides["embedding.sharing"] = "none"
        base = tiny(**{"embedding.sharing": "none"})
    else:
        base = tiny()
    changed = tiny(**overrides)
    assert getattr(changed, field) == value
    assert changed.digest() != base.digest()


@pytest.mark.parametrize("overrides", OPTION_CHANGES, ids=[next(iter(o)) for o in OPTION_CHANGES])
def test_digest_changes_with_slot_option(tiny, overrides):
    base, changed = tiny(), tiny(**overrides)
    assert changed != base
    assert changed.digest() != base.digest()


SWITCHABLE = [e for e in registry.entries() if len(registry.names(e.slot)) > 1]


@pytest.mark.parametrize("slot, name", [(e.slot, e.name) for e in SWITCHABLE], ids=[e.qualified for e in SWITCHABLE])
def test_digest_changes_with_component(tiny, slot, name):
    key = registry.slot(slot).key
    base = tiny()
    if getattr(getattr(base, slot), key) == name:
        other = next(n for n in registry.names(slot) if n != name)
        base = zoo.load_spec(base, {f"{slot}.{key}": other})
    changed = zoo.load_spec(base, {f"{slot}.{key}": name})
    assert changed.digest() != base.digest()


# -- JSON schema -------------------------------------------------------------------------------------
def test_schema_has_one_of_per_slot_listing_every_name():
    schema = ModelSpec.model_json_schema()
    json.dumps(schema)  # serialisable
    for slot in SLOTS:
        key = registry.slot(slot).key
        prop = schema["properties"][slot]
        assert prop["discriminator"] == {"propertyName": key}
        consts = [variant["properties"][key]["const"] for variant in prop["oneOf"]]
        assert sorted(consts) == registry.names(slot), slot
        for variant in prop["oneOf"]:
            assert variant.get("additionalProperties") is False
    # implementation options appear in their variant only
    attention = {v["properties"]["kind"]["const"]: v for v in schema["properties"]["attention"]["oneOf"]}
    assert "qkv" in attention["sdpa"]["properties"]
    assert "qkv" not in attention["torch-mha"]["properties"]
    for field in ("d_model", "n_heads", "dropout", "pad_id"):
        assert field in schema["properties"]
