"""Statistics of a comparison: mean ± 95% CI over seeds, Welch's t-test, and paired bootstrap BLEU.

Seeds are the unit of replication for every measure but BLEU: a run's number is one sample, and
two variants are compared with Welch's t-test (unequal variances, scipy.stats.ttest_ind with
equal_var=False), which needs at least two seeds on each side.

BLEU is a corpus-level score, so its noise is mostly which sentences happen to be in the test set;
it is compared with the paired bootstrap over test sentences (Koehn 2004, "Statistical Significance
Tests for Machine Translation Evaluation"): draw R resamples of sentence indices with replacement,
shared by both systems, compute corpus BLEU of baseline and variant on each resample, and count how
often the resampled difference fails to have the sign of the observed one. Definition used here:

    d   = BLEU(variant) - BLEU(baseline) on the full test set (each averaged over the shared seeds)
    k   = number of resamples whose difference d_r is <= 0 when d > 0 (>= 0 when d < 0)
    p   = min(1, 2 (k + 1) / (R + 1))       two-sided; the +1 keeps p > 0 with finitely many resamples
    p   = 1 when d = 0 (identical outputs cannot differ)

(sacreBLEU's own `--paired-bs` instead centres |d_r| and compares it with |d|; the sign count above
is Koehn's original formulation and does not assume the resampled differences are symmetric.)
Speed: sentence-level sufficient statistics (n-gram matches and totals, lengths) are extracted once
per run with sacreBLEU's own `BLEU._extract_corpus_statistics`, a resample is a vector of counts per
sentence, its statistics are `counts @ stats`, and `BLEU._compute_score_from_stats` turns them into
the score - the same calls sacreBLEU's significance module makes, so the BLEU is sacreBLEU's.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats as scipy_stats
from sacrebleu.metrics import BLEU

ALPHA = 0.05
RESAMPLES = 1000
BOOTSTRAP_SEED = 12345  # sacreBLEU's default seed; fixed so a report is reproducible
# Which way is better, per results column; columns not listed (e.g. parameters) are not compared.
HIGHER_IS_BETTER = {
    "bleu": True, "bleu_lowercase": True, "chrf": True, "exact_match": True, "token_accuracy": True,
    "tok_per_s": True, "valid_loss": False, "valid_nll": False, "valid_ppl": False, "test_nll": False,
    "test_ppl": False, "steps_to_threshold": False, "train_seconds": False,
}
BETTER, WORSE, SAME, FEW = "better", "worse", "no detectable difference", "not enough seeds"


@dataclass(frozen=True)
class Estimate:
    """Mean over seeds with the half-width of its 95% confidence interval (NaN with fewer than 2)."""

    mean: float
    half_width: float
    n: int


def mean_ci(values: Sequence[float], confidence: float = 0.95) -> Estimate:
    """Student-t interval: mean ± t(1 - (1 - confidence)/2, n - 1) * s / sqrt(n), s with ddof=1."""
    data = np.asarray([v for v in values if v is not None and not math.isnan(v)], dtype=float)
    n = len(data)
    if n == 0:
        return Estimate(math.nan, math.nan, 0)
    if n == 1:
        return Estimate(float(data[0]), math.nan, 1)
    t = scipy_stats.t.ppf(1 - (1 - confidence) / 2, n - 1)
    return Estimate(float(data.mean()), float(t * data.std(ddof=1) / math.sqrt(n)), n)


@dataclass(frozen=True)
class Test:
    """The outcome of comparing a variant with the baseline on one measure."""

    difference: float  # variant - baseline
    p_value: float
    verdict: str  # better | worse | no detectable difference | not enough seeds
    method: str  # "Welch t-test" | "paired bootstrap"
    n_baseline: int
    n_variant: int


def verdict(difference: float, p_value: float, higher_is_better: bool, alpha: float = ALPHA) -> str:
    """'better'/'worse' when significant at `alpha`, in the direction that is good for the measure."""
    if math.isnan(p_value) or p_value >= alpha or difference == 0:
        return SAME
    return BETTER if (difference > 0) == higher_is_better else WORSE


def welch(baseline: Sequence[float], variant: Sequence[float], higher_is_better: bool, alpha: float = ALPHA) -> Test:
    """Welch's t-test over seeds. Two constant samples with different means (no seed-to-seed spread,
    e.g. a parameter count) differ exactly: p = 0; with equal means p = 1."""
    a = [v for v in baseline if not math.isnan(v)]
    b = [v for v in variant if not math.isnan(v)]
    difference = float(np.mean(b) - np.mean(a)) if a and b else math.nan
    if len(a) < 2 or len(b) < 2:
        return Test(difference, math.nan, FEW, "Welch t-test", len(a), len(b))
    if np.var(a) == 0 and np.var(b) == 0:
        p = 1.0 if difference == 0 else 0.0
    else:
        with warnings.catch_warnings():  # one constant sample (same value every seed) is legitimate here
            warnings.filterwarnings("ignore", "Precision loss occurred", RuntimeWarning)
            p = float(scipy_stats.ttest_ind(b, a, equal_var=False).pvalue)
    return Test(difference, p, verdict(difference, p, higher_is_better, alpha), "Welch t-test", len(a), len(b))


def sentence_stats(hypotheses: Sequence[str], references: Sequence[str]) -> np.ndarray:
    """(N, 2 + 2 * max order) sacreBLEU sufficient statistics, one row per sentence."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    return np.asarray(BLEU()._extract_corpus_statistics(list(hypotheses), [list(references)]), dtype=float)


def resample_counts(sentences: int, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED) -> np.ndarray:
    """(R, N) how often each sentence is drawn in each resample (N draws with replacement)."""
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, sentences, size=(resamples, sentences))
    flat = (draws + sentences * np.arange(resamples)[:, None]).ravel()
    return np.bincount(flat, minlength=resamples * sentences).reshape(resamples, sentences).astype(float)


def _bleu_of(stats: np.ndarray) -> float:
    return BLEU()._compute_score_from_stats(stats).score


def resampled_bleu(stats: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """(R,) corpus BLEU of one system on each resample."""
    metric = BLEU()
    return np.array([metric._compute_score_from_stats(row).score for row in counts @ stats])


def paired_bootstrap(baseline: Sequence[np.ndarray], variant: Sequence[np.ndarray], *,
                     resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED, alpha: float = ALPHA) -> Test:
    """Paired bootstrap of corpus BLEU (see the module docstring). `baseline` and `variant` hold one
    `sentence_stats` array per seed (the seeds both have, in the same order); BLEU is averaged over
    seeds, on the full set and on every resample."""
    if not baseline or not variant:
        return Test(math.nan, math.nan, FEW, "paired bootstrap", len(baseline), len(variant))
    sentences = baseline[0].shape[0]
    if any(s.shape[0] != sentences for s in [*baseline, *variant]):
        raise ValueError("paired bootstrap: every system must be scored on the same sentences")
    observed = float(np.mean([_bleu_of(s.sum(0)) for s in variant]) - np.mean([_bleu_of(s.sum(0)) for s in baseline]))
    if observed == 0 or sentences == 0:
        return Test(observed, 1.0, SAME, "paired bootstrap", len(baseline), len(variant))
    counts = resample_counts(sentences, resamples, seed)
    resampled = (np.mean([resampled_bleu(s, counts) for s in variant], axis=0)
                 - np.mean([resampled_bleu(s, counts) for s in baseline], axis=0))
    against = int(np.sum(resampled <= 0)) if observed > 0 else int(np.sum(resampled >= 0))
    p = min(1.0, 2 * (against + 1) / (resamples + 1))
    return Test(observed, p, verdict(observed, p, True, alpha), "paired bootstrap", len(baseline), len(variant))
