"""Error rates and power of zoo's verdict rules at the designs its studies declared, simulated at sizes CI cannot run.

    python3 benchmarks/calibration.py            # the full run; writes benchmarks/calibration.txt
    python3 benchmarks/calibration.py --quick    # a smoke run (under a minute), prints only
    python3 benchmarks/calibration.py --seed N   # other draws (the committed output is --seed 20261130)

Why: tests/test_pooled.py, tests/test_sequential.py, tests/test_inference.py and tests/test_calibration.py check the
same rules on a few hundred to a few thousand experiments, sizes that fit CI's time; here each rate has a
Monte-Carlo standard error small enough to read against its bound (alpha = 0.05: "ABOVE (> 2 se)" where the rate is
more than 2 standard errors over it, "above, within 2 se" where it is over by less). Every test statistic,
correction and decision is zoo's own function; this file only draws scores and counts outcomes. Units are BLEU at
the resolved study's expected sizes on 3,071 sentences: seed sd 0.3 (more where a spread is asked for), test-set
term sd 0.06-0.1, effects of 0.5.

How a comparison's scores are drawn. compare_corpus is too slow for thousands of experiments (a sentence bootstrap
each), so its variance model is drawn directly: a variant's per-seed score is its true mean plus the seed's noise
(sd of its arm) plus ONE test-set draw per comparison and experiment, shared by every seed of that variant (the
sentence x variant interaction of the one test set: seeds do not average it away), of variance T. compare_corpus
adds T (its `sentence_part`) to Welch's variance over seeds with Welch's df; many_to_one adds it to the pooled
variance. Both take T as known, as here. Terms of different comparisons are drawn independently, as in
tests/test_pooled.py (zoo/stats/pooled.py's docstring says why a shared part would only lower the error).
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np
from rich.progress import Progress
from scipy import stats as scipy_stats

from zoo.stats import BETTER
from zoo.stats.family import benjamini_hochberg, holm
from zoo.stats.pooled import equal_spreads, many_to_one
from zoo.stats.sequential import SequentialPlan
from zoo.stats.stopping import EQUIVALENT, Estimate, decide_ahead
from zoo.stats.welch import welch_statistics

ALPHA = 0.05  # every study here declared zoo's default level
POOL_ALPHA = 0.05  # experiments/resolved.toml: pool unless Brown-Forsythe rejects equal spreads at this level
SEED_SD = 0.3  # the resolved study's expected seed sd (BLEU); the bottom of every spread below
TERMS = np.linspace(0.06, 0.1, 13) ** 2  # test-set term variances of 13 comparisons (sd 0.06 .. 0.1)
EFFECT = 0.5  # the resolved study's margin and the size the literature reports
SEEDS = 5  # an arm, in round 1 and in the fixed designs
OUTPUT = Path(__file__).with_name("calibration.txt")
DEFAULT_SEED = 20261130
FULL = {"pooled null": 20000, "pooled power": 5000, "bh": 100000, "sequential": 10000}  # experiments a row
QUICK = {"pooled null": 1000, "pooled power": 300, "bh": 5000, "sequential": 300}


# ---- shared pieces ---------------------------------------------------------------------------------------------


def spread(ratio: float, m: int, baseline_at: str) -> tuple[float, np.ndarray]:
    """True seed variances: the m variants evenly from SEED_SD² to ratio x that (as tests/test_pooled.py spreads
    them), the baseline at the spread's bottom, middle or top, so the largest arm variance is `ratio` x the smallest."""
    low = SEED_SD ** 2
    baseline = {"bottom": low, "middle": low * (1 + ratio) / 2, "top": low * ratio}[baseline_at]
    return baseline, np.linspace(low, ratio * low, m)


def draw(rng: np.random.Generator, experiments: int, baseline_var: float, variant_vars: np.ndarray,
         terms: np.ndarray, shifts: np.ndarray, seeds: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-seed scores (module docstring): baseline (E, seeds) and variants (E, m, seeds), each variant's test-set
    draw added to all its seeds."""
    m = len(variant_vars)
    baseline = rng.normal(0, math.sqrt(baseline_var), (experiments, seeds))
    variants = (rng.normal(0, 1, (experiments, m, seeds)) * np.sqrt(variant_vars)[:, None] + shifts[:, None]
                + rng.normal(0, 1, (experiments, m, 1)) * np.sqrt(terms)[:, None])
    return baseline, variants


def welch_with_term(baseline: np.ndarray, variants: np.ndarray, terms: np.ndarray) -> tuple[np.ndarray, ...]:
    """compare_corpus's test at equal arms, vectorised: Welch's se over seeds with the term T added, Welch's df of
    the seed part, a two-sided t p (corpus.py: `variance = v_b + v_v + sentence_part`). Returns d, se, df, p."""
    d, se, df, _ = welch_statistics(baseline[..., None, :], variants)
    se = np.sqrt(se ** 2 + terms)  # (E, m): the baseline (E, 1, n) broadcast against the variants (E, m, n)
    return d, se, df, 2 * scipy_stats.t.sf(np.abs(d) / se, df)


def rate(hits: np.ndarray) -> tuple[float, float]:
    """A share and its Monte-Carlo standard error (the sd of the per-experiment values over sqrt(n))."""
    hits = np.asarray(hits, dtype=float)
    se = float(hits.std(ddof=1) / math.sqrt(len(hits))) if len(hits) > 1 else math.nan
    return float(hits.mean()), se


def show(value: tuple[float, float]) -> str:
    return f"{value[0]:.4f} ± {value[1]:.4f}"


def check(value: tuple[float, float], bound: float = ALPHA) -> str:
    r, se = value
    if r <= bound:
        return "at or below"
    return "ABOVE (> 2 se)" if r - 2 * se > bound else "above, within 2 se"


def table(title: str, header: list[str], rows: list[list[str]], notes: list[str]) -> str:
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    line = "  ".join("{:<%d}" % widths[0] if i == 0 else "{:>%d}" % w for i, w in enumerate(widths))
    out = [title, "=" * len(title), line.format(*header), "  ".join("-" * w for w in widths)]
    out += [line.format(*row) for row in rows]
    return "\n".join([*out, *notes, ""])


# ---- 1. pooled many-to-one at the resolved study's design --------------------------------------------------------

POOLED_DESIGNS = [(1.0, "middle"), (2.0, "bottom"), (2.0, "middle"), (2.0, "top"), (4.0, "bottom"),
                  (4.0, "middle"), (4.0, "top")]
SHIFTED = np.arange(13) % 2 == 1  # 6 of 13 variants, spread over the variances, shifted by +EFFECT in power rows


def pooled_experiments(rng, experiments: int, ratio: float, baseline_at: str, shifts: np.ndarray, advance):
    """Per experiment: pooled by the rule?, and rejections (E, 13) of rule + Holm, always-pooled + Holm and
    Welch + term + Holm, with the differences' signs."""
    baseline_var, variant_vars = spread(ratio, 13, baseline_at)
    baseline, variants = draw(rng, experiments, baseline_var, variant_vars, TERMS, shifts, SEEDS)
    d, _, _, welch_p = welch_with_term(baseline, variants, TERMS)
    labels = [f"v{j}" for j in range(13)]
    terms = dict(zip(labels, TERMS.tolist()))
    pooled = np.zeros(experiments, bool)
    rule, always, welch = (np.zeros((experiments, 13), bool) for _ in range(3))
    for e in range(experiments):
        p_spreads = equal_spreads([baseline[e].tolist(), *variants[e].tolist()])
        pooled[e] = not p_spreads < POOL_ALPHA  # zoo.report.pooling.pool: NaN (no arm varies) pools too
        pooled_p = [c.p_value for c in many_to_one(baseline[e], dict(zip(labels, variants[e])), terms=terms)]
        always[e] = np.array(holm(pooled_p)) < ALPHA
        welch[e] = np.array(holm(welch_p[e])) < ALPHA
        rule[e] = always[e] if pooled[e] else welch[e]
        advance()
    return pooled, rule, always, welch, d


def found(rejected: np.ndarray, d: np.ndarray) -> tuple[float, float]:
    """Power: the share of the shifted comparisons rejected in the right direction (better), per experiment."""
    return rate((rejected & (d > 0))[:, SHIFTED].mean(1))


def pooled_tables(sizes, seed, progress) -> str:
    task = progress.add_task("1 pooled many-to-one", total=len(POOLED_DESIGNS) * (sizes["pooled null"]
                                                                               + sizes["pooled power"]))
    null_rows, power_rows = [], []

    def advance():
        progress.advance(task)

    for i, (ratio, at) in enumerate(POOLED_DESIGNS):
        label = f"ratio {ratio:g}, baseline " + ("= every arm" if ratio == 1 else f"at the {at}")
        pooled, rule, always, welch, _ = pooled_experiments(np.random.default_rng([seed, 1, i, 0]),
                                                            sizes["pooled null"], ratio, at, np.zeros(13), advance)
        fwer = rate(rule.any(1))
        null_rows.append([label, f"{pooled.mean():.3f}", show(fwer), show(rate(always.any(1))),
                          show(rate(welch.any(1))), f"{ALPHA:g}", check(fwer)])
        pooled, rule, always, welch, d = pooled_experiments(np.random.default_rng([seed, 1, i, 1]),
                                                            sizes["pooled power"], ratio, at, EFFECT * SHIFTED,
                                                            advance)
        fwer = rate(rule[:, ~SHIFTED].any(1))
        power_rows.append([label, f"{pooled.mean():.3f}", show(found(rule, d)), show(found(welch, d)),
                           show(found(always, d)), show(fwer), show(rate(welch[:, ~SHIFTED].any(1))), check(fwer)])
    n0, n1 = sizes["pooled null"], sizes["pooled power"]
    spreads = (f"Seed sds from {SEED_SD} up to {SEED_SD} x sqrt(ratio) over the 13 variants; the baseline's at the "
               f"bottom, middle or top of that spread. Test-set term sd 0.06-0.1 per comparison.")
    first = table(f"1a. Pooled many-to-one, global null: 13 variants v 1 baseline, {SEEDS} seeds an arm, "
                  f"{n0} experiments a row",
                  ["design (true variance ratio)", "pooled", "FWER rule+Holm", "FWER always pooled",
                   "FWER Welch+Holm", "bound", "rule+Holm v bound"], null_rows,
                  [spreads, "rule: pooled t (many_to_one, its term added) when Brown-Forsythe (equal_spreads) gives "
                   f"p >= {POOL_ALPHA:g}, else Welch + term for every comparison; then Holm over the 13 at "
                   f"{ALPHA:g}.", "'pooled': the share of experiments the rule pooled. ± one Monte-Carlo se."])
    second = table(f"1b. Pooled many-to-one, power: 6 of the 13 variants {EFFECT:+g} BLEU, 7 at 0, {n1} "
                   "experiments a row",
                   ["design (true variance ratio)", "pooled", "power rule+Holm", "power Welch+Holm",
                    "power always pooled", "FWER of 7 nulls, rule", "FWER of 7 nulls, Welch", "rule v 0.05"],
                   power_rows, ["power: the share of the 6 shifted comparisons found better (the right direction), "
                                "on the same draws for every rule."])
    return first + "\n" + second


# ---- 2. Benjamini-Hochberg at the ablations' and the scale study's designs ----------------------------------------

BH_DESIGNS = [(1.0, "middle"), (4.0, "bottom"), (4.0, "top")]


def bh_rows(rng, experiments: int, m: int, ratio: float, baseline_at: str, shifted: bool, advance) -> list[str]:
    """FDR and power of BH, FWER and power of Holm, over one family of m Welch + term comparisons."""
    baseline_var, variant_vars = spread(ratio, m, baseline_at)
    terms = np.linspace(TERMS[0], TERMS[-1], m)
    truth = np.zeros(m)
    if shifted:  # the last floor(m/2) comparisons, alternately +EFFECT and -EFFECT
        truth[m - m // 2:] = EFFECT * np.where(np.arange(m // 2) % 2 == 0, 1.0, -1.0)
    baseline, variants = draw(rng, experiments, baseline_var, variant_vars, terms, truth, SEEDS)
    d, _, _, p = welch_with_term(baseline, variants, terms)
    null = truth == 0
    out = {}
    for name, correction in (("bh", benjamini_hochberg), ("holm", holm)):
        rejected = np.array([correction(row) for row in p]) < ALPHA
        right = rejected & ~null & (np.sign(d) == np.sign(truth))
        false = rejected & ~right  # a null rejected, or a shifted one in the wrong direction
        out[name] = (false.sum(1) / np.maximum(rejected.sum(1), 1), false.any(1),
                     right[:, ~null].mean(1) if shifted else None)
        advance(experiments / 2)
    label = f"{m}, ratio {ratio:g}" + ("" if ratio == 1 else f", baseline {baseline_at}")
    fdr, fwer = rate(out["bh"][0]), rate(out["holm"][1])
    power = ["" if out[name][2] is None else show(rate(out[name][2])) for name in ("bh", "holm")]
    return [label, f"{m - int(null.sum())} of {m}" if shifted else "none", show(fdr), check(fdr), power[0],
            show(fwer), check(fwer), power[1]]


def bh_table(sizes, seed, progress) -> str:
    n = sizes["bh"]
    task = progress.add_task("2 Benjamini-Hochberg", total=2 * len(BH_DESIGNS) * 2 * n)
    rows = [bh_rows(np.random.default_rng([seed, 2, m, i, shifted]), n, m, ratio, at, bool(shifted),
                    lambda k: progress.advance(task, k))
            for m in (13, 9) for i, (ratio, at) in enumerate(BH_DESIGNS) for shifted in (1, 0)]
    return table(f"2. Benjamini-Hochberg and Holm over one family v a shared baseline, Welch + term p, {SEEDS} seeds "
                 f"an arm, {n} experiments a row",
                 ["comparisons, true variance ratio", "shifted", "FDR of BH", "v 0.05", "power BH", "FWER Holm",
                  "v 0.05", "power Holm"], rows,
                 ["13: the ablations (12 factors + the placebo on one task); 9: the scale study. Shifted comparisons "
                  f"are ±{EFFECT:g} BLEU (alternating); the rest 0. A rejection of a null, or of a shifted",
                  "comparison in the wrong direction, is false. FDR: the mean share of false among rejections (0 "
                  "with none); FWER: any false rejection; power: the share of shifted ones found in their",
                  "direction. Seed sds and terms as in 1 (the sds over m variants)."])


# ---- 3. seeds until decided (the resolved plan) ------------------------------------------------------------------

PLAN = SequentialPlan(alpha=ALPHA, round_seeds=5, max_seeds=30)  # experiments/resolved.toml: 6 looks
TERM_SD = 0.08  # the resolved study's expected test-set term
MIX = np.array([0, 0, 0, 0, 0, 0.3, -0.3, 0.3, -0.3, 1.0, -1.0, 1.0, -1.0])


def decide(d, se, df, p, plan: SequentialPlan, margin: float = EFFECT) -> tuple[list, list, int]:
    """One experiment's seeds until decided, through zoo.stats.stopping.decide_ahead (decide_look at each look,
    the rule `zoo run --until-decided` and the report apply). d, se, df, p: (m, looks) Welch + term statistics of
    each comparison as if it ran to the cap. Returns per comparison its difference claim (look, sign) or None
    and its equivalence look or None, and the baseline's seeds (it trains while any comparison is open)."""
    m, looks = p.shape
    names = [str(i) for i in range(m)]
    estimates = [{names[i]: Estimate(d[i, k], se[i, k], df[i, k], p[i, k]) for i in range(m)} for k in range(looks)]
    decided, made = decide_ahead(plan, estimates, names, margin)
    difference, equivalent = [None] * m, [None] * m
    for i, name in enumerate(names):
        decision = decided.get(name)
        if decision is None:
            continue
        if decision.kind == EQUIVALENT:
            equivalent[i] = decision.look
        else:
            difference[i] = (decision.look, 1.0 if decision.kind == BETTER else -1.0)
            if decision.also_equivalent:
                equivalent[i] = decision.look
    return difference, equivalent, plan.seeds_at(made) if len(decided) == m else plan.max_seeds


def simulate_plan(rng, experiments: int, truth: np.ndarray, advance) -> dict[str, np.ndarray]:
    """Both designs on the same draws: seeds until decided (the resolved plan) and the fixed 30-seed design (one
    look, the same rule)."""
    m, looks = len(truth), PLAN.looks
    baseline, variants = draw(rng, experiments, SEED_SD ** 2, np.full(m, SEED_SD ** 2), np.full(m, TERM_SD ** 2),
                              truth, PLAN.max_seeds)
    at = [welch_with_term(baseline[:, :n], variants[..., :n], np.full(m, TERM_SD ** 2))
          for n in (PLAN.seeds_at(k) for k in range(1, looks + 1))]
    d, se, df, p = (np.stack([look[j] for look in at], axis=-1) for j in range(4))  # (E, m, looks)
    fixed = SequentialPlan(ALPHA, PLAN.max_seeds, PLAN.max_seeds)
    runs = ((PLAN, slice(None)), (fixed, slice(looks - 1, None)))
    out = {key: np.zeros((len(runs), experiments, m)) for key in ("right", "wrong", "equivalent", "undecided",
                                                                   "seeds")}
    out["runs"] = np.zeros((len(runs), experiments))
    for e in range(experiments):
        for s, (plan, window) in enumerate(runs):
            difference, equivalent, base = decide(d[e][:, window], se[e][:, window], df[e][:, window],
                                                  p[e][:, window], plan)
            for i in range(m):
                claim = difference[i]
                out["right"][s, e, i] = claim is not None and truth[i] != 0 and claim[1] == np.sign(truth[i])
                out["wrong"][s, e, i] = claim is not None and not out["right"][s, e, i]
                out["equivalent"][s, e, i] = equivalent[i] is not None
                out["undecided"][s, e, i] = claim is None and equivalent[i] is None
                decided = [x for x in (claim and claim[0], equivalent[i]) if x]
                out["seeds"][s, e, i] = plan.seeds_at(min(decided)) if decided else plan.max_seeds
            out["runs"][s, e] = base + out["seeds"][s, e].sum()
        advance()
    return out


def sequential_tables(sizes, seed, progress) -> str:
    n = sizes["sequential"]
    task = progress.add_task("3 seeds until decided", total=3 * n)
    truths = {"a": np.zeros(13), "b": EFFECT * np.where(np.arange(13) % 2 == 0, 1.0, -1.0), "c": MIX}
    sims = {key: simulate_plan(np.random.default_rng([seed, 3, i]), n, truth, lambda: progress.advance(task))
            for i, (key, truth) in enumerate(truths.items())}
    designs = ["sequential (5 .. 30)", "fixed 30 seeds"]
    rows = []
    for s, name in enumerate(designs):
        a, b = sims["a"], sims["b"]
        fwer, false_eq = rate(a["wrong"][s].any(1)), rate(b["equivalent"][s].any(1))
        rows.append([name, show(fwer), check(fwer), show(rate(a["equivalent"][s].mean(1))), show(false_eq),
                     check(false_eq), show(rate(b["equivalent"][s].mean(1))), show(rate(b["right"][s].mean(1)))])
    first = table(f"3a-b. Seeds until decided: 13 comparisons v a shared baseline, seed sd {SEED_SD}, term sd "
                  f"{TERM_SD}, margin ±{EFFECT:g}, {n} experiments a row",
                  ["design", "(a) FWER better/worse", "v 0.05", "(a) share equivalent", "(b) any false equivalent",
                   "v 0.05", "(b) share equivalent", "(b) share found"], rows,
                  ["(a) every true difference 0: any better/worse claim at any look is an error. (b) true "
                   f"differences ±{EFFECT:g} (alternating), on the margin: any 'equivalent' is an error.",
                   "Each look decided by zoo.stats.stopping.decide_look: better/worse by sequential Holm "
                   "(O'Brien-Fleming spending, over the 13); equivalent by TOST at the plan's one-sided",
                   "level for alpha / (comparisons not yet shown equivalent). An arm decided better or worse "
                   "whose TOST held at the same look counts as 'equivalent' too. The fixed design is the same",
                   "rule at one look with 30 seeds an arm (Holm at 0.05, TOST at 0.05/13). '(b) share found': "
                   "better/worse in the true direction."])
    c, groups = sims["c"], {"0": MIX == 0, "±0.3": np.abs(MIX) == 0.3, "±1.0": np.abs(MIX) == 1.0}
    rows = []
    for s, name in enumerate(designs):
        for g, mask in groups.items():
            rows.append([name, g, show(rate(c["right"][s][:, mask].mean(1))),
                         show(rate(c["wrong"][s][:, mask].mean(1))), show(rate(c["equivalent"][s][:, mask].mean(1))),
                         show(rate(c["undecided"][s][:, mask].mean(1))), f"{c['seeds'][s][:, mask].mean():.1f}"])
        rows.append([name, "all 13", "", "", "", show(rate(c["undecided"][s].mean(1))),
                     f"{c['seeds'][s].mean():.1f}"])
    runs = rate(c["runs"][0])
    saving = 1 - runs[0] / c["runs"][1].mean()
    second = table(f"3c. Seeds until decided, a mix: 5 comparisons at 0, 4 at ±0.3, 4 at ±1.0 BLEU, {n} experiments",
                   ["design", "true difference", "found (right way)", "better/worse wrong", "equivalent",
                    "undecided at the cap", "seeds an arm"], rows,
                   [f"Runs an experiment (14 arms, the baseline trains while any comparison is open): sequential "
                    f"{runs[0]:.1f} ± {runs[1]:.1f}, fixed {c['runs'][1].mean():.0f}; expected saving {saving:.1%}.",
                    "'better/worse wrong': a claim at a true 0, or in the wrong direction. 'undecided at the cap': "
                    "neither claim after the last look (30 seeds)."])
    return first + "\n" + second


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run at small sizes; writes nothing")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="the draws' seed (default %(default)s)")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    start = time.perf_counter()
    with Progress() as progress:
        parts = []
        for part in (pooled_tables, bh_table, sequential_tables):
            parts.append(part(sizes, args.seed, progress))
            progress.console.print(parts[-1], markup=False, highlight=False, soft_wrap=True)
    header = (f"python3 benchmarks/calibration.py --seed {args.seed}: zoo's verdict rules simulated at its studies' "
              f"designs; alpha {ALPHA:g}; rate ± one Monte-Carlo standard error.\n")
    text = "\n".join([header, *parts])
    if not args.quick:
        OUTPUT.write_text(text)
        print(f"wrote {OUTPUT}")
    print(f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
