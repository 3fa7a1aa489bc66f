"""Input checks: numbers that are numbers, decode lengths the model can represent, sentences that fit the
positional table (checked when the task is fitted, naming file and line), missing corpora found up front."""

import json
import math
import typing

import pytest
import torch

import zoo
from zoo.cli import main
from zoo.data import DataError, TaskConfig, load_saved, load_task
from zoo.errors import SpecError, ZooError
from zoo.experiment import load_experiment
from zoo.model.decode import MAX_BEAM, DecodeConfig, greedy
from zoo.registry import registry
from zoo.train import TrainConfig, check_fits, fit_to_task, load_train_config
from zoo.train.config import load_train_config as load_config

TINY = {"d_model": 16, "n_heads": 2, "d_ff": 32, "encoder_layers": 1, "decoder_layers": 1}


# -- numbers ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("override, field", [
    ({"steps": True}, "steps"), ({"lr": math.inf}, "lr"), ({"lr": math.nan}, "lr"),
    ({"weight_decay": math.nan}, "weight_decay"),
    ({"eps": 0.0}, "eps"), ({"eps": math.inf}, "eps"), ({"clip_norm": math.inf}, "clip_norm"),
    ({"label_smoothing": math.nan}, "label_smoothing"), ({"betas": [2.0, 0.98]}, "betas.0"),
    ({"betas": [0.9, 1.0]}, "betas.1"), ({"betas": [-0.1, 0.9]}, "betas.0"), ({"epochs": math.nan}, "epochs"),
    ({"batch_tokens": False}, "batch_tokens"), ({"seed": True}, "seed"),
])
def test_training_numbers_must_be_finite_numbers_in_range(override, field):
    with pytest.raises(SpecError, match=f"training config: {field}: ") as err:
        load_train_config(None, {"steps": 3, **override})
    assert "\n" not in str(err.value)


def test_train_steps_true_is_one_line_exit_2(capsys, tmp_path):
    code = main(["train", "paper-base", "--task", "copy", "--train", "steps=true", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and "steps" in err and len(err.strip().splitlines()) == 1 and not (tmp_path / "r").exists()


def test_a_valid_config_round_trips_through_json():
    config = TrainConfig(steps=3, epochs=2, betas=(0.9, 0.98))
    assert TrainConfig.model_validate(json.loads(json.dumps(config.model_dump(mode="json")))) == config
    assert load_config(None, {"steps": 3, "betas": [0.0, 0.5]})[0].betas == (0.0, 0.5)


EXPERIMENT = 'name = "x"\n[[variants]]\nlabel = "a"\nbase = "paper-base"\n[[tasks]]\nname = "copy"\n{task}\n{decode}\n'


@pytest.mark.parametrize("task, decode, field", [
    ("threshold = nan", "", "tasks.0.threshold"), ("threshold = true", "", "tasks.0.threshold"),
    ("", "[decode]\nmax_ratio = 100.0", "decode.max_ratio"), ("", "[decode]\nalpha = inf", "decode.alpha"),
    ("", "[decode]\nbeam = true", "decode.beam"), ("", "[decode]\nbeam = 100000", "decode.beam"),
])
def test_experiment_numbers(tmp_path, task, decode, field):
    path = tmp_path / "exp.toml"
    path.write_text(EXPERIMENT.format(task=task, decode=decode))
    with pytest.raises(ZooError, match=field):
        load_experiment(path)


def test_a_task_option_named_like_the_task_field_is_one_line(tmp_path, capsys):
    """`options = {name = "reverse"}` clashed with the task's own name: a TypeError traceback."""
    path = tmp_path / "exp.toml"
    path.write_text(EXPERIMENT.format(task='options = {name = "reverse"}', decode="[train]\nsteps = 1"))
    assert main(["run", str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "tasks.0.options: 'name' is not a task option" in err and len(err.strip().splitlines()) == 1


FINDING = ('[[findings]]\nkind = "direction"\nvariant = "a"\nexpect = "better"\nclaim = "c"\nsource = "s"\n'
           '{finding}')


@pytest.mark.parametrize("top, task, finding, field", [
    ("seeds = [true]", "", "", "seeds.0"), ("seeds = [0, inf]", "", "", "seeds.1"),
    ("", "stall = {floor = true}", "", "tasks.0.stall.floor"), ("", "stall = {floor = inf}", "", "tasks.0.stall.floor"),
    ("", "stall = {patience = true}", "", "tasks.0.stall.patience"),
    ("", "margin = true", "", "tasks.0.margin"), ("", "detect = inf", "", "tasks.0.detect"),
    ("", "", "effect = true", "findings.0.effect"), ("", "", "effect = nan", "findings.0.effect"),
    ("", "", "regime = {tolerance = true}", "findings.0.regime.tolerance"),
    ("", "", "regime = {min_seeds = true}", "findings.0.regime.min_seeds"),
    ("analysis = {alpha = true}", "", "", "analysis.alpha"), ("analysis = {power = nan}", "", "", "analysis.power"),
    ("analysis = {min_seeds = true}", "", "", "analysis.min_seeds"),
])
def test_experiment_file_numbers_refuse_bools_and_non_finite(tmp_path, top, task, finding, field):
    path = tmp_path / "exp.toml"
    text = top + "\n" + EXPERIMENT.format(task=task, decode="") + (FINDING.format(finding=finding) if finding else "")
    path.write_text(text)
    with pytest.raises(ZooError, match=field.replace(".", r"\.")):
        load_experiment(path)


def _numeric(annotation) -> bool:
    """Whether a field holds an int or a float (possibly optional or annotated), not a bool."""
    if annotation in (int, float):
        return True
    return any(_numeric(arg) for arg in typing.get_args(annotation))


NUMERIC_OPTIONS = [(entry.qualified, field) for entry in registry.entries()
                   for field, info in entry.config.model_fields.items() if _numeric(info.annotation)]


def test_the_registry_has_numeric_options_to_check():
    assert {"norm.layernorm", "embedding.fixnorm", "positional.rotary"} <= {name for name, _ in NUMERIC_OPTIONS}


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan, True, False], ids=repr)
@pytest.mark.parametrize("component, field", NUMERIC_OPTIONS)
def test_every_numeric_component_option_refuses_bools_and_non_finite(component, field, bad):
    """eps=inf trained to a 'complete' run that learned nothing; max_len=true became 1."""
    slot, name = component.split(".", 1)
    key = registry.slot(slot).key
    with pytest.raises(SpecError, match=rf"{slot}\.{field}:"):
        zoo.load_spec("paper-base", {**TINY, f"{slot}.{key}": name, f"{slot}.{field}": bad})


INTEGER_OPTIONS = [(entry.qualified, field) for entry in registry.entries()
                   for field, info in entry.config.model_fields.items() if _numeric(info.annotation)
                   and int in (info.annotation, *typing.get_args(info.annotation))]


@pytest.mark.parametrize("component, field", INTEGER_OPTIONS)
def test_every_integer_component_option_has_an_upper_bound(component, field):
    """positional.max_len = 10^40 passed validation and overflowed in torch.arange with a traceback in `zoo show`
    (found by tests/test_fuzz_inputs.py): a size no machine could allocate is one line, like d_model's."""
    slot, name = component.split(".", 1)
    key = registry.slot(slot).key
    with pytest.raises(SpecError, match=rf"{slot}\.{field}:"):
        zoo.load_spec("paper-base", {**TINY, f"{slot}.{key}": name, f"{slot}.{field}": 10**40})


@pytest.mark.parametrize("field", ["d_model", "n_heads", "d_ff", "encoder_layers", "decoder_layers", "dropout",
                                   "src_vocab", "tgt_vocab", "pad_id"])
@pytest.mark.parametrize("bad", [math.inf, math.nan, True, False], ids=repr)
def test_every_numeric_spec_field_refuses_bools_and_non_finite(field, bad):
    with pytest.raises(SpecError, match=rf"^paper-base: {field}:"):
        zoo.load_spec("paper-base", {field: bad})


# -- names -----------------------------------------------------------------------------------------
NAMED_EXPERIMENT = ('name = {name}\n[[variants]]\nlabel = {label}\nbase = "paper-base"\n'
                    '[[tasks]]\nname = "copy"\n{task}\n')


@pytest.mark.parametrize("name, label, task, field", [
    (r'"x\n"', '"a"', "", "name: 'x\\n'"), ('"x "', '"a"', "", "name: 'x '"),
    ('"x"', r'"pre-norm\n"', "", "label: 'pre-norm\\n'"), ('"x"', r'"a\tb"', "", "label: 'a\\tb'"),
    ('"x"', '"a"', r'label = "copy\n"', "label: 'copy\\n'"), ('"x"', '"a"', 'label = "c/d"', "label: 'c/d'"),
])
def test_names_and_labels_with_a_newline_or_separator_are_refused(tmp_path, name, label, task, field):
    """`name = "x\n"` made a folder whose name ends in a newline and broke the report's tables."""
    path = tmp_path / "exp.toml"
    path.write_text(NAMED_EXPERIMENT.format(name=name, label=label, task=task))
    with pytest.raises(ZooError) as caught:
        load_experiment(path)
    assert field in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("name", ["x\n", " x", "x ", "a/b", "a\\b", "t\tb", "", "\x1b[31m"])
def test_a_spec_name_must_be_one_clean_printable_line(name):
    with pytest.raises(SpecError, match="^paper-base: name: must be non-empty printable text"):
        zoo.load_spec("paper-base", {"name": name})
    assert zoo.load_spec("paper-base", {"name": "my variant (d=256)"}).name == "my variant (d=256)"


@pytest.mark.parametrize("settings", [{"max_ratio": math.nan}, {"max_ratio": 1e9}, {"beam": 0}, {"alpha": math.inf},
                                      {"max_extra": -1}, {"beam": True}, {"beam": MAX_BEAM + 1}])
def test_decode_config_refuses_what_cannot_be_a_length(settings):
    with pytest.raises(ZooError, match=next(iter(settings))):
        DecodeConfig(**settings)


@pytest.mark.parametrize("argv, field", [(["evaluate", "RUN", "--beam", "100000"], "beam: 100000"),
                                         (["evaluate", "RUN", "--limit", "-1"], "--limit: -1"),
                                         (["evaluate", "RUN", "--limit", "0"], "--limit: 0"),
                                         (["translate", "RUN", "--beam", "65"], "beam: 65")])
def test_evaluate_refuses_a_beam_that_never_ends_and_a_limit_below_one(tmp_path, capsys, argv, field):
    """--beam 100000 hung in decoding; --limit -1 silently dropped the last sentence."""
    argv = [str(tmp_path / "run") if word == "RUN" else word for word in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert field in err and len(err.strip().splitlines()) == 1


def test_decoding_never_goes_past_the_positional_table():
    spec = zoo.load_spec("paper-base", {**TINY, "src_vocab": 12, "tgt_vocab": 12, "positional.max_len": 8})
    model = zoo.build(spec, seed=0).eval()
    src = torch.tensor([[5, 6, 7, 3]])
    out = greedy(model, src, bos=2, eos=3, config=DecodeConfig(max_ratio=10, max_extra=100))  # asks for 140 tokens
    assert len(out[0]) <= 7


def test_synthetic_symbols_one_is_refused_up_front():
    with pytest.raises(DataError, match="symbols: 1 with lengths 5..20 gives too few distinct sequences"):
        TaskConfig(name="copy", symbols=1)
    TaskConfig(name="copy", symbols=2)  # 2^5 + ... sequences: plenty


def test_synthetic_lengths_beyond_the_positional_table_fail_before_training():
    spec = zoo.load_spec("paper-base", {"positional.max_len": 30})
    with pytest.raises(DataError, match=r"up to 40 tokens need 41 positions \(with eos or bos\), "
                                        r"more than positional.max_len = 30"):
        check_fits(spec, TaskConfig(name="long-copy"))


# -- long sentences ----------------------------------------------------------------------------------
def corpus(tmp_path):
    folder = tmp_path / "data" / "toy"
    folder.mkdir(parents=True)
    lines = [" ".join(["alpha", "beta", "gamma"] * (1 + i % 3)) for i in range(30)]
    for split in ("train", "valid", "test"):
        chosen = lines if split == "train" else lines[:6]
        if split == "test":
            chosen = [*chosen[:3], " ".join(["delta"] * 40), *chosen[3:]]  # line 4: 40 words
        for lang in ("xx", "yy"):
            (folder / f"{split}.{lang}").write_text("".join(s + "\n" for s in chosen))
    return folder


def toy_task(tmp_path, **options):
    return load_task("toy:xx-yy", data_dir=corpus(tmp_path).parent, cache_dir=tmp_path / "cache", vocab_size=60,
                     tokenizer="wordlevel", **options)


def toy_spec(task, max_len=20):
    return zoo.load_spec("paper-base", {**TINY, "src_vocab": task.src_vocab, "tgt_vocab": task.tgt_vocab,
                                        "positional.max_len": max_len})


def test_a_sentence_too_long_for_the_model_names_file_and_line(tmp_path):
    task = toy_task(tmp_path)
    with pytest.raises(DataError) as err:
        fit_to_task(toy_spec(task), task)
    assert str(err.value) == (f"{tmp_path / 'data' / 'toy' / 'test.xx'}:4: 40 tokens, "
                              "longer than positional.max_len = 20 "
                              'allows (19 + eos/bos); set long_sentences = "truncate" or "skip"')


@pytest.mark.parametrize("policy, test_pairs, longest", [("truncate", 7, 19), ("skip", 6, 9)])
def test_truncate_or_skip_and_the_task_records_how_many(tmp_path, policy, test_pairs, longest):
    task = toy_task(tmp_path, long_sentences=policy)
    fit_to_task(toy_spec(task), task)
    examples = task.examples("test")
    assert len(examples) == len(task.sources("test")) == len(task.references("test")) == test_pairs
    assert max(len(src) - 1 for src, _ in examples) == longest
    assert task.shortened == {"train": 0, "valid": 0, "test": 1}
    task.save(tmp_path / "saved")
    record = json.loads((tmp_path / "saved" / "task.json").read_text())
    assert record["long_sentences"] == {"policy": policy, "shortened": {"train": 0, "valid": 0, "test": 1}}
    restored = load_saved(tmp_path / "saved")
    assert restored.positions == 20 and restored.examples("test") == examples


# -- missing data ----------------------------------------------------------------------------------
def test_a_missing_corpus_fails_zoo_run_before_anything_trains(tmp_path, capsys):
    path = tmp_path / "exp.toml"
    path.write_text(f'name = "x"\ndata_dir = "{tmp_path}"\n[[variants]]\nlabel = "a"\nbase = "paper-base"\n'
                    '[[tasks]]\nname = "nothere:de-en"\n[train]\nsteps = 1\n')
    code = main(["run", str(path), "--runs", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert code == 2 and "nothere: no such corpus folder" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()


def test_a_missing_split_file_fails_zoo_train_before_reading(tmp_path, capsys):
    folder = corpus(tmp_path)
    (folder / "test.yy").unlink()
    code = main(["train", "paper-base", "--task", "toy:xx-yy", "--data-dir", str(folder.parent), "--train", "steps=1",
                 "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and "test.yy: missing" in err and len(err.strip().splitlines()) == 1
