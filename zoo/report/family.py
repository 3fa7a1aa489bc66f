"""The report's families of tests, adjusted together: the analysis decides them, the writer only writes.

Two families, each adjusted by the experiment's correction (Holm by default) at its alpha:

    verdicts      every primary comparison and its TOST, every finding's test, every transfer interaction
                  and its TOST; a test that a finding shares with its task (the same object) counts once
    instability   every Fisher test of unstable runs against the baseline, the findings' ones included

After the adjustment each primary comparison states its 'detectable Δ' and 'seeds for ±X' at the level one
rejection needs (alpha / the family's size: Holm's first step), and each instability test its detectable
rise at its own family's level.
"""

from __future__ import annotations

import math
from dataclasses import replace

from zoo.experiment.config import Analysis
from zoo.report.analysis import Comparison, TaskAnalysis, at_level
from zoo.report.findings import Check
from zoo.report.transfer import TransferAnalysis
from zoo.stats.family import adjust, correct
from zoo.stats.outcomes import at_level as failures_at_level
from zoo.stats.transfer import adjusted as adjusted_interaction

Placebo = tuple[str, str, str, Comparison | None]  # task, a, b, their comparison (None: bit-identical)


def adjust_verdicts(tasks: list[TaskAnalysis], checks: list[Check], placebos: list[Placebo],
                    transfers: list[TransferAnalysis], settings: Analysis) -> tuple[int, list[Placebo]]:
    """Adjust the verdicts' family in place (tasks' comparisons, findings' tests, transfer rows); returns the
    family's size and the placebos with the adjusted comparisons they share."""
    method, alpha = settings.correction, settings.alpha
    family = _unique([c for analysis in tasks for c in analysis.comparisons.values()]
                     + [check.comparison for check in checks if check.comparison is not None])
    equivalences = [c for c in family if c.equivalence is not None and not math.isnan(c.equivalence.p_value)]
    interactions = [(t, variant) for t in transfers for variant in t.rows]
    tested = [c.result.p_value for c in family] + [c.equivalence.p_value for c in equivalences] \
        + [t.rows[v].p_value for t, v in interactions] + [t.rows[v].tost_p for t, v in interactions]
    size = sum(not math.isnan(p) for p in tested)
    adjusted = iter(correct(tested, method))
    settled = {id(c): replace(c, result=r) for c, r in zip(family, adjust([c.result for c in family], method,
                                                                          [next(adjusted) for _ in family]))}
    for c in equivalences:
        p = next(adjusted)
        settled[id(c)] = replace(settled[id(c)], equivalence=replace(c.equivalence, p_adjusted=p, equivalent=p < alpha))
    interaction_p = [next(adjusted) for _ in interactions]
    for (t, variant), p, tost_p in zip(interactions, interaction_p, [next(adjusted) for _ in interactions]):
        t.rows[variant] = adjusted_interaction(t.rows[variant], p, tost_p)
    level = alpha / max(size, 1)  # what one rejection needs under the correction (Holm's first step)
    for analysis in tasks:
        analysis.comparisons = {variant: at_level(settled[id(c)], level, analysis.task.target_effect, settings.power)
                                for variant, c in analysis.comparisons.items()}
    for check in checks:
        if check.comparison is not None:
            check.comparison = settled[id(check.comparison)]
    return size, [(task, a, b, settled.get(id(c), c)) for task, a, b, c in placebos]


def adjust_instability(tasks: list[TaskAnalysis], checks: list[Check], settings: Analysis) -> int:
    """Adjust the instability family in place (tasks' failure tests, findings' failure tests); returns its size."""
    tests = _unique([t for analysis in tasks for t in analysis.failure_tests.values()]
                    + [check.failures for check in checks if check.failures is not None])
    size = sum(not math.isnan(t.p_value) for t in tests)
    adjusted = dict(zip(map(id, tests), correct([t.p_value for t in tests], settings.correction)))
    level = settings.alpha / max(size, 1)
    for analysis in tasks:
        analysis.failure_adjusted = {variant: adjusted[id(t)] for variant, t in analysis.failure_tests.items()}
        analysis.failure_tests = {variant: failures_at_level(t, level) for variant, t in analysis.failure_tests.items()}
    for check in checks:
        if check.failures is not None:
            check.failure_adjusted = adjusted[id(check.failures)]
            check.failures = failures_at_level(check.failures, level)
    return size


def _unique(tests: list) -> list:
    """Each test object once, in first-seen order."""
    return list({id(t): t for t in tests}.values())
