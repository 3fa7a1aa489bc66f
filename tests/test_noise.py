"""zoo.stats.noise: known-answer tests on a simulated corpus whose variance parts are known.

The corpus metric is the mean of per-sentence scores (statistics (value, 1), score = sum / count), and sentence i
of seed s scores d_i + m_s + e_is (+ b_i in the variant arm): d_i the sentence's difficulty, shared by every seed;
m_s ~ N(0, σ_m²) the model part; e_is ~ N(0, σ_e²) the seed x sentence noise; b_i ~ N(0, σ_b²) the sentence x
variant interaction. A seed's corpus score is then mean(d) + m_s + mean_i(e_is): its seed x sentence part is
σ_e²/N exactly, its model part σ_m², and a comparison's test-set term σ_b²/N."""

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from zoo.stats.corpus import compare_corpus, resampled_scores
from zoo.stats.noise import ComparisonNoise, comparison_noise, seed_sentence_variance, sentence_term, split_arm
from zoo.stats.resample import resample_counts

Z = scipy_stats.norm.ppf(0.975) + scipy_stats.norm.ppf(0.8)  # level 0.05, power 0.8: 2.8016


def mean_score(stats):
    return stats[..., 0] / stats[..., 1]


def arm(rng, seeds, difficulty, sd_model, sd_sentence, interaction=0.0):
    """Per-sentence statistics (N, 2) of `seeds` seeds on the test set whose difficulties are `difficulty`."""
    n = len(difficulty)
    values = (difficulty + interaction + rng.normal(0, sd_model, (seeds, 1))
              + rng.normal(0, sd_sentence, (seeds, n)))
    return [np.stack([v, np.ones(n)], 1) for v in values]


def split(rng, seeds, sentences, model, seed_sentence, resamples=200, counts=None):
    """split_arm of one simulated arm with model part `model` and seed x sentence part `seed_sentence`."""
    systems = arm(rng, seeds, rng.normal(0, 1, sentences), math.sqrt(model), math.sqrt(seed_sentence * sentences))
    counts = resample_counts(sentences, resamples, int(rng.integers(1 << 30))) if counts is None else counts
    return split_arm(*resampled_scores(systems, mean_score, counts, vectorised=True), sentences)


@pytest.mark.parametrize("sentences", [400, 1600])
def test_split_arm_recovers_the_model_and_seed_sentence_parts(sentences):
    """2000 seeds: a variance from n normal seeds has sd var·sqrt(2/(n − 1)), 3.2% for the total and 3.2%·4/3 =
    4.2% for model = total − seed_sentence (seed_sentence is a quarter of it), so 15% is 3.5 sd; seed_sentence,
    averaged over 2000 seeds' bootstraps, is good to well under 1%: 5%. At 4 times the sentences the seed x
    sentence part must shrink 4 times and the model part stay."""
    model, seed_sentence = 0.03, 0.01 * 400 / sentences
    result = split(np.random.default_rng(sentences), 2000, sentences, model, seed_sentence)
    total = model + seed_sentence
    assert result.seed_sentence == pytest.approx(seed_sentence, rel=0.05)
    assert result.model == pytest.approx(model, rel=0.15)
    assert result.total == pytest.approx(total, rel=0.15)
    assert result.share == pytest.approx(seed_sentence / total, rel=0.15)
    assert result.total_low <= total <= result.total_high and result.model_low <= model <= result.model_high
    assert result.share_low <= seed_sentence / total <= result.share_high
    assert (result.seeds, result.sentences, result.alpha) == (2000, sentences, 0.05)


def test_at_5_seeds_the_parts_are_unbiased_and_the_intervals_cover():
    """4000 arms of 5 seeds (about 1 s). The total is unbiased only with ddof 1 and seed_sentence only with its
    n/(n − 1): each would be 0.8 of the truth without. Their means over 4000 arms are good to 1.1% (the total:
    sd sqrt(2/4)/sqrt(4000)) and well under 1% (seed_sentence: 0.988 of the truth here, as the one resample draw
    the arms share has counts of variance 0.987, not 1), checked to 5% and 4%. The total's chi-square interval is
    exact for normal seed scores: it misses 0.025 on each side, sd 0.25% over 4000 arms, checked to [0.015, 0.035]
    (4 sd; 5 df in place of 4 for one bound misses 0.012 on its side, a one-sided alpha 0.05 a side); the model
    and share intervals inherit its coverage, 0.95 checked to [0.93, 0.97], seed_sentence being precise."""
    rng = np.random.default_rng(5)
    model, seed_sentence, sentences = 0.03, 0.01, 200
    counts = resample_counts(sentences, 200, 7)
    splits = [split(rng, 5, sentences, model, seed_sentence, counts=counts) for _ in range(4000)]
    total, share = model + seed_sentence, seed_sentence / (model + seed_sentence)
    assert np.mean([s.total for s in splits]) == pytest.approx(total, rel=0.05)
    assert np.mean([s.seed_sentence for s in splits]) == pytest.approx(seed_sentence, rel=0.04)
    below, above = np.mean([total < s.total_low for s in splits]), np.mean([total > s.total_high for s in splits])
    assert 0.015 <= below <= 0.035 and 0.015 <= above <= 0.035, (below, above)
    coverage = {name: np.mean([getattr(s, name + "_low") <= truth <= getattr(s, name + "_high") for s in splits])
                for name, truth in [("model", model), ("share", share)]}
    assert all(0.93 <= c <= 0.97 for c in coverage.values()), coverage


def test_the_test_set_term_recovers_the_sentence_by_variant_interaction():
    """10 v 10 seeds, 1000 sentences, σ_b² = σ_e² = 1: T = σ_b²/N. One experiment's T is good to some 10% (the
    bootstrap's variance from 1000 resamples, the test set's own sample of b, and se_within taken off), so the
    mean of 10 is checked to 10% (3 sd). Without an interaction T must be near 0: what the per-seed scores
    already carry, σ_e²/N·(1/10 + 1/10), is not counted again."""
    rng, sentences = np.random.default_rng(21), 1000

    def terms(sd_interaction):
        out = []
        for e in range(10):
            difficulty = rng.normal(0, 1, sentences)
            b = rng.normal(0, sd_interaction, sentences)
            result = compare_corpus(arm(rng, 10, difficulty, 0.1, 1.0), arm(rng, 10, difficulty, 0.1, 1.0, b),
                                    mean_score, vectorised=True, resamples=1000, seed=e)
            term = sentence_term(result.se_sentences, result.se_within)
            assert result.se ** 2 == pytest.approx(result.se_seeds ** 2 + term)  # what compare_corpus adds
            out.append(term)
        return np.mean(out)

    assert terms(1.0) == pytest.approx(1.0 / sentences, rel=0.1)
    assert terms(0.0) < 0.05 / sentences


def test_projected_variance_by_hand():
    noise = ComparisonNoise(model_b=1.0, seed_sentence_b=2.0, model_v=3.0, seed_sentence_v=4.0, term=5.0)
    assert noise.variance(1, 1) == pytest.approx(15.0)
    assert noise.variance(2, 4, scale=2.0) == pytest.approx((1 + 2 / 2) / 2 + (3 + 4 / 2) / 4 + 5 / 2)  # 4.75
    assert noise.variance(2, 4, scale=2.0) == pytest.approx(4.75)


def test_projected_variance_matches_a_simulation_at_twice_the_sentences():
    """The formula's parts each scale as the module says: arms of 3 and 6 seeds on fresh test sets of 2N sentences
    (4000 experiments: the variance of their difference of means is good to 2.2%, checked to 8%) against the
    projection from the parts at N. Leaving any part unscaled moves it by 20% or more."""
    rng, sentences, experiments = np.random.default_rng(3), 200, 4000
    noise = ComparisonNoise(model_b=0.02, seed_sentence_b=0.06, model_v=0.05, seed_sentence_v=0.01, term=0.03)
    n_b, n_v, big = 3, 6, 2 * sentences

    def means(seeds, model, seed_sentence, extra):
        per_seed = (rng.normal(0, math.sqrt(model), (experiments, seeds, 1))
                    + rng.normal(0, math.sqrt(seed_sentence * sentences), (experiments, seeds, big)) + extra)
        return per_seed.mean(axis=(1, 2))

    difficulty = rng.normal(0, 1, (experiments, 1, big))
    interaction = rng.normal(0, math.sqrt(noise.term * sentences), (experiments, 1, big))
    difference = (means(n_v, noise.model_v, noise.seed_sentence_v, difficulty + interaction)
                  - means(n_b, noise.model_b, noise.seed_sentence_b, difficulty))
    assert difference.var(ddof=1) == pytest.approx(noise.variance(n_b, n_v, scale=2.0), rel=0.08)


def test_the_floor_shrinks_as_one_over_root_scale_and_is_what_infinitely_many_seeds_reach():
    noise = ComparisonNoise(0.4, 0.1, 0.3, 0.2, term=0.09)
    assert noise.floor() == pytest.approx(Z * 0.3)
    assert noise.floor(scale=4.0) == pytest.approx(noise.floor() / 2)
    assert noise.floor(scale=9.0) == pytest.approx(noise.floor() / 3)
    for scale in (1.0, 2.0, 4.0):  # no seed count gets below it, and enough seeds get to it
        detectable = [Z * math.sqrt(noise.variance(n, n, scale)) for n in (5, 50, 10 ** 9)]
        assert detectable[0] > detectable[1] > noise.floor(scale=scale)
        assert detectable[2] == pytest.approx(noise.floor(scale=scale), rel=1e-6)
    assert ComparisonNoise(0.4, 0.1, 0.3, 0.2, term=0.0).floor() == 0.0
    assert noise.floor(level=0.01, power=0.9) == pytest.approx(
        (scipy_stats.norm.ppf(0.995) + scipy_stats.norm.ppf(0.9)) * 0.3)


def test_buys_more_picks_seeds_when_the_model_part_dominates_and_sentences_when_the_term_does():
    seeds = ComparisonNoise(1.0, 0.5, 1.0, 0.5, term=0.1).buys_more(5)  # (1 + 1)/5 = 0.4 > 0.1
    assert seeds.better == "seeds"
    assert seeds.seeds == pytest.approx(Z * math.sqrt(1.5 / 10 * 2 + 0.1))  # 2n seeds: 0.4
    assert seeds.sentences == pytest.approx(Z * math.sqrt((1 + 0.25) / 5 * 2 + 0.05))  # 2N sentences: 0.55
    sentences = ComparisonNoise(0.1, 0.5, 0.1, 0.5, term=1.0).buys_more(5)  # 0.2/5 = 0.04 < 1
    assert sentences.better == "sentences" and sentences.sentences < sentences.seeds
    # the crossover, (model_b + model_v)/n = term, whatever the seed x sentence parts
    assert ComparisonNoise(1.0, 3.0, 1.0, 0.2, term=0.39).buys_more(5).better == "seeds"
    assert ComparisonNoise(1.0, 3.0, 1.0, 0.2, term=0.41).buys_more(5).better == "sentences"


def test_comparison_noise_from_two_splits_and_its_refusals():
    rng = np.random.default_rng(8)
    baseline, variant = split(rng, 6, 100, 0.03, 0.01), split(rng, 6, 100, 0.02, 0.02)
    noise = comparison_noise(baseline, variant, term=0.004)
    assert noise == ComparisonNoise(baseline.model, baseline.seed_sentence, variant.model, variant.seed_sentence,
                                    0.004)
    with pytest.raises(ValueError, match="100 and 50 sentences"):
        comparison_noise(baseline, split(rng, 6, 50, 0.03, 0.01), term=0.004)
    with pytest.raises(ValueError, match="boot must be"):
        split_arm(np.zeros(3), np.zeros((10, 4)), 100)


def test_seeds_that_agree_more_than_their_sentence_noise_allows_give_a_share_of_one_not_more():
    """total below seed_sentence (chance, at a few seeds): the model part is 0 and the share 1, not above; all
    seeds alike, with no sentence noise either, have no share at all."""
    boot = np.random.default_rng(4).normal(0, 1, (200, 3))
    result = split_arm(np.array([0.0, 1e-3, 2e-3]), boot, 100)
    assert result.seed_sentence > 0.5 > result.total
    assert result.model == result.model_low == result.model_high == 0.0
    assert result.share == result.share_low == result.share_high == 1.0
    assert result.total_low < result.total < result.total_high
    alike = split_arm(np.zeros(3), np.zeros((200, 3)), 100)
    assert alike.model == 0.0 and math.isnan(alike.share)
    missing = split_arm(np.array([0.0, math.nan, 2e-3]), boot, 100)  # a seed without a score: no part is 0
    assert all(math.isnan(x) for x in (missing.total, missing.model, missing.model_high, missing.share))


@pytest.mark.parametrize("seeds", [0, 1])
def test_fewer_than_two_seeds_give_nan_not_an_error(seeds):
    result = split_arm(np.zeros(seeds), np.zeros((10, seeds)), 100)
    numbers = [result.total, result.total_low, result.total_high, result.seed_sentence, result.model,
               result.model_low, result.model_high, result.share, result.share_low, result.share_high]
    assert all(math.isnan(x) for x in numbers) and (result.seeds, result.sentences) == (seeds, 100)
    assert math.isnan(seed_sentence_variance(np.zeros((10, seeds))))  # one seed's own noise is not identified
    assert math.isnan(sentence_term(0.3, math.nan))  # compare_corpus's se_within below its minimum seeds
