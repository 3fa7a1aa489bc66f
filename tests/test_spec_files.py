"""Spec files (TOML, YAML, JSON) and the presets: each format gives the same spec, a bad file is named with its
field, and every preset loads, validates, builds and may be extended."""

from __future__ import annotations

import json

import pytest
import yaml

import zoo
from zoo.model.spec import ModelSpec


# -- spec files -------------------------------------------------------------------------------------
def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(value)


def to_toml(data: dict) -> str:
    """Minimal TOML writer for a spec dict: scalars at top level, one table per slot."""
    lines = [f"{k} = {_toml_value(v)}" for k, v in data.items() if not isinstance(v, dict) and v is not None]
    for key, table in data.items():
        if isinstance(table, dict):
            lines.append(f"\n[{key}]")
            lines += [f"{k} = {_toml_value(v)}" for k, v in table.items() if v is not None]
    return "\n".join(lines) + "\n"


SPEC_DATA = {
    "name": "file-spec",
    "description": "a spec written to disk",
    "d_model": 32,
    "n_heads": 4,
    "d_ff": 64,
    "encoder_layers": 2,
    "decoder_layers": 1,
    "dropout": 0.2,
    "src_vocab": 40,
    "tgt_vocab": 50,
    "pad_id": 1,
    "residual": {"kind": "pre-norm", "dropout_on": ["ffn"]},
    "norm": {"kind": "layernorm", "eps": 1e-6},
    "ffn": {"kind": "conv1d", "activation": "gelu", "dropout": 0.0},
    "attention": {"kind": "matmul", "qkv": "fused"},
    "mask": {"convention": "int-keep"},
    "embedding": {"sharing": "none", "scale": False},
    "positional": {"kind": "learned", "max_len": 64},
    "output": {"kind": "log-softmax", "bias": False},
    "init": {"kind": "xavier-uniform"},
}


def write_spec(tmp_path, suffix: str, data: dict = SPEC_DATA):
    path = tmp_path / f"spec{suffix}"
    if suffix == ".toml":
        path.write_text(to_toml(data))
    elif suffix in (".yaml", ".yml"):
        path.write_text(yaml.safe_dump(data))
    else:
        path.write_text(json.dumps(data, indent=2))
    return path


def test_toml_yaml_json_give_equal_specs(tmp_path):
    specs = [zoo.load_spec(write_spec(tmp_path, suffix)) for suffix in (".toml", ".yaml", ".yml", ".json")]
    assert all(spec == specs[0] for spec in specs)
    assert len({spec.digest() for spec in specs}) == 1
    spec = specs[0]
    assert spec.norm.eps == 1e-6 and spec.ffn.kind == "conv1d" and spec.attention.qkv == "fused"
    assert spec.residual.dropout_on == ["ffn"] and spec.tgt_vocab == 50 and spec.pad_id == 1
    # a str path works as well as a Path
    assert zoo.load_spec(str(write_spec(tmp_path, ".json"))) == spec


def test_spec_file_with_overrides(tmp_path):
    spec = zoo.load_spec(write_spec(tmp_path, ".yaml"), {"ffn.kind": "linear", "d_ff": 128})
    assert spec.ffn.kind == "linear" and spec.ffn.activation == "gelu" and spec.d_ff == 128


@pytest.mark.parametrize(
    "suffix, text",
    [
        (".toml", "d_model = = 32\n"),
        (".yaml", "d_model: [32\n"),
        (".json", '{"d_model": 32,'),
    ],
)
def test_malformed_files_name_the_file(tmp_path, suffix, text):
    path = tmp_path / f"broken{suffix}"
    path.write_text(text)
    with pytest.raises(zoo.SpecError) as info:
        zoo.load_spec(path)
    message = str(info.value)
    assert str(path) in message
    assert suffix.lstrip(".").upper() in message


@pytest.mark.parametrize("suffix, text", [(".yaml", "- 1\n- 2\n"), (".json", "[1, 2]")])
def test_file_that_is_not_a_table(tmp_path, suffix, text):
    path = tmp_path / f"list{suffix}"
    path.write_text(text)
    with pytest.raises(zoo.SpecError, match="table") as info:
        zoo.load_spec(path)
    assert str(path) in str(info.value)


def test_invalid_field_in_file_names_file_and_field(tmp_path):
    path = write_spec(tmp_path, ".json", {**SPEC_DATA, "d_ff": 0})
    with pytest.raises(zoo.SpecError) as info:
        zoo.load_spec(path)
    assert str(path) in str(info.value) and "d_ff" in str(info.value)


def test_missing_and_unknown_format_files(tmp_path):
    missing = tmp_path / "missing.toml"
    with pytest.raises(zoo.SpecError, match="cannot read") as info:
        zoo.load_spec(missing)
    assert str(missing) in str(info.value)
    odd = tmp_path / "spec.txt"
    odd.write_text("d_model = 32\n")
    with pytest.raises(zoo.SpecError, match="unknown file format") as info:
        zoo.load_spec(odd)
    assert str(odd) in str(info.value)


# -- presets -----------------------------------------------------------------------------------------
PRESETS = zoo.preset_names()


def test_presets_exist():
    assert {"paper-base", "paper-big"} <= set(PRESETS)
    assert any(name.startswith("writeup-") for name in PRESETS)


@pytest.mark.parametrize("name", PRESETS)
def test_preset_loads_validates_and_names_its_source(name):
    spec = zoo.load_spec(name)
    assert isinstance(spec, ModelSpec)
    assert spec.name == name
    assert spec.d_model % spec.n_heads == 0
    assert ModelSpec.model_validate(spec.model_dump()) == spec
    if name.startswith("writeup-"):
        number = name.split("-")[1]  # writeup-001-as-written: 001
        assert number in spec.description, spec.description
    else:
        assert "Attention Is All You Need" in spec.description or "Vaswani" in spec.description
    assert spec.notes.strip(), "a preset should explain how it reproduces its source"


@pytest.mark.parametrize("name", PRESETS)
def test_preset_builds_on_meta(name):
    model = zoo.build(name, device="meta")
    assert model.num_parameters() > 0
    assert model.spec == zoo.load_spec(name)


@pytest.mark.parametrize("field", ["d_model", "n_heads", "encoder_layers", "src_vocab", "pad_id"])
def test_booleans_are_not_sizes(field):
    with pytest.raises(zoo.SpecError, match=field):
        zoo.load_spec("paper-base", {field: True})


@pytest.mark.parametrize("suffix, text", [
    (".toml", 'extends = "paper-base"\nname = "mine"\n[norm]\nkind = "rmsnorm"\n'),
    (".json", '{"extends": "paper-base", "name": "mine", "norm": {"kind": "rmsnorm"}}'),
])
def test_a_spec_file_extends_a_preset(tmp_path, suffix, text):
    path = tmp_path / f"mine{suffix}"
    path.write_text(text)
    spec = zoo.load_spec(path)
    assert spec.norm.kind == "rmsnorm" and spec.name == "mine"
    assert spec.model_dump(exclude={"name", "description", "notes"}) == zoo.load_spec(
        "paper-base", {"norm.kind": "rmsnorm"}).model_dump(exclude={"name", "description", "notes"})


def test_extends_names_a_cycle_and_a_bad_value(tmp_path, monkeypatch):
    (tmp_path / "ping.toml").write_text('extends = "pong"\nname = "ping"\n')
    (tmp_path / "pong.toml").write_text('extends = "ping"\nname = "pong"\n')
    monkeypatch.setenv("ZOO_PRESETS", str(tmp_path))
    with pytest.raises(zoo.SpecError, match="extends: ping -> pong -> ping is a cycle"):
        zoo.load_spec("ping")
    (tmp_path / "odd.toml").write_text('extends = 3\nname = "odd"\n')
    with pytest.raises(zoo.SpecError, match="odd.toml: extends: expected the name of a preset, got 3"):
        zoo.load_spec(tmp_path / "odd.toml")
    (tmp_path / "typo.toml").write_text('extends = "paper-bse"\nname = "typo"\n')
    with pytest.raises(zoo.SpecError, match="typo.toml: extends: unknown preset 'paper-bse'; did you mean"):
        zoo.load_spec(tmp_path / "typo.toml")


def test_extends_switches_a_kind_as_set_does(tmp_path, monkeypatch):
    """`[ffn] kind = "swiglu"` over paper-base drops `activation`, which SwiGLU does not have, as
    `--set ffn.kind=swiglu` does; the slot's other options and the other slots are kept."""
    (tmp_path / "my-swiglu.toml").write_text('extends = "paper-base"\nname = "my-swiglu"\n[ffn]\nkind = "swiglu"\n')
    monkeypatch.setenv("ZOO_PRESETS", str(tmp_path))
    extended, switched = zoo.load_spec("my-swiglu"), zoo.load_spec("paper-base", {"ffn.kind": "swiglu"})
    assert extended.model_dump(exclude={"name", "description", "notes"}) == \
        switched.model_dump(exclude={"name", "description", "notes"})  # a spec of its own, described as one


def test_an_unknown_preset_names_a_zoo_presets_that_is_no_folder(tmp_path, monkeypatch):
    """A mistyped $ZOO_PRESETS was silently ignored: 'unknown preset' with no word of where it looked."""
    monkeypatch.setenv("ZOO_PRESETS", str(tmp_path / "nowhere"))
    with pytest.raises(zoo.SpecError, match="ZOO_PRESETS is '.*nowhere', which is not a folder"):
        zoo.load_spec("mine")
    monkeypatch.setenv("ZOO_PRESETS", str(tmp_path))
    with pytest.raises(zoo.SpecError) as raised:
        zoo.load_spec("mine")
    assert "ZOO_PRESETS" not in str(raised.value)


def test_a_spec_extending_a_preset_does_not_wear_the_presets_description(tmp_path):
    """A file with `extends = "paper-base"` and d_model 128 showed 'Sizes from Table 3 (base): d_model 512 ...'
    under its own name. One that gives its own description and notes keeps them."""
    (tmp_path / "mine.toml").write_text('extends = "paper-base"\nname = "mine"\nd_model = 128\nn_heads = 4\n')
    spec = zoo.load_spec(tmp_path / "mine.toml")
    assert spec.description.startswith("paper-base, with the fields this spec changes") and spec.notes == ""
    assert zoo.load_spec("writeup-004-as-written").description.startswith("Writeup 004 as written")
