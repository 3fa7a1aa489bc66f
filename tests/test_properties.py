"""Property-based: whatever text, bytes or values a user feeds the loaders and the CLI, the outcome is
success or a ZooError with a one-line message (CLI: exit 2, one stderr line, no traceback)."""

from __future__ import annotations

import functools
import importlib.metadata
import json
import math
import tempfile
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import zoo
from zoo import cli
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


# -- fuzzing the CLI in process: --set, YAML specs, experiment files (issue 24) -----------------------
# Each test runs thousands of cases (about 7,000 in all); a case is an in-process `zoo` call, and a
# timeout marker bounds the whole test, so a hang (alias expansion, a huge beam) fails instead of waiting.
def fuzz(cases: int) -> settings:
    return settings(max_examples=cases, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


MARKUP = ["[/]", "[bold]", "[bold]x", "[/bold]", "[red]x[/]", "\\[x]", "[link=http://x]y[/link]", ":smile:", "[", "]"]
CONTROL = ["x\n", "\n", "\r", "x\r\n", "\x00", "\x1b[31m", "\t", "a\u2028b", " x", "x ", "a/b", "..", "\x7f"]
NUMBERS = ["inf", "-inf", "nan", "+nan", "true", "false", "[true]", "[inf]", "1e999", "0", "-1", "1e308", "0.5",
           "3", "64", "[0.9, 0.98]", "{}", "{kind = \"x\"}", '"[/]"']
nasty_text = st.one_of(st.sampled_from(MARKUP + CONTROL), st.text(max_size=10),
                       st.lists(st.sampled_from(MARKUP + CONTROL + ["a", "-"]), max_size=4).map("".join))
nasty_scalar = st.one_of(nasty_text, st.booleans(), st.floats(allow_nan=True), st.integers(-10**12, 10**12),
                         st.none())
SET_KEYS = [*SPEC_KEYS, "description", "notes", "norm.eps", "norm.kind", "embedding.radius", "embedding.kind",
            "positional.base", "positional.kind", "attention.dropout", "attention.kind", "residual.kind",
            "ffn.dropout", "embedding.extra_rows", "tgt_vocab", "decoder_layers", "n_heads", "x.y.z", "", " "]
TINY_SPEC = ('extends = "paper-base"\nd_model = 16\nn_heads = 2\nd_ff = 32\nencoder_layers = 1\n'
             "decoder_layers = 1\nsrc_vocab = 40\ntgt_vocab = 40\n")


def cli_outcome(capsys, argv: list[str], allowed=(0, 2)) -> tuple[int, str]:
    """Run `zoo ARGV` in process: an allowed exit code, and a user error is one line on stderr."""
    code = main(argv)
    err = capsys.readouterr().err
    assert code in allowed and "Traceback" not in err, (argv, code, err)
    if code == 2:
        assert len(err.strip().splitlines()) == 1 and err.startswith("zoo: error: "), (argv, err)
    return code, err


@pytest.fixture
def once_per_process(monkeypatch):
    """What a real `zoo` does once per process, done once for thousands of in-process calls: building the
    argument parser, and scanning the installed distributions for entry points (the plugins). The two were
    three quarters of each case's time; the parser and the plugins found are the same."""
    built = cli.parser()
    monkeypatch.setattr(cli, "parser", lambda: built)
    scan = functools.lru_cache(maxsize=None)(importlib.metadata.entry_points)
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **selection: scan(**selection))


@pytest.fixture(scope="module")
def tiny_spec(tmp_path_factory):
    path = tmp_path_factory.mktemp("fuzz") / "tiny.toml"
    path.write_text(TINY_SPEC)
    return path


@pytest.mark.timeout(600)
@fuzz(3000)
@given(st.lists(st.tuples(st.sampled_from(SET_KEYS), st.one_of(st.sampled_from(NUMBERS), nasty_text)),
                min_size=1, max_size=3))
def test_fuzzed_set_gives_zoo_show_a_table_or_one_line(once_per_process, tiny_spec, capsys, assignments):
    argv = ["show", str(tiny_spec), *[f"--set={key}={value}" for key, value in assignments]]
    code, err = cli_outcome(capsys, argv)
    key, value = assignments[0]
    if len(assignments) == 1 and key == "d_model" and isinstance(parse_assignments([f"d_model={value}"])["d_model"],
                                                                  str):
        quoted = repr(parse_assignments([f"d_model={value}"])["d_model"])
        assert len(quoted) > 80 or f"got {quoted}" in err, (value, err)  # as written, never read as markup


def yaml_specs():
    """YAML spec texts built from lines: nasty scalars, anchors and aliases (nested, merged), tags."""
    key = st.sampled_from(["name", "description", "notes", "d_model", "n_heads", "dropout", "src_vocab", "extends",
                           "ffn", "norm", "positional", "x"])
    scalar = st.one_of(nasty_scalar.map(lambda v: json.dumps(v, allow_nan=True)),
                       st.sampled_from([".inf", "-.inf", ".nan", "yes", "no", "~", "!!float inf", "!!binary aGk=",
                                        "!!python/object/apply:os.system ['true']", "&a 1", "*a", "&b [*a, *a]",
                                        "[*b, *b, *b]", "{kind: layernorm, eps: .inf}", "{<<: *a}", "&a {kind: x}",
                                        "'[/]'", '"x\\n"', "|\n  [bold]\n  x", "0x40", "1_000", "64"]))
    line = st.tuples(key, scalar).map(lambda pair: f"{pair[0]}: {pair[1]}")
    return st.lists(line, max_size=6).map("\n".join)


@pytest.mark.timeout(600)
@fuzz(2000)
@given(yaml_specs(), st.sampled_from([".yaml", ".yml"]))
def test_fuzzed_yaml_specs_show_or_are_one_line(once_per_process, tmp_path, capsys, text, suffix):
    path = tmp_path / f"spec{suffix}"  # rewritten by each case
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    cli_outcome(capsys, ["show", str(path), "--set=src_vocab=40", "--set=tgt_vocab=40", "--set=encoder_layers=1",
                         "--set=decoder_layers=1", "--set=d_ff=32"])


EXPERIMENT_FIELDS = [("name",), ("description",), ("seeds",), ("baseline",), ("variants", 0, "label"),
                     ("variants", 0, "set"), ("variants", 0, "base"), ("tasks", 0, "label"), ("tasks", 0, "options"),
                     ("tasks", 0, "threshold"), ("tasks", 0, "margin"), ("tasks", 0, "stall"), ("train", "steps"),
                     ("train", "lr"), ("decode", "beam"), ("decode", "max_ratio"), ("analysis", "alpha"),
                     ("analysis", "min_seeds"), ("findings",), ("shared", "d_model"), ("shared", "norm.eps")]
experiment_values = st.one_of(nasty_scalar, st.sampled_from([
    [True], [0, math.inf], {"name": "reverse"}, {"floor": True}, {"patience": 0}, {"symbols": True},
    {"residual.kind": "pre-norm"}, 100_000, 65, -1, [{"kind": "direction", "variant": "a", "expect": "better",
                                                      "claim": "[/]", "source": "s", "effect": True}]]))


@pytest.mark.timeout(600)
@fuzz(2000)
@given(st.lists(st.tuples(st.sampled_from(EXPERIMENT_FIELDS), experiment_values), max_size=3),
       st.sampled_from([".toml", ".json", ".yaml"]))
def test_fuzzed_experiment_files_dry_run_or_are_one_line(once_per_process, tmp_path, capsys, mutations, suffix):
    doc = json.loads(json.dumps({**BASE_EXPERIMENT, "shared": {"d_model": 16, "n_heads": 2, "d_ff": 32,
                                                               "encoder_layers": 1, "decoder_layers": 1}}))
    for path, value in mutations:
        node = doc
        for part in path[:-1]:
            node = node.setdefault(part, {}) if isinstance(node, dict) else node[part]
        node[path[-1]] = value
    folder = Path(tempfile.mkdtemp(dir=tmp_path))  # a fresh folder per case, without pytest's numbering scan
    file = folder / f"e{suffix}"
    if suffix == ".toml" and any(v is None for _, v in mutations):
        file = folder / "e.json"  # TOML has no null
    file.write_bytes(render(file.suffix, doc) if file.suffix != ".toml" else
                     "\n".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in doc.items()).encode())
    cli_outcome(capsys, ["run", str(file), "--dry-run", "--runs", str(folder / "runs"), "--out", str(folder / "out")])
