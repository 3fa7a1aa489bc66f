"""Many variants against one baseline, with the seed variance pooled over every arm of the task
(`[analysis] pool = "many-to-one"`; zoo/stats/pooled.py holds the test).

Each comparison is first made on its own two arms (zoo/report/analysis.py: Welch over seeds, a corpus metric's
test-set term added); pooling then replaces its standard error and degrees of freedom: the seed variance is the
pooled within-arm variance of every trained arm (df = Σ (n − 1), about 56 at 14 arms x 5 seeds against Welch's
8), and the comparison keeps its own test-set term (the sentence x variant variance that seeds do not shrink).
Its equivalence test (TOST) uses the same standard error and df.

Pooling assumes one seed variance in every arm; a baseline noisier than the pool would understate every
comparison's error at once. So the experiment declares its rule before the runs: pool unless the
Brown-Forsythe test (Levene's, centred on the median: Brown & Forsythe 1974, robust to the stall-free but
skewed scores seeds give) rejects equal variances across the arms at `pool_alpha`; then every comparison of the
task stays Welch's, and the report says why. The rule is a test, with its own power: at 5 seeds an arm it
hardly ever rejects (it pooled 99% of simulated 14-arm experiments at a fourfold spread), and the family's error
then exceeds alpha when the baseline is the noisiest arm (0.055 at a twofold spread, 0.072 at a fourfold one,
where Welch stays at 0.016-0.018: benchmarks/calibration.txt, section 1a). Pool where the arms' spreads are
known to be alike (from earlier studies of the same task), or where the baseline has more seeds than the
variants (zoo/stats/pooled.py: 17 baseline seeds bring 0.082 to 0.054).
"""

from __future__ import annotations

import math
from dataclasses import replace

from zoo.experiment.schema import Analysis
from zoo.report.analysis import TaskAnalysis, at_level, higher_is_better
from zoo.report.noise import term_of
from zoo.stats import FEW
from zoo.stats.pooled import equal_spreads, many_to_one
from zoo.stats.tost import tost_from


def pool(analysis: TaskAnalysis, settings: Analysis) -> None:
    """Replace `analysis`'s primary comparisons by pooled ones, where the experiment pools and its rule allows;
    set `analysis.pooling` to what was done and why (empty where the experiment does not pool)."""
    if settings.pool == "none":
        return
    tested = {variant: c for variant, c in analysis.comparisons.items() if c.result.verdict != FEW}
    if not tested:
        analysis.pooling = "not pooled: no comparison has enough seeds"
        return
    baseline = list(next(iter(tested.values())).per_seed[0])
    arms = [baseline, *(list(c.per_seed[1]) for c in tested.values())]
    p = equal_spreads(arms)
    if not math.isnan(p) and p < settings.pool_alpha:
        analysis.pooling = (f"not pooled: the arms' seed spreads differ (Brown–Forsythe p = {p:.3g}, below the "
                            f"declared {settings.pool_alpha:g}), so each comparison is Welch's on its own two arms")
        return
    terms = {variant: term for variant, c in tested.items() if not math.isnan(term := term_of(c))}
    primary, task = analysis.primary, analysis.task
    results = many_to_one(baseline, {variant: c.per_seed[1] for variant, c in tested.items()}, terms=terms,
                          higher_is_better=higher_is_better(primary), alpha=settings.alpha,
                          min_seeds=settings.min_seeds)
    for result in results:
        c = tested[result.variant]
        equivalence = c.equivalence
        if equivalence is not None and not math.isnan(result.se):
            equivalence = tost_from(result.difference, result.se, result.df, task.margin, settings.alpha,
                                    result.n_baseline, result.n_variant)
        pooled = replace(c, result=result, equivalence=equivalence, pooled_arms=len(arms))
        analysis.comparisons[result.variant] = at_level(pooled, settings.alpha, task.target_effect, settings.power)
    df = results[0].pooled_df
    said = "undefined: no arm varies" if math.isnan(p) else f"{p:.3g}"
    analysis.pooling = (f"pooled over {len(arms)} arms ({df:g} df; Brown–Forsythe p for equal spreads {said}, "
                        f"at or above the declared {settings.pool_alpha:g})")
