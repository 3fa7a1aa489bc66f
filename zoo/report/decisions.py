"""A sequential experiment's decisions in words (zoo/report/sequential.py makes them; zoo/stats/stopping.py is the
rule): what the verdict tables, the terminal and the findings say of a comparison the looks decided. Apart from
sequential.py because the tables import it, and sequential.py imports what imports the tables."""

from __future__ import annotations

import math

from zoo.report.analysis import Comparison
from zoo.stats import BETTER, WORSE
from zoo.stats.stopping import CAP, EQUIVALENT
from zoo.stats.tost import tost_from


def _p(value: float) -> str:
    return "—" if math.isnan(value) else f"{value:.2g}"


def words(comparison: Comparison, short: bool = False) -> str:
    """The verdict of a sequentially decided comparison in words: how and at which look, or why it is open."""
    d = comparison.sequential
    at = f"look {d.look}" if short else f"look {d.look} (after round {d.look}, {d.seeds} seeds an arm"
    if d.kind in (BETTER, WORSE):
        if short:
            return f"{d.kind} ({at})"
        crossed = f" on look {d.crossed}'s p" if d.crossed != d.look else ""
        also = f"; also equivalent within ±{comparison.equivalence.margin:g}" if d.also_equivalent else ""
        return f"**{d.kind}** at {at}; p {_p(d.p)} < {_p(d.level)}{crossed}{also})"
    if d.kind == EQUIVALENT:
        margin = comparison.equivalence.margin
        if short:
            return f"equivalent ±{margin:g} ({at})"
        e = d.estimate
        tost = tost_from(e.difference, e.se, e.df, margin, d.equivalence_level)
        return (f"**equivalent** within ±{margin:g} at {at}; {100 * (1 - 2 * d.equivalence_level):.4g}% interval "
                f"[{tost.ci_low:+.3g}, {tost.ci_high:+.3g}])")
    if d.kind == CAP:
        needed = comparison.seeds_needed
        if short:
            return f"undecided at the cap ({d.cap} seeds)"
        return (f"undecided at the cap ({d.cap} seeds an arm); the target effect would need "
                f"{needed if needed else '> 100'} seeds an arm ({comparison.power:.0%} power)")
    if d.look == 0:
        return "open: no look yet" if short else "open: look 1 waits for round 1's records"
    return f"open after look {d.look}" if short else f"open after {at}): round {d.look + 1} called"


def verdict_word(comparison: Comparison) -> str:
    """The one-word class of a sequential verdict (as `verdict_class` gives it): better, worse, equivalent,
    undecided (at the cap) or open."""
    kind = comparison.sequential.kind
    return "undecided" if kind == CAP else kind
