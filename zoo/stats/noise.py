"""Where a corpus metric's noise comes from, and whether more seeds or more test sentences would shrink it.

A seed's corpus score (BLEU from per-sentence statistics summed over N test sentences) varies over the seeds
of one arm for two reasons, and a comparison of two arms has a third:

    model            different seeds train different models: var σ_m², the same at any test-set size
    seed x sentence  each model's score carries its own sentence noise (which sentences happen to suit that
                     model): var σ_e²/N, halved by a test set twice as large
    test-set term    T, the comparison's sentence x variant interaction: the variance of the difference of
                     the arm means over which sentences were drawn, beyond what the per-seed scores already
                     carry (zoo/stats/corpus.py: se_sentences² − se_within²); T = σ_b²/N

Over the n seeds of an arm, on one test set, score_s = μ + m_s + ε_s (the test set's shared difficulty is in
μ), so the sample variance of the scores estimates total = σ_m² + σ_e²/N. The seed x sentence part comes from
the paired bootstrap over sentences (one shared index draw for every seed): in B[r, s] − mean_s B[r, s] what
the seeds share cancels, its variance over resamples is σ_e²/N · (n − 1)/n, hence the factor n/(n − 1)
(`seed_sentence_variance`, which zoo/stats/corpus.py also uses for its `within`). model = total − that.

Why: zoo/stats/power.py counts seeds with T held fixed (its Design.extra), but T and the seed x sentence part
shrink with a larger test set, and whether more seeds or more sentences would do more needs the parts apart.
With k times the sentences and n_b, n_v seeds the difference of arm means has variance

    V(n_b, n_v, k) = (σ_m,b² + σ_e,b²/(kN))/n_b + (σ_m,v² + σ_e,v²/(kN))/n_v + T/k

and no number of seeds detects a difference below (z_{1−level/2} + z_power)·sqrt(T/k) (normal quantiles:
with infinitely many seeds the df is infinite). Doubling the seeds against doubling the test set:

    V(2n, 2n, 1) − V(n, n, 2) = T/2 − (σ_m,b² + σ_m,v²)/(2n)

(the seed x sentence part halves either way), so more seeds buy more iff (σ_m,b² + σ_m,v²)/n > T.

The detectable differences here use normal quantiles: optimistic at a few seeds (power.py simulates Welch's
test, the one the verdicts use, for that reason), and blind to the df that doubling the seeds also buys, which
favours seeds a little more than V alone. They say which way to spend, not the power itself. The variances
are estimates: total from n seeds (chi-square, below), T as a difference of two bootstrap variances; treat
the answers as orders of magnitude at 5 seeds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from scipy import stats as scipy_stats

from zoo.stats import ALPHA, POWER


def seed_sentence_variance(boot: np.ndarray) -> float:
    """One arm's per-seed sentence noise σ_e²/N: the bootstrap variance of each seed's score about its arm's mean
    (what the seeds share, the test set's difficulty and any sentence x variant interaction, cancels), averaged
    over the seeds and scaled by n / (n − 1), since centring on the mean of n seeds removes 1/n of each seed's
    own noise. boot: (R, n) resampled scores of the arm's seeds. NaN below 2 seeds: one seed's own noise cannot
    be told from what all seeds share."""
    n = boot.shape[1]
    if n < 2:
        return math.nan
    return float((boot - boot.mean(1, keepdims=True)).var(0, ddof=1).mean() * n / (n - 1))


@dataclass(frozen=True)
class NoiseSplit:
    """One arm's seed variance on its test set, split into the model part and the seed x sentence part, with
    (1 − alpha) intervals. share = seed_sentence/total, clipped to [0, 1] as model is clipped at 0."""

    total: float  # sample variance of the per-seed corpus scores (ddof 1): σ_m² + σ_e²/N
    total_low: float  # chi-square interval, n − 1 df (normal seed scores)
    total_high: float
    seed_sentence: float  # σ_e²/N, from the sentence bootstrap
    model: float  # σ_m² = max(0, total − seed_sentence)
    model_low: float
    model_high: float
    share: float  # of the total that a larger test set would shrink
    share_low: float
    share_high: float
    seeds: int
    sentences: int  # N: at k·N sentences the seed x sentence part is seed_sentence/k
    alpha: float


def split_arm(full: np.ndarray, boot: np.ndarray, sentences: int, alpha: float = ALPHA) -> NoiseSplit:
    """Split an arm's seed variance. `full`: (n,) corpus scores of its n seeds on the whole test set of
    `sentences` sentences; `boot`: (R, n) their scores on R shared sentence resamples (corpus.resampled_scores).

    The intervals take seed_sentence as known: it is averaged over thousands of sentences and every seed,
    far more precise than a variance from n seeds (at 5 seeds the total's 95% chi-square interval spans a
    factor of 23; one seed's bootstrap variance from 1000 resamples is good to some 5%, the mean over seeds
    better still). So

        total   [(n − 1)s²/χ²_{1−α/2, n−1}, (n − 1)s²/χ²_{α/2, n−1}]
        model   total's interval − seed_sentence, clipped at 0
        share   seed_sentence / total's interval, clipped to [0, 1]

    The chi-square interval assumes normal seed scores: stall-or-succeed seeds (two clusters) break it."""
    full, boot = np.asarray(full, dtype=float), np.asarray(boot, dtype=float)
    n = len(full)
    if boot.ndim != 2 or boot.shape[1] != n:
        raise ValueError(f"split_arm: boot must be (resamples, {n}) for {n} seeds, got {boot.shape}")
    if n < 2:
        nan = math.nan
        return NoiseSplit(nan, nan, nan, nan, nan, nan, nan, nan, nan, nan, n, sentences, alpha)
    total = float(full.var(ddof=1))
    low = (n - 1) * total / float(scipy_stats.chi2.ppf(1 - alpha / 2, n - 1))
    high = (n - 1) * total / float(scipy_stats.chi2.ppf(alpha / 2, n - 1))
    seed_sentence = seed_sentence_variance(boot)

    def model(t: float) -> float:  # np.clip keeps a NaN (a seed without a score) where max(0, NaN) gives 0
        return float(np.clip(t - seed_sentence, 0.0, None))

    def share(t: float) -> float:
        if t == 0:
            return 1.0 if seed_sentence > 0 else math.nan
        return float(np.clip(seed_sentence / t, 0.0, 1.0))

    return NoiseSplit(total, low, high, seed_sentence, model(total), model(low), model(high),
                      share(total), share(high), share(low), n, sentences, alpha)


def sentence_term(se_sentences: float, se_within: float) -> float:
    """A comparison's test-set term T at its test set's size, from corpus.CorpusComparison's se_sentences and
    se_within: max(0, se_sentences² − se_within²), the `sentence_part` compare_corpus adds to Welch's variance."""
    return max(0.0, se_sentences ** 2 - se_within ** 2) if not math.isnan(se_within) else math.nan


def _z(level: float, power: float) -> float:
    return float(scipy_stats.norm.ppf(1 - level / 2) + scipy_stats.norm.ppf(power))


class Doubling(NamedTuple):
    """What doubling the seeds (2n each arm, same test set) and doubling the test set (n seeds, 2N sentences)
    would each let a comparison detect, and which detects the smaller difference."""

    better: str  # "seeds", "sentences" or "either"
    seeds: float  # detectable |difference| with 2n seeds per arm
    sentences: float  # detectable |difference| with n seeds and twice the sentences


@dataclass(frozen=True)
class ComparisonNoise:
    """A comparison's variance parts at its test set's size (see the module docstring), to project it."""

    model_b: float
    seed_sentence_b: float
    model_v: float
    seed_sentence_v: float
    term: float  # test-set term T at the current size

    def variance(self, n_b: int, n_v: int, scale: float = 1.0) -> float:
        """Variance of the difference of arm means with n_b, n_v seeds and a test set `scale` times as large."""
        return ((self.model_b + self.seed_sentence_b / scale) / n_b
                + (self.model_v + self.seed_sentence_v / scale) / n_v + self.term / scale)

    def floor(self, level: float = ALPHA, power: float = POWER, scale: float = 1.0) -> float:
        """The smallest |difference| detectable with any number of seeds: (z_{1−level/2} + z_power)·sqrt(T/scale)."""
        return _z(level, power) * math.sqrt(self.term / scale)

    def buys_more(self, n: int, level: float = ALPHA, power: float = POWER) -> Doubling:
        """From n seeds per arm, does doubling the seeds or doubling the test set shrink the detectable
        difference (z_{1−level/2} + z_power)·sqrt(V) more? Seeds iff (model_b + model_v)/n > term."""
        z = _z(level, power)
        seeds, sentences = z * math.sqrt(self.variance(2 * n, 2 * n)), z * math.sqrt(self.variance(n, n, 2.0))
        better = "seeds" if seeds < sentences else "sentences" if sentences < seeds else "either"
        return Doubling(better, seeds, sentences)


def comparison_noise(baseline: NoiseSplit, variant: NoiseSplit, term: float) -> ComparisonNoise:
    """The comparison of two arms split on the same test set, with its test-set term (`sentence_term`)."""
    if baseline.sentences != variant.sentences:
        raise ValueError(f"comparison_noise: the arms were split on {baseline.sentences} and {variant.sentences} "
                         "sentences; a comparison scores both on one test set")
    return ComparisonNoise(baseline.model, baseline.seed_sentence, variant.model, variant.seed_sentence, term)
