"""The report's families of tests, adjusted together: the analysis decides them, the writer only writes.

Three families, each adjusted by the experiment's correction (Holm by default) at its alpha:

    differences   every primary comparison, every finding's test, every transfer interaction; a test that a
                  finding shares with its task (the same object) counts once
    equivalences  the TOSTs of those comparisons and interactions
    instability   every Fisher test of unstable runs against the baseline, the findings' ones included

Differences and equivalences are kept apart because a difference test and its own TOST are negatively
dependent (a small p for one means a large p for the other), which voids the guarantee of Benjamini-Hochberg
(positive dependence, PRDS) in a family that holds both: near-zero TOST p-values of a task at ceiling can then
lower the bar for another task's differences. Within each family the tests share the baseline's seeds, a
positive dependence; tests/test_inference.py measures both families' false-discovery rates by simulation.

After the adjustment every comparison, the findings' included, states its 'detectable Δ', 'seeds for ±X' and
power at the level one rejection needs in the differences family (alpha / its size: the first step of Holm and
of Benjamini-Hochberg), and each instability test its detectable rise at its own family's level. A raw p at or
below that level is rejected by either procedure whatever the other tests give, so these powers are lower bounds;
later steps reject at larger raw p (Holm alpha / (m - k + 1), Benjamini-Hochberg k alpha / m), and the report says
the largest raw p its family rejected.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from zoo.experiment.schema import Analysis
from zoo.report.analysis import Comparison, TaskAnalysis, at_level
from zoo.report.findings import Check
from zoo.report.transfer import TransferAnalysis
from zoo.stats.family import adjust, correct, verdict_families
from zoo.stats.outcomes import at_level as failures_at_level
from zoo.stats.transfer import adjusted as adjusted_interaction

Placebo = tuple[str, str, str, Comparison | None]  # task, a, b, their comparison (None: bit-identical)


def adjust_verdicts(tasks: list[TaskAnalysis], checks: list[Check], placebos: list[Placebo],
                    transfers: list[TransferAnalysis], settings: Analysis,
                    decided_elsewhere: Callable[[Comparison], bool] | None = None,
                    ) -> tuple[int, int, float, list[Placebo]]:
    """Adjust the differences and equivalences families in place (tasks' comparisons, findings' tests,
    transfer rows); returns the two families' sizes, the largest raw p of a test the differences family rejected
    and decides (nan where none), and the placebos with the adjusted comparisons they share. A comparison
    `decided_elsewhere` (by a sequential design's looks) counts in the family's size but is no rejection of it."""
    method, alpha = settings.correction, settings.alpha
    family = _unique([c for analysis in tasks for c in analysis.comparisons.values()]
                     + [check.comparison for check in checks if check.comparison is not None])
    equivalences = [c for c in family if c.equivalence is not None and not math.isnan(c.equivalence.p_value)]
    interactions = [(t, variant) for t in transfers for variant in t.rows]
    raw = [c.result.p_value for c in family] + [t.rows[v].p_value for t, v in interactions]
    differences_p, equivalences_p = verdict_families(
        raw, [c.equivalence.p_value for c in equivalences] + [t.rows[v].tost_p for t, v in interactions], method)
    decides = [decided_elsewhere is None or not decided_elsewhere(c) for c in family] + [True] * len(interactions)
    rejected_at = max((p for p, adjusted, own in zip(raw, differences_p, decides) if own and adjusted < alpha),
                      default=math.nan)
    settled = {id(c): replace(c, result=r)
               for c, r in zip(family, adjust([c.result for c in family], method, differences_p[:len(family)]))}
    for c, p in zip(equivalences, equivalences_p):
        settled[id(c)] = replace(settled[id(c)], equivalence=replace(c.equivalence, p_adjusted=p, equivalent=p < alpha))
    for (t, variant), p, tost_p in zip(interactions, differences_p[len(family):], equivalences_p[len(equivalences):]):
        t.rows[variant] = adjusted_interaction(t.rows[variant], p, tost_p)
    sizes = (sum(not math.isnan(p) for p in differences_p), sum(not math.isnan(p) for p in equivalences_p))
    level = alpha / max(sizes[0], 1)  # what one rejection needs (the first step of Holm and of BH)
    primary = {analysis.task.key: (analysis.primary, analysis.task.target_effect) for analysis in tasks}

    def sized(c: Comparison) -> Comparison:  # 'seeds for ±target' only where the target is in c's metric
        metric, target = primary[c.task]
        return at_level(c, level, target if c.metric == metric else math.nan, settings.power)

    for analysis in tasks:
        analysis.comparisons = {variant: sized(settled[id(c)]) for variant, c in analysis.comparisons.items()}
    for check in checks:
        if check.comparison is not None:
            check.comparison = sized(settled[id(check.comparison)])
        if check.untested is not None:
            check.untested = sized(check.untested)
    return *sizes, rejected_at, [(task, a, b, settled.get(id(c), c)) for task, a, b, c in placebos]


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
