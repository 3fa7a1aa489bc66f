"""A record's numbers agree with each other, or the record is refused (issue 56): `read` gives a record or one
RunError line naming the file; `zoo report` leaves a refused record out and lists it (file and reason), never a
traceback; `zoo run` trains its cell again. Each rule of zoo/experiment/consistency.py and each type and range of
the Record model is broken once by hand below; then real records take random mutations (a key deleted, a value set
to "x", 2**63, -1, NaN, None, [], {}, a list shortened, a type swapped), drawn from a fixed seed.

ZOO_RECORD_FUZZ=2000 draws that many mutations for `read` (and a fifth of them through `zoo report`) to look for
more; CI draws what fits in about 30 seconds."""

from __future__ import annotations

import copy
import glob
import io
import json
import math
import os
import random
import shutil
from pathlib import Path

import pandas as pd
import pytest
from smoke_runs import TRAINED

from zoo.cli import main
from zoo.experiment import load_experiment, store
from zoo.experiment import record as records
from zoo.experiment.grid import Cell, cell_state
from zoo.report import plots
from zoo.report.tables import md_text
from zoo.rundir import RunError

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "reports" / "quickstart" / "records"
EXPERIMENT = ROOT / "experiments" / "quickstart.toml"
SOURCES = [QUICKSTART / "pre-norm" / "copy" / "seed-3.json",  # complete, trained
           QUICKSTART / "post-norm" / "copy" / "seed-0.json",  # complete, stalled at 0
           ROOT / "reports" / "resolved" / "records" / "no-embedding-scale" / "multi30k-de-en" / "seed-0.json"]  # 2
TEXT = ROOT / "reports" / "ablations" / "records" / "rotary" / "multi30k-de-en" / "seed-2.json"  # BLEU and chrF
ORIGINALS = {path: path.read_text() for path in [*SOURCES, TEXT]}
DRAWS = int(os.environ.get("ZOO_RECORD_FUZZ", "0")) or None
READ_DRAWS = DRAWS or 800
REPORT_ROUNDS = max(1, DRAWS // 75) if DRAWS else 3  # up to 15 cells, one mutation each, per report


def _pre(edit):
    return QUICKSTART / "pre-norm" / "copy" / "seed-3.json", edit


def _post(edit):
    return QUICKSTART / "post-norm" / "copy" / "seed-0.json", edit


def _set(*path_value):
    *path, value = path_value

    def edit(record):
        parent = record
        for part in path[:-1]:
            parent = parent[part]
        parent[path[-1]] = value(parent[path[-1]]) if callable(value) else value
    return edit


def _negative_hit(record):
    """Exact match rows with the same total and one negative: the recomputed score still agrees."""
    rows = record["sentences"]["exact_match"]
    hit, misses = rows.index(1), [i for i, v in enumerate(rows) if v == 0][:2]
    rows[hit] = -1
    for i in misses:
        rows[i] = 1


def _sets_sentences(record):
    record["sentences"] = {}
    record["test"]["exact_match"] = 95.0


# (where, edit, what the one line says): each rule once, the issue's cases first
RULES = {
    "sentences-empty": (*_pre(_sets_sentences), "sentences.exact_match: none, but the task is scored by exact_match "
                                                "(test.exact_match is 95.0)"),
    "final-edited": (*_post(_set("final", "exact_match", 50)),
                     "final.exact_match is 50, but the eval curve ends at 0.0"),
    "sentences-shortened": (*_pre(_set("sentences", "exact_match", lambda rows: rows[:100])),
                            "sentences.exact_match holds 100 sentences, but test.sentences is 500"),
    "concurrent-runs-text": (*_pre(_set("provenance", "concurrent_runs", "x")),
                             "provenance.concurrent_runs: Input should be a valid integer, not 'x'"),
    "curve-2**63": (*_pre(_set("curves", "train", "tokens", lambda v: [*v[:-2], 2**63, v[-1]])),
                    "curves: train.tokens: 9223372036854775808 does not fit a 64-bit integer"),
    "eval-curve-2**63": (*_pre(_set("curves", "eval", "valid_loss", lambda v: [*v[:-1], 2**63])),
                         "curves: eval.valid_loss: 9223372036854775808 does not fit a 64-bit integer"),
    "final-missing": (*_pre(_set("final", lambda final: {k: v for k, v in final.items() if k != "exact_match"})),
                      "final.exact_match is missing, but the eval curve ends at 97.5"),
    "final-without-curve": (*_pre(_set("curves", "eval", {})), "final.exact_match is 97.5, but curves.eval has no "
                                                               "evaluation"),
    "hypotheses-shortened": (*_pre(_set("hypotheses", lambda h: h[:-1])),
                             "sentences.exact_match holds 500 sentences, but there are 499 hypotheses"),
    "test-sentences": (*_pre(_set("test", "sentences", 400)),
                       "sentences.exact_match holds 500 sentences, but test.sentences is 400"),
    "test-sentences-negative": (*_pre(_set("test", "sentences", -1)), "test.sentences is -1: not a count"),
    "test-metric-nan": (*_pre(_set("test", "token_accuracy", math.nan)), "test.token_accuracy is nan: not finite"),
    "test-metric-bounds": (*_pre(_set("test", "token_accuracy", 101.0)),
                           "test.token_accuracy is 101.0: outside token accuracy %'s bounds 0..100"),
    "test-metric-text": (*_pre(_set("test", "token_accuracy", "99")), "test.token_accuracy is '99': not a number"),
    "test-recomputed": (*_pre(_set("test", "exact_match", 95.0)),
                        "test.exact_match is 95.0, but its per-sentence statistics give 98"),
    "curve-metric-bounds": (*_pre(_set("curves", "eval", "exact_match", lambda v: [150.0, *v[1:]])),
                            "curves.eval.exact_match[0] is 150.0: outside exact match %'s bounds 0..100"),
    "curve-step-negative": (*_pre(_set("curves", "train", "step", lambda v: [-1, *v[1:]])),
                            "curves.train.step[0] is -1: not a count"),
    "sentences-negative": (*_pre(_negative_hit), "sentences.exact_match: a negative count, -1"),
    "sentences-rows": (*_pre(_set("sentences", "exact_match", lambda rows: [[v, 1] for v in rows])),
                       "sentences.exact_match: not exact match % statistics (rows of (2, 2) values)"),
    "sentences-unequal": (TEXT, _set("sentences", "chrf", lambda rows: rows[:-1]),
                          "sentences.chrf holds 999 sentences, but sentences.bleu holds 1000"),
    "summary-steps-negative": (*_pre(_set("summary", "steps", -1)),
                               "summary.steps: Input should be greater than or equal to 0, not -1"),
    "summary-seconds-nan": (*_pre(_set("summary", "train_seconds", math.nan)), "summary.train_seconds"),
    "summary-steps-bool": (*_pre(_set("summary", "steps", True)), "summary.steps"),
    "concurrent-runs-zero": (*_pre(_set("provenance", "concurrent_runs", 0)),
                             "provenance.concurrent_runs: Input should be greater than or equal to 1, not 0"),
    "provenance-commit": (*_pre(_set("provenance", "commit", 7)), "provenance.commit: Input should be a valid string"),
    "spec-invalid": (*_pre(_set("spec", "dropout", math.nan)), "spec: dropout: Input should be a finite number"),
    "summary-empty": (*_pre(_set("summary", {})), "summary.parameters: missing, and a complete run has it"),
    "packed-predictor-inf": (SOURCES[2], _set("packed", "tables", 0, "predictors", 5, math.inf),
                             "packed: cannot be decoded (OverflowError"),
    "packed-shape-empty": (SOURCES[2], _set("packed", "tables", 0, "shape", []),
                           "packed: cannot be decoded (IndexError"),
}


def _written(path: Path, record: dict) -> Path:
    path.write_text(json.dumps(record, allow_nan=True))
    return path


def _refusal(path: Path) -> str:
    """What `read` says of `path`: '' when it reads; else its one line, checked to name the file."""
    try:
        records.read(path)
    except RunError as err:
        message = str(err)
        assert message.startswith(f"{path}: ") and "\n" not in message, message
        return message.removeprefix(f"{path}: ")
    return ""


@pytest.mark.parametrize("name", RULES)
def test_each_rule_refuses_the_record_that_breaks_it_in_one_line(name, tmp_path):
    source, edit, said = RULES[name]
    record = json.loads(ORIGINALS[source])
    edit(record)
    assert said in _refusal(_written(tmp_path / "seed-3.json", record))


def test_every_committed_record_still_reads():
    """The rules hold for every record committed under reports/ (written before digests: none has one)."""
    paths = sorted(glob.glob(str(ROOT / "reports/*/records/*/*/seed-*.json")))
    assert len(paths) > 800
    refused = {path: _refusal(Path(path)) for path in paths}
    assert not {path: why for path, why in refused.items() if why}


def test_the_digest_catches_an_edit_and_not_a_reformatting(tmp_path):
    path = tmp_path / "seed-3.json"
    records.write(path, records.read(SOURCES[0]))
    text = path.read_text()
    written = json.loads(text)
    assert len(written["digest"]) == 64 and written.pop("digest") == records.content_digest(records.canonical(written))
    assert records.read(path).digest == json.loads(text)["digest"]
    again = tmp_path / "again.json"
    records.write(again, records.read(path))
    assert again.read_text() == text  # a record read and written again: the same bytes, the same digest
    path.write_text(json.dumps(json.loads(text), indent=1))  # the same content, formatted otherwise
    assert _refusal(path) == ""
    edited = json.loads(text)
    edited["summary"]["device"] = "cuda"  # consistent with everything else: only the digest can tell
    assert _refusal(_written(path, edited)).startswith("edited after it was written: digest ")
    edited = json.loads(text)
    edited["digest"] = "0" * 64
    assert _refusal(_written(path, edited)) == (f"edited after it was written: digest {'0' * 12}... does not match "
                                                f"its content ({json.loads(text)['digest'][:12]}...)")
    edited["digest"] = "not hex"
    assert "digest: String should match pattern" in _refusal(_written(path, edited))
    del edited["digest"]  # a record written before digests
    assert _refusal(_written(path, edited)) == ""


def test_a_record_whose_numbers_agree_after_an_edit_is_refused_by_its_digest_alone(tmp_path):
    """final and the curve's end both edited: the rules see one story, the digest sees the edit."""
    path = tmp_path / "seed-0.json"
    records.write(path, records.read(SOURCES[1]))
    record = json.loads(path.read_text())
    record["final"]["exact_match"] = record["curves"]["eval"]["exact_match"][-1] = 50.0
    assert _refusal(_written(path, record)).startswith("edited after it was written")
    del record["digest"]
    assert _refusal(_written(path, record)) == ""


# -- the report and the runner ----------------------------------------------------------------------
@pytest.fixture
def grid_copy(tmp_path):
    shutil.copytree(QUICKSTART, tmp_path / "records")
    return tmp_path


def _report(folder: Path, capsys) -> tuple[str, pd.DataFrame]:
    code = main(["report", str(EXPERIMENT), "--out", str(folder)])
    err = capsys.readouterr().err
    assert code == 0, err
    return (folder / "report.md").read_text(), pd.read_csv(folder / "results.csv")


def _dry_run(folder: Path, capsys) -> str:
    code = main(["run", str(EXPERIMENT), "--dry-run", "--runs", str(folder / "runs"), "--out", str(folder)])
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def _cell(folder: Path, variant: str, seed: int) -> Cell:
    return Cell(str(EXPERIMENT), "quickstart", variant, "copy", seed, str(folder / "runs"), str(folder / "records"))


def test_the_issues_records_are_left_out_of_the_report_and_listed_and_trained_again(grid_copy, capsys):
    """The issue's cases, each in a cell of its own: `sentences: {}` with test exact match 95 (the report showed
    pre-norm 95.00), a stalled seed's final edited to 50 (a verdict appeared), shortened sentences, concurrent_runs
    'x' and a curve value of 2**63 (tracebacks in the report and in --dry-run)."""
    cases = {("pre-norm", 0): "sentences-empty", ("post-norm", 0): "final-edited",
             ("pre-norm", 1): "sentences-shortened", ("pre-norm-conv1d", 0): "concurrent-runs-text",
             ("pre-norm-conv1d", 1): "curve-2**63"}
    for (variant, seed), name in cases.items():
        path = grid_copy / "records" / variant / "copy" / f"seed-{seed}.json"
        record = json.loads(path.read_text())
        RULES[name][1](record)
        _written(path, record)
    text, frame = _report(grid_copy, capsys)
    assert "15 runs planned: 6 complete, 4 stalled, 5 refused." in text  # post-norm stalls on copy
    for (variant, seed), name in cases.items():
        file = f"records/{variant}/copy/seed-{seed}.json"
        listed = [line for line in text.splitlines() if line.startswith(f"- `{variant} / copy / seed-{seed}`: ")]
        assert listed == [f"- `{variant} / copy / seed-{seed}`: **refused**: `{file}` is not used: "
                          f"{md_text(_refusal(grid_copy / file))}"]
        assert RULES[name][2] in listed[0]
        row = frame[(frame.variant == variant) & (frame.seed == seed)].iloc[0]
        assert row.status == "refused" and RULES[name][2] in row.reason and math.isnan(row.exact_match)
    assert "95.00" not in text
    post_norm = next(line for line in text.splitlines() if line.startswith("| post-norm |") and "verdict" in line)
    assert "no verdict: 0 v 3 trained seeds" in post_norm  # no post-norm seed trained, as before the edit
    table = _dry_run(grid_copy, capsys)
    assert [cell.strip() for cell in next(line for line in table.splitlines() if "copy" in line).split("│")[1:6]] \
        == ["copy", "15", "10", "0", "5"]  # cells, recorded, copied, stale: to train again
    experiment = load_experiment(EXPERIMENT)
    task = experiment.config.tasks[0]
    for variant, seed in cases:
        state, why = cell_state(_cell(grid_copy, variant, seed), store.definition(experiment, variant, task, seed))
        path = grid_copy / "records" / variant / "copy" / f"seed-{seed}.json"
        assert state == "stale" and why == [f"its record is refused: {path}: {_refusal(path)}"]


def test_zoo_run_moves_a_refused_record_aside_and_trains_its_cell_again_saying_which_file_and_why(tmp_path):
    from grid_files import tiny_experiment
    from rich.console import Console

    from zoo.experiment.runner import run_grid

    path = tmp_path / "tiny.toml"
    path.write_text(tiny_experiment("tiny"))
    experiment, runs, kept = load_experiment(path), tmp_path / "runs", tmp_path / "records"
    run_grid(experiment, runs, kept, live=False, console=Console(file=io.StringIO()))
    [recorded] = kept.rglob("seed-0.json")
    record = json.loads(recorded.read_text())
    record["final"]["exact_match"] = record["final"]["exact_match"] + 1  # the curve still ends where it did
    damaged = _written(recorded, record).read_text()
    said = io.StringIO()
    results = run_grid(experiment, runs, kept, live=False, console=Console(file=said, width=1000))
    assert {status for status, _ in results.values()} == {TRAINED}
    assert f"its record is refused: {recorded}: a damaged record: final.exact_match is " in said.getvalue()
    [aside] = (kept / store.STALE).rglob("seed-0.json")
    assert aside.read_text() == damaged and records.read(recorded).digest  # moved, not deleted; trained again


def test_a_throughput_plot_whose_runs_give_no_speed_draws_an_empty_panel(tmp_path):
    """Found by the fuzz below: every complete run without its seconds (tok_per_s NaN) set the axis to NaN."""
    frame = pd.read_csv(ROOT / "reports" / "quickstart" / "results.csv")
    frame["tok_per_s"] = math.nan
    assert plots.throughput(load_experiment(EXPERIMENT), frame, tmp_path / "throughput.png").exists()


# -- fuzzing ------------------------------------------------------------------------------------------
POOL = ["x", 2**63, -1, math.nan, math.inf, None, [], {}, True, 0, 1e308, 0.5]


def _places(value, path=()):
    """Every place under `value` (dict keys; a list's first, second, middle and last items)."""
    yield path
    if isinstance(value, dict):
        for key, sub in value.items():
            yield from _places(sub, (*path, key))
    elif isinstance(value, list) and value:
        for index in sorted({0, 1, len(value) // 2, len(value) - 1} & set(range(len(value)))):
            yield from _places(value[index], (*path, index))


def _swapped(value):
    """`value` as another JSON type: a number as text, text as a number, an int as a float, a list as an object."""
    if isinstance(value, bool) or value is None:
        return int(bool(value))
    if isinstance(value, int):
        return value + 0.5
    if isinstance(value, float):
        return str(value) if not math.isfinite(value) or value != int(value) else int(value)
    if isinstance(value, str):
        return len(value)
    if isinstance(value, list):
        return {str(i): v for i, v in enumerate(value)}
    return list(value.values())


NUMBERS = ("curves", "final", "test", "sentences", "summary", "provenance", "test_sets", "packed", "hypotheses")


def mutate(record: dict, rng: random.Random) -> str:
    """One random change to `record` (a field first, then a place under it: every field is drawn, the fields the
    report computes from three times as often); what it did, for a failing test's message."""
    fields = sorted(record)
    top = rng.choices(fields, weights=[3 if field in NUMBERS else 1 for field in fields])[0]
    path = rng.choice(list(_places(record[top], (top,))))
    parent = record
    for part in path[:-1]:
        parent = parent[part]
    key, value = path[-1], parent[path[-1]]
    action = rng.choice(["delete", "set", "shorten", "swap"])
    if action == "delete":
        del parent[key]
    elif action == "shorten" and isinstance(value, (list, str)) and value:
        parent[key] = value[:rng.randrange(len(value))]
    elif action == "swap":
        parent[key] = _swapped(value)
    else:
        action = "set"
        parent[key] = copy.copy(rng.choice(POOL))
    return f"{action} {'.'.join(map(str, path))}" + (f" = {parent[key]!r:.40}" if action != "delete" else "")


def test_a_mutated_record_reads_or_is_refused_in_one_line(tmp_path):
    rng = random.Random(56)
    outcomes = {"read": 0, "refused": 0}
    for i in range(READ_DRAWS):
        source = SOURCES[2] if i % 10 == 9 else SOURCES[i % 2]  # the format 2 record takes 0.1 s to read
        record = json.loads(ORIGINALS[source])
        what = mutate(record, rng)
        path = _written(tmp_path / "seed-0.json", record)
        try:
            outcomes["refused" if _refusal(path) else "read"] += 1
        except AssertionError:
            raise
        except Exception as err:  # noqa: BLE001 - the test's point: name the mutation that raised it
            raise AssertionError(f"{source.name}: {what}: {type(err).__name__}: {err}") from err
    assert outcomes["read"] and outcomes["refused"]  # both kinds were drawn


def test_a_report_of_mutated_records_lists_the_refused_ones_and_never_raises(grid_copy, capsys):
    """Every cell of the quickstart grid takes a mutation: `zoo report` and `zoo run --dry-run` finish, and each
    record `read` refuses is listed in report.md with its file, never counted."""
    rng = random.Random(5600)
    experiment = load_experiment(EXPERIMENT)
    for _ in range(REPORT_ROUNDS):
        done = []
        for variant, task, seed in experiment.grid():
            path = grid_copy / "records" / variant / task.key / f"seed-{seed}.json"
            original = (QUICKSTART / variant / task.key / f"seed-{seed}.json").read_text()
            for _ in range(20):  # the odd cells: a mutation `read` accepts, where one is drawn (they reach the report)
                record = json.loads(original)
                what = mutate(record, rng)
                refused = _refusal(_written(path, record))
                if not refused or seed % 2 == 0:
                    break
            done.append((variant, seed, what, refused))
        try:
            text, frame = _report(grid_copy, capsys)
            _dry_run(grid_copy, capsys)
        except Exception as err:  # noqa: BLE001 - name the mutations of the round that raised it
            raise AssertionError(f"{type(err).__name__}: {err}, with {[d[2] for d in done]}") from err
        for variant, seed, what, refused in done:
            status = frame[(frame.variant == variant) & (frame.seed == seed)].status.iloc[0]
            assert (status == "refused") == bool(refused), (what, status)
            if refused:
                assert f"- `{variant} / copy / seed-{seed}`: **refused**: `records/{variant}/copy/seed-{seed}.json` " \
                       "is not used: " in text, what
