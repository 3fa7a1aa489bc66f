"""The report's tables as plain rows (header, rows of strings), for markdown and for the terminal.

Every number a reader sees is formatted here, so docs/reading-reports.md can describe
each column once.
"""

from __future__ import annotations

import math

import numpy as np

from zoo import metrics
from zoo.experiment import Experiment
from zoo.experiment.schema import TaskEntry
from zoo.report import decisions
from zoo.report.analysis import DEVICE_BOUND, Comparison, TaskAnalysis, bounds, detectable_phrase, metric_range
from zoo.stats import ALPHA, BETTER, FEW, WORSE
from zoo.stats import outcomes as oc
from zoo.stats.intervals import mean_half_width

LABELS = {  # columns that are not metrics; a metric brings its own label (zoo/metrics.py)
    "parameters": "parameters", "tok_per_s": "train tok/s", "valid_loss": "valid loss",
    "valid_ppl": "valid ppl", "valid_nll": "valid NLL", "test_nll": "test NLL", "test_ppl": "test ppl",
    "train_seconds": "training seconds", "curve_area": "curve area",
}
DECIMALS = {"parameters": 0, "tok_per_s": 0, "valid_loss": 3, "valid_nll": 3, "valid_ppl": 2, "test_nll": 3,
            "test_ppl": 2, "train_seconds": 0, "steps": 0}


def label(column: str) -> str:
    metric = metrics.find(column)
    return metric.label if metric is not None else LABELS.get(column, column)


def fmt(value: float, column: str = "") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, float) and math.isinf(value):
        return "∞" if value > 0 else "−∞"
    return f"{value:,.{DECIMALS.get(column, 2)}f}"


def fmt_difference(value: float, column: str = "") -> str:
    """Signed; a difference the column's format would round to zero keeps two significant digits, unless
    it is floating-point residue (|value| < 1e-9, e.g. two equal means summed in another order): 0."""
    if value is None or math.isnan(value):
        return "—"
    if abs(value) < 1e-9:
        value = 0.0
    text = fmt(value, column)
    if value != 0 and float(text.replace(",", "")) == 0:
        text = f"{value:.2g}"
    return ("+" if value > 0 else "") + text


def fmt_p(p: float, alpha: float = ALPHA) -> str:
    """Three decimals, or as many more as it takes for the printed p to fall on the same side of alpha as p
    (0.04996 is "0.04996", not "0.050" beside a verdict that it is below 0.05)."""
    if p is None or math.isnan(p):
        return "—"
    if p < 0.001:
        return "< 0.001"
    for digits in range(3, 9):
        said = f"{p:.{digits}f}"
        if (float(said) < alpha) == (p < alpha):
            return said
    return f"< {alpha:g}"  # below alpha by less than 5e-9


def ci(alpha: float) -> str:
    """'95% CI' at alpha 0.05: a comparison's interval is at 1 - the experiment's alpha, and says so."""
    return f"{round(100 * (1 - alpha), 6):g}% CI"


def fmt_interval(low: float, high: float, column: str = "", signed: bool = False) -> str:
    show = fmt_difference if signed else fmt
    return "—" if math.isnan(low) else f"[{show(low, column)}, {show(high, column)}]"


def fmt_effect(difference: float, low: float, high: float, column: str = "") -> str:
    """'+1.20 [-0.40, +2.80]': a difference with its interval (just the difference if it has none)."""
    if difference is None or math.isnan(difference):
        return "—"
    interval = "" if math.isnan(low) else " " + fmt_interval(low, high, column, signed=True)
    return fmt_difference(difference, column) + interval


def fmt_detectable(comparison) -> str:
    """The smallest difference the design detects, or why it detects none: with unequal seeds the
    permutation-checked p cannot fall below its floor, which may be above the corrected level."""
    why = comparison.undetectable
    if why == "correction":
        return f"cannot reach the corrected level (no outcome of these runs has p < {comparison.unreachable:.2g})"
    number = fmt(comparison.mde, comparison.metric)
    return f"{number}: more than {metric_range(comparison)}" if why == "range" else number


def fmt_rise(test: oc.FailureComparison | None) -> str:
    """The smallest rise of the unstable share over the baseline's that the test would detect."""
    if test is None:
        return "—"
    if test.cannot_reject:
        return f"cannot reach the corrected level (no outcome of these runs has p < {test.level:.2g})"
    if math.isnan(test.detectable):
        return "none, even to 100% (too few runs)"
    return f"+{100 * test.detectable:.0f} points"


def fmt_rate(rate: oc.Rate) -> str:
    if not rate.n:
        return "—"
    return f"{rate.count}/{rate.n} ({100 * rate.rate:.0f}%, CI {100 * rate.ci_low:.0f}–{100 * rate.ci_high:.0f}%)"


def per_seed(values, column: str = "") -> str:
    return "; ".join(fmt(v, column) for v in values) or "none"


def mean_interval(values: list[float], column: str, min_seeds: int, alpha: float = ALPHA) -> str:
    """'mean [low, high]' (Student t over seeds, clipped to the metric's range and marked so), or the
    per-seed values below `min_seeds` seeds, or the value when it does not vary."""
    data = np.asarray([v for v in values if not math.isnan(v)], dtype=float)
    if len(data) == 0:
        return "—"
    if np.all(data == data[0]):
        return fmt(float(data[0]), column) + ("" if len(data) >= min_seeds else f" (n={len(data)})")
    if len(data) < min_seeds:
        return f"seeds: {per_seed(data, column)}"
    mean = float(data.mean())
    half = mean_half_width(data, alpha)
    low, high = bounds(column)
    clipped = mean - half < low or mean + half > high
    interval = fmt_interval(max(mean - half, low), min(mean + half, high), column)
    return f"{fmt(mean, column)} {interval}" + ("*" if clipped else "")


def verdict_class(comparison: Comparison) -> str:
    """The verdict in one word: better, worse, equivalent, undecided, or 'no verdict' (too few seeds); with
    [sequential], the looks' decision (also 'open': a later look may decide)."""
    if comparison.sequential is not None:
        return decisions.verdict_word(comparison)
    result = comparison.result
    if result.verdict == FEW:
        return "no verdict"
    if result.verdict in (BETTER, WORSE):
        return result.verdict
    if comparison.equivalence is not None and comparison.equivalence.equivalent:
        return "equivalent"
    return "undecided"


def verdict_text(comparison: Comparison, min_seeds: int, short: bool = False) -> str:
    """The plain-words verdict of a primary comparison, never stronger than its statistics
    (`short`: the terminal's version, details left to report.md); with [sequential], the looks' decision."""
    if comparison.sequential is not None:
        return decisions.words(comparison, short)
    result = comparison.result
    if short:
        none_of = detectable_phrase(comparison, lambda mde: f"> {fmt(mde, comparison.metric)}")
        return {"no verdict": f"no verdict ({result.n_variant} v {result.n_baseline} trained seeds)",
                "equivalent": f"equivalent ±{comparison.equivalence.margin:g}" if comparison.equivalence else "",
                "undecided": "undecided: " + ("cannot reach the corrected level"
                                              if comparison.undetectable == "correction"
                                              else f"none {none_of} detectable"),
                }.get(verdict_class(comparison), result.verdict)
    if result.verdict == FEW:
        return (f"no verdict: {result.n_variant} v {result.n_baseline} trained seeds (< {min_seeds}); per seed "
                f"{comparison.variant}: {per_seed(comparison.per_seed[1], comparison.metric)}, "
                f"{comparison.reference}: {per_seed(comparison.per_seed[0], comparison.metric)}")
    if result.verdict in (BETTER, WORSE):
        return f"**{result.verdict}**"
    if comparison.equivalence is not None and comparison.equivalence.equivalent:
        return f"**equivalent** within ±{comparison.equivalence.margin:g}"
    if comparison.undetectable == "correction":
        return f"undecided: cannot reach the corrected level ({result.n_baseline} v {result.n_variant} seeds)"
    larger_than = detectable_phrase(comparison, lambda mde: f"larger than {fmt(mde, comparison.metric)}")
    return f"no difference {larger_than} could be detected ({result.n_baseline} v {result.n_variant} seeds)"


def fmt_odds(test: oc.FailureComparison | None) -> str:
    """'odds ratio [95% CI]' of an instability test: the exact conditional interval, which the test inverts
    (it rejects exactly when the interval leaves out 1)."""
    if test is None or math.isnan(test.p_value):
        return "—"

    def number(x: float) -> str:
        return "∞" if math.isinf(x) else f"{x:.3g}"
    # no unstable run in either arm (or every run in both): the odds ratio has no estimate, its interval all
    estimate = "none" if math.isnan(test.odds_ratio) else number(test.odds_ratio)
    return f"{estimate} [{number(test.odds_low)}, {number(test.odds_high)}]"


def outcome_rows(experiment: Experiment, analysis: TaskAnalysis) -> tuple[list[str], list[list[str]]]:
    alpha = experiment.config.analysis.alpha
    header = ["variant", "complete", "stalled", "diverged", "failed", "unstable (stalled + diverged)",
              "Δ unstable", f"odds ratio [{ci(alpha)}]", "vs baseline: Fisher p",
              "adjusted p", "verdict",
              "detectable rise (80% power, at the corrected level)"]
    rows = []
    for variant in (v.label for v in experiment.config.variants):
        counts = {state: sorted(s for s, o in analysis.outcomes[variant].items() if o == state)
                  for state in (oc.COMPLETE, oc.STALLED, oc.DIVERGED, oc.FAILED)}
        cells = [str(len(seeds)) + (f" (seed {', '.join(map(str, seeds))})" if seeds and state != oc.COMPLETE else "")
                 for state, seeds in counts.items()]
        test = analysis.failure_tests.get(variant)
        adjusted = analysis.failure_adjusted.get(variant, math.nan)
        verdict = "—"
        if test is not None and not math.isnan(adjusted):
            verdict = ("**more unstable**" if test.difference > 0 else "**less unstable**") \
                if adjusted < alpha else "no detectable difference"
        name = variant + (" (baseline)" if variant == experiment.config.baseline_label else "")
        change = "—" if test is None or math.isnan(test.difference) else f"{100 * test.difference:+.0f} points"
        rows.append([name, *cells, fmt_rate(analysis.instability[variant]), change, fmt_odds(test),
                     fmt_p(test.p_value, alpha) if test else "—", fmt_p(adjusted, alpha), verdict, fmt_rise(test)])
    return header, rows


def quality_rows(experiment: Experiment, analysis: TaskAnalysis, frame, metrics: list[str],
                 analyst) -> tuple[list[str], list[list[str]]]:
    """Per variant over its trained seeds: mean [95% CI] of each metric, curve area, steps to threshold."""
    task = analysis.task
    min_seeds = experiment.config.analysis.min_seeds
    columns = [*metrics, "curve_area", "late_change"]
    header = ["variant", "trained seeds", *(label(c) for c in metrics),
              f"area under valid {label(task.primary_metric)}",
              f"Δ valid {label(task.primary_metric)} over the last quarter"]
    if task.threshold is not None:
        header.append(f"steps to valid {label(task.primary_metric)} ≥ {task.threshold:g} (KM median [CI])")
    rows = []
    for variant in (v.label for v in experiment.config.variants):
        name = variant + (" (baseline)" if variant == experiment.config.baseline_label else "")
        if variant in analysis.collapsed:
            rows.append([name, f"≡ {analysis.collapsed[variant]}", *(["same numbers, bit for bit"]
                                                                     + [""] * (len(header) - 3))])
            continue
        seeds = analyst.trained(task, variant)
        cells = [joined_by_device({d: mean_interval(analyst.values(task, variant, c, d), c, min_seeds)
                             for d in analysis.devices}) if c in DEVICE_BOUND else
                 mean_interval(analyst.values(task, variant, c), c, min_seeds) for c in columns]
        if task.threshold is not None:
            km = analysis.survival[variant]
            cells.append("—" if not km.n else f"not reached ({km.reached}/{km.n})" if math.isinf(km.median) else
                         f"{fmt(km.median, 'steps')} {fmt_interval(km.ci_low, km.ci_high, 'steps')} "
                         f"({km.reached}/{km.n} reached)")
        others = {o for o in analysis.outcomes[variant].values()} - {oc.COMPLETE}
        missing = ", ".join(f"{sum(o == state for o in analysis.outcomes[variant].values())} {state}"
                            for state in sorted(others))
        rows.append([name, str(len(seeds)) + (f" ({missing})" if missing else ""), *cells])
    return header, rows


def comparison_rows(experiment: Experiment, analysis: TaskAnalysis) -> tuple[list[str], list[list[str]]]:
    task, settings = analysis.task, experiment.config.analysis
    metric = label(analysis.primary)
    margin = f"TOST ±{task.margin:g}" if task.margin is not None else "TOST (no margin declared)"
    fixed = experiment.config.sequential is not None  # the looks decide: these columns only describe
    header = ["variant", f"Δ {metric} [{ci(settings.alpha)}" + (", fixed-sample]" if fixed else "]"),
              "p (fixed-sample, every seed called; not the test)" if fixed else "p",
              "adjusted p (none: the looks decide)" if fixed else f"adjusted p ({settings.correction})",
              "verdict (sequential)" if fixed else "verdict",
              "P(better)", "ASO ε_min", "detectable Δ (80% power, at the corrected level)",
              f"seeds for ±{task.target_effect:g}", margin + (" (fixed-sample; not the test)" if fixed else ""),
              "sentence-bootstrap p (test set only)"]
    rows = []
    for variant, c in analysis.comparisons.items():
        r = c.result
        equivalence = "—"
        if c.equivalence is not None and c.equivalence.equivalent is not None:
            adjusted = c.equivalence.p_adjusted
            said = (f"adjusted p {fmt_p(adjusted, settings.alpha)}" if not math.isnan(adjusted)
                    else f"p {fmt_p(c.equivalence.p_value, settings.alpha)}")
            shown = c.equivalence.equivalent if c.sequential is None else c.equivalence.p_value < settings.alpha
            equivalence = ("equivalent" if shown else "not shown") + f" ({said})"
        sentence = getattr(r, "test_set_only", None)
        rows.append([variant, fmt_effect(r.difference, r.ci_low, r.ci_high, c.metric),
                     fmt_p(r.p_value, settings.alpha), fmt_p(r.p_adjusted, settings.alpha),
                     verdict_text(c, settings.min_seeds) + _among_trained(analysis, c),
                     fmt(c.prob_better), fmt(c.eps_min), fmt_detectable(c),
                     str(c.seeds_needed) if c.seeds_needed else ("—" if r.verdict == FEW else "> 100"),
                     equivalence, fmt_p(sentence.p_value, settings.alpha) if sentence is not None else "—"])
    return header, rows


def _among_trained(analysis: TaskAnalysis, comparison: Comparison) -> str:
    """' among trained seeds (3 of 5 v 5 of 5)' when stalled or diverged runs are left out of a quality verdict,
    which is then about the runs that trained, next to the instability verdict that counts the others."""
    result, variant, reference = comparison.result, comparison.variant, comparison.reference
    if result.verdict == FEW:
        return ""
    finished = {name: sum(o in oc.FINISHED for o in analysis.outcomes[name].values()) for name in (variant, reference)}
    if result.n_variant == finished[variant] and result.n_baseline == finished[reference]:
        return ""
    return (f" among trained seeds ({result.n_variant} of {finished[variant]} v {result.n_baseline} of "
            f"{finished[reference]}; the outcomes table counts the others)")


def descriptive_rows(analysis: TaskAnalysis, metrics: list[str], alpha: float) -> tuple[list[str], list[list[str]]]:
    """Differences with intervals, no verdicts; with a threshold, the log-rank p of the steps to reach it."""
    header = ["variant", *(f"Δ {label(m)} [{ci(alpha)}]" for m in metrics)]
    if analysis.task.threshold is not None:
        header.append("steps to threshold: log-rank p")
    rows = []
    for variant, results in analysis.descriptive.items():
        cells = [joined_by_device({d: fmt_result(r, metric) for d, r in analysis.per_device[variant][metric].items()})
                 if metric in DEVICE_BOUND else fmt_result(results.get(metric), metric) for metric in metrics]
        if analysis.task.threshold is not None:
            cells.append(fmt_p(analysis.logrank.get(variant, math.nan), alpha))
        rows.append([variant, *cells])
    return header, rows


def fmt_result(result, metric: str) -> str:
    """A descriptive difference with its interval, or '—' where there is none (too few seeds)."""
    return "—" if result is None or result.verdict == FEW else fmt_effect(result.difference, result.ci_low,
                                                                          result.ci_high, metric)


def joined_by_device(cells: dict[str, str]) -> str:
    """One cell of a DEVICE_BOUND column from its cell per device: the cell itself where every run trained on one
    device, else 'device: cell' for each (a mean of two machines' speeds would be neither's)."""
    if len(cells) <= 1:
        return next(iter(cells.values()), "—")
    return "; ".join(f"{md_text(device) or 'unnamed device'}: {cell}" for device, cell in cells.items())


def md_text(value: object) -> str:
    """A string from a record (a CPU or device name, a failure's reason) as inert markdown text: one line, no
    raw HTML (md_table escapes pipes in cells); a record is data, and must not be able to reshape the report."""
    text = " ".join(str(value).split())
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def md_table(header: list[str], rows: list[list[str]]) -> str:
    def cell(text: object) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def task_metrics(task: TaskEntry) -> list[str]:
    """The quality columns of a task: its metrics that are tabled, then perplexity, parameters and throughput."""
    own = [name for name in task.task_class.metrics if metrics.get(name).tabled]
    primary = task.primary_metric
    return [primary, *(m for m in own if m != primary), "valid_ppl", "parameters", "tok_per_s"]


def descriptive_metrics(task: TaskEntry) -> list[str]:
    """The metrics shown as differences without verdicts: all but the primary one and the parameter count."""
    return [m for m in task_metrics(task) if m not in (task.primary_metric, "parameters")]


def terminal_rows(experiment: Experiment, analysis: TaskAnalysis) -> tuple[list[str], list[list[str]]]:
    """The verdicts, narrow enough for a terminal (report.md has every column)."""
    settings = experiment.config.analysis
    header = ["variant", f"Δ {label(analysis.primary)} [{ci(settings.alpha)}]", "adjusted p", "verdict", "P(better)",
              "detectable Δ"]
    rows = [[variant, fmt_effect(c.result.difference, c.result.ci_low, c.result.ci_high, c.metric),
             fmt_p(c.result.p_adjusted, settings.alpha), verdict_text(c, settings.min_seeds, short=True),
             fmt(c.prob_better), fmt_detectable(c)] for variant, c in analysis.comparisons.items()]
    return header, rows


def overview_rows(experiment: Experiment, tasks: list[TaskAnalysis], analyst) -> tuple[list[str], list[list[str]]]:
    """One row per variant, one column per task: the mean primary test metric over trained seeds, the
    unstable runs, and the verdicts against the baseline (quality, then instability when it is significant)."""
    alpha, min_seeds = experiment.config.analysis.alpha, experiment.config.analysis.min_seeds
    header = ["variant", *(f"{analysis.task.key} ({label(analysis.primary)})" for analysis in tasks)]
    rows = []
    for variant in (v.label for v in experiment.config.variants):
        cells = []
        for analysis in tasks:
            values = analyst.values(analysis.task, variant, analysis.primary)
            rate = analysis.instability[variant]
            if not rate.n:
                cells.append("no finished runs yet")
                continue
            parts = [fmt(float(np.mean(values)), analysis.primary) if values else "—",
                     f"{rate.count}/{rate.n} unstable"]
            if variant in analysis.collapsed:
                parts.append(f"≡ {analysis.collapsed[variant]}")
            elif variant in analysis.comparisons:
                parts.append(verdict_text(analysis.comparisons[variant], min_seeds, short=True))
            adjusted = analysis.failure_adjusted.get(variant, math.nan)
            if not math.isnan(adjusted) and adjusted < alpha:
                parts.append("more unstable" if analysis.failure_tests[variant].difference > 0 else "less unstable")
            cells.append("; ".join(parts))
        rows.append([variant + (" (baseline)" if variant == experiment.config.baseline_label else ""), *cells])
    return header, rows
