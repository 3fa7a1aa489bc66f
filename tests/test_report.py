"""`zoo report` on fabricated run directories whose right answers are known by construction.

The grid (3 variants x 2 tasks x 3 seeds) is written once per module with chosen numbers:

    copy (exact match, threshold 90)      toy (text, BLEU; references patched in)
    linear   60 62 61, reaches 90 at      garbage hypotheses, 3 seeds
             200 400 300, 1000-1200 tok/s
    conv1d   61 60, seed 2 diverged       the same garbage (identical outputs), seed 2 incomplete
    prenorm  99 98, seed 2 failed,        hypotheses = references, seed 2 missing
             ~500 tok/s (slower)
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import sacrebleu
from scipy import stats as scipy_stats

from zoo.cli import main
from zoo.errors import DataError
from zoo.experiment import load_experiment
from zoo.report import build_report, collect
from zoo.report.compare import Comparer, check_findings, results_rows
from zoo.report.report import loss_caveat
from zoo.equivalence import Verdict
from zoo.report.equiv import Matrix, equivalence_matrix, matrix_markdown
from zoo.report.stats import mean_ci, paired_bootstrap, sentence_stats, welch

EXPERIMENT = """
name = "fake"
description = "fabricated runs with known answers"
seeds = [0, 1, 2]
baseline = "linear"
shared = {d_model = 32, n_heads = 4, d_ff = 64, encoder_layers = 1, decoder_layers = 1, dropout = 0.0}

[[variants]]
label = "linear"
base = "paper-base"
[[variants]]
label = "conv1d"
base = "paper-base"
set = {"ffn.kind" = "conv1d"}
[[variants]]
label = "prenorm"
base = "paper-base"
set = {"residual.kind" = "pre-norm"}

[[tasks]]
name = "copy"
options = {symbols = 8, min_len = 2, max_len = 4}
threshold = 90.0
[[tasks]]
name = "toy:de-en"
label = "toy"

[train]
steps = 400

[[findings]]
variant = "prenorm"
task = "copy"
expect = "better"
claim = "pre-norm learns copy better"
source = "Fake et al. 2024, Known Answers"
[[findings]]
variant = "prenorm"
task = "copy"
metric = "valid_loss"
expect = "worse"
claim = "pre-norm ends at a higher validation loss"
source = "Contrarian 2023"
[[findings]]
variant = "conv1d"
task = "copy"
expect = "worse"
claim = "conv1d hurts"
source = "Nobody 2022"
[[findings]]
variant = "prenorm"
task = "toy"
expect = "better"
claim = "pre-norm translates better"
source = "Fake et al. 2024"
[[findings]]
variant = "prenorm"
against = "conv1d"
task = "toy"
expect = "better"
claim = "pre-norm translates better than conv1d"
source = "Fake et al. 2024"
"""

WORDS = "the cat sat on a mat while dogs ran past red houses near green trees".split()
REFERENCES = [" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(6 + i % 5)) for i in range(30)]
GARBAGE = [" ".join(ref.split()[:2]) + " zz qq" for ref in REFERENCES]
VOCAB = {"copy": 12, "toy": 50}
COMMAND = "zoo report fake.toml --runs RUNS --out OUT"


def write_json(path: Path, value) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value))


def write_run(root: Path, experiment, variant: str, task: str, seed: int, *, status: str = "complete",
              main: float = 0.0, valid_loss: float = 1.0, tokens: int = 10000, reach: int | None = None,
              hyps: list[str] | None = None) -> None:
    """One run directory; `main` is the test (and last validation) value of the task's metric."""
    run = root / variant / task / f"seed-{seed}"
    if status == "missing":
        return
    spec = experiment.specs[variant].with_overrides({"src_vocab": VOCAB[task], "tgt_vocab": VOCAB[task]})
    write_json(run / "spec.json", {"digest": spec.digest(), "spec": spec.model_dump(mode="json")})
    write_json(run / "train.json", {"steps": 400, "seed": seed})
    if status == "failed":
        write_json(run / "failed.json", {"reason": "RuntimeError: out of memory"})
        return
    metric = "exact_match" if task == "copy" else "bleu"
    rows = [{"step": s, "epoch": s / 100, "loss": 3.0 - s / 200, "nll": 2.5 - s / 200, "lr": 1e-3, "grad_norm": 1.0,
             "tokens": 250, "tok_per_s": 1000.0, "seconds": s / 40} for s in range(10, 410, 10)]
    evals = []
    for step in (100, 200, 300, 400):
        value = 95.0 if reach is not None and step >= reach else main if step == 400 else 50.0
        evals.append({"event": "eval", "step": step, "epoch": step / 100, "seconds": step / 40,
                      "valid_loss": valid_loss + (400 - step) / 1000, "valid_nll": valid_loss - 0.1,
                      "valid_ppl": math.exp(valid_loss - 0.1), "decoded_sentences": 10, metric: value})
    if status == "diverged":
        rows = rows[:4] + [{"event": "diverged", "step": 40, "loss": "nan"}]
        evals = []
    log = sorted(rows + evals, key=lambda r: (r["step"], "event" in r))
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in log))
    if status == "incomplete":
        return
    summary = {"status": status, "reason": "diverged at step 40: loss is nan" if status == "diverged" else "",
               "spec_digest": spec.digest(), "parameters": 5000, "steps": 40 if status == "diverged" else 400,
               "epochs": 4.0, "tokens": tokens, "train_seconds": 10.0, "device": "cpu", "precision": "fp32",
               "final": evals[-1] if evals else None}
    write_json(run / "summary.json", summary)
    if status == "complete":
        test = {"split": "test", "sentences": 30, "beam": 1, "alpha": 0.6, "nll": valid_loss, "ppl": math.exp(valid_loss),
                "tokens": 300}
        if task == "copy":
            test.update(exact_match=main, token_accuracy=main)
        else:
            test.update(bleu=sacrebleu.corpus_bleu(hyps, [REFERENCES]).score, chrf=sacrebleu.corpus_chrf(hyps, [REFERENCES]).score,
                        bleu_lowercase=sacrebleu.corpus_bleu(hyps, [REFERENCES], lowercase=True).score)
            (run / "test.hyp").write_text("".join(h + "\n" for h in hyps))
        write_json(run / "test.json", test)


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    """The experiment, its runs folder, and the report built from it (references patched in)."""
    folder = tmp_path_factory.mktemp("report")
    (folder / "fake.toml").write_text(EXPERIMENT)
    experiment = load_experiment(folder / "fake.toml")
    runs = folder / "runs"
    for seed, (exact, loss, reach) in enumerate([(60, 1.0, 200), (62, 1.1, 400), (61, 1.2, 300)]):
        write_run(runs, experiment, "linear", "copy", seed, main=exact, valid_loss=loss, reach=reach, tokens=10000 + 1000 * seed)
        write_run(runs, experiment, "linear", "toy", seed, main=5.0, hyps=GARBAGE)
    write_run(runs, experiment, "conv1d", "copy", 0, main=61, valid_loss=1.05, reach=300)
    write_run(runs, experiment, "conv1d", "copy", 1, main=60, valid_loss=1.15, reach=300, tokens=11000)
    write_run(runs, experiment, "conv1d", "copy", 2, status="diverged")
    write_run(runs, experiment, "prenorm", "copy", 0, main=99, valid_loss=0.5, reach=100, tokens=5000)
    write_run(runs, experiment, "prenorm", "copy", 1, main=98, valid_loss=0.6, reach=200, tokens=5100)
    write_run(runs, experiment, "prenorm", "copy", 2, status="failed")
    for seed in (0, 1):
        write_run(runs, experiment, "conv1d", "toy", seed, main=5.0, hyps=GARBAGE)
        write_run(runs, experiment, "prenorm", "toy", seed, main=100.0, hyps=REFERENCES)
    write_run(runs, experiment, "conv1d", "toy", 2, status="incomplete")
    write_run(runs, experiment, "prenorm", "toy", 2, status="missing")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("zoo.report.report.references", lambda run_dir: REFERENCES)
        report = build_report(experiment, runs, folder / "out", COMMAND)
    return experiment, runs, report


def row(frame: pd.DataFrame, variant: str, task: str, seed: int) -> pd.Series:
    return frame[(frame.variant == variant) & (frame.task == task) & (frame.seed == seed)].iloc[0]


def test_collect_gives_one_row_per_grid_cell_with_the_written_numbers(grid):
    experiment, runs, _ = grid
    frame = collect(experiment, runs)
    assert len(frame) == 18
    first = row(frame, "linear", "copy", 0)
    assert first.status == "complete"
    assert first.tok_per_s == pytest.approx(1000.0)  # tokens / train_seconds
    assert (first.valid_loss, first.exact_match, first.parameters, first.steps) == (1.0, 60.0, 5000, 400)
    assert first.test_ppl == pytest.approx(math.e)
    assert [row(frame, "linear", "copy", s).steps_to_threshold for s in range(3)] == [200, 400, 300]
    assert math.isnan(row(frame, "linear", "toy", 0).steps_to_threshold)  # no threshold for this task
    assert row(frame, "prenorm", "toy", 0).bleu == pytest.approx(100.0)


def test_failed_diverged_incomplete_and_missing_runs_are_marked(grid):
    experiment, runs, _ = grid
    frame = collect(experiment, runs)
    assert row(frame, "conv1d", "copy", 2).status == "diverged"
    assert "loss is nan" in row(frame, "conv1d", "copy", 2).reason
    assert row(frame, "prenorm", "copy", 2).status == "failed"
    assert "out of memory" in row(frame, "prenorm", "copy", 2).reason
    assert row(frame, "conv1d", "toy", 2).status == "incomplete"
    assert row(frame, "prenorm", "toy", 2).status == "missing"


def test_results_csv_has_every_run(grid):
    _, _, report = grid
    csv = pd.read_csv(report.parent / "results.csv")
    assert len(csv) == 18
    assert {"variant", "task", "seed", "status", "reason", "tok_per_s", "valid_ppl", "bleu", "chrf", "exact_match",
            "test_nll", "test_ppl", "steps_to_threshold"} <= set(csv.columns)
    assert sorted(csv.status.unique()) == ["complete", "diverged", "failed", "incomplete", "missing"]


def test_mean_and_confidence_interval_match_hand_computation():
    estimate = mean_ci([1.0, 2.0, 3.0])
    assert estimate.mean == pytest.approx(2.0)
    assert estimate.half_width == pytest.approx(scipy_stats.t.ppf(0.975, 2) * 1 / math.sqrt(3))
    assert estimate.half_width == pytest.approx(2.4841377)
    single = mean_ci([7.0])
    assert (single.mean, single.n) == (7.0, 1) and math.isnan(single.half_width)


def test_task_table_shows_ci_and_excludes_broken_runs(grid):
    experiment, runs, _ = grid
    header, rows = results_rows(collect(experiment, runs), experiment, experiment.config.tasks[0])
    table = {r[0].split(" ")[0]: dict(zip(header, r)) for r in rows}
    half = scipy_stats.t.ppf(0.975, 2) * 100 / math.sqrt(3)  # steps 200, 400, 300
    steps = next(h for h in header if h.startswith("steps to"))
    assert table["linear"][steps] == f"300 ± {half:.0f} (3/3 reached)"
    assert table["linear"]["complete seeds"] == "3/3"
    assert table["conv1d"]["complete seeds"] == "2/3" and table["prenorm"]["complete seeds"] == "2/3"
    assert table["prenorm"]["test exact match %"].startswith("98.50 ± ")  # the failed seed is not a zero
    assert table["linear"]["trainable parameters"] == "5,000"  # constant over seeds: no interval


def test_welch_verdicts_follow_each_measures_direction(grid):
    experiment, runs, _ = grid
    comparer = Comparer(experiment, collect(experiment, runs), lambda run_dir: REFERENCES)
    assert comparer.compare("copy", "prenorm", "exact_match").verdict == "better"
    assert comparer.compare("copy", "prenorm", "valid_loss").verdict == "better"  # lower loss is better
    assert comparer.compare("copy", "prenorm", "tok_per_s").verdict == "worse"
    assert comparer.compare("copy", "conv1d", "exact_match").verdict == "no detectable difference"
    assert welch([1.0], [2.0, 3.0], True).verdict == "not enough seeds"
    assert welch([1.0, 1.1, 0.9], [5.0, 5.2, 4.9], False).verdict == "worse"


def test_paired_bootstrap_on_sentences():
    perfect, garbage = sentence_stats(REFERENCES, REFERENCES), sentence_stats(GARBAGE, REFERENCES)
    better = paired_bootstrap([garbage], [perfect])
    assert better.verdict == "better" and better.difference > 50 and better.p_value < 0.01
    assert paired_bootstrap([perfect], [garbage]).verdict == "worse"
    same = paired_bootstrap([garbage, garbage], [garbage, garbage])
    assert (same.verdict, same.p_value, same.difference) == ("no detectable difference", 1.0, 0.0)


def test_bleu_comparisons_use_the_run_hypotheses(grid):
    experiment, runs, _ = grid
    comparer = Comparer(experiment, collect(experiment, runs), lambda run_dir: REFERENCES)
    better = comparer.compare("toy", "prenorm", "bleu")
    assert (better.method, better.verdict, better.n_baseline, better.n_variant) == ("paired bootstrap", "better", 2, 2)
    same = comparer.compare("toy", "conv1d", "bleu")
    assert same.verdict == "no detectable difference" and same.p_value == 1.0


def test_unreadable_references_fall_back_to_welch_with_a_note(grid):
    experiment, runs, _ = grid

    def moved(run_dir):
        raise DataError("toy/test.en: no such file")

    comparer = Comparer(experiment, collect(experiment, runs), moved)
    test = comparer.compare("toy", "prenorm", "bleu")
    assert (test.method, test.verdict) == ("Welch t-test", "better")
    assert "toy/test.en" in comparer.notes["toy"][0]


def test_findings_agree_disagree_or_are_inconclusive(grid):
    experiment, runs, _ = grid
    checks = check_findings(experiment, Comparer(experiment, collect(experiment, runs), lambda run_dir: REFERENCES))
    assert [c.outcome for c in checks] == ["agrees", "disagrees", "inconclusive (no detectable difference)", "agrees",
                                           "agrees"]
    assert [c.metric for c in checks] == ["exact_match", "valid_loss", "exact_match", "bleu", "bleu"]
    # against: conv1d (garbage outputs, 2 complete seeds) is the reference, not the baseline
    assert checks[4].test.n_baseline == 2 and checks[4].test.difference > 0


def test_equivalence_matrix_finds_conv1d_equals_linear(grid):
    experiment, runs, _ = grid
    matrix = equivalence_matrix(experiment, runs)
    assert matrix.equivalent_pairs() == [("linear", "conv1d")]
    assert not matrix.equivalent("linear", "prenorm")
    assert "spec.json" in matrix.sources["prenorm"]


def test_equivalence_matrix_shrinks_big_pairs_and_says_so_once(grid, monkeypatch):
    experiment, runs, _ = grid
    monkeypatch.setattr("zoo.report.equiv.MAX_PARAMETERS", 1)
    matrix = equivalence_matrix(experiment, runs)
    assert matrix.notes == ["every pair checked: shrunk for the check: src_vocab=12, tgt_vocab=12, d_model=32, d_ff=64"]
    assert matrix.equivalent_pairs() == [("linear", "conv1d")]  # shrinking keeps what differs


def test_equivalent_variants_that_train_differently_are_told_apart():
    labels = ["base", "conv", "no-warmup", "prenorm"]
    same = {("base", "conv"), ("base", "no-warmup"), ("conv", "no-warmup")}
    verdicts = {(a, b): Verdict(tuple(sorted((a, b), key=labels.index)) in same, 1e-6, "within 1e-05", 1e-5)
                for a in labels for b in labels if a != b}
    matrix = Matrix(labels, verdicts, {}, training={"no-warmup": {"warmup": 0}})
    assert matrix.classes() == [["base", "conv", "no-warmup"]]
    text = matrix_markdown(matrix)
    assert "**base, conv and no-warmup compute the same function**" in text
    assert "**base, conv: also trained alike, so their differences are not ablations**" in text
    assert "base, conv: the experiment's training; no-warmup: warmup = 0" in text
    assert "prenorm" not in text.split("\n\n", 1)[1]


def test_valid_loss_is_flagged_when_the_training_objectives_differ(grid, tmp_path):
    experiment, _, _ = grid
    assert loss_caveat(experiment, experiment.config.tasks[0]) == []  # one head, one smoothing: no caveat
    text = EXPERIMENT.replace('set = {"residual.kind" = "pre-norm"}',
                              'set = {"residual.kind" = "pre-norm", "output.kind" = "log-softmax"}\n'
                              'train = {label_smoothing = 0.0}')
    (tmp_path / "fake.toml").write_text(text)
    mixed = load_experiment(tmp_path / "fake.toml")
    [note, _] = loss_caveat(mixed, mixed.config.tasks[0])
    assert "linear, conv1d: logits head, label smoothing 0.1; prenorm: log-softmax head, label smoothing 0" in note


def test_report_has_command_sections_and_plots(grid):
    experiment, _, report = grid
    text = report.read_text()
    assert report.name == "report.md"
    assert COMMAND in text
    assert "# fake: comparison report" in text and 'name = "fake"' in text  # the experiment file, verbatim
    for phrase in ("diverged at step 40", "RuntimeError: out of memory", "**missing**", "**incomplete**",
                   "**linear and conv1d compute the same function**",
                   "linear, conv1d: also trained alike, so their differences are not ablations",
                   "**agrees**", "**disagrees**", "Expected prenorm to be *better* than conv1d",
                   "conv1d and linear compute the same function and train alike: a gap between them is training noise", "paired bootstrap", "Welch t-test", "| ≡ |", "| ≠ |"):
        assert phrase in text, phrase
    links = [line.split("](")[1].rstrip(")") for line in text.splitlines() if line.startswith("![")]
    assert len(links) == 2 * len(experiment.config.tasks) + 1
    for link in links:
        png = report.parent / link
        assert png.exists() and png.read_bytes()[:4] == b"\x89PNG"


def test_cli_report_prints_tables_and_path(grid, tmp_path, monkeypatch, capsys):
    experiment, runs, _ = grid
    monkeypatch.setattr("zoo.report.report.references", lambda run_dir: REFERENCES)
    code = main(["report", str(experiment.path), "--runs", str(runs), "--out", str(tmp_path / "cli")])
    out = capsys.readouterr().out
    assert code == 0
    assert str(tmp_path / "cli" / "report.md") in out and "fake / copy" in out
    assert f"--runs {runs}" in (tmp_path / "cli" / "report.md").read_text()


def test_cli_report_without_runs_is_a_user_error(grid, tmp_path, capsys):
    experiment, _, _ = grid
    assert main(["report", str(experiment.path), "--runs", str(tmp_path / "nowhere")]) == 2
    assert "--runs" in capsys.readouterr().err


def test_a_tested_difference_never_prints_as_zero():
    from zoo.report.compare import fmt_difference

    assert fmt_difference(0.0017, "bleu") == "+0.0017"
    assert fmt_difference(-0.00042, "bleu") == "-0.00042"
    assert fmt_difference(1.234, "bleu") == "+1.23"
    assert fmt_difference(0.0, "bleu") == "0.00"
