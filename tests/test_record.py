"""The typed record: `record.read` gives the model, and writing what was read gives the very bytes read (a record
written before digests gains its digest, and nothing else), so records committed beside reports, records copied
between experiments and diverged records (NaN, inf) are written as they always were."""

from __future__ import annotations

import json
import math
from array import array
from pathlib import Path

import numpy as np
import pytest

from zoo.experiment import record as records
from zoo.experiment.cell import _copy_record
from zoo.experiment.grid import Cell

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = sorted(ROOT.glob("reports/*/records/*/*/seed-*.json"))
SAMPLE = COMMITTED[::10]  # every report folder's records, a tenth of them (all of them take ~10 s here)
HEAD = {"format": 1, "cell": {"experiment": "e", "variant": "v", "task": "copy", "seed": 0}, "definition": {"x": 1},
        "definition_digest": "d", "provenance": {"zoo": "0", "concurrent_runs": 1}}


def _round_trip(source: Path, tmp_path: Path) -> bytes:
    again = tmp_path / "again.json"
    records.write(again, records.read(source))
    return again.read_bytes()


@pytest.mark.parametrize("path", SAMPLE, ids=[p.relative_to(ROOT / "reports").as_posix() for p in SAMPLE])
def test_a_committed_record_read_and_written_again_is_the_same_bytes_and_its_digest(path, tmp_path):
    """Committed records were written before digests: written again, each gains the digest of its very bytes."""
    digest = records.content_digest(path.read_bytes().removesuffix(b"\n"))
    assert _round_trip(path, tmp_path).replace(f',"digest":"{digest}"'.encode(), b"") == path.read_bytes()


def test_a_read_record_holds_its_numbers_packed():
    """Memory holds a record's per-sentence statistics as one integer table per metric and its training curves as
    typed arrays (a report reads hundreds of records at once), read back as the very numbers of the file."""
    path = ROOT / "reports/ablations/records/baseline/multi30k-de-en/seed-0.json"
    read, raw = records.read(path), json.loads(path.read_text())
    for name, rows in raw["sentences"].items():
        table = read.sentences[name]
        assert isinstance(table, np.ndarray) and table.dtype == np.int64 and table.tolist() == rows
    assert all(isinstance(column, array) for column in read.curves.train.values())
    assert read.curves.train["loss"].tolist() == raw["curves"]["train"]["loss"]
    ragged = records.packed_rows([[1, 2], [3]])  # a plugin metric's rows of unequal length stay lists
    assert ragged == [[1, 2], [3]]


@pytest.mark.parametrize("record", [
    {**HEAD, "status": "diverged", "reason": "loss is nan at step 7", "summary": {"steps": 7, "device": None},
     "spec": {}, "final": None, "curves": {"train": {"step": [1, 2], "loss": [math.nan, math.inf]}, "eval": {}},
     "later": {"a field": "a later zoo wrote"}},
    {**HEAD, "status": "failed", "reason": "boom", "traceback": "Traceback ..."},
], ids=["diverged", "failed"])
def test_diverged_and_failed_records_and_extra_fields_survive_a_round_trip(record, tmp_path):
    path = tmp_path / "seed-0.json"
    records.write(path, records.Record.model_validate(record))
    assert _round_trip(path, tmp_path) == path.read_bytes()
    read = records.read(path)
    assert read.status == record["status"] and read.cell.seed == 0
    if record["status"] == "diverged":  # the file's NaN and Infinity tokens read back as floats
        loss = read.curves.train["loss"]
        assert math.isnan(loss[0]) and loss[1] == math.inf


@pytest.mark.parametrize("content, problem", [
    (b'{"format": 1, "cell": ', "cannot read (Invalid JSON: EOF while parsing"),
    (b"\xff\xfe", "cannot read (Invalid JSON"),
    (b"[1, 2]", "not a zoo record of format 1 or 2: record: Input should be an object"),
    (b'{"format": 3}', "not a zoo record of format 1 or 2: format: Input should be 1 or 2"),
], ids=["cut-short", "not-text", "a-list", "another-format"])
def test_a_file_that_is_not_a_record_is_one_error_naming_it(content, problem, tmp_path):
    path = tmp_path / "seed-0.json"
    path.write_bytes(content)
    with pytest.raises(records.RunError) as info:
        records.read(path)
    assert str(info.value).startswith(f"{path}: {problem}")
    with pytest.raises(records.RunError, match="cannot read \\(No such file"):
        records.read(tmp_path / "absent.json")


def test_a_copied_record_differs_from_its_original_in_cell_and_provenance_only(tmp_path):
    source = next(p for p in COMMITTED if "copied_from" not in json.loads(p.read_text())["provenance"])
    original = json.loads(source.read_text())
    cell = Cell("study.toml", "study", "copy-variant", original["cell"]["task"], 7, str(tmp_path / "runs"),
                str(tmp_path / "records"), reuse=str(source))
    assert _copy_record(cell, original["definition"]) == original["status"]
    made = original["cell"]
    expected = {**original, "cell": {"experiment": "study", "variant": "copy-variant", "task": made["task"], "seed": 7},
                "provenance": {**original["provenance"], "copied_from":
                               f"{made['experiment']}/{made['variant']}/{made['task']}/seed-{made['seed']}"}}
    body = json.dumps(expected, sort_keys=True, separators=(",", ":"), allow_nan=True)
    text = json.dumps({**expected, "digest": records.content_digest(body)}, sort_keys=True, separators=(",", ":"),
                      allow_nan=True) + "\n"
    assert cell.record.read_text() == text


def test_records_are_built_as_the_model_they_are_read_with(tmp_path):
    """One schema writes and reads: the head and a failed record are the models `read` checks, so a cell field of
    the wrong type fails where the record is made, not in the report that reads it."""
    head = records.base(HEAD["cell"], {"x": 1}, "d", 1, commit="abc")
    assert isinstance(head, records.Head) and isinstance(head.cell, records.Cell)
    failed = records.failed(head, "boom", "Traceback ...")
    assert isinstance(failed, records.Record) and failed.traceback == "Traceback ..."
    records.write(tmp_path / "seed-0.json", failed)
    read = records.read(tmp_path / "seed-0.json")
    assert read.digest and read == failed.model_copy(update={"digest": read.digest})
    with pytest.raises(ValueError, match="seed"):
        records.base({**HEAD["cell"], "seed": "0"}, {}, "", 1, commit="abc")


def test_a_run_directory_that_does_not_make_a_record_is_one_line_naming_it(tmp_path):
    from zoo import rundir

    run = tmp_path / "run"
    run.mkdir()
    rundir.write_json(run / rundir.SUMMARY, {"status": "diverged", "steps": "seven"})
    rundir.write_json(run / rundir.SPEC, {"spec": {}})
    (run / rundir.METRICS).write_text("")
    head = records.base(HEAD["cell"], {"x": 1}, "d", 1, commit="abc")
    with pytest.raises(rundir.RunError, match=rf"^{run}: its files do not make a record: summary.steps: "):
        records.from_run(run, head)
