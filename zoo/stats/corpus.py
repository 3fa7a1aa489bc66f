"""Corpus metrics (BLEU, chrF) compared over seeds AND test sentences.

A corpus metric of one run is computed from summed per-sentence sufficient statistics (sacreBLEU's
n-gram matches and totals; see zoo/metrics.py), so it varies for two reasons: the seed (which
model training produced) and the test set (which sentences happened to be drawn). A difference
between two variants should survive both (Clark et al. 2011; Bouthillier et al. 2021):

    difference     mean over the variant's seeds of its corpus score − the same for the baseline
    se_seeds       Welch's standard error of that difference over the per-seed corpus scores
    se_sentences   the test-set standard error: sd of the difference over R paired bootstrap
                   resamples of the test sentences (Koehn 2004), seeds held fixed; one shared index
                   draw per resample for every system, since all decode the same test set
    within         the sentence noise each arm's per-seed scores already carry: the bootstrap variance of
                   each seed's score about its arm's mean (shared test-set difficulty and sentence x
                   variant interaction cancel there), averaged over seeds, x n/(n − 1), / n
    se             sqrt(se_seeds² + max(0, se_sentences² − within_b − within_v)): the seed variance, plus
                   the test-set variance beyond what the per-seed scores already carry (counting it twice
                   made the test conservative: 0.31-0.33 BLEU of sentence noise per seed on Multi30k,
                   against a seed sd of 0.27-0.42)
    df             Welch's df of the seed part (no part of se is known exactly)
    ci, p_value    difference ± t(1 − alpha/2, df) · se; two-sided t p-value; with unequal seed counts
                   the larger of it and the exact permutation p over the per-seed corpus scores (as the
                   per-seed path does): bimodal stall-or-succeed scores in 3 v 10 seeds fooled Welch
    se_two_level   sd of the two-level bootstrap (seeds resampled within each arm, then sentences,
                   scores from the resampled statistics, averaged over the resampled seeds) — shown
                   for transparency, not used for the test (below)
    test_set_only  the sentence-only paired bootstrap ("test-set variation only"): percentile
                   interval and Koehn's sign-count p; it says whether the difference would survive
                   another test set from the same source, NOT another set of seeds

Why not the two-level bootstrap's own percentile interval: resampling n seeds with replacement
shrinks the seed variance by (n − 1)/n (20% at n = 5) and a normal/percentile interval ignores that
the seed variance is estimated from 5 numbers (t with ~8 df vs z: 2.31 vs 1.96), so it is
anti-conservative. A bootstrap-t is unstable at n = 5 (resamples of 5 seeds often repeat one seed,
so their standard errors collapse). The combination above keeps Welch's unbiased seed variance and
its t quantile and adds the test-set variance. It is conservative when the systems do not interact
with sentences: the per-seed corpus scores already carry some per-sentence decoding noise that the
sentence bootstrap counts again. Simulated (tests/test_corpus.py model: per-sentence binomial
accuracy, 200 sentences, 200 resamples, 5 v 5 seeds, 300 experiments per row, alpha 0.05):

    rejection rate (400 experiments a row)      combined   before the fix   sentence-only
    null, seed spread dominates                 0.03       0.02             0.47
    null, small seed spread                     0.02       0.02             0.09
    null, variant better on some sentences and  0.03       0.03             0.07
      worse on others (zero mean over the population of sentences)
    real effect (small seed spread, effect 0.1) 0.75       0.68             0.94

("before the fix": the sentence variance counted twice, with the bootstrap part's df taken as exact.
Welch over seeds alone rejects 0.19 of null experiments with the interaction.) The null rates of every
design a report allows, unequal arms and stall-or-succeed seeds included, are checked in
tests/test_calibration.py.

So the sentence-only bootstrap, today's BLEU test, is no test of a variant: it calls seed noise an
effect in up to half of null experiments. Welch over seeds alone is valid for "this test set" but not
for the task; the combination is valid for both at a modest cost in power.

Speed: the sentence statistics of all seeds of both arms are stacked, (R, N) resample counts @ (N, S·K)
gives every resampled system in one product; the score function then runs on R·S rows (BLEU from
sacreBLEU's `_compute_score_from_stats` takes ~7 µs a row: 1000 resamples × 10 seeds ≈ 0.1 s). A
`vectorised=True` score takes an (M, K) array and returns M scores.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

from zoo.stats import ALPHA, FEW
from zoo.stats.noise import seed_sentence_variance
from zoo.stats.resample import BOOTSTRAP_SEED, RESAMPLES, resample_counts
from zoo.stats.seeds import Difference, verdict
from zoo.stats.tost import Equivalence, tost_from
from zoo.stats.welch import MIN_SEEDS, permutation_p

TEST_SET_ONLY = "test-set variation only"
SEEDS_AND_SENTENCES = "Welch over seeds + sentence bootstrap"
SEEDS_AND_SENTENCES_PERMUTATION = "Welch over seeds + sentence bootstrap, permutation-checked"


@dataclass(frozen=True)
class SentenceBootstrap:
    """Paired bootstrap over test sentences, seeds held fixed: test-set variation only."""

    difference: float
    ci_low: float  # percentile interval of the resampled differences
    ci_high: float
    p_value: float  # Koehn's sign count: min(1, 2 (k + 1) / (R + 1))
    se: float
    label: str = TEST_SET_ONLY


@dataclass(frozen=True)
class CorpusComparison(Difference):
    """Variant against baseline on a corpus metric, over seeds and sentences (see the module docstring)."""

    baseline_scores: tuple[float, ...]  # per-seed corpus scores
    variant_scores: tuple[float, ...]
    sentences: int
    resamples: int
    se_seeds: float
    se_sentences: float
    se_within: float  # the sentence noise the per-seed scores already carry (not counted twice)
    se_two_level: float
    method: str
    test_set_only: SentenceBootstrap


def _scores(score: Callable, rows: np.ndarray, vectorised: bool) -> np.ndarray:
    flat = rows.reshape(-1, rows.shape[-1])
    out = np.asarray(score(flat), dtype=float) if vectorised else np.array([score(r) for r in flat], dtype=float)
    return out.reshape(rows.shape[:-1])


def resampled_scores(systems: Sequence[np.ndarray], score: Callable, counts: np.ndarray,
                     vectorised: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Corpus scores of each system on the full test set (S,) and on each resample (R, S).
    `systems`: S arrays (N, K) of per-sentence statistics; `counts`: (R, N) from stats.resample_counts."""
    stacked = np.stack([np.asarray(s, dtype=float) for s in systems], axis=1)  # (N, S, K)
    n, s, k = stacked.shape
    full = _scores(score, stacked.sum(0), vectorised)
    resampled = _scores(score, (counts @ stacked.reshape(n, s * k)).reshape(-1, s, k), vectorised)
    return full, resampled


def _check(baseline: Sequence[np.ndarray], variant: Sequence[np.ndarray]) -> int:
    sizes = {np.shape(s)[0] for s in [*baseline, *variant]}
    if len(sizes) > 1:
        raise ValueError(f"corpus comparison: every system must be scored on the same sentences, got {sorted(sizes)}")
    return sizes.pop() if sizes else 0


def _sentence_only(d: float, boot: np.ndarray, alpha: float) -> SentenceBootstrap:
    low, high = np.quantile(boot, [alpha / 2, 1 - alpha / 2])
    if d == 0:
        p = 1.0
    else:
        against = int(np.sum(boot <= 0)) if d > 0 else int(np.sum(boot >= 0))
        p = min(1.0, 2 * (against + 1) / (len(boot) + 1))
    return SentenceBootstrap(d, float(low), float(high), p, float(boot.std(ddof=1)))


def sentence_bootstrap(baseline: Sequence[np.ndarray], variant: Sequence[np.ndarray], score: Callable, *,
                       vectorised: bool = False, alpha: float = ALPHA, resamples: int = RESAMPLES,
                       seed: int = BOOTSTRAP_SEED) -> SentenceBootstrap:
    """Paired bootstrap over sentences of mean-over-seeds corpus scores (test-set variation only)."""
    sentences = _check(baseline, variant)
    if not (baseline and variant and sentences):
        return SentenceBootstrap(math.nan, math.nan, math.nan, math.nan, math.nan)
    full, boot = resampled_scores([*baseline, *variant], score, resample_counts(sentences, resamples, seed),
                                  vectorised)
    n_b = len(baseline)
    d = float(full[n_b:].mean() - full[:n_b].mean())
    return _sentence_only(d, boot[:, n_b:].mean(1) - boot[:, :n_b].mean(1), alpha)


def compare_corpus(baseline: Sequence[np.ndarray], variant: Sequence[np.ndarray], score: Callable, *,
                   higher_is_better: bool = True, vectorised: bool = False, alpha: float = ALPHA,
                   resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED,
                   min_seeds: int = MIN_SEEDS) -> CorpusComparison:
    """Compare a corpus metric over seeds and test sentences. `baseline`/`variant`: one (N, K) array of
    per-sentence statistics per seed (same N sentences everywhere); `score`: statistics summed over
    sentences (K,) -> corpus score, e.g. `lambda s: BLEU()._compute_score_from_stats(s).score`."""
    sentences = _check(baseline, variant)
    n_b, n_v = len(baseline), len(variant)
    if not (n_b and n_v and sentences):
        raise ValueError(f"corpus comparison needs sentences and seeds on both sides (got {n_b}, {n_v} seeds, "
                         f"{sentences} sentences)")
    full, boot = resampled_scores([*baseline, *variant], score, resample_counts(sentences, resamples, seed),
                                  vectorised)
    y_b, y_v = full[:n_b], full[n_b:]
    d = float(y_v.mean() - y_b.mean())
    sentence_diffs = boot[:, n_b:].mean(1) - boot[:, :n_b].mean(1)
    only = _sentence_only(d, sentence_diffs, alpha)
    rng = np.random.default_rng(seed + 1)
    rows = np.arange(resamples)[:, None]
    two_level = (boot[:, n_b:][rows, rng.integers(0, n_v, (resamples, n_v))].mean(1)
                 - boot[:, :n_b][rows, rng.integers(0, n_b, (resamples, n_b))].mean(1))
    common = {"baseline_scores": tuple(y_b.tolist()), "variant_scores": tuple(y_v.tolist()),
              "higher_is_better": higher_is_better, "alpha": alpha, "n_baseline": n_b, "n_variant": n_v,
              "sentences": sentences, "resamples": resamples, "baseline_mean": float(y_b.mean()),
              "variant_mean": float(y_v.mean()), "difference": d, "se_sentences": only.se,
              "se_two_level": float(two_level.std(ddof=1)), "method": SEEDS_AND_SENTENCES, "test_set_only": only}
    if min(n_b, n_v) < max(min_seeds, 2):
        nan = math.nan
        return CorpusComparison(**common, ci_low=nan, ci_high=nan, se=nan, se_seeds=nan, se_within=nan, df=nan,
                                p_value=nan, p_adjusted=nan, verdict=FEW)
    v_b, v_v, within, se, df = _seed_and_sentence_variance(y_b, y_v, boot, only.se)
    method = SEEDS_AND_SENTENCES
    if se == 0:
        p, half = (1.0 if d == 0 else 0.0), 0.0
    else:
        p = float(2 * scipy_stats.t.sf(abs(d) / se, df))
        half = float(scipy_stats.t.ppf(1 - alpha / 2, df)) * se
    if n_b != n_v:  # unequal arms: Welch alone is not to be trusted with stall-or-succeed outcomes
        p, method = max(p, float(permutation_p(y_b, y_v))), SEEDS_AND_SENTENCES_PERMUTATION
    return CorpusComparison(**{**common, "method": method}, ci_low=d - half, ci_high=d + half, se=se,
                            se_seeds=math.sqrt(v_b + v_v), se_within=math.sqrt(within), df=df, p_value=p,
                            p_adjusted=p, verdict=verdict(d, p, higher_is_better, alpha))


def _seed_and_sentence_variance(y_b: np.ndarray, y_v: np.ndarray, boot: np.ndarray, sentence_se: float
                                ) -> tuple[float, float, float, float, float]:
    """(baseline's and variant's seed variance of the mean, the sentence variance their seeds carry within
    themselves, the difference's standard error, its Welch df) for `compare_corpus`: Welch over the per-seed scores
    `y_b` and `y_v`, plus the paired test-set variance (`sentence_se` squared) beyond what `boot`'s (resamples,
    seeds) scores show each arm's seeds already carry."""
    n_b, n_v = len(y_b), len(y_v)
    v_b, v_v = y_b.var(ddof=1) / n_b, y_v.var(ddof=1) / n_v
    # Each seed's corpus score already carries its own sentence noise, which the seed variance counts: add
    # the paired test-set variance only beyond what each arm's seeds carry within themselves (their mean
    # bootstrap variance / n), and never go below Welch's seed variance.
    within = seed_sentence_variance(boot[:, :n_b]) / n_b + seed_sentence_variance(boot[:, n_b:]) / n_v
    sentence_part = max(0.0, sentence_se ** 2 - within)
    variance = v_b + v_v + sentence_part
    seed_part = v_b ** 2 / (n_b - 1) + v_v ** 2 / (n_v - 1)
    df = float((v_b + v_v) ** 2 / seed_part) if seed_part > 0 else math.inf  # Welch's df: no part is exact
    return v_b, v_v, within, math.sqrt(variance), df


def contrast_term(arms: Sequence[Sequence[np.ndarray]], signs: Sequence[float], score: Callable, *,
                  vectorised: bool = False, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED) -> float:
    """The test-set variance of a contrast Σ sign_g · (mean corpus score of arm g) over arms scored on ONE test set
    (the same sentences, in order), beyond the sentence noise their per-seed scores already carry: compare_corpus's
    `sentence_part` for any contrast. A transfer's interaction Δ_B − Δ_A is the signs (+1, −1, −1, +1) over
    (variant on B, baseline on B, variant on A, baseline on A): one paired bootstrap over the sentences for all
    four arms, so a sentence that favours the variant on both tasks cancels in it as it does in the truth.
    `arms`: per arm one (N, K) array of per-sentence statistics per seed. NaN where an arm has fewer than 2 seeds
    (its own sentence noise cannot be told from what its seeds share)."""
    systems = [stats for arm in arms for stats in arm]
    sentences = _check(systems, [])
    if min(map(len, arms)) < 2 or not sentences:
        return math.nan
    _, boot = resampled_scores(systems, score, resample_counts(sentences, resamples, seed), vectorised)  # (R, S)
    edges = np.cumsum([0, *map(len, arms)])
    parts = [boot[:, start:end] for start, end in zip(edges, edges[1:])]  # per arm (R, n_g)
    contrast = sum(sign * part.mean(1) for sign, part in zip(signs, parts))  # (R,)
    within = sum(sign ** 2 * seed_sentence_variance(part) / part.shape[1] for sign, part in zip(signs, parts))
    return max(0.0, float(contrast.var(ddof=1)) - within)


def corpus_tost(comparison: CorpusComparison, margin: float) -> Equivalence:
    """TOST (Schuirmann 1987) on the combined seed + sentence standard error and its df."""
    return tost_from(comparison.difference, comparison.se, comparison.df, margin, comparison.alpha,
                     comparison.n_baseline, comparison.n_variant)
