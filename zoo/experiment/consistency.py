"""Whether a record's numbers tell one story. A report computes from all of them, so a record where they disagree
(edited by hand, or damaged) is refused when it is read (zoo/experiment/record.py, `read`), with one line naming the
field and what disagrees. The record's models check each field's type on its own; the rules here cross fields, or
need a metric's registered definition (zoo/metrics.py):

- spec: the spec a record was trained with is one (zoo/model/spec.py), as the report reads it to check equivalences;
- ranges: a metric's value (test, final, the curves, the test sets' scores) lies within the metric's `bounds`, and a
  complete record's test metrics are finite numbers; counts (steps, tokens, sentences) are integers, not negative;
  a complete record's summary says what trained (its parameters, steps, tokens and seconds);
- final: the last validation evaluation is the eval curve's last row, for every column the two share, and holds
  every metric the curve holds;
- sentences: a complete record has per-sentence statistics, not empty, for every sentence-level metric its task is
  scored by (for a task this installation does not know: every one its test metrics name), all of one length: its
  test sentences, its hypotheses, its test sets' sizes added up; zoo's own metrics' statistics are counts;
- test metrics against what their per-sentence statistics give, and each test set's scores against its own rows.

A metric this installation does not have (a plugin's, not loaded) is not checked.
"""

from __future__ import annotations

import math
from array import array
from typing import Any

import numpy as np

from zoo import metrics

COUNTS = ("step", "tokens", "decoded_sentences", "sentences")  # integers, not negative, wherever they appear
SUMMARY = ("parameters", "steps", "tokens", "train_seconds")  # what every complete run's summary says


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
    """The first disagreement among a record's numbers (see the module docstring), as one line naming the field;
    '' when they tell one story."""
    checks = [_spec, _curve_ranges, _final]
    if record.status == "complete":  # the model requires its summary, test metrics and per-sentence statistics
        checks += [_summary, _test_ranges, _sentence_shapes, _recomputed, _sets_inconsistency]
    for check in checks:
        problem = check(record)
        if problem:
            return problem
    return ""


def _spec(record) -> str:
    from zoo.errors import ZooError
    from zoo.model.spec import validate_spec

    if record.spec is None:
        return ""
    try:
        validate_spec(record.spec)
    except ZooError as err:
        return "spec: " + " ".join(str(err).split())
    return ""


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _out_of_range(name: str, value: Any, finite: bool = False) -> str:
    """Why `value` cannot be column `name`'s (a metric outside its bounds, a negative or fractional count), or ''.
    Text and None pass (a diverged run logs 'nan'), as do NaN and infinities unless `finite`."""
    if not _number(value):
        return "not a number" if finite else ""
    if not math.isfinite(value):
        return "not finite" if finite else ""
    metric = metrics.find(name)
    if metric is not None and not metric.bounds[0] <= value <= metric.bounds[1]:
        return f"outside {metric.label}'s bounds {metric.bounds[0]:g}..{metric.bounds[1]:g}"
    if name in COUNTS and (not isinstance(value, int) or value < 0):
        return "not a count (an integer, not negative)"
    return ""


def _curve_ranges(record) -> str:
    if record.curves is None:
        return ""
    for part in ("train", "eval"):
        for name, values in getattr(record.curves, part).items():
            if (name not in COUNTS and metrics.find(name) is None) or not _suspect(name, values):
                continue
            for i, value in enumerate(values):
                why = _out_of_range(name, value)
                if why:
                    return f"curves.{part}.{name}[{i}] is {value!r}: {why}"
    return ""


def _suspect(name: str, values: list | array) -> bool:
    """Whether a curve's column may hold a value out of range: a packed one (record.packed: thousands of training
    rows) is looked at with numpy first, and only one that fails is looked at value by value."""
    if not isinstance(values, array):
        return True
    numbers = np.frombuffer(values, dtype=np.int64 if values.typecode == "q" else np.float64)
    if name in COUNTS:
        return values.typecode != "q" or bool((numbers < 0).any())
    low, high = metrics.find(name).bounds
    finite = numbers[np.isfinite(numbers)]
    return bool(((finite < low) | (finite > high)).any())


def _same(a: Any, b: Any) -> bool:
    if _number(a) and _number(b):
        return a == b or (math.isnan(a) and math.isnan(b))
    return type(a) is type(b) and a == b


def _final(record) -> str:
    """`final` (the last validation evaluation) against the eval curve's last row."""
    final = record.final or {}
    for name, value in final.items():
        why = _out_of_range(name, value)
        if why:
            return f"final.{name} is {value!r}: {why}"
    columns = record.curves.eval if record.curves is not None else {}
    rows = len(next(iter(columns.values()))) if columns else 0
    if not rows:
        shown = next((name for name in final if metrics.find(name) is not None), None)
        return f"final.{shown} is {final[shown]!r}, but curves.eval has no evaluation" if shown else ""
    for name, values in columns.items():
        if name in final and not _same(final[name], values[-1]):
            return f"final.{name} is {final[name]!r}, but the eval curve ends at {values[-1]!r}"
        if name not in final and metrics.find(name) is not None:
            return f"final.{name} is missing, but the eval curve ends at {values[-1]!r}"
    return ""


def _summary(record) -> str:
    missing = [name for name in SUMMARY if getattr(record.summary, name) is None]
    return f"summary.{missing[0]}: missing, and a complete run has it" if missing else ""


def _test_ranges(record) -> str:
    for name, value in record.test.items():
        why = _out_of_range(name, value, finite=metrics.find(name) is not None or name in COUNTS)
        if why:
            return f"test.{name} is {value!r}: {why}"
    for i, test_set in enumerate(record.test_sets or []):
        for name, value in test_set.scores.items():
            why = _out_of_range(name, value, finite=True)
            if why:
                return f"test_sets[{i}].scores.{name} is {value!r}: {why}"
    return ""


def scored_by(record) -> list[str]:
    """The sentence-level metrics a complete record must hold statistics of: its task's (from its definition), or
    where this installation does not know the task, those its test metrics name."""
    from zoo.data.tasks import task_class

    task = record.definition.get("task")
    try:
        names = list(task_class(task.get("name")).metrics) if isinstance(task, dict) else list(record.test)
    except (ValueError, TypeError, KeyError):  # a plugin's task, not loaded here
        names = list(record.test)
    return [name for name in names if metrics.find(name) is not None and metrics.find(name).sentence_level]


def _sentence_shapes(record) -> str:
    """Every sentence-level metric of the task has statistics, one row per test sentence; zoo's own are counts."""
    sentences = record.sentences
    for name in scored_by(record):
        if not len(sentences.get(name, ())):
            stated = f" (test.{name} is {record.test[name]!r})" if name in record.test else ""
            return f"sentences.{name}: none, but the task is scored by {name}{stated}"
    sizes = {name: len(rows) for name, rows in sentences.items()}
    expected = [(f"test.sentences is {record.test['sentences']!r}", record.test["sentences"])
                if _number(record.test.get("sentences")) else None,
                (f"there are {len(record.hypotheses)} hypotheses", len(record.hypotheses))
                if record.hypotheses is not None else None]
    first = next(iter(sizes), None)
    for name, size in sizes.items():
        if size != sizes[first]:
            return f"sentences.{name} holds {size} sentences, but sentences.{first} holds {sizes[first]}"
        for said, count in filter(None, expected):
            if size != count:
                return f"sentences.{name} holds {size} sentences, but {said}"
    for name, rows in sentences.items():
        metric = metrics.find(name)
        if metric is None or not metric.sentence_level or not len(rows):
            continue
        try:
            table = metric.as_array(rows)
        except (ValueError, TypeError, OverflowError) as err:
            return f"sentences.{name}: not {metric.label} statistics ({type(err).__name__})"
        if table.ndim != 2:
            return f"sentences.{name}: not {metric.label} statistics (rows of {table.shape[1:]} values)"
        if metrics.is_builtin(name) and (table < 0).any():
            return f"sentences.{name}: a negative count, {int(table.min())}"
    return ""


def _recomputed(record) -> str:
    """Where a complete record's test metrics disagree with what its per-sentence statistics give."""
    test, sentences = record.test, record.sentences
    recomputed = {}
    for name, rows in sentences.items():
        metric = metrics.find(name)
        if metric is None or not metric.sentence_level or not len(rows):
            continue  # a metric this installation does not have (a plugin's not loaded) is not checked
        try:
            with np.errstate(all="ignore"):
                recomputed[name] = float(metric.from_totals(metric.as_array(rows).sum(axis=0)))
        except (ValueError, IndexError, ZeroDivisionError, TypeError, OverflowError) as err:
            return f"sentences.{name}: not {metric.label} statistics ({type(err).__name__})"
    for name, value in recomputed.items():
        stated = test.get(name)
        if not _agrees(stated, value):
            return f"test.{name} is {stated!r}, but its per-sentence statistics give {value:.6g}"
    return ""


def _agrees(stated: Any, value: float) -> bool:
    return _number(stated) and math.isclose(stated, value, rel_tol=1e-9, abs_tol=1e-6)


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
