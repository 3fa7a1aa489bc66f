"""Multiple comparisons: Holm (1979) step-down adjustment over a family (e.g. all variant-vs-baseline
comparisons of a task); Benjamini–Hochberg (1995) is available for false-discovery-rate control.

Adjusting a family's results recomputes their verdicts from the adjusted p-values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from zoo.stats.seeds import verdict


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm (1979) step-down adjusted p-values: sort the m non-NaN p ascending, adjusted p_(i) =
    max over j <= i of min(1, (m - j + 1) p_(j)); reject where adjusted p < alpha. NaN stays NaN
    and does not count toward m."""
    p = np.asarray(p_values, dtype=float)
    out = p.copy()
    present = np.flatnonzero(~np.isnan(p))
    order = present[np.argsort(p[present], kind="stable")]
    m = len(order)
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out[order] = np.maximum.accumulate(scaled) if m else scaled
    return out.tolist()


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """Benjamini–Hochberg (1995) adjusted p-values (false discovery rate); NaN as in holm()."""
    p = np.asarray(p_values, dtype=float)
    out = p.copy()
    present = np.flatnonzero(~np.isnan(p))
    order = present[np.argsort(p[present], kind="stable")]
    m = len(order)
    scaled = np.minimum(1.0, m / np.arange(1, m + 1) * p[order])
    out[order] = np.minimum.accumulate(scaled[::-1])[::-1] if m else scaled
    return out.tolist()


CORRECTIONS = {"holm": holm, "benjamini-hochberg": benjamini_hochberg}


def correct(p_values: Sequence[float], method: str = "holm") -> list[float]:
    """Adjusted p-values by `method`: 'holm' (family-wise error) or 'benjamini-hochberg' (false discovery rate)."""
    return CORRECTIONS[method](p_values)


def verdict_families(differences: Sequence[float], equivalences: Sequence[float],
                     method: str = "holm") -> tuple[list[float], list[float]]:
    """A report's verdict p-values adjusted as two families: the difference tests (comparisons, findings,
    interactions) and the equivalence tests (their TOSTs), each by `method` on its own. A difference test and its
    own TOST are negatively dependent, which voids Benjamini-Hochberg's guarantee in a family holding both
    (zoo/report/family.py; their false-discovery rates, simulated: tests/test_inference.py)."""
    return correct(differences, method), correct(equivalences, method)


def adjust(results: Sequence, method: str = "holm", adjusted: Sequence[float] | None = None) -> list:
    """The family's results with p_adjusted set and verdicts recomputed from it (for SeedComparison
    and CorpusComparison alike). Results without a p-value (not enough seeds) are left as they are.
    `adjusted`: their p-values already adjusted in a larger family (other kinds of tests beside them)."""
    adjusted = correct([r.p_value for r in results], method) if adjusted is None else adjusted
    out = []
    for r, p in zip(results, adjusted):
        if math.isnan(p):
            out.append(r)
            continue
        out.append(replace(r, p_adjusted=p, verdict=verdict(r.difference, p, r.higher_is_better, r.alpha)))
    return out
