"""reports/README.md's "Where the translation studies stand" (the WMT sample, what runs cost, the device as a block
of seeds) and its two "Verdicts changed by ..." sections (the rule and the layout: tests/test_claims.py).

Not checked: the "before" columns of both "Verdicts changed" tables and the ablations rows of the calibration
audit's table, whose "now" was superseded on 2026-11-27 (the table above it): no record gives those numbers any
more; "8 to 16 at once", which the records cannot show (each holds its own `zoo run`'s worker count;
docs/measurements/h200-2026-11-26 says two lanes shared the GPU).
"""

from __future__ import annotations

import json
import math
import re
from datetime import datetime

import numpy as np
import pytest
from claims import (
    REPORTS,
    ROOT,
    effect_text,
    records,
    report,
    results,
    said,
    signed,
    table_after,
    task,
    values,
)

from zoo.report.tables import verdict_class
from zoo.stats import ALPHA


def _floor(name: str, key: str) -> dict:
    """What copying the source scores on a task's test set (its trivial floor)."""
    floor = json.loads((ROOT / "reports" / name / "records" / ".floors" / f"{key}.json").read_text())
    return floor["systems"]["copy-source"]["test"]


# -- Multi30k and the WMT sample --------------------------------------------------------------------------------
def test_each_doubling_still_adds():
    said(REPORTS, "Multi30k: each doubling of the baseline's budget still adds 1.8–2.5 BLEU up to 16000 steps (above; "
                  "from 8000 to 16000 only the point estimate is above the 1-BLEU margin: its interval, [−0.19, "
                  "+3.74] on 3 seeds, is not), and a 16000-step run takes 45–49 core-minutes of training "
                  "(2,686–2,949 s).")
    pilot = task("budget-pilot", "multi30k-de-en").comparisons  # each against 8000 steps
    gains = [-pilot["baseline"].result.difference, pilot["baseline-16000"].result.difference]
    assert (f"{min(gains):.1f}", f"{max(gains):.1f}") == ("1.8", "2.5")
    longer = pilot["baseline-16000"].result
    assert longer.difference > 1 > longer.ci_low and f"[{signed(longer.ci_low)}, {signed(longer.ci_high)}]" == \
        "[−0.19, +3.74]" and longer.n_variant == 3
    frame = results("budget-pilot")
    seconds = frame[(frame.variant == "baseline-16000") & (frame.status == "complete")].train_seconds
    assert (f"{seconds.min():,.0f}", f"{seconds.max():,.0f}") == ("2,686", "2,949")
    assert (round(seconds.min() / 60), round(seconds.max() / 60)) == (45, 49)


def test_the_wmt_samples_failure():
    said(REPORTS, "copying its English source unchanged scores 21.44 test chrF (2.83 BLEU), more than the 6000-step "
                  "baseline (19.59 / 1.44).")
    copy = _floor("budget-pilot-wmt", "wmt10k-en-de")  # copying the source: the task's trivial floor
    assert (f"{copy['chrf']:.2f}", f"{copy['bleu']:.2f}") == ("21.44", "2.83")
    frame = results("budget-pilot-wmt")
    short = frame[(frame.variant == "baseline") & (frame.status == "complete")]
    assert set(short.steps) == {6000}
    assert (f"{short.chrf.mean():.2f}", f"{short.bleu.mean():.2f}") == ("19.59", "1.44")
    assert short.chrf.mean() < copy["chrf"] and short.bleu.mean() < copy["bleu"]
    said(REPORTS, "At 12000 steps, 51 epochs over its 9,000 pairs, the baseline's chrF (23.75) clears the copy "
                  "floor but its BLEU (2.15) is still below copying's 2.83;")
    long = [r for r in records("budget-pilot-wmt") if r["cell"]["variant"] == "baseline-12000"]
    chrf, bleu = np.mean([r["test"]["chrf"] for r in long]), np.mean([r["test"]["bleu"] for r in long])
    assert len(long) == 3 and round(chrf, 2) == 23.75 and round(bleu, 2) == 2.15
    assert {round(r["summary"]["epochs"]) for r in long} == {51}
    assert chrf > copy["chrf"] and bleu < copy["bleu"]
    said(REPORTS, "smaller vocabularies do not help at 6000 steps (18.90, 18.97:")
    pilot = results("floor-pilot-wmt").set_index("task")
    assert set(pilot.steps) == {6000}
    assert [f"{pilot.chrf[key]:.2f}" for key in ("wmt10k-en-de-bpe2000", "wmt10k-en-de-bpe1000")] == ["18.90", "18.97"]
    assert (pilot.chrf < short.chrf.mean()).all()  # no better than the 4000-token vocabulary at 6000 steps
    said(REPORTS, "Twice the steps left its BLEU below copying's, and no run varied the amount of data, so that 9,000 "
                  "pairs of news text are too few for this model to translate is a reading of these runs, not a "
                  "measurement.")
    wmt = records("budget-pilot-wmt") + records("floor-pilot-wmt")
    assert {r["definition"]["train"]["steps"] for r in wmt} == {6000, 12000}
    assert len({json.dumps(r["definition"]["data"], sort_keys=True) for r in wmt}) == 1  # one corpus's files in all


# -- what runs cost ---------------------------------------------------------------------------------------------
def _gpu(frame):
    return frame[frame.device.astype(str).str.startswith("cuda")]


def test_what_a_cpu_run_cost():
    said(REPORTS, "On the CPU with 2 workers, a `reverse-long` run took 119–449 s of training (median 169 s) and a "
                  "writeups Multi30k run 714–1,154 s.")
    ablations, writeups = results("ablations"), results("five-writeups")
    long = ablations[(ablations.task == "reverse-long") & (ablations.device == "cpu")]
    translation = writeups[(writeups.task == "multi30k-de-en") & (writeups.device == "cpu")]
    assert set(long.concurrent_runs) == set(translation.concurrent_runs) == {2}
    seconds = long.train_seconds
    assert (round(seconds.min()), round(seconds.max()), round(seconds.median())) == (119, 449, 169)
    seconds = translation.train_seconds
    assert (f"{seconds.min():,.0f}", f"{seconds.max():,.0f}") == ("714", "1,154")


def test_what_a_scale_run_costs():
    """The pilot's 200-step times on the two paths, and the scale grid's runs on each device, from their records."""
    said(REPORTS, "`scale-pilot/` trained 200 steps on that path in 126.98 s against 177.19 s on the fast path, "
                  "about 32 minutes for a run's 3000 steps. Seed 0's ten runs, one at a time on the 2-core CPU with "
                  "other work beside them, took 32–85 minutes of training each; seeds 1–4, ten runs at once on an "
                  "H200, 60–97 s each.")
    pilot = {r["cell"]["variant"]: r["summary"] for r in records("scale-pilot")}
    assert pilot["fast-attention"]["steps"] == pilot["fast"]["steps"] == 200
    assert (f"{pilot['fast-attention']['train_seconds']:.2f}", f"{pilot['fast']['train_seconds']:.2f}") == \
        ("126.98", "177.19")
    assert round(pilot["fast-attention"]["train_seconds"] / 200 * 3000 / 60) == 32
    runs = {device: [r for r in records("scale") if r["summary"]["device"].startswith(device)]
            for device in ("cpu", "cuda")}
    cpu, gpu = ([r["summary"]["train_seconds"] for r in runs[device]] for device in ("cpu", "cuda"))
    assert {r["cell"]["seed"] for r in runs["cpu"]} == {0} and len(cpu) == 10
    assert {r["provenance"]["concurrent_runs"] for r in runs["cpu"]} == {1}
    assert (round(min(cpu) / 60), round(max(cpu) / 60)) == (32, 85)
    assert {r["summary"]["device"] for r in runs["cuda"]} == {"cuda (NVIDIA H200)"} and len(gpu) == 40
    assert {r["provenance"]["concurrent_runs"] for r in runs["cuda"]} == {10}
    assert (round(min(gpu)), round(max(gpu))) == (60, 97)


def test_what_a_gpu_run_cost():
    said(REPORTS, "over all 80 Multi30k runs it trained (8 to 16 at once) a run took 114–238 s of training "
                  "(median 141 s), where the 2-core CPU takes 430–1,350 s a run with 2 workers.")
    frames = [results(name) for name in ("ablations", "five-writeups")]
    multi30k = [f[f.task.str.startswith("multi30k")] for f in frames]
    gpu = np.concatenate([_gpu(f).train_seconds for f in multi30k])
    assert (len(gpu), round(gpu.min()), round(gpu.max()), round(np.median(gpu))) == (80, 114, 238, 141)
    cpu = np.concatenate([f[f.device == "cpu"].train_seconds for f in multi30k])
    assert {n for f in multi30k for n in f[f.device == "cpu"].concurrent_runs} == {2}
    assert (f"{round(cpu.min(), -1):,.0f}", f"{round(cpu.max(), -1):,.0f}") == ("430", "1,350")  # to 10 s
    said(REPORTS, "one NVIDIA H200 trained 12 of the 4000-step Multi30k runs at once, a batch about every 145 s in "
                  "the first sitting;")
    first = sorted(datetime.fromisoformat(r["provenance"]["finished"].replace("Z", "+00:00")).timestamp()
                   for r in records("ablations") if r["provenance"]["concurrent_runs"] == 12)
    assert len(first) == 24 and {r["summary"]["device"] for r in records("ablations")
                                 if r["provenance"]["concurrent_runs"] == 12} == {"cuda (NVIDIA H200)"}
    cut = int(np.argmax(np.diff(first))) + 1  # two batches of 12
    assert abs(np.median(first[cut:]) - np.median(first[:cut]) - 145) <= 5


def test_the_gpu_trained_whole_seeds():
    said(REPORTS, "In two sittings it trained 108 cells (ablations en-de seeds 0, 1, 3, 4; reverse-long seeds 0–1; "
                  "the writeups' Multi30k seeds 0–2), all whole seeds across all arms, so in each task the device is "
                  "a block of seeds, never an arm")
    trained = {}
    for name in ("ablations", "five-writeups"):
        frame = results(name)
        for key, rows in _gpu(frame).groupby("task"):
            trained[(name, key)] = set(rows.seed)
            arms = frame[frame.task == key].variant.nunique()
            assert all(len(seed_rows) == arms for _, seed_rows in rows.groupby("seed")), (name, key)  # whole seeds
    assert trained == {("ablations", "multi30k-en-de"): {0, 1, 3, 4}, ("ablations", "reverse-long"): {0, 1},
                       ("five-writeups", "multi30k-de-en"): {0, 1, 2}}
    assert sum(len(_gpu(results(name))) for name in ("ablations", "five-writeups")) == 108
    finished = sorted(datetime.fromisoformat(r["provenance"]["finished"].replace("Z", "+00:00")).timestamp()
                      for name in ("ablations", "five-writeups") for r in records(name)
                      if r["summary"]["device"].startswith("cuda"))
    assert sum(gap > 3600 for gap in np.diff(finished)) == 1  # two sittings, hours apart


def test_the_device_block_effects_are_what_the_reports_records_give():
    from zoo.stats.blocks import block_test

    def device_test(name: str, key: str):
        analysis = task(name, key)
        frame = report(name).frame
        rows = frame[(frame["task"] == key) & frame["status"].isin(("complete", "stalled"))]  # trained to the end
        scores = {v: dict(zip(arm["seed"], arm[analysis.primary])) for v, arm in rows.groupby("variant")}
        gpu = set(rows[rows["device"].astype(str).str.startswith("cuda")]["seed"])
        return block_test(scores, gpu), rows, analysis.primary

    for (name, key), effect, p in ((("ablations", "reverse-long"), "+1.37", "0.50"),
                                   (("ablations", "multi30k-en-de"), "+0.22", "0.40"),
                                   (("five-writeups", "multi30k-de-en"), "+0.14", "0.10"),
                                   (("scale", "multi30k-de-en"), "+0.17", "0.40")):
        test, rows, primary = device_test(name, key)
        assert f"{test.effect:+.2f}" == effect and f"{test.p_value:.2f}" == p, (name, key, test)
        assert test.p_value >= 0.05  # "None is detectable"
    test, rows, primary = device_test("ablations", "reverse-long")
    said(REPORTS, "On `reverse-long` the GPU seeds score +1.37 points above the CPU seeds (p = 0.50 over 14 arms;")
    assert test.arms == 14 and test.floor == pytest.approx(0.1)
    baseline = rows[rows["variant"] == "baseline"]
    on = lambda device: sorted(baseline[baseline["device"].astype(str).str.startswith(device)][primary])  # noqa: E731
    assert [f"{v:.1f}" for v in on("cuda")] == ["90.2", "91.4"]
    assert (f"{on('cpu')[0]:.1f}", f"{on('cpu')[-1]:.1f}") == ("85.8", "89.2")
    said(REPORTS, "in the baseline alone, GPU 91.4 and 90.2 against CPU 85.8–89.2), on Multi30k en-de +0.22 BLEU "
                  "(p = 0.40) and on the writeups' Multi30k de-en +0.14 BLEU (p = 0.10, the smallest p that 3 v 2 "
                  "seeds allow), and on the scale study's +0.17 BLEU (p = 0.40, over 10 arms; 4 v 1 seeds allow no p "
                  "below 0.20). None is detectable, and these tests can show little:")
    scale = device_test("scale", "multi30k-de-en")[0]
    assert scale.arms == 10 and scale.floor == pytest.approx(0.2)
    assert device_test("five-writeups", "multi30k-de-en")[0].floor == pytest.approx(0.1)
    said(REPORTS, "with 5 seeds split between two devices the test cannot go below p = 0.1")
    said(REPORTS, "the scale study's 4 v 1 split, whose smallest p is 0.20, rules out nothing.")
    assert scale.floor > ALPHA  # no outcome could reject
    rows = report("scale").frame
    rows = rows[rows.task == "multi30k-de-en"].set_index(["variant", "seed"])
    placebo = {s: rows.loc[("conv1d-ffn", s), "bleu"] - rows.loc[("baseline", s), "bleu"] for s in range(5)}
    cpu = [s for s in range(5) if rows.loc[("baseline", s), "device"] == "cpu"]
    assert cpu == [0]
    said(REPORTS, f"scores {placebo[0]:+.2f} BLEU against the baseline on the CPU seed and "
                  + ", ".join(f"{placebo[s]:+.2f}".replace("-", "−") for s in range(1, 4)) + f" and "
                  f"{placebo[4]:+.2f}".replace("-", "−") + " on the four GPU seeds.")
    said(ROOT / "docs" / "experiments.md", f"scored {placebo[0]:+.2f} BLEU on its CPU seed and "
         f"{min(placebo[s] for s in range(1, 5)):+.2f} to {max(placebo[s] for s in range(1, 5)):+.2f}".replace("-", "−")
         + " on its four GPU seeds")
    assert min(1 / math.comb(5, k) for k in range(1, 5)) == pytest.approx(0.1)  # the most even split, 3 v 2


# -- the verdicts the method changes changed -----------------------------------------------------------------------
def test_the_verdicts_the_two_families_changed():
    """The 'now' column; 'before' is the one family of before 2026-11-27, which no report computes any more."""
    rows = table_after(REPORTS, "## Verdicts changed by the two verdict families")
    assert len(rows) == 6
    for experiment, key, variant, _, now in rows:
        c = task(experiment, key).comparisons[variant]
        word = verdict_class(c)
        assert now.startswith(word)
        tost = [float(x) for x in re.findall(r"TOST (\d\.\d{3})", now)]
        plain = [float(x) for x in re.findall(r"(?<!TOST )(\d\.\d{3})", now)]
        if word == "equivalent":  # its one p is the TOST's
            tost, plain = plain, []
        assert plain in ([], [round(c.result.p_adjusted, 3)]), now
        assert tost in ([], [round(c.equivalence.p_adjusted, 3)]) and plain + tost, now


def test_the_verdicts_the_statistics_fixes_changed():
    """The rows whose 'now' is still today's: the ablations rows changed again on 2026-11-27 (the table above)."""
    rows = {(row[0], row[1], row[2]): row[4] for row in
            table_after(REPORTS, "## Verdicts changed by the statistics fixes")}
    assert len(rows) == 10
    budget = task("budget-pilot", "multi30k-de-en").comparisons["baseline-16000"]
    assert rows[("budget-pilot", "multi30k-de-en", "baseline-16000 (3 seeds) against baseline-8000 (5)")] == \
        "undecided" == verdict_class(budget)
    assert (budget.result.n_variant, budget.result.n_baseline, math.comb(8, 3)) == (3, 5, 56)  # "(56 splits)"
    wmt = task("budget-pilot-wmt", "wmt10k-en-de")
    assert rows[("budget-pilot-wmt", "wmt10k-en-de", "baseline-12000")] == "no verdict"
    assert wmt.below_floor and not wmt.comparisons
    said(REPORTS, "the task's baseline (19.59 chrF) does not clear its floor: copying the source scores 21.44")
    said(REPORTS, "a task whose baseline does not clear its floor gets no verdicts.")
    assert "(19.59 over 3 trained seeds)" in wmt.below_floor and "(21.44)" in wmt.below_floor
    for (name, key, variant), word in (("five-writeups", "reverse", "writeup-003"), "undecided"), \
            (("five-writeups", "reverse", "writeup-004"), "equivalent within ±5"), \
            (("stability", "copy-w0-lr3e-3", "post-norm"), "undecided"), \
            (("stability", "copy-w200-lr3e-3", "post-norm"), "equivalent within ±5"):
        c = task(name, key).comparisons[variant]
        assert rows[(name, key, variant)] == word and word.startswith(verdict_class(c)), (name, key, variant)
    said(REPORTS, "the difference's adjusted p is above alpha, its adjusted TOST below")
    c = task("five-writeups", "reverse").comparisons["writeup-004"]
    assert c.result.p_adjusted > 0.05 > c.equivalence.p_adjusted
    finding = "finding: 000's shared starting weights cost nothing (writeup-000-as-written against writeup-000)"
    (check,) = [ch for ch in report("five-writeups").checks
                if ch.task == "reverse" and ch.finding.variant == "writeup-000-as-written"]
    assert rows[("five-writeups", "reverse", finding)] == f"inconclusive ({effect_text(check.comparison)})"
    assert check.outcome == "inconclusive"
    said(REPORTS, "The budget pilot's 16000-step arm is therefore no longer \"better\" than 8000 steps on its own 3 "
                  "seeds. What stands is that 4000 steps are not the plateau (the 4000 → 8000 step, +2.54 [+1.91, "
                  "+3.17], is still **better**); whether 8000 steps are is undecided.")
    assert verdict_class(task("budget-pilot", "multi30k-de-en").comparisons["baseline-16000"]) == "undecided"
    step = task("budget-pilot", "multi30k-de-en").comparisons["baseline"].result  # 4000 against 8000
    assert f"{signed(-step.difference)} [{signed(-step.ci_high)}, {signed(-step.ci_low)}]" == "+2.54 [+1.91, +3.17]"
    assert step.verdict == "worse" and values("budget-pilot", "multi30k-de-en", "baseline").size == 5
