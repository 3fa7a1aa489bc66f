"""Property-based: whatever text, bytes or values a user feeds the loaders and the CLI, the outcome is
success or a ZooError with a one-line message (CLI: exit 2, one stderr line, no traceback)."""

from __future__ import annotations

import json
import math
import tomllib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import zoo
from zoo.cli import main
from zoo.config_io import parse_assignments
from zoo.data import TaskConfig, load_task
from zoo.errors import ZooError
from zoo.experiment import load_experiment
from zoo.train import load_train_config

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

SPEC_KEYS = ["d_model", "n_heads", "d_ff", "encoder_layers", "dropout", "pad_id", "src_vocab", "name", "ffn",
             "ffn.kind", "attention", "mask.convention", "positional.max_len", "embedding.sharing", "residual",
             "d_modle"]
TRAIN_KEYS = ["steps", "epochs", "minutes", "lr", "betas", "eps", "weight_decay", "label_smoothing", "clip_norm",
              "warmup", "batch_tokens", "seed", "device", "schedule", "stesp", "threads"]
TASK_KEYS = ["symbols", "min_len", "max_len", "train_size", "valid_size", "test_size", "seed", "long_sentences",
             "vocab_size", "joint", "tokenizer", "symbol"]

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12), st.floats(allow_nan=True),
                    st.text(max_size=12), st.just("conv1d"), st.just("pre-norm"))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                        st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                      max_leaves=6)


def one_line(err: ZooError) -> None:
    message = str(err)
    assert message and "\n" not in message and "Traceback" not in message, message


def check(call) -> None:
    try:
        call()
    except ZooError as err:
        one_line(err)


# -- text fed to the spec loader --------------------------------------------------------------------
def spec_texts():
    """Valid-looking spec documents, each mutated: keys and values drawn from what specs hold."""
    doc = st.dictionaries(st.sampled_from(SPEC_KEYS), values, max_size=5)
    return st.tuples(st.sampled_from([".toml", ".yaml", ".json"]), doc, st.binary(max_size=8), st.integers(0, 60))


def render(suffix: str, doc: dict) -> bytes:
    import yaml

    if suffix == ".json":
        return json.dumps(doc, allow_nan=True).encode()
    if suffix == ".yaml":
        return yaml.safe_dump(doc, allow_unicode=True).encode()
    return "\n".join(f"{json.dumps(key)} = {toml_value(value)}" for key, value in doc.items()).encode()


def toml_value(value) -> str:
    """TOML for a generated value (TOML has no null: None becomes an empty string)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else {float("inf"): "inf", float("-inf"): "-inf"}.get(value, repr(value))
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    return json.dumps("" if value is None else value)


@FAST
@given(spec_texts())
def test_any_spec_file_loads_or_is_one_line(tmp_path_factory, case):
    suffix, doc, garbage, cut = case
    data = render(suffix, doc)
    data = data[:cut] + garbage + data[cut:] if garbage else data
    path = tmp_path_factory.mktemp("spec") / f"s{suffix}"
    path.write_bytes(data)
    check(lambda: zoo.load_spec(path))


@FAST
@given(st.binary(max_size=200), st.sampled_from([".toml", ".yaml", ".yml", ".json", ".txt"]))
def test_garbage_bytes_are_one_line(tmp_path_factory, data, suffix):
    path = tmp_path_factory.mktemp("garbage") / f"g{suffix}"
    path.write_bytes(data)
    check(lambda: zoo.load_spec(path))
    check(lambda: load_train_config(path))
    check(lambda: load_experiment(path))


@FAST
@given(st.dictionaries(st.sampled_from(SPEC_KEYS), values, max_size=4))
def test_any_overrides_give_a_spec_or_one_line(overrides):
    check(lambda: zoo.load_spec("paper-base", overrides))


# -- training configs, --train assignments, task options ---------------------------------------------
@FAST
@given(st.lists(st.tuples(st.sampled_from(TRAIN_KEYS), st.one_of(st.text(max_size=10), st.sampled_from(
    ["true", "nan", "inf", "-1", "0", "1e9", "[2.0, 0.98]", "[0.9]", "'cpu'", "3", "0.5", "[0.9, 0.98]"]))),
    max_size=4))
def test_any_train_assignments_validate_or_are_one_line(pairs):
    items = [f"{key}={value}" for key, value in pairs] + ["steps=2"]
    check(lambda: load_train_config(None, parse_assignments(items)))


@FAST
@given(st.dictionaries(st.sampled_from(TASK_KEYS), values, max_size=4), st.sampled_from(["copy", "long-copy", "sort"]))
def test_any_task_options_give_a_config_or_one_line(options, name):
    check(lambda: TaskConfig(name=name, **options))


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 4), st.integers(1, 4), st.integers(0, 3), st.integers(1, 30))
def test_small_synthetic_tasks_generate_or_are_one_line(symbols, min_len, extra, size):
    def build():
        task = load_task("copy", symbols=symbols, min_len=min_len, max_len=min_len + extra, train_size=size,
                         valid_size=size, test_size=size)
        task.examples("train")

    check(build)


# -- experiment files --------------------------------------------------------------------------------
BASE_EXPERIMENT = {"name": "p", "variants": [{"label": "a", "base": "paper-base"}], "tasks": [{"name": "copy"}],
                   "train": {"steps": 1}}
EXPERIMENT_PATHS = [("name",), ("seeds",), ("baseline",), ("shared",), ("variants", 0, "label"), ("variants", 0, "set"),
                    ("variants", 0, "lable"), ("tasks", 0, "name"), ("tasks", 0, "threshold"), ("tasks", 0, "options"),
                    ("train", "lr"), ("train", "steps"), ("decode", "max_ratio"), ("decode", "beam"), ("findings",)]


@FAST
@given(st.lists(st.tuples(st.sampled_from(EXPERIMENT_PATHS), values), max_size=3))
def test_mutated_experiments_load_or_are_one_line(tmp_path_factory, mutations):
    doc = json.loads(json.dumps(BASE_EXPERIMENT))
    for path, value in mutations:
        node = doc
        for part in path[:-1]:
            node = node.setdefault(part, {}) if isinstance(node, dict) else node[part]
        if isinstance(node, dict):
            node[path[-1]] = value
    file = tmp_path_factory.mktemp("exp") / "e.json"
    file.write_text(json.dumps(doc, allow_nan=True))
    check(lambda: load_experiment(file))


# -- corpora -----------------------------------------------------------------------------------------
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.binary(max_size=30), min_size=1, max_size=6), st.integers(0, 2))
def test_mutated_corpora_load_or_are_one_line(tmp_path_factory, lines, drop):
    root = tmp_path_factory.mktemp("corpus")
    folder = root / "c"
    folder.mkdir()
    for split in ("train", "valid", "test"):
        for lang in ("xx", "yy"):
            chosen = lines[: len(lines) - drop] if (split, lang) == ("test", "yy") else lines
            (folder / f"{split}.{lang}").write_bytes(b"\n".join(chosen) + b"\n")

    def build():
        task = load_task("c:xx-yy", data_dir=root, cache_dir=root / "cache", vocab_size=40, tokenizer="wordlevel")
        task.limit_lengths(6)
        task.examples("test")

    check(build)


# -- the CLI, in process -----------------------------------------------------------------------------
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec_texts(), st.lists(st.sampled_from(["d_model=true", "dropout=nan", "ffn.kind=x", "n_heads=3", "foo",
                                                "positional.max_len=-1", "d_model=64"]), max_size=2))
def test_zoo_show_is_a_table_or_one_line_exit_2(tmp_path_factory, capsys, case, sets):
    suffix, doc, garbage, cut = case
    data = render(suffix, doc)
    path = tmp_path_factory.mktemp("show") / f"s{suffix}"
    path.write_bytes(data[:cut] + garbage + data[cut:])
    argv = ["show", str(path), *[arg for item in sets for arg in ("--set", item)]]
    code = main(argv)
    err = capsys.readouterr().err
    assert code in (0, 2) and "Traceback" not in err
    if code == 2:
        assert len(err.strip().splitlines()) == 1, err


def test_render_makes_valid_toml():  # the generator itself: unmutated TOML documents parse
    document = {"d_model": 3, "ffn": {"kind": "x"}}
    assert tomllib.loads(render(".toml", document).decode()) == document


@pytest.mark.parametrize("argv", [["show", "paper-base", "--set", "d_model"], ["show", "no-such-preset"],
                                  ["train", "paper-base", "--task", "copyy", "--train", "steps=1",
                                   "--out", "/nonexistent/x"]])
def test_cli_user_errors_are_one_line(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_an_unprintable_key_is_quoted_and_the_error_stays_one_line():
    """Found by test_any_overrides_give_a_spec_or_one_line: a key holding a newline broke the line."""
    with pytest.raises(ZooError) as caught:
        zoo.load_spec("paper-base", {"ffn": {"\n": 1}})
    one_line(caught.value)
    assert "ffn.'\\n': unknown key" in str(caught.value)
