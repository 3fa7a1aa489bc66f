"""Evaluation sets: a text task's test split made of several sets (one corpus score over their union, each set's own
score in the record), and records of format 2, which keep their sentences and hypotheses packed and their training
curve thinned, read back as format 1 holds them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sacrebleu.metrics import BLEU

from zoo.data import TaskConfig, load_task
from zoo.errors import DataError
from zoo.experiment import packing
from zoo.experiment import record as records
from zoo.experiment.consistency import set_scores

ROOT = Path(__file__).resolve().parent.parent
FORMAT_1 = ROOT / "reports/ablations/records/baseline/multi30k-de-en/seed-0.json"
WORDS = {"haus": "house", "hund": "dog", "ein": "a", "der": "the", "das": "the", "kleines": "small", "grosse": "big"}
SETS = {"train": ["ein haus", "ein hund", "der hund", "das haus", "ein kleines haus", "der grosse hund"] * 4,
        "valid": ["ein haus"], "test": ["das haus", "ein hund"], "later": ["der grosse hund", "ein haus", "der hund"]}


@pytest.fixture
def corpus(tmp_path):
    for stem, lines in SETS.items():
        (tmp_path / "toy" / "x").parent.mkdir(exist_ok=True)
        (tmp_path / "toy" / f"{stem}.de").write_text("\n".join(lines) + "\n")
        (tmp_path / "toy" / f"{stem}.en").write_text("\n".join(" ".join(WORDS[w] for w in line.split())
                                                               for line in lines) + "\n")
    return tmp_path


def test_the_test_split_is_its_sets_one_after_the_other(corpus, tmp_path):
    task = load_task("toy:de-en", data_dir=corpus, tokenizer="wordlevel", vocab_size=40, test_sets=["later", "test"],
                     cache_dir=tmp_path / "cache")
    assert task.test_sets() == [("later", 3), ("test", 2)]
    assert task.references("test") == ["the big dog", "a house", "the dog", "the house", "a dog"]
    one = load_task("toy:de-en", data_dir=corpus, tokenizer="wordlevel", vocab_size=40, cache_dir=tmp_path / "cache")
    assert one.test_sets() == [("test", 2)] and one.references("test") == ["the house", "a dog"]


def test_a_skipped_sentence_leaves_its_own_set(corpus, tmp_path):
    """long_sentences = "skip" drops test pairs too long for the model: the set they were in holds fewer."""
    task = load_task("toy:de-en", data_dir=corpus, tokenizer="wordlevel", vocab_size=40, test_sets=["test", "later"],
                     long_sentences="skip", cache_dir=tmp_path / "cache")
    task.limit_lengths(3)  # two tokens a side: "der grosse hund" (3) is skipped
    assert task.test_sets() == [("test", 2), ("later", 2)]


@pytest.mark.parametrize("options, problem", [
    ({"test_sets": ["test", "test"]}, "test_sets: a test set is named twice"),
    ({"test_sets": ["valid"]}, "test_sets: 'valid' is not a test set name"),
    ({"test_sets": ["../x"]}, "test_sets: '../x' is not a test set name"),
    ({"test_sets": []}, "test_sets:"),
])
def test_a_wrong_test_set_is_one_line_naming_the_field(options, problem):
    with pytest.raises(DataError, match=f"^task 'toy:de-en': {problem}".replace("(", r"\(").replace(".", r"\.")):
        TaskConfig(name="toy:de-en", **options)


def test_a_synthetic_task_has_no_test_sets_to_name():
    with pytest.raises(DataError, match="test_sets: only a parallel-text task"):
        TaskConfig(name="copy", test_sets=["test", "more"])


def test_a_missing_test_set_file_is_named_before_anything_is_read(corpus, tmp_path):
    with pytest.raises(DataError, match=r"nope\.de: missing.*a test set the task's test_sets names"):
        load_task("toy:de-en", data_dir=corpus, test_sets=["test", "nope"], cache_dir=tmp_path / "cache")


def _bleu_rows(hypotheses, references):
    bleu = BLEU()
    return [[int(x) for x in bleu._extract_corpus_statistics([h], [[r]])[0]] for h, r in zip(hypotheses, references)]


def test_each_sets_score_is_sacrebleus_on_that_set_alone():
    """The per-set scores a record keeps are sacreBLEU's corpus BLEU of each set's sentences on their own."""
    hyps = ["a small house", "the dog", "a big dog runs", "the house", "a dog"]
    refs = ["a small house", "the dog runs", "a big dog runs", "the house is big", "a dog"]
    rows = np.asarray(_bleu_rows(hyps, refs))
    scores = set_scores([("first", 2), ("second", 3)], {"bleu": rows})
    assert [s["name"] for s in scores] == ["first", "second"] and [s["sentences"] for s in scores] == [2, 3]
    assert scores[0]["scores"]["bleu"] == pytest.approx(BLEU().corpus_score(hyps[:2], [refs[:2]]).score)
    assert scores[1]["scores"]["bleu"] == pytest.approx(BLEU().corpus_score(hyps[2:], [refs[2:]]).score)


def _format_2(tmp_path: Path) -> tuple[dict, Path]:
    """The committed ablations record as a record of format 2 with two test sets (its first 400 and last 600
    sentences), written and read back."""
    source = records.read(FORMAT_1)
    sets = set_scores([("a", 400), ("b", 600)], source.sentences)
    record = source.model_copy(update={"format": 2, "test_sets": [records.TestSet(**s) for s in sets]})
    path = tmp_path / "seed-0.json"
    records.write(path, record)
    return json.loads(path.read_text()), path


def test_a_format_2_record_packs_what_format_1_lists_and_reads_back_the_same(tmp_path):
    raw, path = _format_2(tmp_path)
    assert "sentences" not in raw and "hypotheses" not in raw and raw["packed"]["codec"] == packing.CODEC
    read, original = records.read(path), records.read(FORMAT_1)
    assert read.hypotheses == original.hypotheses
    for name, table in original.sentences.items():
        assert np.array_equal(read.sentences[name], table)
    again = tmp_path / "again.json"
    records.write(again, read)
    assert again.read_bytes() == path.read_bytes()
    listed = json.loads(FORMAT_1.read_text())
    assert len(json.dumps(raw["packed"])) < len(json.dumps([listed["sentences"], listed["hypotheses"]])) / 5


def test_packing_predicts_sacrebleus_totals_from_the_length():
    """BLEU's n-gram totals are the hypothesis length less n - 1: packing stores them as residuals of a column."""
    rows = np.asarray(_bleu_rows(["a b c d e", "a b c", "x y z w"], ["a b c d e", "a b", "x y"]))
    layout = packing.pack({"bleu": rows}, ["h"])["tables"][0]
    assert layout["shape"] == [3, 10] and all(p >= 0 for p in layout["predictors"][7:])  # t2..t4 from earlier ones
    sentences, hypotheses = packing.unpack(packing.pack({"bleu": rows, "ragged": [[1], [2, 3]]}, ["h"]))
    assert sentences == {"bleu": rows.tolist(), "ragged": [[1], [2, 3]]} and hypotheses == ["h"]


def test_tables_in_any_key_order_read_back_as_written(tmp_path):
    """A record is written with sorted keys: tables packed in another order must still decode to their own rows
    (two metrics whose names sort the other way round from the order the task lists them)."""
    sentences = {"zz_last": np.array([[5, 7], [3, 4]]), "aa_first": np.array([0, 1])}
    raw = json.loads(json.dumps(packing.pack(sentences, ["a", "b"]), sort_keys=True))
    decoded, _ = packing.unpack(raw)
    assert decoded == {"zz_last": [[5, 7], [3, 4]], "aa_first": [0, 1]}


@pytest.mark.parametrize("damage, problem", [
    (lambda raw: raw["packed"].update(data=raw["packed"]["data"][:-20]), "packed: cannot be decoded"),
    (lambda raw: raw["packed"].update(codec="zip"), "packed: not 'xz-base85' data"),
    (lambda raw: raw.update(format=1), "packed: only a record of format 2 holds it"),
    (lambda raw: raw["test_sets"][1].update(sentences=599),
     "test_sets: 400 \\+ 599 sentences, but sentences.bleu holds 1000"),
    (lambda raw: raw["test_sets"][0]["scores"].update(bleu=99.0), "test_sets: a's bleu is 99.0, but its sentences"),
], ids=["cut", "codec", "format-1", "sizes", "a-set-score"])
def test_a_damaged_format_2_record_is_one_line_naming_what(damage, problem, tmp_path):
    raw, path = _format_2(tmp_path)
    damage(raw)
    path.write_text(json.dumps(raw))
    with pytest.raises(records.RunError, match=problem):
        records.read(path)


def test_a_records_training_curve_keeps_every_evaluation_and_at_most_train_rows():
    rows = [{"step": s, "loss": 1.0 / s} for s in range(1, 1001)] + [{"event": "eval", "step": s, "bleu": s / 100}
                                                                     for s in range(100, 1001, 100)]
    kept = records.curves(rows)
    assert len(kept["train"]["step"]) <= records.TRAIN_ROWS and kept["train"]["step"][-1] == 1000
    assert np.all(np.diff(kept["train"]["step"]) == kept["train"]["step"][1] - kept["train"]["step"][0])
    assert kept["eval"]["step"] == list(range(100, 1001, 100))
