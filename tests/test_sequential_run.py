"""`zoo run --until-decided` end to end: the quickstart experiment trained sequentially, small.

The quickstart's content (pre-norm as the baseline, the Conv1d placebo, post-norm at a high learning rate without
warmup) with a [sequential] table of rounds of 3 seeds up to 9 (3 looks), at a size that trains in seconds:
d_model 32 (two layers each side, as the quickstart), 100 steps at lr 3e-2 on an easy copy task, judged on token
accuracy (exact match is near 0 this early; its stall floor of 50 would class every run as stalled). Post-norm
does not learn at this rate: every seed ends at the same 22.8% (one constant output), against pre-norm's 41-83%,
so its comparison is decided before the cap (on this machine at look 2, p 0.0013 against a level of 0.0044); the
placebo's seeds spread by ~15 points, so it stays open to the cap. The module's runs: plain `zoo run` (round 1
only), then `--until-decided`, which resumes from those records, as after an interruption between rounds.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from zoo.cli import main
from zoo.experiment import load_experiment
from zoo.report import sequential as seq

ROOT = Path(__file__).resolve().parent.parent
EDITS = {
    'name = "quickstart"': 'name = "quickstart-sequential"',
    "seeds = [0, 1, 2, 3, 4]": "seeds = [0, 1, 2]",
    "shared = {d_model = 64, n_heads = 4, d_ff = 128, encoder_layers = 2, decoder_layers = 2}":
        "shared = {d_model = 32, n_heads = 4, d_ff = 64, encoder_layers = 2, decoder_layers = 2}",
    "options = {symbols = 10, min_len = 4, max_len = 12, train_size = 10000, valid_size = 200, test_size = 500}":
        "options = {symbols = 4, min_len = 2, max_len = 4, train_size = 2000, valid_size = 50, test_size = 200}",
    "stall = {floor = 50.0}": 'primary = "token_accuracy"\nstall = {floor = 20.0}',
    "steps = 500": "steps = 100",
    "lr = 1e-2 ": "lr = 3e-2 ",
    "eval_interval = 100": "eval_interval = 50",
    "eval_sentences = 200": "eval_sentences = 50",
    "checkpoint_interval = 100": "checkpoint_interval = 50",
    "[[variants]]": "[sequential]\nround_seeds = 3\nmax_seeds = 9\n\n[[variants]]",
}


def experiment_file(folder: Path) -> Path:
    text = (ROOT / "experiments" / "quickstart.toml").read_text()
    for old, new in EDITS.items():
        assert old in text, old
        text = text.replace(old, new, 1)
    path = folder / "quickstart-sequential.toml"
    path.write_text(text)
    return path


def zoo(path: Path, folder: Path, *extra: str) -> tuple[int, str]:
    """`zoo run` in this process (one worker: the cells train here); its exit code and what it said on stderr."""
    said = io.StringIO()
    with contextlib.redirect_stderr(said):
        code = main(["run", str(path), "--runs", str(folder / "runs"), "--out", str(folder / "out"), "--no-live",
                     *extra])
    return code, " ".join(said.getvalue().split())


def on_disk(folder: Path) -> dict[str, bytes]:
    root = folder / "out" / "records"
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.glob("*/*/seed-*.json"))}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("until-decided")
    path = experiment_file(folder)
    first = zoo(path, folder)
    after_round_one = on_disk(folder)
    resumed = zoo(path, folder, "--until-decided")
    state = seq.read(load_experiment(path), folder / "out" / "records")
    return {"path": path, "folder": folder, "first": first, "round_one": after_round_one, "resumed": resumed,
            "state": state}


def test_plain_run_trains_round_one_and_starts_no_round(runs):
    code, said = runs["first"]
    assert code == 0
    assert "quickstart-sequential trains seeds until decided ([sequential]): plain `zoo run` trains the rounds its " \
           "plan has called and begun, never a new one" in said
    assert sorted(runs["round_one"]) == sorted(f"{variant}/copy/seed-{seed}.json" for variant in
                                               ("post-norm", "pre-norm", "pre-norm-conv1d") for seed in range(3))
    assert "copy: seeds until decided, look 1 of 3 made" in said and "round 2 called for" in said


def test_until_decided_resumes_and_trains_later_rounds_only_for_open_arms(runs):
    code, said = runs["resumed"]
    state = runs["state"]
    looks = state.tasks["copy"]
    assert code == 0 and state.finished and not looks.waiting
    calls = {variant: seeds for (variant, _), seeds in state.calls().items()}
    trained = on_disk(runs["folder"])
    assert sorted(trained) == sorted(f"{variant}/copy/seed-{seed}.json" for variant, seeds in calls.items()
                                     for seed in seeds)  # exactly the called cells: no seed for a stopped arm
    assert all(trained[name] == record for name, record in runs["round_one"].items())  # round 1 kept, not retrained
    decided = {variant: d for variant, d in looks.decisions.items() if d.decided}
    post = looks.decisions["post-norm"]
    assert post.kind == "worse" and post.look < 3  # a clear effect stops early ...
    assert len(calls["post-norm"]) == 3 * post.look < len(calls["pre-norm"])  # ... and gets no more seeds
    for variant, d in decided.items():
        assert len(calls[variant]) == d.seeds  # every decided arm stopped at its deciding look
    for variant, d in looks.decisions.items():
        if not d.decided:
            assert d.kind == "undecided at the cap" and len(calls[variant]) == 9
    assert len(calls["pre-norm"]) == max(len(seeds) for seeds in calls.values())  # the baseline went on
    assert f"copy: seeds until decided, look {len(looks.looks)} of 3 made:" in said


def test_running_again_trains_nothing(runs):
    before = on_disk(runs["folder"])
    code, said = zoo(runs["path"], runs["folder"], "--until-decided")
    assert code == 0 and on_disk(runs["folder"]) == before
    assert f"{len(before)} complete" in said  # each cell reported as its record has it, none trained


def test_the_report_names_the_rounds(runs):
    folder = runs["folder"]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["report", str(runs["path"]), "--out", str(folder / "out")]) == 0
    said = " ".join((folder / "out" / "report.md").read_text().split())
    assert "round 1 is seeds 0–2 of every arm" in said and "Interim" not in said
    post = runs["state"].tasks["copy"].decisions["post-norm"]
    assert f"**worse** at look {post.look} (after round {post.look}, {post.seeds} seeds an arm; p" in said
    assert f"Looks made: {len(runs['state'].tasks['copy'].looks)} of 3." in said


def test_until_decided_needs_a_sequential_table(tmp_path, capsys):
    code = main(["run", str(ROOT / "experiments" / "quickstart.toml"), "--until-decided", "--out", str(tmp_path / "o"),
                 "--runs", str(tmp_path / "r")])
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--until-decided: quickstart has no [sequential] table; add one" in err
    assert not (tmp_path / "o").exists() and not (tmp_path / "r").exists()
