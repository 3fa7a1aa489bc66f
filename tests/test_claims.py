"""Prose is tested like code: each sentence of README.md and reports/README.md that states a result (a number, a
sign, a ranking, 'every', 'all', 'none', 'holds', 'better') has a check that recomputes it from the committed
results.csv or records, through the analysis the reports make, named after the sentence it guards. A claim that
fails its check is reworded, never the check loosened. Sign claims are for effects distinguishable from zero;
near-zero effects have no sign.

The checks follow reports/README.md section by section (helpers in tests/claims.py):

    test_claims.py             README.md and reports/README's "In short"
    test_claims_folders.py     reports/README's table of folders: each study's runs, devices and state
    test_claims_summary.py     "What the committed reports show": what matters, what to use, the literature
    test_claims_stability.py   the quickstart, warmup and norm placement, depth
    test_claims_ablations.py   the ablations (reverse, reverse-long, Multi30k de-en and en-de)
    test_claims_steps.py       whether the ablations' verdicts at 4000 steps hold at 8000 (transfer)
    test_claims_writeups.py    the writeups and writeup 000's diagnosis
    test_claims_lr.py          whether the verdicts depend on the learning rate (lr-check)
    test_claims_scale.py       whether they hold at 4x the width (scale), and what that changed in "What to use"
    test_claims_scale_left_out.py  the scale study's runs left out, their rules and the verdicts with them kept
    test_claims_standing.py    where the translation studies stand (the WMT sample, costs, devices) and the
                               verdicts the method changes changed
    test_claims_measurements.py  docs/benchmark.md's bf16 on a CPU without AVX-512, from its measurement folder
    test_claims_resolution.py  the noise split, pooling's calibration, the resolved study's state (and
                               docs/reading-reports.md's "Resolution")
    test_claims_interactions.py  "Interactions carry the test-set term": each interaction before and now

A test that guards sentences of several sections lives with the section that holds their evidence. Not
checked: values the two "Verdicts changed" tables quote from before a change (no record gives them any more).
"""

from __future__ import annotations

import json
import math

import numpy as np
from claims import (
    README,
    REPORTS,
    ROOT,
    clear_of_zero,
    effect,
    effect_text,
    experiment,
    records,
    report,
    results,
    said,
    signed,
    task,
    verdicts,
)
from scipy import stats as scipy_stats

from zoo.report.tables import verdict_class


# -- README.md --------------------------------------------------------------------------------------------------
def test_what_the_quickstart_runs_cost():
    said(README, "the 15 runs trained 517-694 s in all, reports/quickstart*/results.csv)")
    totals = [results(name).train_seconds.sum() for name in ("quickstart", "quickstart-seeds-5-9",
                                                             "quickstart-seeds-10-14")]
    assert (int(min(totals)), math.ceil(max(totals))) == (517, 694)  # the range, outward
    said(README, "write the report into my-quickstart/ (4-6 minutes")
    said(README, "of training with 2 workers, then evaluation")
    assert (int(min(totals) / 2 / 60), math.ceil(max(totals) / 2 / 60)) == (4, 6)  # 2 workers share the 15 runs


def test_the_quickstart_learning_rate():
    said(README, "at a high learning rate with no warmup (1e-2 from the first step, five times the studies' 2e-3 "
                 "peak)")
    def train(name: str):
        study = experiment(name)
        return study.train_config(study.config.tasks[0], 0, study.config.baseline_label)

    for name in ("quickstart", "quickstart-seeds-5-9", "quickstart-seeds-10-14"):
        assert (train(name).lr, train(name).warmup) == (1e-2, 0), name
    assert {train(name).lr for name in ("ablations", "transfer", "five-writeups")} == {2e-3}


def test_the_readmes_quickstart_paragraph():
    """'every post-norm seed stalls while no pre-norm seed does', and the placebo 'equivalent to pre-norm within
    the declared ±5 exact-match points'."""
    analysis = task("quickstart", "copy")
    said(README, "every post-norm seed stalls while no pre-norm seed does")
    assert set(analysis.outcomes["post-norm"].values()) == {"stalled"} and len(analysis.outcomes["post-norm"]) == 5
    assert "stalled" not in set(analysis.outcomes["pre-norm"].values()) | set(
        analysis.outcomes["pre-norm-conv1d"].values())
    said(README, "the Conv1d placebo comes out **equivalent** to pre-norm within the declared ±5 exact-match points")
    placebo = analysis.comparisons["pre-norm-conv1d"]
    assert placebo.reference == "pre-norm" and verdict_class(placebo) == "equivalent"
    assert placebo.equivalence.margin == 5.0


def test_the_readme_points_to_the_studies_and_what_to_use():
    said(README, "norm placement and warmup, depth, twelve one-factor ablations, the five writeups, budget transfer, "
                 "and six factors at d_model 256.")
    scale = experiment("scale")
    assert (ROOT / "reports" / "scale" / "report.md").exists() and scale.specs["baseline"].d_model == 256
    assert len(records("scale")) == len(scale.config.seeds) * len(scale.config.variants) * len(scale.config.tasks)
    said(README, "says what they found and what to use (at d_model 64, and where d_model 256 answered otherwise)")
    said(REPORTS, "**What to use, from these numbers.** Each line holds at the scale and budgets it was measured "
                  "at: d_model 64 with 2+2 layers")
    said(REPORTS, "The scale study (`scale/`) trained the lines on positions, embeddings, pre-norm, label smoothing "
                  "and SwiGLU again at d_model 256: where the answer differs there, the line says so.")
    arms = {v.label for v in scale.config.variants}
    assert {"rotary", "sharing-none", "pre-norm", "no-label-smoothing", "swiglu"} <= arms


# -- reports/README: "In short" -------------------------------------------------------------------------------------
def test_post_norm_fails_where_pre_norm_trains():
    said(REPORTS, "In short, post-norm fails where pre-norm trains: - without warmup at lr 1e-2, reproducing Xiong "
                  "et al. 2020 there (at 3e-3 no run of either failed without warmup, where 6 seeds detect only a "
                  "rise in failures of 97 points); - at 12+12 layers within 500 steps (Liu et al. "
                  "2020), where DeepNorm and ReZero train.")
    said(REPORTS, "post-norm fails without warmup at lr 1e-2 and at 12+12 layers, where pre-norm, DeepNorm and ReZero "
                  "train; - at lr 3e-3 and 2+2 layers no run of either placement failed without warmup (0/6 v 0/6; 6 "
                  "seeds detect only a rise in the failure rate of 97 points or more).")
    (cold,) = [c for c in report("stability").checks if c.task == "copy-w0-lr3e-3"]
    assert cold.outcome == "inconclusive" and f"{100 * cold.failures.detectable:.0f}" == "97"
    assert "unstable runs 0/6 vs 0/6" in cold.evidence
    no_warmup = task("stability", "copy-w0-lr1e-2")
    assert set(no_warmup.outcomes["post-norm"].values()) == {"stalled"}
    assert set(no_warmup.outcomes["pre-norm"].values()) == {"complete"}
    assert no_warmup.failure_adjusted["post-norm"] < 0.05
    xiong = [c for c in report("stability").checks if c.task == "copy-w0-lr1e-2"]
    assert [c.outcome for c in xiong] == ["confirmed"] and "Xiong" in xiong[0].finding.source
    for warmup in (0, 50, 200):  # at 3e-3 no run of either placement fails, with or without warmup
        outcomes = task("stability", f"copy-w{warmup}-lr3e-3").outcomes
        assert {o for arm in outcomes.values() for o in arm.values()} == {"complete"}
    assert experiment("stability").specs["post-norm"].encoder_layers == 2
    deep = task("stability-depth", "copy")
    assert set(deep.outcomes["post-norm-12"].values()) == {"stalled"}
    assert deep.failure_adjusted["post-norm-12"] < 0.05
    assert set(deep.outcomes["pre-norm-12"].values()) == set(deep.outcomes["rezero-12"].values()) == {"complete"}
    assert experiment("stability-depth").specs["post-norm-12"].encoder_layers == 12
    assert experiment("stability-depth").train_config(deep.task, 1, "post-norm-12").steps == 500
    for check in report("stability-depth").checks:  # DeepNorm and ReZero fail less than post-norm: confirmed
        if check.finding.variant in ("deepnorm-12", "rezero-12"):
            assert check.finding.against == "post-norm-12" and check.outcome == "confirmed"
    liu = [c for c in report("stability-depth").checks if c.finding.variant == "post-norm-12"]
    assert liu and all("Liu et al. 2020" in c.finding.source and c.outcome == "confirmed" for c in liu)


def test_de_en_verdicts():
    said(REPORTS, "rotary positions (+2.18 BLEU) and untied embeddings (+1.68, with twice the parameters) are better;")
    said(REPORTS, "dropping the √d embedding scale is worse;")
    said(REPORTS, "seven are equivalent within ±1 BLEU (the Conv1d placebo among them)")
    said(REPORTS, "source–target sharing (+0.91), learned positions and the PreNorm+ScaleNorm+FixNorm stack are "
                 "undecided.")
    found = verdicts("ablations", "multi30k-de-en")
    assert {v for v, w in found.items() if w == "better"} == {"rotary", "sharing-none"}
    assert {v for v, w in found.items() if w == "worse"} == {"no-embedding-scale"}
    assert sum(w == "equivalent" for w in found.values()) == 7 and found["conv1d-ffn"] == "equivalent"
    assert {v for v, w in found.items() if w == "undecided"} == {"sharing-src-tgt", "learned-positions",
                                                                 "prenorm-scalenorm-fixnorm"}
    assert round(effect("ablations", "multi30k-de-en", "rotary"), 2) == 2.18
    assert round(effect("ablations", "multi30k-de-en", "sharing-none"), 2) == 1.68
    assert round(effect("ablations", "multi30k-de-en", "sharing-src-tgt"), 2) == 0.91


def test_the_two_directions_agree():
    said(REPORTS, "On Multi30k en-de at 4000 steps all 13 verdicts are the same as on de-en (rotary +1.46 and untied "
                 "+1.21 better; the √d scale's removal worse), and every effect clear of zero in one direction has "
                 "the same sign in the other.")
    said(REPORTS, "All 13 verdicts are the same in both directions. Every effect whose interval excludes zero in one "
                  "direction has the same sign in the other; the near-zero ones differ in sign (RMSNorm −0.24 v +0.03, "
                  "no label smoothing −0.07 v +0.03)")
    de, en = task("ablations", "multi30k-de-en").comparisons, task("ablations", "multi30k-en-de").comparisons
    assert len(de) == 13 and verdicts("ablations", "multi30k-de-en") == verdicts("ablations", "multi30k-en-de")
    for variant in de:
        if clear_of_zero(de[variant]) or clear_of_zero(en[variant]):
            assert np.sign(de[variant].result.difference) == np.sign(en[variant].result.difference), variant
    for variant, a, b in (("rmsnorm", -0.24, 0.03), ("no-label-smoothing", -0.07, 0.03)):
        assert (round(de[variant].result.difference, 2), round(en[variant].result.difference, 2)) == (a, b)
    assert round(en["rotary"].result.difference, 2) == 1.46 and round(en["sharing-none"].result.difference, 2) == 1.21


def _transfer_effects() -> tuple[dict, dict]:
    return (task("transfer", "multi30k-de-en").comparisons, task("transfer", "multi30k-de-en-8000").comparisons)


def test_three_of_the_four_effects_clear_of_zero_stay_clear_at_twice_the_budget():
    said(REPORTS, "At 8000 steps three of the four effects clear of zero at 4000 are still clear of zero, with the "
                  "same sign; the fourth, the ScaleNorm stack's deficit, is gone (rank correlation of all eight +0.95, "
                  "seed-bootstrap interval [+0.76, +0.98]).")
    said(REPORTS, "Of the four effects whose 4000-step interval excludes zero, three (rotary, untied embeddings, "
                  "source–target sharing) are clear of zero with the same sign at 8000 steps; the ScaleNorm stack's "
                  "is not (−0.13 [−0.63, +0.37], equivalent within ±1). The near-zero ones have no sign to keep: no "
                  "label smoothing goes −0.07 → +0.08 and the placebo −0.06 → +0.14. The rank correlation of the "
                  "eight effects is +0.95 (seed-bootstrap interval [+0.76, +0.98]).")
    said(REPORTS, "(Spearman ρ +0.95; resampling the seeds of every arm gives the interval [+0.76, +0.98]")
    said(REPORTS, "Of the four effects whose 4000-step interval excludes zero, three are clear of zero with the same "
                  "sign at 8000 steps and the ScaleNorm stack's is not; the near-zero ones have none to keep (no "
                  "label smoothing −0.07 → +0.08, the placebo −0.06 → +0.14).")
    short, long = _transfer_effects()
    clear = {v for v, c in short.items() if clear_of_zero(c)}
    assert clear == {"rotary", "sharing-none", "sharing-src-tgt", "prenorm-scalenorm-fixnorm"}
    still = {v for v in clear if clear_of_zero(long[v])
             and np.sign(short[v].result.difference) == np.sign(long[v].result.difference)}
    assert still == {"rotary", "sharing-none", "sharing-src-tgt"}
    gone = long["prenorm-scalenorm-fixnorm"]
    assert effect_text(gone) == "−0.13 [−0.63, +0.37]" and verdict_class(gone) == "equivalent"
    assert gone.equivalence.margin == 1
    for variant, a, b in (("no-label-smoothing", -0.07, 0.08), ("conv1d-ffn", -0.06, 0.14)):
        assert (round(short[variant].result.difference, 2), round(long[variant].result.difference, 2)) == (a, b)
        assert np.sign(a) != np.sign(b)  # the reason the old sentence was false
    variants = sorted(short)
    rho = scipy_stats.spearmanr([short[v].result.difference for v in variants],
                                [long[v].result.difference for v in variants]).statistic
    assert len(variants) == 8 and round(rho, 2) == 0.95
    (transfer,) = report("transfer").transfers
    c = transfer.correlation
    assert (c.n, round(c.rho, 2), round(c.ci_low, 2), round(c.ci_high, 2)) == (8, 0.95, 0.76, 0.98)


def test_what_holds_between_the_budgets():
    said(REPORTS, "Only two near-zero ones are shown to hold within ±1 BLEU; for every effect that matters the "
                 "change is undetermined: rotary's gain shrinks to +1.64, and SwiGLU's appears (+0.76).")
    said(REPORTS, "Only near-zero effects are shown to hold within ±1 (label smoothing and the placebo); for every "
                  "effect that matters the change is undetermined.")
    said(REPORTS, "Only near-zero effects are shown stable within ±1 BLEU (the placebo and label smoothing); every "
                  "effect that matters is undetermined")
    (transfer,) = report("transfer").transfers
    held = {v for v, i in transfer.rows.items() if i.verdict == "holds"}
    assert held == {"conv1d-ffn", "no-label-smoothing"}
    assert all(abs(transfer.first.comparisons[v].result.difference) < 1 for v in held)  # near zero
    assert sum(i.verdict == "undetermined" for i in transfer.rows.values()) == 6
    mattering = {v for v, c in transfer.first.comparisons.items() if clear_of_zero(c)}  # effects clear of zero
    assert mattering and all(transfer.rows[v].verdict == "undetermined" for v in mattering)
    _, long = _transfer_effects()
    assert round(long["rotary"].result.difference, 2) == 1.64 and round(long["swiglu"].result.difference, 2) == 0.76


def test_the_synthetic_task_below_ceiling():
    said(REPORTS, "On a synthetic task below ceiling (reverse with 8–24 symbols, 1500 steps, baseline 88.8% exact "
                  "match), rotary (+10.5 points) and dropping the √d scale (+7.3, at a vocabulary of 14) are better; "
                  "learned positions (−29.6), the ScaleNorm stack (−16.2) and pre-norm (−13.5) are worse.")
    said(REPORTS, "On the synthetic task that discriminates (`reverse-long`: 8–24 symbols, 1500 steps, baseline 88.8% "
                  "test exact match): rotary gains 10.5 points, and dropping the √d_model scale gains 7.3 at its "
                  "vocabulary of 14; learned positions lose 29.6, the ScaleNorm stack 16.2 and pre-norm 13.5.")
    analysis, found = task("ablations", "reverse-long"), verdicts("ablations", "reverse-long")
    assert (analysis.task.options["min_len"], analysis.task.options["max_len"]) == (8, 24)
    assert experiment("ablations").train_config(analysis.task, 0, "baseline").steps == 1500
    assert f"{np.mean(analysis.comparisons['rotary'].per_seed[0]):.1f}" == "88.8"  # the baseline's seeds
    assert {v for v, w in found.items() if w == "better"} == {"rotary", "no-embedding-scale"}
    assert {v for v, w in found.items() if w == "worse"} == {"learned-positions", "prenorm-scalenorm-fixnorm",
                                                             "pre-norm"}
    quoted = {"rotary": "+10.5", "no-embedding-scale": "+7.3", "learned-positions": "−29.6",
              "prenorm-scalenorm-fixnorm": "−16.2", "pre-norm": "−13.5"}
    assert {v: signed(effect("ablations", "reverse-long", v), 1) for v in quoted} == quoted
    vocab = {r["spec"]["src_vocab"] for r in records("ablations") if r["cell"]["task"] == "reverse-long"}
    assert vocab == {14}


def test_the_five_writeups_span():
    said(REPORTS, "The five writeups, slips fixed, span 10.29 BLEU on Multi30k de-en at 4000 steps (004 32.39, "
                 "003 30.75, 002 26.61, 001 24.17, 000 22.10;")
    said(REPORTS, "at 4000 Multi30k de-en steps the five, slips fixed, span 10.29 BLEU (004 32.39, 003 30.75, 002 "
                  "26.61, 001 24.17, 000 22.10)")
    said(REPORTS, "at 4000 Multi30k steps they span 10.29 BLEU")
    frame = results("five-writeups")
    means = frame[(frame.task == "multi30k-de-en") & (frame.status == "complete")].groupby("variant").bleu.mean()
    five = means[[f"writeup-00{i}" for i in range(5)]].round(2)
    assert five.tolist() == [22.10, 24.17, 26.61, 30.75, 32.39]
    assert round(five.max() - five.min(), 2) == 10.29


def test_no_wmt14_subset_was_studied():
    said(REPORTS, "No WMT14 news subset was studied here: every translation result is Multi30k's")
    said(REPORTS, "No WMT14 news subset was studied here")
    said(REPORTS, "(a 9,000-pair WMT news sample was tried and left the studies: a model trained on it does not beat "
                  "copying the source in BLEU)")
    tasks = {task.name for path in (ROOT / "experiments").glob("*.toml") for task in experiment(path.stem).config.tasks}
    assert not any(name.split(":")[0].startswith("wmt14") for name in tasks)
    assert {name.split(":")[0] for name in tasks if ":" in name} == {"multi30k", "wmt-ende-10k"}
    bleu = results("budget-pilot-wmt").groupby("variant").bleu.mean()  # neither budget beats copying in BLEU
    floor = json.loads((ROOT / "reports/budget-pilot-wmt/records/.floors/wmt10k-en-de.json").read_text())
    assert (bleu < floor["systems"]["copy-source"]["test"]["bleu"]).all()
