"""Trivial floors: each task's do-nothing systems, scored like the models, written beside the records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sacrebleu

from zoo.cli import main
from zoo.data import load_task
from zoo.experiment import load_experiment
from zoo.experiment.floors import FOLDER, floor_path, read_floor, write_floors

ROOT = Path(__file__).resolve().parent.parent
SYNTHETIC = {"symbols": 6, "min_len": 2, "max_len": 5, "train_size": 400, "valid_size": 30, "test_size": 60}


def test_copy_tasks_have_no_identity_floor_since_it_is_their_answer():
    assert list(load_task("copy", **SYNTHETIC).trivial_outputs("test")) == ["majority"]
    assert list(load_task("reverse", **SYNTHETIC).trivial_outputs("test")) == ["identity", "majority"]


def test_identity_and_majority_outputs():
    task = load_task("reverse", **SYNTHETIC)
    outputs = task.trivial_outputs("test")
    sources, references = task.sources("test"), task.references("test")
    assert outputs["identity"] == sources
    palindromes = sum(s == r for s, r in zip(sources, references))
    assert sum(o == r for o, r in zip(outputs["identity"], references)) == palindromes
    # majority: as long as the source, and at each position the target symbol most frequent there in training
    assert [len(o.split()) for o in outputs["majority"]] == [len(s.split()) for s in sources]
    first = [r.split()[0] for r in task.references("train")]
    assert outputs["majority"][0].split()[0] == max(sorted(set(first)), key=first.count)


def test_copying_the_wmt_source_scores_as_measured(tmp_path, corpora):
    """The issue's measurement: the English source copied unchanged, Moses-detokenized as the references are."""
    task = load_task("wmt-ende-10k:en-de", data_dir=corpora("wmt-ende-10k"), cache_dir=tmp_path, vocab_size=1000,
                     joint=True, detokenize="moses")
    copied = task.trivial_outputs("test")["copy-source"]
    references = task.references("test")
    assert len(copied) == len(references) == 500
    assert sacrebleu.corpus_chrf(copied, [references]).score == pytest.approx(21.44, abs=0.005)
    assert sacrebleu.corpus_bleu(copied, [references]).score == pytest.approx(2.83, abs=0.005)


def _experiment(tmp_path, symbols: int = 8) -> Path:
    text = (ROOT / "experiments" / "smoke.toml").read_text().replace("symbols = 8", f"symbols = {symbols}")
    path = tmp_path / "smoke.toml"
    path.write_text(text)
    return path


def test_floors_are_written_once_and_again_when_the_task_changes(tmp_path):
    records = tmp_path / "records"
    experiment = load_experiment(_experiment(tmp_path))
    assert write_floors(experiment, records) == ["copy"]
    floor = read_floor(records, "copy")
    assert set(floor["systems"]) == {"majority"}
    assert set(floor["systems"]["majority"]["test"]) == {"exact_match", "token_accuracy"}
    assert len(floor["systems"]["majority"]["sentences"]["exact_match"]) == 30
    assert write_floors(experiment, records) == []  # current: nothing to do
    assert write_floors(load_experiment(_experiment(tmp_path, symbols=9)), records) == ["copy"]
    floor_path(records, "copy").write_text('{"format": 1, "systems": "x"}')
    assert write_floors(experiment, records) == ["copy"]  # a damaged floor is made again
    assert read_floor(records, "copy")["definition"]["task"]["symbols"] == 8


def test_zoo_floors_writes_and_prints_the_floors(tmp_path, capsys):
    assert main(["floors", str(_experiment(tmp_path)), "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr()
    assert "majority" in printed.out and "exact_match" in printed.out
    written = json.loads((tmp_path / "out" / "records" / FOLDER / "copy.json").read_text())
    assert written["task"] == "copy"
