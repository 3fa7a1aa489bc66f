"""The Student t interval of a mean over seeds: what a table's 'mean [95% CI]' and a plot's error bar show."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats as scipy_stats

from zoo.stats import ALPHA


def mean_half_width(values: np.ndarray, alpha: float = ALPHA) -> float:
    """Half the width of the (1 − alpha) t interval of the mean of `values` (at least two, no NaN)."""
    return float(scipy_stats.t.ppf(1 - alpha / 2, len(values) - 1) * values.std(ddof=1) / math.sqrt(len(values)))
