"""reports/README's table of folders, recomputed from the records: each study's runs, where they trained, and its
state (the rule and the layout: tests/test_claims.py)."""

from __future__ import annotations

import re

from claims import (
    REPORTS,
    ROOT,
    effect_text,
    experiment,
    records,
    report,
    results,
    said,
    signed,
    table_after,
    task,
    training_round,
    verdicts,
)

from zoo.report.tables import verdict_class


def _states() -> dict[str, str]:
    return {row[0]: row[2] for row in table_after(REPORTS, "| folder | what it is | state |")}


def _on(name: str, key: str, device: str) -> set[int]:
    """The seeds of a task a device trained (every arm's)."""
    frame = results(name)
    rows = frame[(frame.task == key) & frame.device.astype(str).str.startswith(device)]
    return set(rows.seed)


ENDED = ("complete", "stalled")  # a run trained to its end, whether or not it cleared its task's floor


def test_the_folders_table_counts_the_runs_and_where_they_trained():
    states = _states()
    counted = {"quickstart": 15, "stability": 108, "stability-depth": 56, "ablations": 280, "synthetic-pilot": 14,
               "five-writeups": 120, "transfer": 90, "floor-pilot-wmt": 2, "writeup-000-diagnosis": 25,
               "fast-path": 10, "lr-pilot": 4, "lr-check": 24}
    for name, runs in counted.items():
        frame = results(name)
        assert len(frame) == runs and frame.status.isin(ENDED).all(), name
        assert re.match(rf"complete \({runs} (runs|cells)\b", states[f"`{name}/`"]), name
    assert states["`quickstart-seeds-5-9/`, `quickstart-seeds-10-14/`"].startswith("complete (15 runs each)")
    assert all(len(results(name)) == 15 and results(name).status.isin(ENDED).all()
               for name in ("quickstart-seeds-5-9", "quickstart-seeds-10-14"))
    for name, planned, done in (("budget-pilot", 15, 13), ("budget-pilot-wmt", 10, 6)):
        frame = results(name)
        assert states[f"`{name}/`"].startswith(f"{done} of {planned} runs")
        assert len(frame) == planned and frame.status.isin(ENDED).sum() == done
    missing = results("budget-pilot")[~results("budget-pilot").status.isin(ENDED)]
    assert set(missing.variant) == {"baseline-16000"} and set(missing.seed) == {3, 4}  # "16000 steps: seeds 0–2"
    wmt = results("budget-pilot-wmt")
    assert set(wmt[wmt.status.isin(ENDED)].seed) == {0, 1, 2}  # "seeds 0–2 of each"

    said(REPORTS, "12 one-factor ablations from paper-base and a placebo; reverse, Multi30k de-en and en-de, each "
                  "translation task at 4000 steps, and reverse with 8-24 symbols at 1500 steps")
    assert len(experiment("ablations").config.variants) == 14  # the baseline, 12 factors, the placebo
    said(REPORTS, "en-de seeds 0, 1, 3, 4 and `reverse-long` seeds 0–1 trained on a GPU, the rest on the CPU")
    assert _on("ablations", "multi30k-en-de", "cuda") == {0, 1, 3, 4} and _on("ablations", "reverse-long", "cuda") \
        == {0, 1}
    assert _on("ablations", "multi30k-en-de", "cpu") == {2} and _on("ablations", "reverse-long", "cpu") == {2, 3, 4}
    assert _on("ablations", "reverse", "cuda") == _on("ablations", "multi30k-de-en", "cuda") == set()
    said(REPORTS, "reverse is at ceiling for every arm, so the synthetic verdicts come from `reverse-long`, where "
                  "the baseline is below ceiling (88.8%)")
    frame = results("ablations")
    means = frame.groupby(["task", "variant"]).exact_match.mean()
    assert means["reverse"].min() > 96 and f"{means['reverse-long']['baseline']:.1f}" == "88.8"
    said(REPORTS, "complete (120 runs; Multi30k seeds 0–2 of every arm on a GPU, 3–4 on the CPU)")
    assert _on("five-writeups", "multi30k-de-en", "cuda") == {0, 1, 2}
    assert _on("five-writeups", "multi30k-de-en", "cpu") == {3, 4}
    said(REPORTS, "7 factors of the ablations and the Conv1d placebo (8 arms)")
    said(REPORTS, "complete (90 cells: the 45 4000-step cells copied from `ablations/`, the 8000-step baseline from "
                  "`budget-pilot/`, and 40 new 8000-step runs, declared before them)")
    copied = [r["provenance"].get("copied_from", "").split("/")[0] for r in records("transfer")]
    assert (copied.count("ablations"), copied.count("budget-pilot"), copied.count("")) == (45, 5, 40)
    assert len(experiment("transfer").config.variants) == 9  # the baseline and 8 arms
    assert min(r["provenance"]["finished"] for r in records("transfer") if "copied_from" not in r["provenance"]) \
        > "2026-11-25"  # after the header's declaration of 2026-11-25
    said(REPORTS, "complete (10 runs, CPU)")
    assert (results("fast-path").device == "cpu").all()
    said(REPORTS, "as a placebo on the ablations' `reverse-long` baseline, 5 v 5 seeds, declared before its runs")
    assert results("fast-path").groupby("variant").seed.nunique().tolist() == [5, 5]
    assert "# Declared before any of its runs" in (ROOT / "experiments" / "fast-path.toml").read_text()
    said(REPORTS, f"Every study is finished but `resolved/`, whose {training_round('resolved')} round is training "
                  "(tests/test_claims_resolution.py), and the width study, declared and waiting for a GPU "
                  "(tests/test_width_declaration.py); the two budget pilots stopped at 13 of 15 and 6 of 10 runs, as "
                  "their headers declare (the table at the top).")
    declared = {row for row, state in states.items() if state.startswith("declared, waits for a GPU: no records yet")}
    assert declared == {"`width/`, `width-64/`, `width-lr/`"}
    assert all(state.startswith(("complete", "13 of 15", "6 of 10")) for name, state in states.items()
               if name != "`resolved/`" and name not in declared)
    folders = {row: {name.strip("`/") for name in row.split(", ")} for row in states}
    for row in declared:  # a declared study has its experiment files and no records
        for name in folders[row]:
            assert (ROOT / "experiments" / f"{name}.toml").exists()
            assert not (ROOT / "reports" / name / "records").exists()
    named = {name for row in states if row not in declared for name in folders[row]}
    assert named == {folder.name for folder in (ROOT / "reports").iterdir() if (folder / "records").is_dir()}


def test_the_folders_table_on_the_scale_study_and_its_pilot():
    states = _states()
    pilot = results("scale-pilot").set_index("variant")
    assert states["`scale-pilot/`"].startswith("complete (3 runs, descriptive): 192.40, 177.19 and 126.98 s")
    assert pilot.status.isin(ENDED).all() and [f"{pilot.train_seconds[v]:.2f}" for v in (
        "reference", "fast", "fast-attention")] == ["192.40", "177.19", "126.98"]
    assert set(pilot.steps) == {200} and experiment("scale-pilot").config.seeds == [0]
    said(REPORTS, "the baseline, the Conv1d placebo, six of the ablations' factors, a parameter-matched tied model and "
                  'the "What to use" recipe (10 arms) at d_model 256, 3+3 layers, on Multi30k de-en at 3000 steps, '
                  "beam 4, 5 seeds")
    scale = experiment("scale")
    assert len(scale.config.variants) == 10 and scale.config.seeds == [0, 1, 2, 3, 4]
    assert [(t.key, t.train["steps"]) for t in scale.config.tasks] == [("multi30k-de-en", 3000)]
    assert scale.config.decode.beam == 4
    assert (scale.specs["baseline"].d_model, scale.specs["baseline"].encoder_layers,
            scale.specs["baseline"].decoder_layers) == (256, 3, 3)
    found = {(r["cell"]["variant"], r["cell"]["seed"]): r["summary"]["device"] for r in records("scale")}
    assert states["`scale/`"] == (
        "complete (50 runs; seed 0 on the CPU, seeds 1–4 on a GPU): two of seven effects change significantly from "
        "d_model 64 (untied embeddings' gain and source–target sharing's estimate gone); rotary is still better and "
        "removing label smoothing worse, their changes not significant; rotary with SwiGLU ends 1.10 BLEU behind "
        "rotary alone")
    arms = [v.label for v in scale.config.variants]
    factors = set(arms) - {"baseline", "conv1d-ffn", "tied-wide", "recipe"}
    assert len(factors) == 6 and factors <= {v.label for v in experiment("ablations").config.variants}
    assert set(found) == {(v, s) for v in arms for s in range(5)} and (results("scale").status == "complete").all()
    assert {s for (_, s), d in found.items() if d == "cpu"} == {0}
    assert {s for (_, s), d in found.items() if d.startswith("cuda")} == {1, 2, 3, 4}
    (move,) = report("scale").transfers  # the numbers: tests/test_claims_scale.py
    assert {v for v, i in move.rows.items() if i.verdict == "changes"} == {"sharing-none", "sharing-src-tgt"}
    assert len(move.rows) == 7
    wide = {v: verdict_class(move.second.comparisons[v]) for v in ("rotary", "no-label-smoothing")}
    assert wide == {"rotary": "better", "no-label-smoothing": "worse"}


def _budget_step(c) -> str:
    """The budget pilot's comparisons read from the longer budget's side: 4000 against 8000 is 8000's gain."""
    r = c.result
    return f"{signed(-r.difference)} [{signed(-r.ci_high)}, {signed(-r.ci_low)}]"


def test_the_folders_table_gives_each_pilots_answer():
    said(REPORTS, "complete (14 runs in two declared rounds, descriptive): only reverse with 8-24 symbols at 1500 "
                  "steps (88.8, 86.8)")
    pilot = results("synthetic-pilot")
    in_band = pilot.groupby("task").exact_match.agg(lambda x: bool(((x >= 60) & (x <= 90)).all()))
    assert list(in_band[in_band].index) == ["reverse-long-1500"]
    assert list(pilot[pilot.task == "reverse-long-1500"].sort_values("seed").exact_match) == [88.8, 86.8]
    said(REPORTS, "can the WMT sample's baseline clear the copy-the-source floor (21.44 chrF) at an affordable "
                  "budget? | complete (2 runs, descriptive): no (18.90 and 18.97 chrF with smaller vocabularies)")
    for key, chrf in (("wmt10k-en-de-bpe2000", "18.90"), ("wmt10k-en-de-bpe1000", "18.97")):
        analysis = task("floor-pilot-wmt", key)
        assert analysis.below_floor and f"{analysis.floors['copy-source']:.2f}" == "21.44"
        assert f"{results('floor-pilot-wmt').set_index('task').chrf[key]:.2f}" == chrf
        assert analysis.task.options["vocab_size"] < task("budget-pilot-wmt", "wmt10k-en-de").task.options["vocab_size"]
    said(REPORTS, "complete (15 runs each): the same verdicts as seeds 0–4")
    first = task("quickstart", "copy")
    for name in ("quickstart-seeds-5-9", "quickstart-seeds-10-14"):
        other = task(name, "copy")
        assert verdicts(name, "copy") == verdicts("quickstart", "copy")
        assert other.failure_adjusted["post-norm"] < 0.05 and first.failure_adjusted["post-norm"] < 0.05
    said(REPORTS, "8000 add +2.54 [+1.91, +3.17] BLEU to 4000 (better); 16000 add +1.78 [−0.19, +3.74] to 8000 "
                  "(undecided on 3 seeds), so 4000 steps are not the plateau, and whether 8000 are is undecided")
    budget = task("budget-pilot", "multi30k-de-en").comparisons
    assert _budget_step(budget["baseline"]) == "+2.54 [+1.91, +3.17]" and verdict_class(budget["baseline"]) == "worse"
    assert effect_text(budget["baseline-16000"]) == "+1.78 [−0.19, +3.74]"
    assert verdict_class(budget["baseline-16000"]) == "undecided" and budget["baseline-16000"].result.n_variant == 3
    said(REPORTS, "12000 steps end at 23.75 against 19.59 chrF (+4.16), so no; the report gives no verdict, since "
                  "the baseline is below what copying the source scores (21.44)")
    wmt = task("budget-pilot-wmt", "wmt10k-en-de")
    chrf = results("budget-pilot-wmt").groupby("variant").chrf.mean()
    assert (f"{chrf['baseline-12000']:.2f}", f"{chrf['baseline']:.2f}") == ("23.75", "19.59")
    assert f"{chrf['baseline-12000'] - chrf['baseline']:+.2f}" == "+4.16"
    assert wmt.below_floor and not wmt.comparisons and f"{wmt.floors['copy-source']:.2f}" == "21.44"
    said(REPORTS, "complete (10 runs, CPU): −0.28 [−2.77, +2.21] exact-match points, **equivalent** within ±5")
    fast = task("fast-path", "reverse-long").comparisons["fast"]
    assert effect_text(fast) == "−0.28 [−2.77, +2.21]" and verdict_class(fast) == "equivalent"
    assert fast.equivalence.margin == 5
    said(REPORTS, "complete (4 runs, seed 0, descriptive): no, 2e-3 ends highest")
    lr = results("lr-pilot").set_index("variant").bleu
    assert lr.idxmax() == "baseline" and set(results("lr-pilot").seed) == {0}
