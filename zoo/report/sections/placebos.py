"""Placebo pairs: variants that compute one function and train alike measure the noise floor."""

from __future__ import annotations

import math

from zoo.report.study import Report
from zoo.report.tables import ci, fmt_effect, fmt_p, md_table


def placebo_section(report: Report) -> list[str]:
    if not report.placebos:
        return ["No two variants compute the same function and train alike, so this experiment has no placebo pair "
                "to measure its noise floor with.", ""]
    alpha = report.experiment.config.analysis.alpha
    rows, flagged = [], []
    for task, a, b, comparison in report.placebos:
        if comparison is None:
            rows.append([task, f"{a} vs {b}", "0 (bit-identical)", "—", "—", "—"])
            continue
        r = comparison.result
        significant = not math.isnan(r.p_adjusted) and r.p_adjusted < alpha
        if significant:
            flagged.append(f"{a} vs {b} on {task}")
        equivalent = comparison.equivalence.equivalent if comparison.equivalence else None
        rows.append([task, f"{b} − {a}", fmt_effect(r.difference, r.ci_low, r.ci_high, comparison.metric),
                     fmt_p(r.p_adjusted, alpha), "—" if equivalent is None else ("yes" if equivalent else "not shown"),
                     "**SIGNIFICANT: the report's verdicts are suspect**" if significant else "not significant"])
    lines = ["Variants the equivalence check proves to compute the same function, trained alike: any difference "
             "between them is noise (seeds, rounding), so they show how large a difference noise alone makes here. "
             "A pair not tested against the baseline is in no family: its p is unadjusted, judged at the raw alpha "
             "(stricter for this check).", "",
             md_table(["task", "placebo pair", f"difference [{ci(alpha)}]", "adjusted p", "equivalent within margin",
                       "status"],
                      rows), ""]
    if flagged:
        lines.insert(0, f"> **Warning: a placebo comparison is significant ({'; '.join(flagged)}).** Noise alone "
                        "produced a verdict here; treat every verdict of this report with suspicion.\n")
    return lines
