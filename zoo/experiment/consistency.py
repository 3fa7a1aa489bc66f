"""Whether a record's numbers tell one story: its test metrics against its per-sentence statistics, and its test
sets' sizes and scores against the rows that are theirs. A report computes from all of them, so a record where
they disagree (edited by hand, or damaged) is refused when it is read (zoo/experiment/record.py, `read`)."""

from __future__ import annotations

import math
from typing import Any

from zoo import metrics


def set_scores(sets: list[tuple[str, int]], sentences: dict[str, Any]) -> list[dict[str, Any]]:
    """Each test set's size and its own score on every sentence-level metric of `sentences`, from the rows
    that are its sentences (the sets lie one after the other, in `sets`' order)."""
    out, start = [], 0
    for name, size in sets:
        scores = {}
        for metric_name, rows in sentences.items():
            metric = metrics.find(metric_name)
            if metric is not None and metric.sentence_level:
                scores[metric_name] = float(metric.from_totals(metric.as_array(rows)[start:start + size].sum(axis=0)))
        out.append({"name": name, "sentences": size, "scores": scores})
        start += size
    return out


def inconsistency(record) -> str:  # a zoo.experiment.record.Record, which imports this module
    """Where a complete record's test metrics disagree with what its per-sentence statistics give (a record
    edited by hand, or damaged), '' when they agree: a report computes from both, and they must be one story."""
    if record.status != "complete":
        return ""
    test, sentences = record.test, record.sentences  # present: the model requires them of a complete record
    recomputed = {}
    for name, rows in sentences.items():
        metric = metrics.find(name)
        if metric is None or not metric.sentence_level or not len(rows):
            continue  # a metric this installation does not have (a plugin's not loaded) is not checked
        try:
            recomputed[name] = float(metric.from_totals(metric.as_array(rows).sum(axis=0)))
        except (ValueError, IndexError, ZeroDivisionError, TypeError) as err:
            return f"sentences.{name}: not {metric.label} statistics ({type(err).__name__})"
    for name, value in recomputed.items():
        stated = test.get(name)
        if not _agrees(stated, value):
            return f"test.{name} is {stated!r}, but its per-sentence statistics give {value:.6g}"
    return _sets_inconsistency(record)


def _agrees(stated: Any, value: float) -> bool:
    return isinstance(stated, (int, float)) and not isinstance(stated, bool) and math.isclose(
        stated, value, rel_tol=1e-9, abs_tol=1e-6)


def _sets_inconsistency(record) -> str:
    """Where a record's test sets disagree with its per-sentence statistics: their sizes must add up to the
    sentences scored, and each set's scores be what its rows give; '' when they agree (or there are no sets)."""
    if not record.test_sets:
        return ""
    sizes = [(s.name, s.sentences) for s in record.test_sets]
    for name, rows in record.sentences.items():
        if metrics.find(name) is not None and len(rows) != sum(size for _, size in sizes):
            return (f"test_sets: {' + '.join(str(size) for _, size in sizes)} sentences, but sentences.{name} "
                    f"holds {len(rows)}")
    for stated, computed in zip(record.test_sets, set_scores(sizes, record.sentences)):
        for name, value in computed["scores"].items():
            if not _agrees(stated.scores.get(name), value):
                return (f"test_sets: {stated.name}'s {name} is {stated.scores.get(name)!r}, but its sentences' "
                        f"statistics give {value:.6g}")
    return ""
