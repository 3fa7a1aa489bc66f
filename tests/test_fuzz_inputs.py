"""What a user types or saves, fuzzed: `--set` assignments, experiment files and YAML specs. Every case loads
or is one ZooError line (the CLI: exit 2, one stderr line); none raises anything else, none hangs. With
tests/test_fuzz_records.py (3,210 records) this is 10,360 cases (and tests/test_properties.py has more)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zoo.cli import main
from zoo.config_io import parse_assignments
from zoo.errors import ZooError
from zoo.experiment import load_experiment
from zoo.model.spec import load_spec


def many(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
KEYS = ["d_model", "n_heads", "d_ff", "dropout", "pad_id", "src_vocab", "name", "ffn.kind", "ffn.activation",
        "ffn.dropout", "norm.eps", "norm.kind", "attention.kind", "attention.qkv", "mask.convention",
        "positional.kind", "positional.max_len", "positional.base", "embedding.sharing", "embedding.scale",
        "embedding.radius", "residual.kind", "init.kind", "output.kind", "encoder_layers", "d_modle", "[/]"]
NASTY = ["[/]", "[bold]x", "inf", "-inf", "nan", "true", "false", "1e308", "-1", "0", "1.5", "[1, 2]", "{a = 1}",
         "x\n", "pre-norm\n", " conv1d", "'quoted'", "\x00", "é", "*a", "&a [1]", "9" * 40, ""]
values = st.one_of(st.sampled_from(NASTY), st.text(max_size=10), st.integers(-10**20, 10**20).map(str),
                   st.floats(allow_nan=True, allow_infinity=True).map(repr))


def one_line(call) -> None:
    try:
        call()
    except ZooError as err:
        message = str(err)
        assert message and "\n" not in message and "Traceback" not in message, message


@pytest.mark.timeout(600)
@many(3000)
@given(st.lists(st.tuples(st.sampled_from(KEYS), values), min_size=1, max_size=3))
def test_set_assignments_give_a_spec_or_one_line(pairs):
    one_line(lambda: load_spec("paper-base", parse_assignments([f"{key}={value}" for key, value in pairs])))


@pytest.mark.timeout(600)
@many(150)
@given(st.sampled_from(KEYS), values)
def test_zoo_show_with_a_fuzzed_set_is_a_table_or_one_line_exit_2(capsys, key, value):
    small = ["--set", "d_model=16", "--set", "n_heads=2", "--set", "d_ff=16", "--set", "encoder_layers=1",
             "--set", "decoder_layers=1", "--set", "src_vocab=20", "--set", "tgt_vocab=20"]
    code = main(["show", "paper-base", *small, "--set", f"{key}={value}"])
    err = capsys.readouterr().err.strip()
    assert code in (0, 2) and "Traceback" not in err
    if code == 2:
        assert len(err.splitlines()) == 1, err


EXPERIMENT = {
    "name": "fuzz", "seeds": [0, 1], "baseline": "a", "shared": {"d_model": 16, "n_heads": 2},
    "variants": [{"label": "a", "base": "paper-base"}, {"label": "b", "base": "paper-base",
                                                         "set": {"ffn.kind": "conv1d"}}],
    "tasks": [{"name": "copy", "options": {"symbols": 6}, "margin": 5.0, "stall": {"floor": 10.0}}],
    "train": {"steps": 10}, "analysis": {"alpha": 0.05},
    "findings": [{"kind": "direction", "variant": "b", "expect": "better", "claim": "c", "source": "s",
                  "effect": 1.0, "regime": {"tolerance": 1.0}}],
}
PLACES = [("name",), ("seeds",), ("baseline",), ("shared", "d_model"), ("variants", 0, "label"),
          ("variants", 1, "set", "ffn.kind"), ("variants", 1, "base"), ("tasks", 0, "name"),
          ("tasks", 0, "options", "symbols"), ("tasks", 0, "margin"), ("tasks", 0, "stall", "floor"),
          ("tasks", 0, "label"), ("train", "steps"), ("train", "lr"), ("analysis", "alpha"),
          ("findings", 0, "effect"), ("findings", 0, "regime", "tolerance"), ("tasks", 0, "options", "name"),
          ("plugins",), ("transfers",)]
json_values = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12), st.floats(allow_nan=True),
                        st.sampled_from(NASTY), st.lists(st.integers(-3, 3), max_size=3), st.just({"x": 1}))


def toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else {math.inf: "inf", -math.inf: "-inf"}.get(value, repr(value))
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    return json.dumps("" if value is None else value)


def render(document: dict) -> str:
    arrays = ("variants", "tasks", "findings", "transfers")
    lines = [f"{json.dumps(k)} = {toml_value(v)}" for k, v in document.items() if not isinstance(v, (dict, list))
             or k in ("seeds", "shared", "plugins") or (k in arrays and not isinstance(v, list))]
    for table in ("train", "analysis"):
        if isinstance(document.get(table), dict):
            lines += [f"[{table}]"] + [f"{json.dumps(k)} = {toml_value(v)}" for k, v in document[table].items()]
    for array in arrays:
        for item in document.get(array) if isinstance(document.get(array), list) else []:
            lines.append(f"[[{array}]]")
            lines += [f"{json.dumps(k)} = {toml_value(v)}" for k, v in (item.items() if isinstance(item, dict)
                                                                         else [("x", item)])]
    return "\n".join(lines) + "\n"


@pytest.mark.timeout(600)
@many(2500)
@given(st.lists(st.tuples(st.sampled_from(PLACES), json_values), min_size=1, max_size=3))
def test_mutated_experiment_files_load_or_are_one_line(tmp_path, mutations):
    document = json.loads(json.dumps(EXPERIMENT))
    for place, value in mutations:
        parent = document
        try:
            for part in place[:-1]:
                parent = parent[part]
            parent[place[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue
    path = tmp_path / "fuzz.toml"  # rewritten by each case: a numbered folder each cost a scan of the others
    path.write_text(render(document))
    one_line(lambda: load_experiment(path))


YAML_SPECS = st.one_of(
    st.builds(lambda k, v: f"extends: paper-base\n{k}: {v}\n", st.sampled_from(["d_model", "dropout", "name"]),
              st.sampled_from(NASTY)),
    st.builds(lambda v: f"extends: paper-base\nffn: &a {{kind: {v}}}\nattention: *a\n", st.sampled_from(NASTY)),
    st.builds(lambda n: "a: &a [x, x]\n" + "".join(f"{c}: &{c} [*{p}, *{p}]\n" for p, c in zip("abcdefgh", "bcdefghi"))
              [: 20 * n], st.integers(1, 8)),  # billion laughs
    st.text(max_size=60),
    st.binary(max_size=40).map(lambda b: b.decode("latin-1")),
)


@pytest.mark.timeout(600)
@many(1500)
@given(YAML_SPECS)
def test_yaml_specs_load_or_are_one_line(tmp_path, text):
    path = tmp_path / "spec.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    one_line(lambda: load_spec(path))


@pytest.mark.parametrize("field", ["d_model", "d_ff", "src_vocab", "encoder_layers"])
def test_a_size_no_machine_could_allocate_is_one_line(capsys, field):
    """Found by the fuzzer: `zoo show paper-base --set d_model=1518500250` overflowed a tensor allocation."""
    assert main(["show", "paper-base", "--set", f"{field}=1518500250"]) == 2
    err = capsys.readouterr().err.strip()
    assert field in err and len(err.splitlines()) == 1
