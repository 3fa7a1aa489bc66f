"""Checking published findings, only where they apply.

Each finding declares its kind, what it expects, the published effect with its source, and the
regime it needs (zoo/experiment/schema.py: Finding, Regime). For every task it names, the report says

    confirmed        the test is significant (after the report's correction) in the expected direction,
                     or equivalence within the task's margin is shown where the paper reports none
    contradicted     significant in the opposite direction, or equivalence shown (within a margin
                     smaller than the published effect) where the paper reports an effect
    inconclusive     the regime holds but neither: with the power this design had for the published effect,
                     and whether the published effect lies inside the (unadjusted) 1 - alpha interval
    not testable here  the regime does not hold (too few seeds, not converged or a budget the task declares
                     below its plateau; under a schedule that decays the rate to 0 the last quarter is flat by
                     construction, so a task must declare `at_plateau` for a finding that needs convergence;
                     more than one factor differs, no margin declared, a baseline below the
                     task's trivial floor, a speed of runs on more than one device), with the reason; or a
                     direction finding whose published effect lies within the task's equivalence margin is not
                     significant ("not testable at this margin", with the seeds that would make it testable):
                     "equivalent within ±1" must not read as "no effect"

Same-function claims are answered by the equivalence check (weight transplant), not by training.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from zoo.experiment import Experiment
from zoo.experiment.schema import Finding, TaskEntry
from zoo.model.summary import diff
from zoo.report import decisions
from zoo.report.analysis import (
    DEVICE_BOUND,
    Analyst,
    Comparison,
    TaskAnalysis,
    compared_columns,
    detectable_phrase,
)
from zoo.report.collect import ReportError
from zoo.report.equiv import Matrix
from zoo.stats import BETTER, FEW, WORSE
from zoo.stats import outcomes as oc
from zoo.stats.power import MAX_SEEDS

CONFIRMED, CONTRADICTED, INCONCLUSIVE, UNTESTABLE = "confirmed", "contradicted", "inconclusive", "not testable here"
DECAYING = {"linear-decay"}  # schedules whose rate reaches 0 at the last step (zoo/train/schedule.py)


@dataclass
class Check:
    finding: Finding
    task: str
    metric: str
    outcome: str
    evidence: str
    comparison: Comparison | None = None  # to be adjusted with the report's family
    failures: oc.FailureComparison | None = None
    failure_adjusted: float = math.nan  # the failure test's p after the report's correction
    untested: Comparison | None = None  # not testable here: the comparison its power is stated from, not a test
    margin: float | None = None  # the task's equivalence margin, where the finding is on the primary metric


def factors(experiment: Experiment, a: str, b: str) -> list[str]:
    """What differs between two variants: components (a slot with all its options is one factor, as
    switching `residual.kind` brings its own `final_norm`), other spec fields, training settings."""
    spec = list(dict.fromkeys(field.split(".")[0] for field, _, _ in diff(experiment.specs[a], experiment.specs[b])))
    train_a = next(v.train for v in experiment.config.variants if v.label == a)
    train_b = next(v.train for v in experiment.config.variants if v.label == b)
    train = [f"train.{k}" for k in sorted(set(train_a) | set(train_b)) if train_a.get(k) != train_b.get(k)]
    return spec + train


def converged(analyst: Analyst, task: TaskEntry, variant: str, tolerance: float) -> tuple[bool, float]:
    """Did the mean primary validation curve change by less than `tolerance` over the last quarter of training?"""
    changes = [c for c in analyst.values(task, variant, "late_change") if not math.isnan(c)]
    if not changes:
        return False, math.nan
    change = float(np.mean(changes))
    return abs(change) < tolerance, change


def regime_problems(experiment: Experiment, analyst: Analyst, finding: Finding, task: TaskEntry, reference: str,
                    counted: tuple[int, int]) -> list[str]:
    regime, problems = finding.regime, []
    if min(counted) < regime.min_seeds:
        problems.append(f"{counted[1]} v {counted[0]} seeds, the finding needs {regime.min_seeds} per arm")
    if regime.single_factor:
        differ = factors(experiment, finding.variant, reference)
        if len(differ) != 1:
            problems.append(f"{finding.variant} and {reference} differ in {len(differ)} factors "
                            f"({', '.join(differ[:4]) or 'none'}), the finding is about one")
    decaying = {experiment.train_config(task, experiment.config.seeds[0], v).schedule
                for v in (finding.variant, reference)} & DECAYING
    if regime.converged and task.below_plateau:
        problems.append(f"the task's budget ends before the plateau: {task.below_plateau}")
    elif regime.converged and decaying and not task.at_plateau:
        problems.append(f"the learning rate decays to 0 at the end of the budget (schedule "
                        f"{', '.join(sorted(decaying))}), which flattens the last quarter's curve whether or not "
                        "training reached its plateau, so that check cannot show convergence here, and the task "
                        "declares no evidence that it did (`at_plateau`)")
    elif regime.converged and not task.at_plateau:
        for variant in (finding.variant, reference):
            flat, change = converged(analyst, task, variant, regime.tolerance)
            if not flat:
                problems.append(f"{variant} has not converged (valid {task.primary_metric} moved "
                                f"{change:+.2f} over the last quarter of training; tolerance {regime.tolerance:g})")
    if finding.kind == "equivalence" and task.margin is None:
        problems.append(f"task {task.key} declares no equivalence margin")
    return problems


def _power(finding: Finding, comparison: Comparison) -> str:
    """The power this design had for the published effect, at the level its verdict is decided at."""
    if finding.effect is None or min(len(arm) for arm in comparison.per_seed) < 2:
        return ""
    power = comparison.power_for(finding.effect)
    return f"; power for the published effect ({finding.effect:+g}) was {power:.0%}" if not math.isnan(power) else ""


def check(experiment: Experiment, analyst: Analyst, matrix: Matrix, tasks: list[TaskAnalysis]) -> list[Check]:
    """Every finding on every task it names (tests unadjusted: family.py adjusts them with the report's family).
    A finding about a variant against the baseline, on the task's primary metric, holds that task's own
    test object: it is one test, adjusted once, not a second one."""
    analysed = {analysis.task.key: analysis for analysis in tasks}
    checks = []
    for i, finding in enumerate(experiment.config.findings):
        reference = finding.against or experiment.config.baseline_label
        metric = finding.metric
        if metric is not None and metric not in compared_columns():
            raise ReportError(f"{experiment.path}: findings[{i}].metric: {metric!r} is not a compared results "
                              f"column; allowed: {', '.join(compared_columns())}")
        if finding.kind == "same-function":
            same = matrix.equivalent(finding.variant, reference) and matrix.equivalent(reference, finding.variant)
            expected = finding.expect == "same function"
            verdict = matrix.verdicts.get((finding.variant, reference))
            checks.append(Check(finding, "—", "function", CONFIRMED if same == expected else CONTRADICTED,
                                f"the equivalence check says {'same' if same else 'different'} function"
                                + (f" ({verdict.reason})" if verdict else "")))
            continue
        for task in experiment.config.tasks:
            if finding.task is not None and finding.task != task.key:
                continue
            checks.append(_check_task(experiment, analyst, finding, analysed[task.key], reference,
                                      metric or task.primary_metric))
    return checks


def _check_task(experiment: Experiment, analyst: Analyst, finding: Finding, analysis: TaskAnalysis, reference: str,
                metric: str) -> Check:
    task = analysis.task
    if finding.variant == reference:
        return Check(finding, task.key, metric, UNTESTABLE, "the variant is its own reference")
    if analysis.below_floor:
        return Check(finding, task.key, metric, UNTESTABLE, analysis.below_floor)
    own = reference == experiment.config.baseline_label  # the task's own test, when it has one
    if finding.kind == "failure-rate":
        outcomes = {v: [analyst.outcome(v, task, s) for s in experiment.seeds_of(v, task.key)]
                    for v in (reference, finding.variant)}
        rates = {v: oc.instability_rate(o) for v, o in outcomes.items()}
        test = analysis.failure_tests.get(finding.variant) if own else None
        if test is None:
            test = oc.compare_failures(rates[reference].count, rates[reference].n, rates[finding.variant].count,
                                       rates[finding.variant].n, experiment.config.analysis.alpha)
        problems = regime_problems(experiment, analyst, finding, task, reference,
                                   (rates[reference].n, rates[finding.variant].n))
        evidence = (f"unstable runs {rates[finding.variant].count}/{rates[finding.variant].n} vs "
                    f"{rates[reference].count}/{rates[reference].n}, Fisher p {fmt_small_p(test.p_value)}")
        if problems:
            return Check(finding, task.key, "instability", UNTESTABLE, "; ".join(problems) + f" ({evidence})")
        return Check(finding, task.key, "instability", INCONCLUSIVE, evidence, failures=test)
    comparison = analysis.comparisons.get(finding.variant) if own and metric == analysis.primary else None
    if comparison is None:
        comparison = analyst.compare(task, finding.variant, reference, metric)
    counted = (comparison.result.n_baseline, comparison.result.n_variant)
    problems = regime_problems(experiment, analyst, finding, task, reference, counted)
    if metric in DEVICE_BOUND and len(analysis.devices) > 1:
        problems.append(f"{metric} is the machine's as much as the model's, and the runs trained on "
                        f"{len(analysis.devices)} devices")
    margin = task.margin if metric == analysis.primary else None
    if problems:
        return Check(finding, task.key, metric, UNTESTABLE, "; ".join(problems), untested=comparison, margin=margin)
    return Check(finding, task.key, metric, INCONCLUSIVE, "", comparison=comparison, margin=margin)


def _inside_margin(finding: Finding, comparison: Comparison, margin: float | None) -> str:
    """A published effect inside the task's margin stays untestable even once the other problems are gone:
    equivalence cannot speak to it, so say so, and how many seeds a difference test would need."""
    if finding.effect is None or margin is None or abs(finding.effect) > margin or \
            min(len(arm) for arm in comparison.per_seed) < 2:
        return ""
    return (f"; nor is it testable at this margin: {_within(finding.effect, margin)}, and "
            f"{_seeds_for(comparison, finding.effect)}")


def _detectable(c: Comparison) -> str:
    """The design's detectable Δ in a finding's words, or why there is none."""
    return {"correction": "none at the corrected level", "range": "none within the metric's range"}.get(
        c.undetectable, f"{c.mde:.3g}")


def _within(effect: float, margin: float) -> str:
    return f"the published effect ({effect:+g}) is within the task's ±{margin:g}"


def _seeds_for(comparison: Comparison, effect: float) -> str:
    """'N seeds per arm would detect it': the report's one power model, at the level of the verdict."""
    needed = comparison.seeds_for(effect)
    return f"{needed} seeds per arm would detect it ({comparison.power:.0%} power)" if needed is not None else \
        f"more than {MAX_SEEDS} seeds per arm would be needed to detect it"


def fmt_small_p(p: float) -> str:
    """3 significant digits, and '< 0.0001' below that: a p of 1e-78 (or 0, both arms constant over
    seeds) says no more than that."""
    return "< 0.0001" if p < 1e-4 else f"{p:.3g}"


def settle(check_: Check, alpha: float) -> Check:
    """The outcome from the (adjusted) test: confirmed, contradicted or inconclusive."""
    finding = check_.finding
    if check_.failures is not None:
        return _settle_failures(check_, alpha)
    if check_.untested is not None:
        check_.evidence += _power(finding, check_.untested) + _inside_margin(finding, check_.untested, check_.margin)
        return check_
    c = check_.comparison
    if c is None:
        return check_
    r = c.result
    tested = (f"adjusted p {fmt_small_p(r.p_adjusted)}" if getattr(c, "sequential", None) is None  # else the looks
              else f"sequential: {decisions.words(c, short=True)}")
    said = (f"Δ {r.difference:+.3g} [{r.ci_low:+.3g}, {r.ci_high:+.3g}], p {fmt_small_p(r.p_value)}, {tested}, "
            f"{r.n_variant} v {r.n_baseline} seeds")
    equivalent = c.equivalence is not None and c.equivalence.equivalent
    if r.verdict in (BETTER, WORSE):
        if finding.kind == "direction":
            check_.outcome = CONFIRMED if r.verdict == finding.expect else CONTRADICTED
        else:
            check_.outcome = CONTRADICTED
    elif equivalent and finding.kind == "equivalence":
        check_.outcome = CONFIRMED
        said += f"; equivalent within ±{c.equivalence.margin:g}"
    elif equivalent and finding.effect is not None and abs(finding.effect) > c.equivalence.margin:
        check_.outcome = CONTRADICTED
        said += f"; equivalent within ±{c.equivalence.margin:g}, smaller than the published effect"
    elif r.verdict == FEW:
        check_.outcome = UNTESTABLE
    elif finding.kind == "direction" and c.equivalence is not None and finding.effect is not None \
            and abs(finding.effect) <= c.equivalence.margin:
        check_.outcome = UNTESTABLE
        said += (f"; not testable at this margin: {_within(finding.effect, c.equivalence.margin)}, so neither "
                 "equivalence nor this design's power "
                 f"(detectable: {_detectable(c)}) can "
                 f"speak to it; {_seeds_for(c, finding.effect)}")
    else:
        said += ("; no outcome of these runs reaches the corrected level (unequal seeds)"
                 if c.undetectable == "correction"
                 else f"; no difference {detectable_phrase(c, lambda mde: f'larger than {mde:.3g}')} could be detected")
        if finding.effect is not None and not r.ci_low <= finding.effect <= r.ci_high:
            # Descriptive, not a second test: the interval is unadjusted, so the outcome stays inconclusive.
            said += f"; the published effect ({finding.effect:+g}) lies outside this {1 - alpha:.0%} CI (unadjusted)"
    check_.evidence = said + _power(finding, c) + check_.evidence
    return check_


def _settle_failures(check_: Check, alpha: float) -> Check:
    """`settle` for a finding on failure rates: its outcome from the (adjusted) test of the rates, or why the runs
    cannot tell."""
    p, more = check_.failure_adjusted, check_.failures.difference > 0
    check_.evidence += f", adjusted p {fmt_small_p(p)}"  # the raw p is in the evidence already
    if p < alpha:
        expected = (check_.finding.expect == "more failures") == more
        check_.outcome = CONFIRMED if expected else CONTRADICTED
    elif check_.failures.cannot_reject:
        check_.evidence += ("; no outcome of these runs reaches the corrected level "
                            f"({check_.failures.level:.2g})")
    elif math.isnan(check_.failures.detectable):
        check_.evidence += "; too few runs to detect any rise in the failure rate"
    else:
        check_.evidence += (f"; a rise smaller than {100 * check_.failures.detectable:.0f} points over the "
                            "reference's rate could not be detected (80% power, at the corrected level)")
    return check_
