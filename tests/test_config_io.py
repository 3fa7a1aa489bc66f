"""Generic config reading and error wording (zoo/config_io.py), shared by specs, training, tasks and experiments."""

import pytest

import zoo
from zoo.config_io import parse_assignments, read_config_file
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
