"""Metrics of decoded outputs: each one a small class registered by name, carrying everything zoo does with it.

A metric scores a system's outputs against the references (`score`), and says how a report treats it:
which way is better, its bounds, its label and unit, the default stall floor (a run below it learned
nothing) and the default difference `zoo plan` sizes seeds for. A metric with per-sentence statistics
(`sentence_level`) writes them into every record, and the report's seed-aware bootstrap resamples test
sentences through `from_totals`, so every resampled score is computed the way the metric computes it.

A task lists the metrics it is scored by (`Task.metrics`, the first being its default primary metric).
A plugin adds one like any other entry:

    from zoo.metrics import Metric, register_metric

    @register_metric("ends-right")
    class EndsRight(Metric):
        label, unit, stall_floor, effect = "ends right %", "% of sequences", 5.0, 5.0
        def score(self, hypotheses, references): ...
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any, ClassVar

import numpy as np

from zoo.catalogue import Catalogue


class Metric:
    """Base of every metric. Subclasses set the class attributes and `score`; sentence-level ones also set
    `sentence_level = True` and implement `sentence_statistics` and `from_totals`."""

    registry_name: ClassVar[str]
    label: ClassVar[str]  # column header in reports ('BLEU')
    unit: ClassVar[str]  # axis unit in plots ('BLEU points')
    higher_is_better: ClassVar[bool] = True
    bounds: ClassVar[tuple[float, float]] = (0.0, 100.0)  # an interval is clipped to these
    stall_floor: ClassVar[float]  # default `stall.floor` when this is the primary metric
    effect: ClassVar[float]  # default difference `zoo plan` sizes seeds for (without a margin or `detect`)
    tabled: ClassVar[bool] = True  # a column of the report's tables (False: results.csv only)
    sentence_level: ClassVar[bool] = False
    vectorised: ClassVar[bool] = False  # from_totals takes a (..., k) array of totals at once

    def score(self, hypotheses: list[str], references: list[str]) -> float:
        raise NotImplementedError

    def sentence_statistics(self, hypotheses: list[str], references: list[str]) -> list[Any]:
        """One JSON-able entry per sentence, whose column sums `from_totals` turns into the corpus score."""
        raise NotImplementedError

    def signature(self) -> str | None:
        """A string that identifies the scorer's settings (sacreBLEU's signature), recorded with the statistics."""
        return None

    def as_array(self, rows: list[Any]) -> np.ndarray:
        """(N, k) float array of recorded per-sentence statistics."""
        array = np.asarray(rows, dtype=float)
        return array[:, None] if array.ndim == 1 else array

    def from_totals(self, totals: Any) -> Any:
        """The corpus score from summed per-sentence statistics (k numbers, or (..., k) when vectorised)."""
        raise NotImplementedError


METRICS: Catalogue[type[Metric]] = Catalogue("metric", Metric)
register_metric = METRICS.register


@cache
def get(name: str) -> Metric:
    """The metric registered as `name`, as an instance (RegistryError naming the valid ones otherwise)."""
    return METRICS.get(name)()


def find(column: str) -> Metric | None:
    """The metric of a results column, or None for other columns (perplexity, parameters, throughput)."""
    return get(column) if column in METRICS else None


def names() -> list[str]:
    return METRICS.names()


def is_builtin(name: str) -> bool:
    """One of zoo's own metrics (defined in this module), not a plugin's."""
    return METRICS.get(name).__module__ == __name__


# -- zoo's own ----------------------------------------------------------------------------------------
# sacreBLEU's own log (utils.my_log: 0 floored to -9999999999) and math.exp, element by element: numpy's SIMD
# log and exp may differ from libm's in the last bit, and a resampled score must be sacreBLEU's to the bit.
def _elementwise(function, values: Any) -> np.ndarray:
    """`function` (one of libm's, through math) of every element, as floats: 3x faster than np.vectorize."""
    values = np.asarray(values, dtype=float)
    return np.fromiter(map(function, values.ravel().tolist()), dtype=float, count=values.size).reshape(values.shape)


def _log(values: Any) -> np.ndarray:
    values = np.asarray(values, dtype=float)
    logs = np.full(values.shape, -9999999999.0)
    nonzero = values != 0.0
    logs[nonzero] = _elementwise(math.log, values[nonzero])
    return logs


def _exp(values: Any) -> np.ndarray:
    return _elementwise(math.exp, values)


class _SacreBleuMetric(Metric):
    """A sacreBLEU metric: sentence statistics are sacreBLEU's own sufficient statistics."""

    sentence_level = True
    options: ClassVar[dict[str, Any]] = {}

    def _scorer(self):
        raise NotImplementedError

    def score(self, hypotheses: list[str], references: list[str]) -> float:
        return self._scorer().corpus_score(hypotheses, [references]).score

    def sentence_statistics(self, hypotheses: list[str], references: list[str]) -> list[Any]:
        scorer = self._scorer()
        return [[int(x) for x in row] for row in scorer._extract_corpus_statistics(hypotheses, [references])]

    def signature(self) -> str | None:
        scorer = self._scorer()
        scorer.corpus_score(["x"], [["x"]])  # a signature needs the number of references
        return str(scorer.get_signature())

    def from_totals(self, totals: Any) -> Any:
        """sacreBLEU's corpus score of each row of totals (..., k), as its `_compute_score_from_stats` gives it,
        float for float: the bootstrap asks for hundreds of thousands of them, one Python call each otherwise."""
        rows = np.asarray(totals, dtype=float)
        flat = rows.reshape(-1, rows.shape[-1])
        scores = self._scores(flat) if self._replicated() else np.array(
            [self._scorer()._compute_score_from_stats(list(row)).score for row in flat], dtype=float)
        return scores.reshape(rows.shape[:-1])

    def _replicated(self) -> bool:
        """Whether `_scores` replicates this scorer's configuration (else sacreBLEU scores row by row)."""
        return False

    def _scores(self, flat: np.ndarray) -> np.ndarray:
        raise NotImplementedError


@register_metric("bleu")
class Bleu(_SacreBleuMetric):
    """Corpus BLEU, cased, sacreBLEU's default 13a tokenization."""

    label, unit, stall_floor, effect = "BLEU", "BLEU points", 1.0, 1.0
    vectorised = True

    @cache  # noqa: B019 (one scorer per metric; metrics are few and live as long as the process)
    def _scorer(self):
        from sacrebleu.metrics import BLEU

        return BLEU()

    def _replicated(self) -> bool:
        scorer = self._scorer()
        return scorer.smooth_method == "exp" and not scorer.effective_order

    def _scores(self, flat: np.ndarray) -> np.ndarray:
        """sacreBLEU's BLEU.compute_bleu (exp smoothing, no effective order) over rows [sys_len, ref_len,
        correct_1..N, total_1..N], each operation in its order, and its logs and exps by `math` itself."""
        order = self._scorer().max_ngram_order
        sys_len, ref_len = np.trunc(flat[:, 0]), np.trunc(flat[:, 1])
        correct, total = flat[:, 2:2 + order], flat[:, 2 + order:]
        with np.errstate(divide="ignore", invalid="ignore"):
            bp = np.where(sys_len < ref_len, np.where(sys_len > 0, _exp(1 - ref_len / sys_len), 0.0), 1.0)
            precisions, smooth, counted = np.zeros_like(correct), np.ones(len(flat)), np.ones(len(flat), bool)
            for n in range(order):
                counted &= total[:, n] != 0  # sacreBLEU stops at the first order with no n-grams
                unmatched = counted & (correct[:, n] == 0)
                smooth = np.where(unmatched, smooth * 2, smooth)
                precisions[:, n] = np.where(unmatched, 100.0 / (smooth * total[:, n]),
                                            np.where(counted, 100.0 * correct[:, n] / total[:, n], 0.0))
        logs = _log(precisions)
        summed = logs[:, 0]
        for n in range(1, order):  # Python's sum(), left to right
            summed = summed + logs[:, n]
        return np.where(correct.any(axis=1), bp * _exp(summed / order), 0.0)


@register_metric("bleu_lowercase")
class BleuLowercase(Bleu):
    """Corpus BLEU on lowercased text; results.csv only (it repeats BLEU's story)."""

    label, tabled, sentence_level = "BLEU (lowercased)", False, False

    @cache  # noqa: B019
    def _scorer(self):
        from sacrebleu.metrics import BLEU

        return BLEU(lowercase=True)


@register_metric("chrf")
class ChrF(_SacreBleuMetric):
    """Corpus chrF (character 6-grams, beta 2), sacreBLEU's defaults."""

    label, unit, stall_floor, effect = "chrF", "chrF points", 10.0, 1.0
    vectorised = True

    @cache  # noqa: B019
    def _scorer(self):
        from sacrebleu.metrics import CHRF

        return CHRF()

    def _replicated(self) -> bool:
        return not self._scorer().eps_smoothing

    def _scores(self, flat: np.ndarray) -> np.ndarray:
        """sacreBLEU's CHRF._compute_f_score (effective-order smoothing) over rows of [hyp, ref, match] counts
        per order, each operation in its order."""
        scorer = self._scorer()
        factor, eps = scorer.beta ** 2, 1e-16
        avg_prec, avg_rec, effective = np.zeros(len(flat)), np.zeros(len(flat)), np.zeros(len(flat), dtype=int)
        with np.errstate(divide="ignore", invalid="ignore"):
            for i in range(scorer.order):
                hyp, ref, match = flat[:, 3 * i], flat[:, 3 * i + 1], flat[:, 3 * i + 2]
                prec, rec = np.where(hyp > 0, match / hyp, eps), np.where(ref > 0, match / ref, eps)
                both = (hyp > 0) & (ref > 0)
                avg_prec, avg_rec = np.where(both, avg_prec + prec, avg_prec), np.where(both, avg_rec + rec, avg_rec)
                effective += both
            avg_prec = np.where(effective > 0, avg_prec / effective, 0.0)
            avg_rec = np.where(effective > 0, avg_rec / effective, 0.0)
            score = (1 + factor) * avg_prec * avg_rec
            score = score / ((factor * avg_prec) + avg_rec)
        return np.where(avg_prec + avg_rec != 0, 100 * score, 0.0)


@register_metric("exact_match")
class ExactMatch(Metric):
    """Percentage of outputs equal to their reference, whole sequence."""

    label, unit, stall_floor, effect = "exact match %", "% of sequences", 5.0, 5.0
    sentence_level = vectorised = True

    def score(self, hypotheses: list[str], references: list[str]) -> float:
        return 100.0 * sum(h == r for h, r in zip(hypotheses, references)) / max(len(references), 1)

    def sentence_statistics(self, hypotheses: list[str], references: list[str]) -> list[Any]:
        return [int(h == r) for h, r in zip(hypotheses, references)]

    def as_array(self, rows: list[Any]) -> np.ndarray:
        hits = np.asarray(rows, dtype=float)
        return np.stack([hits, np.ones_like(hits)], axis=1)  # (hit, 1): a resample's sum is (hits, sentences)

    def from_totals(self, totals: Any) -> Any:
        totals = np.asarray(totals, dtype=float)
        return 100.0 * totals[..., 0] / np.maximum(totals[..., 1], 1)


@register_metric("token_accuracy")
class TokenAccuracy(Metric):
    """Percentage of reference tokens matched position by position, over the reference's length."""

    label, unit, stall_floor, effect = "token accuracy %", "% of tokens", 20.0, 5.0

    def score(self, hypotheses: list[str], references: list[str]) -> float:
        right = total = 0
        for hyp, ref in zip(hypotheses, references):
            hyp_tokens, ref_tokens = hyp.split(), ref.split()
            right += sum(h == r for h, r in zip(hyp_tokens, ref_tokens))
            total += len(ref_tokens)
        return 100.0 * right / max(total, 1)
