"""Null calibration through zoo's own test functions: in every design a report allows, a test that should not
reject rejects at most at alpha (plus 3 Monte Carlo standard errors).

A few hundred simulated experiments per case keep CI quick (about a minute in all). For the long version,
a person runs `ZOO_CALIBRATION=long python -m pytest tests/test_calibration.py -s` (2,000 experiments per case;
each case prints its rate).

Cases: the per-seed path and the corpus path (seed + sentence), equal arms (5 v 5) and unequal (3 v 10),
bimodal stall-or-succeed outcomes (30% of seeds in both arms learn nothing, and no stall floor sets them
apart), a sentence x variant interaction, TOST at a true difference equal to the margin, and Fisher's test
at equal failure rates.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

from zoo.stats.corpus import compare_corpus
from zoo.stats.outcomes import compare_failures
from zoo.stats.seeds import compare_seeds
from zoo.stats.tost import tost

ALPHA = 0.05
RUNS = 2000 if os.environ.get("ZOO_CALIBRATION") == "long" else 300


def limit(rate: float = ALPHA, runs: int = RUNS) -> float:
    return rate + 3 * math.sqrt(rate * (1 - rate) / runs)


def report(name: str, rate: float) -> None:
    print(f"calibration {name}: {rate:.3f} over {RUNS} null experiments (limit {limit():.3f})")


def seed_scores(rng: np.random.Generator, n: int, stall: float, shift: float = 0.0) -> np.ndarray:
    """Per-seed scores: trained seeds near 30 (sd 0.4), stalled ones near 1: stall-or-succeed."""
    stalled = rng.random(n) < stall
    return np.where(stalled, rng.normal(1.0, 0.3, n), rng.normal(30.0 + shift, 0.4, n))


@pytest.mark.parametrize("n_b, n_v, stall", [(5, 5, 0.0), (3, 10, 0.0), (5, 5, 0.3), (3, 10, 0.3), (10, 3, 0.3)])
def test_per_seed_path(n_b, n_v, stall):
    rng = np.random.default_rng(1)
    rejected = [compare_seeds(seed_scores(rng, n_b, stall), seed_scores(rng, n_v, stall), higher_is_better=True,
                              alpha=ALPHA).p_value < ALPHA for _ in range(RUNS)]
    report(f"per-seed {n_b} v {n_v}, stalls {stall:.0%}", float(np.mean(rejected)))
    assert np.mean(rejected) <= limit()


def accuracy(stats):
    return 100 * stats[..., 0] / np.maximum(stats[..., 1], 1)


def corpus_experiment(rng, n_b: int, n_v: int, stall: float, interaction: float = 0.0, sentences: int = 200):
    """One test set, per-sentence binomial correct counts; a stalled seed gets almost nothing right."""
    lengths, difficulty = rng.integers(5, 30, sentences), rng.normal(0.5, 1, sentences)
    gamma = rng.normal(0, interaction, sentences)  # the variant is better on some sentences, worse on others

    def system(arm: int) -> np.ndarray:
        logit = -4.0 if rng.random() < stall else difficulty + rng.normal(0, 0.05) + arm * gamma
        p = 1 / (1 + np.exp(-logit))
        return np.stack([rng.binomial(lengths, p), lengths], 1).astype(float)

    return [system(0) for _ in range(n_b)], [system(1) for _ in range(n_v)]


@pytest.mark.parametrize("n_b, n_v, stall, interaction", [
    (5, 5, 0.0, 0.0), (5, 5, 0.0, 0.5), (3, 10, 0.0, 0.0), (3, 10, 0.3, 0.0), (5, 5, 0.3, 0.0),
])
def test_corpus_path(n_b, n_v, stall, interaction):
    rng = np.random.default_rng(2)
    rejected = [compare_corpus(*corpus_experiment(rng, n_b, n_v, stall, interaction), accuracy, vectorised=True,
                               resamples=200, seed=run, alpha=ALPHA).p_value < ALPHA for run in range(RUNS)]
    report(f"corpus {n_b} v {n_v}, stalls {stall:.0%}, interaction {interaction}", float(np.mean(rejected)))
    assert np.mean(rejected) <= limit()


def test_the_issue_case_three_v_ten_with_stalls_stays_under_seven_percent():
    """Done-when of the calibration issue: 3 v 10 seeds, 30% stalls in both arms, no floor, corpus path."""
    rng = np.random.default_rng(3)
    rejected = [compare_corpus(*corpus_experiment(rng, 3, 10, 0.3), accuracy, vectorised=True, resamples=200,
                               seed=run).p_value < ALPHA for run in range(RUNS)]
    assert np.mean(rejected) <= 0.07


@pytest.mark.parametrize("n", [5, 10])
def test_tost_at_a_true_difference_equal_to_the_margin(n):
    """A wrong 'equivalent' when the true difference is exactly the margin: at most alpha."""
    rng = np.random.default_rng(4)
    margin = 1.0
    wrong = [tost(rng.normal(30, 0.6, n), rng.normal(30 + margin, 0.6, n), margin, ALPHA).equivalent
             for _ in range(RUNS)]
    report(f"TOST per-seed {n} v {n} at the margin", float(np.mean(wrong)))
    assert np.mean(wrong) <= limit()


@pytest.mark.parametrize("n, rate", [(6, 0.3), (5, 0.5), (8, 0.1)])
def test_fisher_at_equal_failure_rates(n, rate):
    rng = np.random.default_rng(6)
    rejected = [compare_failures(int(rng.binomial(n, rate)), n, int(rng.binomial(n, rate)), n, ALPHA).p_value
                < ALPHA for _ in range(RUNS)]
    report(f"Fisher {n} v {n} at {rate:.0%}", float(np.mean(rejected)))
    assert np.mean(rejected) <= limit()
