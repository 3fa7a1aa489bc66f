"""Resampling test sentences: which sentence each bootstrap resample draws, shared by every system scored
on one test set (the paired bootstrap of Koehn 2004; zoo/stats/corpus.py uses it)."""

from __future__ import annotations

import numpy as np

RESAMPLES = 1000
BOOTSTRAP_SEED = 12345  # sacreBLEU's default seed; fixed so a report is reproducible


def resample_counts(sentences: int, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED) -> np.ndarray:
    """(R, N) how often each sentence is drawn in each resample (N draws with replacement)."""
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, sentences, size=(resamples, sentences))
    flat = (draws + sentences * np.arange(resamples)[:, None]).ravel()
    return np.bincount(flat, minlength=resamples * sentences).reshape(resamples, sentences).astype(float)
