"""zoo.stats.corpus: seed + sentence inference on simulated sentence statistics, and real sacreBLEU."""

import numpy as np
import pytest
from sacrebleu.metrics import BLEU

from zoo.data.text import TextTask
from zoo.experiment.record import sentence_statistics
from zoo.stats import FEW
from zoo.stats.corpus import TEST_SET_ONLY, compare_corpus, corpus_tost, resampled_scores, sentence_bootstrap
from zoo.stats.resample import resample_counts

ALPHA = 0.05


def sentence_stats(hypotheses, references):
    return np.asarray(sentence_statistics(TextTask.metrics, hypotheses, references)[0]["bleu"], dtype=float)


def accuracy(stats):
    """A ratio corpus metric from summed statistics (correct, total), vectorised over rows."""
    return 100 * stats[..., 0] / stats[..., 1]


def experiment(rng, n=5, sentences=200, effect=0.0, interaction=0.0, seed_sd=0.1):
    """One test set (lengths, difficulties) and n seeds per arm; per-sentence binomial correct counts.
    `interaction`: the variant is better on some sentences, worse on others (zero mean over the population)."""
    lengths, difficulty = rng.integers(5, 30, sentences), rng.normal(0.5, 1, sentences)
    gamma = rng.normal(0, interaction, sentences)

    def system(arm):
        p = 1 / (1 + np.exp(-(difficulty + rng.normal(0, seed_sd) + arm * (effect + gamma))))
        return np.stack([rng.binomial(lengths, p), lengths], 1).astype(float)

    return [system(0) for _ in range(n)], [system(1) for _ in range(n)]


def rejections(rng, experiments=300, **kw):
    combined, sentence_only = [], []
    for e in range(experiments):
        result = compare_corpus(*experiment(rng, **kw), accuracy, vectorised=True, resamples=200, seed=e)
        combined.append(result.p_value < ALPHA)
        sentence_only.append(result.test_set_only.p_value < ALPHA)
    return np.mean(combined), np.mean(sentence_only)


@pytest.mark.parametrize("kw", [{}, {"seed_sd": 0.03}, {"seed_sd": 0.03, "interaction": 0.5}])
def test_null_false_positive_rate(kw):
    combined, sentence_only = rejections(np.random.default_rng(11), **kw)
    assert combined <= ALPHA + 0.02
    if not kw:
        assert sentence_only > 0.3  # why the sentence bootstrap is only a secondary result


def test_detects_a_real_effect():
    combined, _ = rejections(np.random.default_rng(12), experiments=100, effect=0.3)
    assert combined > 0.9


def test_fields_and_real_bleu():
    hyps = ["the cat sat on the mat", "a dog barked", "hello world", "it is raining today", "good morning"]
    refs = ["the cat sat on the mat", "the dog barked", "hello there world", "it rains today", "good morning all"]
    worse = ["the cat sat", "a cat", "hello", "it is", "good"]
    base = [sentence_stats(worse, refs), sentence_stats(worse[:4] + ["morning"], refs), sentence_stats(worse, refs)]
    var = [sentence_stats(hyps, refs), sentence_stats(hyps[:4] + ["good morning all"], refs),
           sentence_stats(hyps, refs)]
    def bleu(stats):
        return BLEU()._compute_score_from_stats(stats).score
    result = compare_corpus(base, var, bleu, resamples=300)
    expected = np.mean([bleu(s.sum(0)) for s in var]) - np.mean([bleu(s.sum(0)) for s in base])
    assert result.difference == pytest.approx(expected) and result.difference > 0
    sentence_part = max(0.0, result.se_sentences ** 2 - result.se_within ** 2)
    assert result.se == pytest.approx(np.sqrt(result.se_seeds ** 2 + sentence_part))
    assert result.ci_low <= result.difference <= result.ci_high and result.test_set_only.label == TEST_SET_ONLY
    alone = sentence_bootstrap(base, var, bleu, resamples=300)
    assert alone == result.test_set_only
    full, boot = resampled_scores(base, bleu, resample_counts(5, 300))
    assert full == pytest.approx([bleu(s.sum(0)) for s in base]) and boot.shape == (300, 3)
    few = compare_corpus(base[:2], var, bleu, resamples=50)
    assert few.verdict == FEW and np.isnan(few.p_value) and not np.isnan(few.test_set_only.p_value)
    with pytest.raises(ValueError, match="same sentences"):
        compare_corpus(base, [s[:4] for s in var], bleu)


def test_corpus_tost():
    rng = np.random.default_rng(13)
    result = compare_corpus(*experiment(rng, sentences=400, seed_sd=0.01), accuracy, vectorised=True, resamples=200)
    assert corpus_tost(result, margin=10.0).equivalent is True
    assert corpus_tost(result, margin=0.01).equivalent is False
