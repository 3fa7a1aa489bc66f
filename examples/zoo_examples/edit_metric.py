"""A new metric in one file: edit accuracy, 100 x (1 - token edits / reference tokens), floored at 0.

Per sentence it records (edits, reference tokens), so reports compare it over seeds and test
sentences with the seed-aware bootstrap, like BLEU: a resample's score is `from_totals` of its sums.
Unlike exact match, it gives partial credit, so a variant that is nearly right shows it.
"""

import numpy as np

from zoo.metrics import Metric, register_metric


@register_metric("edit_accuracy")
class EditAccuracy(Metric):
    """100 x (1 - Levenshtein distance over tokens / reference tokens), corpus-level, at least 0."""

    label, unit, stall_floor, effect = "edit accuracy %", "% of reference tokens", 20.0, 5.0
    sentence_level = vectorised = True

    def score(self, hypotheses: list[str], references: list[str]) -> float:
        return float(self.from_totals(self.as_array(self.sentence_statistics(hypotheses, references)).sum(axis=0)))

    def sentence_statistics(self, hypotheses: list[str], references: list[str]) -> list[list[int]]:
        return [[_edits(hyp.split(), ref.split()), len(ref.split())] for hyp, ref in zip(hypotheses, references)]

    def from_totals(self, totals):
        totals = np.asarray(totals, dtype=float)  # (..., 2): edits, reference tokens
        return np.maximum(0.0, 100.0 * (1.0 - totals[..., 0] / np.maximum(totals[..., 1], 1)))


def _edits(hyp: list[str], ref: list[str]) -> int:
    """Levenshtein distance between two token lists (insertions, deletions, substitutions, each 1)."""
    previous = list(range(len(ref) + 1))
    for i, token in enumerate(hyp, 1):
        current = [i]
        for j, wanted in enumerate(ref, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (token != wanted)))
        previous = current
    return previous[-1]
