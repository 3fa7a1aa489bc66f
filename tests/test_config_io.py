"""Generic config reading and error wording (zoo/config_io.py), shared by specs, training, tasks and experiments."""

import os

import pytest

import zoo
from zoo.cli import main
from zoo.config_io import MAX_CONFIG_BYTES, parse_assignments, read_config_file
from zoo.errors import SpecError, ZooError
from zoo.experiment import load_experiment
from zoo.train import load_train_config


@pytest.mark.parametrize("name", ["spec.toml", "spec.yaml", "spec.json"])
def test_a_file_that_is_not_utf8_is_one_line_naming_it(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b'd_model = "\xff\xfe"\n')
    with pytest.raises(SpecError, match="not UTF-8") as err:
        zoo.load_spec(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("name, text", [("spec.yaml", "d_model: 64\nn_heads: 4\nd_model: 128\n"),
                                        ("spec.json", '{"d_model": 64, "d_model": 128}')])
def test_a_key_given_twice_is_refused_naming_it(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(SpecError, match="key 'd_model' is given twice") as err:
        read_config_file(path)
    assert "\n" not in str(err.value)


def test_an_unknown_key_in_a_nested_table_lists_that_tables_keys(tmp_path):
    path = tmp_path / "exp.toml"
    path.write_text('name = "x"\n[[variants]]\nlabel = "a"\nbase = "paper-base"\n'
                    '[[variants]]\nlabel = "b"\nlable = "c"\nbase = "paper-base"\n[[tasks]]\nname = "copy"\n'
                    '[decode]\nbeams = 2\n')
    with pytest.raises(ZooError) as err:
        load_experiment(path)
    message = str(err.value)
    assert ("variants.1.lable: unknown key; did you mean 'variants.1.label'? "
            "(valid keys: base, label, set, train)") in message
    assert ("decode.beams: unknown key; did you mean 'decode.beam'? "
            "(valid keys: alpha, beam, max_extra, max_ratio)") in message


def test_top_level_unknown_keys_still_list_the_top_level(tmp_path):
    path = tmp_path / "train.toml"
    path.write_text("steps = 3\nwarmpu = 2\n")
    with pytest.raises(SpecError, match=r"warmpu: unknown key; did you mean 'warmup'\? \(valid keys: accumulate, "):
        load_train_config(path)


def test_parse_assignments_is_shared():
    assert parse_assignments(["steps=3", "device='cpu'", "name=x"]) == {"steps": 3, "device": "cpu", "name": "x"}


# -- resource limits ---------------------------------------------------------------------------------
LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8))


@pytest.mark.timeout(30)
def test_yaml_aliases_are_refused_so_a_billion_laughs_cannot_hang(tmp_path, capsys):
    """450 bytes of nested aliases expand to 9**9 strings: `zoo show` hung before aliases were refused."""
    path = tmp_path / "laughs.yaml"
    path.write_text(LAUGHS)
    assert main(["show", str(path)]) == 2
    err = capsys.readouterr().err
    assert "alias *a is not allowed" in err and str(path) in err and len(err.strip().splitlines()) == 1


def test_a_yaml_anchor_used_once_is_also_refused(tmp_path):
    path = tmp_path / "experiment.yaml"
    path.write_text("name: &n x\ndescription: *n\n")
    with pytest.raises(ZooError, match="alias \\*n is not allowed"):
        load_experiment(path)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("where", ["/dev/zero", "fifo", "folder.toml"])
def test_a_config_that_is_not_a_regular_file_is_one_line(tmp_path, capsys, where):
    """`zoo show /dev/zero` read until memory ran out; a FIFO would have been waited on forever."""
    if where == "fifo":
        where = tmp_path / "pipe.toml"
        os.mkfifo(where)
    elif where == "folder.toml":
        where = tmp_path / where
        where.mkdir()
    assert main(["show", str(where)]) == 2
    err = capsys.readouterr().err
    assert str(where) in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_config_above_the_cap_is_refused_naming_it(tmp_path):
    path = tmp_path / "big.toml"
    path.write_bytes(b"# " + b"x" * MAX_CONFIG_BYTES + b"\nd_model = 64\n")
    with pytest.raises(SpecError, match="big.toml: larger than 4 MB"):
        read_config_file(path)
    path.write_bytes(b"# " + b"x" * (MAX_CONFIG_BYTES - 20) + b"\nd_model = 64\n")
    assert read_config_file(path) == {"d_model": 64}


# -- user presets ------------------------------------------------------------------------------------
@pytest.fixture
def presets(tmp_path, monkeypatch):
    (tmp_path / "broken.toml").write_text("d_model = [\n")
    (tmp_path / "latin.toml").write_bytes(b'description = "\xe9"\n')
    (tmp_path / "mine.toml").write_text('extends = "paper-base"\nname = "mine"\nd_model = 256\n')
    monkeypatch.setenv("ZOO_PRESETS", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("name, problem", [("broken", "not valid TOML"), ("latin", "not UTF-8")])
def test_a_broken_user_preset_is_one_line_naming_its_file(presets, capsys, name, problem):
    assert main(["show", name]) == 2
    err = capsys.readouterr().err
    assert f"{presets / name}.toml: {problem}" in err and len(err.strip().splitlines()) == 1


def test_a_broken_user_preset_breaks_neither_listing_nor_the_other_presets(presets, capsys):
    assert main(["list"]) == 0
    out, err = capsys.readouterr()
    assert "mine" in out and "paper-base" in out
    assert err.count("preset not listed") == 2 and "broken.toml" in err and "latin.toml" in err
    assert main(["show", "mine"]) == 0 and "d_model" in capsys.readouterr().out


@pytest.mark.parametrize("name, text, where", [
    ("spec.toml", 'extends = "paper-base"\ndescription = 1979-05-27\n', "description: a date"),
    ("spec.yaml", "name: !!binary aGk=\n", "name: a bytes"),
    ("spec.yaml", "ffn: {kind: !!set {a, b}}\n", "ffn.kind: a set"),
    ("spec.yaml", "notes: [2001-12-14t21:59:43.10-05:00]\n", "notes[0]: a datetime"),
])
def test_a_value_json_cannot_hold_is_refused_naming_the_key(tmp_path, capsys, name, text, where):
    """Found by the CLI fuzzer: a YAML !!binary or a TOML date reached json.dumps as a TypeError traceback."""
    path = tmp_path / name
    path.write_text(text)
    assert main(["show", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: {where} is not a config value" in err and len(err.strip().splitlines()) == 1
