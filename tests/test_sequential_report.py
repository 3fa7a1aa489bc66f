"""Seeds until decided, read from fabricated records whose decisions are known by construction (no training):
the looks, the rounds each arm is called for, what the report says, and what blocks a look.

One task (copy, exact match on 1000 sentences, margin ±5), rounds of 3 seeds up to 12 (4 looks). Every arm has a
record for every seed up to the cap, as if someone had trained them all: the plan must read only those it called.

    linear   baseline   60.8 ± 1.5
    prenorm  +6         decided better at look 2 (look 1's p 0.003 is above its spent level 2.6e-7)
    conv1d   placebo    equivalent at look 3 (its TOST interval leaves ±5 at look 2, at the spent level)
    warm     +2.7, noisy  undecided at the cap (12 seeds)

prenorm's seeds 6-11, never called, score 20: read by mistake, they would turn it from better to worse.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from zoo.api import Study
from zoo.cli import main
from zoo.experiment import load_experiment, store
from zoo.experiment import record as records
from zoo.report import analyse, build_report
from zoo.report import sequential as seq
from zoo.report.collect import record_path
from zoo.report.growth import fabricated
from zoo.report.tables import verdict_class

EXPERIMENT = """
name = "fake-sequential"
seeds = [0, 1, 2]
baseline = "linear"
shared = {d_model = 32, n_heads = 4, d_ff = 64, encoder_layers = 1, decoder_layers = 1}

[sequential]
round_seeds = 3
max_seeds = 12

[[variants]]
label = "linear"
base = "paper-base"
[[variants]]
label = "prenorm"
base = "paper-base"
set = {"residual.kind" = "pre-norm"}
[[variants]]
label = "conv1d"
base = "paper-base"
set = {"ffn.kind" = "conv1d"}
[[variants]]
label = "warm"
base = "paper-base"
train = {warmup = 0}

[[tasks]]
name = "copy"
options = {symbols = 8, min_len = 2, max_len = 4}
margin = 5.0

[train]
steps = 400
"""

VALUES = {
    "linear": [60, 62, 61, 59, 63, 61, 60, 62, 58, 61, 63, 60],
    "prenorm": [66, 68, 67, 65, 69, 67, 20, 20, 20, 20, 20, 20],  # seeds 6-11 never called
    "conv1d": [58, 63, 61, 64, 59, 62, 57, 61, 64, 60, 62, 63],
    "warm": [56, 70, 63, 58, 69, 64, 57, 71, 62, 59, 68, 65],
}


def write(folder: Path, values: dict[str, list[float | None]] = VALUES):
    """The experiment at folder/seq.toml and a record for every seed of `values` (None: no record)."""
    path = folder / "seq.toml"
    path.write_text(EXPERIMENT)
    experiment = load_experiment(path)
    root = folder / "out" / "records"
    for variant, seeds in values.items():
        for seed, value in enumerate(seeds):
            if value is not None:
                records.write(record_path(root, variant, "copy", seed), fabricated(experiment, variant, seed, value))
    return experiment, root


def fail(experiment, root: Path, variant: str, seed: int) -> None:
    """Replace a cell's record by a failed one (a run that crashed): a cell with no result."""
    task = experiment.config.tasks[0]
    definition = store.definition(experiment, variant, task, seed)
    head = records.base({"experiment": experiment.name, "variant": variant, "task": task.key, "seed": seed},
                        definition, store.digest(definition), 1)
    records.write(record_path(root, variant, task.key, seed), records.failed(head, "boom", ""))


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sequential")
    experiment, root = write(folder)
    return experiment, root, seq.read(experiment, root)


def test_the_decisions_known_by_construction(study):
    _, _, state = study
    looks = state.tasks["copy"]
    assert len(looks.looks) == 4 and not looks.waiting and state.finished
    got = {v: (d.kind, d.look, d.seeds) for v, d in looks.decisions.items()}
    assert got == {"prenorm": ("better", 2, 6), "conv1d": ("equivalent", 3, 9), "warm": ("undecided at the cap", 4, 12)}
    assert looks.decisions["prenorm"].p < looks.decisions["prenorm"].level  # look 2's p below look 2's level
    first = looks.looks[0]["prenorm"]
    assert 1e-3 < first.p < 0.05  # look 1 would have decided it at an unspent alpha


def test_an_arm_gets_no_more_rounds_once_decided_and_the_baseline_goes_on_while_any_is_open(study):
    _, _, state = study
    assert state.tasks["copy"].rounds == {"linear": 4, "prenorm": 2, "conv1d": 3, "warm": 4}
    calls = state.calls()
    assert calls[("prenorm", "copy")] == tuple(range(6))
    assert calls[("conv1d", "copy")] == tuple(range(9))
    assert calls[("linear", "copy")] == calls[("warm", "copy")] == tuple(range(12))
    assert [look.keys() for look in state.tasks["copy"].looks] == [
        {"prenorm", "conv1d", "warm"}, {"prenorm", "conv1d", "warm"}, {"conv1d", "warm"}, {"warm"}]


def test_the_state_is_a_function_of_the_records(study):
    experiment, root, state = study
    again = seq.read(experiment, root)
    assert again.calls() == state.calls() and again.tasks["copy"].decisions == state.tasks["copy"].decisions


def test_the_report_shows_the_looks_decisions_over_the_called_seeds_only(study):
    experiment, root, _ = study
    report = analyse(experiment, root)
    comparisons = report.tasks[0].comparisons
    assert {v: verdict_class(c) for v, c in comparisons.items()} == {
        "prenorm": "better", "conv1d": "equivalent", "warm": "undecided"}
    prenorm = comparisons["prenorm"].result
    assert (prenorm.n_variant, prenorm.n_baseline) == (6, 12) and prenorm.difference > 5  # never the 20s
    assert report.frame.status.tolist().count("complete") == 12 + 6 + 9 + 12  # the called cells, all recorded
    text = build_report(experiment, root, root.parent, "zoo report seq.toml")[0].read_text()
    said = " ".join(text.split())
    assert "39 runs called for so far by the sequential plan (at most 48, every arm to the cap of 12 seeds): " \
           "39 complete." in said
    assert "missing" not in said and "Interim" not in said  # seeds never called are not missing
    assert "round 1 is seeds 0–2 of every arm" in said and "4 looks, at 3, 6, 9, 12 seeds an arm" in said
    assert "sequential Holm procedure (Maurer & Bretz 2013) over this task's 3 comparisons" in said
    assert "Lan–DeMets O'Brien–Fleming alpha spending" in said and "Looks made: 4 of 4." in said
    assert "**better** at look 2 (after round 2, 6 seeds an arm; p 3.2e-05 < 0.00038)" in said
    assert "**equivalent** within ±5 at look 3 (after round 3, 9 seeds an arm;" in said
    assert "undecided at the cap (12 seeds an arm); the target effect would need" in said
    assert "p (fixed-sample, every seed called; not the test)" in said


def test_the_method_line_counts_no_rejection_the_looks_decided(study, tmp_path):
    """The family holds the primary comparisons for its size only: prenorm's fixed-sample p over its 6 seeds is
    below the family's first step, yet the looks decide it, so the method line names no rejection of the family."""
    experiment, root, _ = study
    report = analyse(experiment, root)
    assert report.tasks[0].comparisons["prenorm"].result.p_value < 0.05 / report.family
    assert math.isnan(report.rejected_at)  # nothing the family decides was rejected
    text = " ".join(build_report(experiment, root, tmp_path, "zoo report seq.toml")[0].read_text().split())
    assert "in this report's differences family no test it decides was rejected." in text


def test_a_failed_cell_blocks_its_look_and_the_comparisons_stay_open(tmp_path):
    experiment, root = write(tmp_path)
    fail(experiment, root, "warm", 7)  # round 3
    state = seq.read(experiment, root)
    looks = state.tasks["copy"]
    assert len(looks.looks) == 2 and looks.waiting == ["warm/seed-7 (failed)"] and not state.finished
    assert {v: (d.kind, d.look) for v, d in looks.decisions.items()} == {
        "prenorm": ("better", 2), "conv1d": ("open", 2), "warm": ("open", 2)}
    assert looks.rounds == {"linear": 3, "prenorm": 2, "conv1d": 3, "warm": 3}  # round 3 called, not round 4
    report = analyse(experiment, root)
    from zoo.report.sections.sequential import design_lines

    said = " ".join(" ".join(design_lines(report, report.tasks[0])).split())
    assert "Looks made: 2 of 4; look 3 waits for 1 cells (warm/seed-7 (failed))." in said
    assert "open after look 2 (after round 2, 6 seeds an arm): round 3 called" in said


def test_no_look_before_round_one_is_in_and_only_round_one_is_missing(tmp_path):
    values = {variant: seeds[:3] for variant, seeds in VALUES.items()}
    values["warm"] = [56, 70, None]
    experiment, root = write(tmp_path, values)
    state = seq.read(experiment, root)
    assert state.tasks["copy"].looks == [] and state.tasks["copy"].waiting == ["warm/seed-2 (missing)"]
    report = analyse(experiment, root)
    assert set(report.frame.seed) == {0, 1, 2} and (report.frame.status == "missing").sum() == 1
    assert {verdict_class(c) for c in report.tasks[0].comparisons.values()} == {"open"}


def test_plain_run_trains_the_rounds_begun_and_until_decided_the_next(tmp_path):
    """After round 1 the plan has called round 2 for every arm (nothing is decided at 3 seeds): plain `zoo run`
    leaves it alone until one of its cells has a record; `--until-decided` trains it."""
    values = {variant: seeds[:3] for variant, seeds in VALUES.items()}
    experiment, root = write(tmp_path, values)
    study = Study(experiment, out=tmp_path / "out", runs=tmp_path / "runs")
    assert {seed for _, _, seed in study.called(until_decided=False).grid()} == {0, 1, 2}  # round 1
    assert {seed for _, _, seed in study.called(until_decided=True).grid()} == set(range(6))
    records.write(record_path(root, "linear", "copy", 3), fabricated(experiment, "linear", 3, 61))
    assert {seed for _, _, seed in study.called(until_decided=False).grid()} == set(range(6))


def test_the_dry_run_forecasts_the_most_and_the_expected_runs(tmp_path, capsys):
    values = {variant: seeds[:3] for variant, seeds in VALUES.items()}
    write(tmp_path, values)
    args = ["run", str(tmp_path / "seq.toml"), "--out", str(tmp_path / "out"), "--runs", str(tmp_path / "runs")]
    assert main([*args, "--dry-run", "--until-decided"]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "copy: seeds until decided, look 1 of 4 made: 3 open; round 2 called for 3 arms and the baseline; " \
           "look 2 waits for 12 cells (12 missing)" in said
    line = said[said.index("copy: 24 runs called so far; at most 48 (every arm to the cap); expected about "):]
    expected = float(line.split("expected about ")[1].split()[0])
    assert 24 < expected < 48
    assert not (tmp_path / "runs").exists()  # a dry run writes nothing
    plain = Path(tmp_path / "plain")
    plain.mkdir()
    write(plain, {variant: [] for variant in VALUES})
    assert main(["run", str(plain / "seq.toml"), "--out", str(plain / "out"), "--dry-run"]) == 0
    assert "expected: cannot be estimated before round 1's records are in" in " ".join(capsys.readouterr().out.split())
