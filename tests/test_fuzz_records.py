"""Records given to `zoo report`: a damaged or malformed record is one line naming the file, never a
traceback. Real committed records are mutated at random places: wrong types, missing keys, odd numbers
(NaN, inf, 1e308, huge integers, booleans), truncated JSON, deep nesting, bytes that are not UTF-8."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zoo.cli import main
from zoo.errors import ZooError
from zoo.experiment import record as records

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [ROOT / "reports" / "quickstart" / "records" / "post-norm" / "copy" / "seed-0.json",  # stalled
           ROOT / "reports" / "quickstart" / "records" / "pre-norm" / "copy" / "seed-1.json",
           ROOT / "reports" / "ablations" / "records" / "rotary" / "multi30k-de-en" / "seed-2.json"]
ORIGINALS = [json.loads(path.read_text()) for path in SOURCES]

odd = st.one_of(st.none(), st.booleans(), st.integers(-10**30, 10**30), st.just(1e308), st.just(-1e308),
                st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6), st.just("[bold]x[/]"),
                st.just([]), st.just({}), st.just(["a"]), st.just([[1, "2"]]), st.just({"x": [1]}))


def _paths(value, prefix=()):
    """Every place in a JSON value (dict keys and list indices), the top first."""
    yield prefix
    if isinstance(value, dict):
        for key, sub in value.items():
            yield from _paths(sub, (*prefix, key))
    elif isinstance(value, list):
        for index, sub in enumerate(value[:3]):
            yield from _paths(sub, (*prefix, index))


PLACES = [[p for p in _paths(record) if p] for record in ORIGINALS]


def mutate(which: int, place: int, action: str, value) -> dict:
    """The original record with one place changed. Only the containers on the way to that place are copied:
    a deep copy of a 580 kB record cost more than reading it, and the rest is shared, never written."""
    record = copy.copy(ORIGINALS[which])
    path = PLACES[which][place % len(PLACES[which])]
    parent = record
    for part in path[:-1]:
        parent[part] = copy.copy(parent[part])
        parent = parent[part]
    if action == "delete" and isinstance(parent, dict):
        del parent[path[-1]]
    elif action == "nest":
        deep = value
        for _ in range(400):
            deep = [deep]
        parent[path[-1]] = deep
    else:
        parent[path[-1]] = value
    return record


def read_or_one_line(path: Path) -> None:
    try:
        records.read(path)
    except ZooError as err:
        message = str(err)
        assert message and "\n" not in message and str(path) in message, message


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, len(SOURCES) - 1), st.integers(0, 10**6), st.sampled_from(["set", "delete", "nest"]), odd)
def test_a_mutated_record_reads_or_is_one_line(tmp_path, which, place, action, value):
    path = tmp_path / "seed-0.json"  # one file, rewritten by each example: a folder each cost a scan of the others
    path.write_text(json.dumps(mutate(which, place, action, value), allow_nan=True))
    read_or_one_line(path)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, len(SOURCES) - 1), st.integers(0, 10**6), st.binary(max_size=4))
def test_truncated_or_non_utf8_records_are_one_line(tmp_path, which, cut, junk):
    text = SOURCES[which].read_bytes()
    path = tmp_path / "seed-0.json"
    path.write_bytes(text[: cut % len(text)] + junk + b"\xff\xfe")
    read_or_one_line(path)


@pytest.fixture(scope="module")
def quickstart_copy(tmp_path_factory):
    folder = tmp_path_factory.mktemp("quickstart")
    shutil.copytree(ROOT / "reports" / "quickstart" / "records", folder / "records")
    return folder


@pytest.mark.parametrize("where, value", [
    (("summary",), "x"), (("curves", "eval", "step"), ["a"]), (("test", "exact_match"), 1e308),
    (("sentences", "exact_match"), "x"), (("final",), [1]), (("status",), "done"), (("curves",), {"x": {}}),
    (("hypotheses",), [1, 2]), (("format",), 3), (("test",), None),
])
def test_zoo_report_lists_a_damaged_record_in_one_line_and_leaves_it_out(quickstart_copy, capsys, where, value):
    path = quickstart_copy / "records" / "pre-norm" / "copy" / "seed-3.json"
    original = path.read_text()
    record = json.loads(original)
    parent = record
    for part in where[:-1]:
        parent = parent[part]
    parent[where[-1]] = value
    path.write_text(json.dumps(record))
    try:
        code = main(["report", str(ROOT / "experiments" / "quickstart.toml"), "--out", str(quickstart_copy)])
    finally:
        path.write_text(original)
    capsys.readouterr()
    listed = [line for line in (quickstart_copy / "report.md").read_text().splitlines() if "seed-3.json" in line]
    assert code == 0 and len(listed) == 1 and "**refused**: `records/pre-norm/copy/seed-3.json` is not used: " \
        in listed[0], listed


def test_a_report_stopped_by_a_damaged_floor_leaves_the_last_report_as_it_was(tmp_path, capsys):
    """report.md was removed before the records were read, so one bad record took a committed report with it. A
    damaged record no longer stops a report (it is listed, and left out); a damaged floor file still does."""
    folder = tmp_path / "quickstart"
    shutil.copytree(ROOT / "reports" / "quickstart", folder)
    before = {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    (folder / "records" / ".floors" / "copy.json").write_text('{"format": 1, "task": ')
    code = main(["report", str(ROOT / "experiments" / "quickstart.toml"), "--out", str(folder)])
    assert code == 2 and "copy.json" in capsys.readouterr().err
    after = {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    assert after.keys() == before.keys()
    assert all(after[p] == before[p] for p in before if p.parts[0] != "records")  # report.md, results.csv, plots
