"""Shared constants of the report's statistics, and the resampling of test sentences.

The tests themselves live in inference.py (over seeds), corpus.py (over seeds and test sentences),
outcomes.py (failure rates, steps to threshold), power.py and aso.py.
"""

from __future__ import annotations

import numpy as np

ALPHA = 0.05
RESAMPLES = 1000
BOOTSTRAP_SEED = 12345  # sacreBLEU's default seed; fixed so a report is reproducible
BETTER, WORSE, SAME, FEW = "better", "worse", "no detectable difference", "not enough seeds"


def resample_counts(sentences: int, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED) -> np.ndarray:
    """(R, N) how often each sentence is drawn in each resample (N draws with replacement)."""
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, sentences, size=(resamples, sentences))
    flat = (draws + sentences * np.arange(resamples)[:, None]).ravel()
    return np.bincount(flat, minlength=resamples * sentences).reshape(resamples, sentences).astype(float)
