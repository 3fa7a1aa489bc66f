"""What defines a cell, field by field: changing any decode setting, a corpus file, a tokenizer setting, a
synthetic task's setting, a training setting or a plugin's source makes exactly the cells that depend on it
stale, and nothing else. Each case goes through the whole path a grid takes (`store.definition` of the
edited experiment, the recorded definitions read back by today's code, `grid.plan`), over a store of records
of the unedited experiment: a staleness check that ignored any part of the definition fails here."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from zoo.data.config import TaskConfig
from zoo.experiment import load_experiment, store
from zoo.experiment import record as records
from zoo.experiment.grid import cells, plan
from zoo.model.decode import DecodeSettings

CORPUS = {"train": ["ein haus", "ein hund", "der hund", "das haus", "ein kleines haus", "der grosse hund"] * 4,
          "valid": ["ein haus", "der hund"], "test": ["das haus", "ein hund"], "more": ["der hund", "das haus"]}
ENGLISH = {"haus": "house", "hund": "dog", "ein": "a", "der": "the", "das": "the", "kleines": "small",
           "grosse": "big"}
TEXT_OPTIONS = {"tokenizer": '"wordlevel"', "vocab_size": "40", "joint": "true", "lowercase": "false",
                "detokenize": '"none"', "max_tokens_per_sentence": "64", "long_sentences": '"error"',
                "test_sets": '["test"]'}
EXPERIMENT = """
name = "defined"
seeds = [0, 1]
shared = {{d_model = 16, n_heads = 2, d_ff = 32, encoder_layers = 1, decoder_layers = 1, "embedding.sharing" = "none"}}

[[variants]]
label = "post-norm"
base = "paper-base"

[[variants]]
label = "pre-norm"
base = "paper-base"
set = {{"residual.kind" = "pre-norm"}}

[[tasks]]
name = "copy"
options = {{symbols = 6, min_len = 2, max_len = 4, train_size = 100, valid_size = 10, test_size = 10, seed = 0}}

[[tasks]]
name = "tiny:de-en"
options = {{data_dir = "{data}", {text}}}

[train]
steps = 4
batch_tokens = 128
warmup = 1
lr = 0.001

[decode]
beam = 1
alpha = 0.6
max_ratio = 1.5
max_extra = 10
"""
ALL = {f"{variant}/{task}/seed-{seed}" for variant in ("post-norm", "pre-norm") for task in ("copy", "tiny-de-en")
       for seed in (0, 1)}


def only(task: str | None = None, variant: str | None = None) -> set[str]:
    """The cells of `task` and/or `variant`."""
    return {name for name in ALL if task in (None, name.split("/")[1]) and variant in (None, name.split("/")[0])}


def write_corpus(folder: Path) -> None:
    (folder / "tiny").mkdir(parents=True, exist_ok=True)
    for split, lines in CORPUS.items():
        (folder / "tiny" / f"{split}.de").write_text("\n".join(lines) + "\n")
        (folder / "tiny" / f"{split}.en").write_text("\n".join(" ".join(ENGLISH[w] for w in line.split())
                                                               for line in lines) + "\n")


def experiment_text(data: Path, edit: tuple[str, str] | None = None, text: dict[str, str] = TEXT_OPTIONS) -> str:
    body = EXPERIMENT.format(data=data, text=", ".join(f"{k} = {v}" for k, v in text.items()))
    if edit:
        assert edit[0] in body, edit
        body = body.replace(*edit, 1)
    return body


@pytest.fixture
def recorded(tmp_path):
    """An experiment with a synthetic and a text task, and a store holding a record of every cell's definition."""
    write_corpus(tmp_path / "data")
    path = tmp_path / "defined.toml"
    path.write_text(experiment_text(tmp_path / "data"))
    experiment = load_experiment(path)
    grid = cells(experiment, tmp_path / "runs", tmp_path / "records")
    for cell in grid:
        task = next(t for t in experiment.config.tasks if t.key == cell.task)
        definition = store.definition(experiment, cell.variant, task, cell.seed)
        head = records.base({"experiment": "defined", "variant": cell.variant, "task": cell.task, "seed": cell.seed},
                            definition, store.digest(definition), 1)
        records.write(cell.record, records.Record(**dict(head), status="diverged", reason="a test's record"))
    assert plan(experiment, grid) == {}
    return tmp_path, path


def stale_after(root: Path, path: Path) -> set[str]:
    experiment = load_experiment(path)
    return set(plan(experiment, cells(experiment, root / "runs", root / "records")))


def other_value(field: str, value: str) -> str:
    """A different valid value of a setting written as TOML."""
    changed = {"true": "false", "false": "true", '"wordlevel"': '"bpe"', '"none"': '"moses"', '"error"': '"skip"',
               '["test"]': '["test", "more"]'}
    if value in changed:
        return changed[value]
    return str(float(value) * 2 if "." in value else int(value) + 1)


DECODE = {"beam": "1", "alpha": "0.6", "max_ratio": "1.5", "max_extra": "10"}


def test_the_cases_cover_every_setting():
    """A setting added to zoo joins these cases, or this fails."""
    assert set(DECODE) == set(DecodeSettings.model_fields)
    text_fields = set(TaskConfig.model_fields) - {"name", "data_dir", "symbols", "min_len", "max_len", "train_size",
                                                  "valid_size", "test_size", "seed"}
    assert text_fields <= set(TEXT_OPTIONS) | {"label"}, text_fields - set(TEXT_OPTIONS)


@pytest.mark.parametrize("field", sorted(DECODE))
def test_a_decode_setting_makes_every_cell_stale(recorded, field):
    root, path = recorded
    value = DECODE[field]
    path.write_text(experiment_text(root / "data", (f"{field} = {value}", f"{field} = {other_value(field, value)}")))
    assert stale_after(root, path) == ALL


@pytest.mark.parametrize("field", sorted(TEXT_OPTIONS))
def test_a_tokenizer_setting_makes_the_text_tasks_cells_stale(recorded, field):
    root, path = recorded
    text = {**TEXT_OPTIONS, field: other_value(field, TEXT_OPTIONS[field])}
    path.write_text(experiment_text(root / "data", text=text))
    assert stale_after(root, path) == only(task="tiny-de-en")


@pytest.mark.parametrize("setting", ["symbols = 6", "min_len = 2", "max_len = 4", "train_size = 100",
                                     "valid_size = 10", "test_size = 10", "seed = 0"])
def test_a_synthetic_tasks_setting_makes_its_cells_stale(recorded, setting):
    root, path = recorded
    key, value = setting.split(" = ")
    path.write_text(experiment_text(root / "data", (f"{setting},", f"{key} = {int(value) + 1},")
                                    if key != "seed" else (setting, f"{key} = 1")))
    assert stale_after(root, path) == only(task="copy")


@pytest.mark.parametrize("file", [f"{split}.{lang}" for split in ("train", "valid", "test") for lang in ("de", "en")])
def test_a_corpus_file_makes_the_text_tasks_cells_stale(recorded, file):
    root, path = recorded
    target = root / "data" / "tiny" / file
    target.write_text(target.read_text().replace("haus", "Haus", 1).replace("house", "House", 1))
    assert stale_after(root, path) == only(task="tiny-de-en")


def test_a_further_test_sets_file_makes_only_the_cells_that_read_it_stale(recorded):
    """The data fingerprint covers the test sets a task names: with a second set declared, editing its file makes
    the text task's cells stale; records made before tasks could name sets keep their digest (test_sets left out of
    the definition where it is the default)."""
    root, path = recorded
    text = {**TEXT_OPTIONS, "test_sets": '["test", "more"]'}
    path.write_text(experiment_text(root / "data", text=text))
    experiment = load_experiment(path)
    task = next(t for t in experiment.config.tasks if t.key == "tiny-de-en")
    before = store.digest(store.definition(experiment, "post-norm", task, 0))
    target = root / "data" / "tiny" / "more.de"
    target.write_text(target.read_text().replace("hund", "Hund", 1))
    assert store.digest(store.definition(experiment, "post-norm", task, 0)) != before
    declared = store.definition(experiment, "post-norm", task, 0)
    assert "more.de" in declared["data"] and declared["task"]["test_sets"] == ["test", "more"]
    path.write_text(experiment_text(root / "data"))  # test_sets = ["test"], the default, said
    experiment = load_experiment(path)
    task = next(t for t in experiment.config.tasks if t.key == "tiny-de-en")
    default = store.definition(experiment, "post-norm", task, 0)
    assert "test_sets" not in default["task"] and "more.de" not in default["data"]


def test_the_same_corpus_elsewhere_is_the_same_data(recorded):
    root, path = recorded
    shutil.copytree(root / "data", root / "moved")
    path.write_text(experiment_text(root / "moved"))
    assert stale_after(root, path) == set()


@pytest.mark.parametrize(("edit", "expected"), [
    (("steps = 4", "steps = 5"), ALL),
    (("lr = 0.001", "lr = 0.002"), ALL),
    (('set = {"residual.kind" = "pre-norm"}', 'set = {"residual.kind" = "pre-norm", "ffn.kind" = "conv1d"}'),
     only(variant="pre-norm")),
    (("seeds = [0, 1]", "seeds = [0, 1, 2]"), set()),  # a new seed is new, and the recorded ones stay current
    (("lr = 0.001", 'lr = 0.001\nkernels = "fast"'), ALL),  # the fast path is another definition
    (("lr = 0.001", 'lr = 0.001\nkernels = "fast-attention"'), ALL),  # and so is its bf16 attention backward
    (("lr = 0.001", 'lr = 0.001\nkernels = "reference"'), set()),  # the default, said: the records made before it
])
def test_training_and_model_settings_make_exactly_their_cells_stale(recorded, edit, expected):
    root, path = recorded
    path.write_text(experiment_text(root / "data", edit))
    assert stale_after(root, path) == expected
