"""build_report: an experiment's records -> reports/<exp>/report.md + results.csv + plots/*.png.

The report is written for someone who did not run the experiment, and every number in it comes from
the committed records (zoo/experiment/record.py) and the experiment file: `zoo report` regenerates it
byte for byte, apart from its first line (date, zoo version, machine). It says which runs are
missing, stale or broken before any number, gives one verdict per task (on the declared primary
metric) with every p-value adjusted over the report's family, states what each comparison could have
detected, calibrates itself on placebo pairs, and checks published findings only where they apply.

Outputs are replaced as a set: report.md is removed first and written last, so a reader never sees a
new table beside an old report (a kill in between leaves no report.md, and `zoo report` makes it again).
"""

from __future__ import annotations

import math
import os
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

from zoo.atomic import write_text_atomic
from zoo.experiment import Experiment
from zoo.report import plots
from zoo.report.analysis import TaskAnalysis
from zoo.report.collect import STATUSES, curves
from zoo.report.equiv import matrix_markdown
from zoo.report.study import Report, analyse
from zoo.report.tables import (
    comparison_rows,
    descriptive_metrics,
    descriptive_rows,
    fmt_effect,
    fmt_p,
    label,
    md_table,
    md_text,
    outcome_rows,
    overview_rows,
    quality_rows,
    task_metrics,
)
from zoo.report.transfer_section import transfer_section


# -- markdown --------------------------------------------------------------------------------------
def provenance(report: Report) -> list[str]:
    """Where the runs trained, from their records (the report's own machine is on its first line)."""
    records = report.analyst.records.by_cell.values()
    count = lambda key: Counter(md_text((r.get("provenance") or {}).get(key, "unknown")) for r in records)  # noqa: E731
    devices = Counter(md_text((r.get("summary") or {}).get("device", "unknown")) for r in records)
    shared = max(((r.get("provenance") or {}).get("concurrent_runs") or 1 for r in records), default=1)
    signatures = sorted({md_text(sig) for r in records for sig in (r.get("signatures") or {}).values()})
    join = lambda counter: ", ".join(f"{k} ({n} runs)" for k, n in sorted(counter.items()))  # noqa: E731
    lines = [f"- {len(records)} records; zoo {join(count('zoo'))}; commit {join(count('commit'))}",
             f"- PyTorch {join(count('torch'))}, Python {join(count('python'))}",
             f"- trained on: {join(devices)}; CPU {join(count('cpu'))}",
             f"- runs sharing the machine at once: up to {shared}"
             + (" (training throughput therefore measures the shared machine, not the variant; it gets no verdict, "
                "and `zoo bench` measures speed in isolation)" if shared > 1 else "")]
    copied = Counter(md_text(Path(r["provenance"]["copied_from"]).parts[0]) for r in records
                     if (r.get("provenance") or {}).get("copied_from"))
    if copied:
        lines.append(f"- {sum(copied.values())} records copied from another experiment's records of the same "
                     f"definition instead of trained again: {join(copied)}; each names its original in "
                     "`provenance.copied_from`")
    if signatures:
        lines.append("- sacreBLEU: " + "; ".join(f"`{s}`" for s in signatures))
    return lines


def grid_status(report: Report) -> list[str]:
    frame = report.frame
    counts = Counter(frame.status)
    lines = [f"{len(frame)} runs planned: " + ", ".join(f"{counts[s]} {s}" for s in STATUSES if counts[s]) + ".", ""]
    problems = frame[~frame.status.isin(["complete", "diverged", "missing"])]
    notes = [f"- `{r.variant} / {r.task} / seed-{r.seed}`: **{r.status}**: {md_text(r.reason)}"
             for r in problems.itertuples()]
    notes += _missing(frame)
    if notes:
        lines += ["Not counted in any statistic:", "", *notes, ""]
    unchecked = sorted(report.analyst.records.unchecked_data)
    if unchecked:
        lines += [f"The data of {', '.join(unchecked)} is not on this machine: those records were matched to the "
                  "experiment file without their data fingerprint.", ""]
    return lines


def _missing(frame) -> list[str]:
    """Cells with no record yet, one line per task (a grid run part-way leaves many)."""
    lines = []
    for task, rows in frame[frame.status == "missing"].groupby("task", sort=False):
        seeds = {variant: sorted(group.seed) for variant, group in rows.groupby("variant", sort=False)}
        of_task = frame[frame.task == task]
        same = len({tuple(v) for v in seeds.values()}) == 1 and len(seeds) == of_task.variant.nunique()
        which = (f"every variant, seed {', '.join(map(str, next(iter(seeds.values()))))}" if same else
                 "; ".join(f"{variant}: seed {', '.join(map(str, s))}" for variant, s in seeds.items()))
        lines.append(f"- `{task}`: **{len(rows)} of {len(of_task)} cells not run yet** (no record): {which}")
    return lines


def stall_rule(task, primary: str) -> str:
    """When a complete run of `task` counts as stalled, in words."""
    parts = [f"the final validation {label(primary)} < {task.stall_floor:g}"] if task.stall_floor is not None else []
    if task.stall.patience:
        parts.append(f"no gain in {task.stall.patience} evaluations")
    if not parts:
        return "no stall rule (every complete run counts in quality, at its score)"
    return "stalled = complete but " + " or ".join(parts)


def task_section(report: Report, analysis: TaskAnalysis, out_dir: Path) -> list[str]:
    experiment, task = report.experiment, analysis.task
    settings = experiment.config.analysis
    metrics = task_metrics(task)
    kind = {"text": "translation"}.get(task.task_class.kind, task.task_class.kind)
    own, differ = budgets(experiment, task)
    lines = [f"## Task `{task.key}`", "",
             f"`{task.name}` ({kind}). Primary metric: **test {label(analysis.primary)}**; "
             + stall_rule(task, analysis.primary)
             + (f"; equivalence margin ±{task.margin:g}" if task.margin is not None else "; no equivalence margin")
             + f". Baseline: **{experiment.config.baseline_label}**. Trained at {own}"
             + (f" ({experiment.config.baseline_label}'s budget; {', '.join(differ)})" if differ else "")
             + ", each budget with its own schedule: every verdict below holds at this budget only.", "",
             *floor_lines(report, analysis),
             "### Outcomes", "", md_table(*outcome_rows(experiment, analysis)), "",
             "### Quality (trained seeds only)", "",
             f"Mean [95% CI over seeds]; fewer than {settings.min_seeds} trained seeds show each seed's value. "
             "* = interval clipped to the metric's range.", "",
             md_table(*quality_rows(experiment, analysis, report.frame, metrics, report.analyst)), ""]
    collapsed = [f"{v} ≡ {w}" for v, w in analysis.collapsed.items()]
    if collapsed:
        lines += ["Bit-identical at every logged step and in every test output, for every seed (one set of numbers, "
                  "not a second sample; not tested against each other): " + "; ".join(collapsed) + ".", ""]
    if analysis.comparisons:
        lines += [f"### Against {experiment.config.baseline_label} on {label(analysis.primary)}"
                  + ("" if differ else f" at {own}") + " (the verdicts)", "",
                  md_table(*comparison_rows(experiment, analysis)), "", *confound_lines(report, analysis)]
        lines += ["Other metrics, descriptive (difference [95% CI], no verdicts):", "",
                  md_table(*descriptive_rows(analysis, descriptive_metrics(task))), ""]
    stem = plots.file_stem(task.key)
    figures = [("test metric per seed", plots.seed_values(experiment, analysis, report.analyst,
                                                          out_dir / "plots" / f"{stem}-seeds.png"))]
    if analysis.comparisons:
        figures.append(("effects", plots.effects(experiment, analysis, out_dir / "plots" / f"{stem}-effects.png")))
    logged = curves(report.analyst.records)
    figures.append(("learning curves", plots.learning_curves(experiment, task, logged,
                                                             out_dir / "plots" / f"{stem}-curves.png")))
    for title, png in figures:
        lines += [f"![{task.key}: {title}]({png.relative_to(out_dir).as_posix()})", ""]
    return lines


def confound_lines(report: Report, analysis: TaskAnalysis) -> list[str]:
    """Variants whose trainable parameter count differs from the baseline's: their verdicts compare capacity too."""
    rows = report.frame[(report.frame.task == analysis.task.key) & report.frame.parameters.notna()]
    counts = rows.groupby("variant").parameters.median()
    baseline = counts.get(report.experiment.config.baseline_label)
    if baseline is None or not baseline:
        return []
    differ = [f"{variant} {int(n - baseline):+,} ({(n - baseline) / baseline:+.1%})"
              for variant, n in counts.items() if variant in analysis.comparisons and n != baseline]
    if not differ:
        return []
    return [f"Parameter confounds (trainable parameters against {report.experiment.config.baseline_label}'s "
            f"{int(baseline):,}): " + "; ".join(differ) + ". Their verdicts compare a change of capacity as well.", ""]


def _budget(config) -> str:
    """A training config's budget in words: what every verdict on the task is conditional on."""
    parts = [f"{config.steps:,} steps" if config.steps else "", f"{config.epochs:g} epochs" if config.epochs else "",
             f"{config.minutes:g} minutes" if config.minutes else ""]
    return " / ".join(p for p in parts if p)


def budgets(experiment: Experiment, task) -> tuple[str, list[str]]:
    """The baseline's budget on `task` ('4,000 steps'), and 'variant at its budget' for every variant that differs."""
    seed, baseline = experiment.config.seeds[0], experiment.config.baseline_label
    own = _budget(experiment.train_config(task, seed, baseline))
    others = {v.label: _budget(experiment.train_config(task, seed, v.label)) for v in experiment.config.variants}
    return own, [f"{variant} at {b}" for variant, b in others.items() if b != own]


def floor_lines(report: Report, analysis: TaskAnalysis) -> list[str]:
    """The task's trivial floors, and the line that replaces its verdicts when the baseline does not clear them."""
    if analysis.floors is None:
        return [f"Trivial floors: none recorded (`zoo floors {os.path.relpath(report.experiment.path)}` scores "
                "them), so the verdicts are not checked against what doing nothing scores.", ""]
    scores = ", ".join(f"{name} {value:.2f}" for name, value in analysis.floors.items())
    lines = [f"Trivial floors (systems that learn nothing, scored like the models on test "
             f"{label(analysis.primary)}): {scores}."]
    if analysis.below_floor:
        lines[0] += f" **No verdicts on this task**: {analysis.below_floor}."
    return [*lines, ""]


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
                     fmt_p(r.p_adjusted), "—" if equivalent is None else ("yes" if equivalent else "not shown"),
                     "**SIGNIFICANT: the report's verdicts are suspect**" if significant else "not significant"])
    lines = ["Variants the equivalence check proves to compute the same function, trained alike: any difference "
             "between them is noise (seeds, rounding), so they show how large a difference noise alone makes here. "
             "A pair not tested against the baseline is tested at the raw alpha (stricter for this check).", "",
             md_table(["task", "placebo pair", "difference [95% CI]", "p", "equivalent within margin", "status"],
                      rows), ""]
    if flagged:
        lines.insert(0, f"> **Warning: a placebo comparison is significant ({'; '.join(flagged)}).** Noise alone "
                        "produced a verdict here; treat every verdict of this report with suspicion.\n")
    return lines


def findings_section(report: Report) -> list[str]:
    if not report.checks:
        return ["The experiment file lists no findings to check."]
    lines = []
    for c in report.checks:
        f = c.finding
        published = f" Published: {f.published}." if f.published else ""
        where = f" on `{c.task}`" if c.task != "—" else ""
        lines.append(f"- **{c.outcome}**{where}: “{f.claim}” ({f.source}).{published} "
                     f"Expected: {f.variant} {f.expect} vs {f.against or report.experiment.config.baseline_label}"
                     f" ({f.kind}, {label(c.metric)}). Here: {c.evidence}.")
    return lines


def method_section(report: Report) -> list[str]:
    analysis = report.experiment.config.analysis
    correction = "Holm" if analysis.correction == "holm" else "Benjamini–Hochberg"
    return [
        "- The seed is the unit of evidence: each run gives one number per metric; variants are compared over seeds.",
        "- Outcomes: complete, stalled (complete but the primary validation metric ended below the task's floor), "
        "diverged (a non-finite loss), failed (raised). Quality uses complete runs only; instability (stalled + "
        "diverged) has a Clopper–Pearson interval and is compared with the baseline by Fisher's exact test; "
        "'detectable rise' is the smallest increase of the unstable share over the baseline's that the test "
        "finds with 80% power at the level one rejection needs after the correction (alpha / the instability family; "
        "exact binomial power); 'cannot reject after correction' where no outcome of the runs could reach it.",
        "- Per-seed metrics: Welch's t-test and interval (Welch–Satterthwaite df); with unequal seed counts the "
        "p-value is the larger of Welch's and an exact permutation p. Corpus metrics (BLEU, chrF, exact match) add "
        "test-sentence variation: variance = Welch seed variance of the per-seed scores + paired sentence-bootstrap "
        "variance (1000 resamples), Satterthwaite df. The sentence-only bootstrap p is shown for reference: it "
        "holds the trained models fixed and sees no seed variation.",
        f"- One verdict per task, on its primary metric. Its test, its TOST at the task's margin, the findings' own "
        f"tests and any transfer interactions with their TOSTs form one family ({report.family} tests), p-values "
        f"adjusted by {correction} at alpha {analysis.alpha:g}: 'equivalent' needs the adjusted TOST p below alpha "
        f"too. Instability tests form a second family ({report.failure_family} tests). Every other number is "
        "descriptive.",
        f"- No verdict below {analysis.min_seeds} trained seeds per arm (per-seed values instead).",
        "- Effect sizes: P(better) = chance that a random seed of the variant beats a random seed of the baseline "
        "(Bouthillier et al. 2021); ASO ε_min = Almost Stochastic Order (Dror et al. 2019) over every run that trained "
        "to the end, stalled ones included: below 0.2 (the authors' threshold) the variant almost dominates the "
        "baseline; above it, no claim. Descriptive, at 5 or more seeds.",
        f"- Power: 'detectable Δ' is the smallest true difference the design detects with {analysis.power:.0%} power "
        "at the level one rejection needs after the correction (alpha divided by the family's size: Holm's first "
        "step; noncentral t from the comparison's own standard error); 'no difference larger than X could be "
        "detected' is not evidence of no difference. 'seeds for ±X' is the number per arm that would detect the "
        "task's target effect at that level, under the same variance model (a corpus metric's test-set variance "
        "does not shrink with seeds).",
        "- Equivalence only by TOST (two one-sided tests) against a margin declared per task in the experiment file.",
        "- Placebos: variant pairs proven to compute one function and trained alike measure the noise floor.",
        "- Steps to threshold: Kaplan–Meier median over finished runs (a run that never reaches it is censored at "
        "its last evaluation). Curve area: mean level of the validation primary metric over training. "
        "Δ over the last quarter: the last validation value minus the value at 75% of the steps, per seed; "
        "a clearly positive interval says training was still improving when it stopped; one around 0 does "
        "not show the plateau under a schedule that decays to zero (the decay flattens the end of any budget), "
        "which only a longer budget can show (a task may declare `below_plateau`).",
    ]


def build_report(experiment: Experiment, records_root: Path, out_dir: Path, command: str) -> tuple[Path, Report]:
    """Write report.md, results.csv and plots/ into `out_dir` from the records; returns report.md and the analysis."""
    out_dir = Path(out_dir)
    (out_dir / "report.md").unlink(missing_ok=True)  # first: never an old report beside new tables
    report = analyse(experiment, Path(records_root))
    out_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out_dir / "results.csv", report.frame.to_csv(index=False))
    config = experiment.config
    from zoo import __version__
    from zoo.experiment.record import zoo_commit
    from zoo.machine import cpu_model

    where = os.path.relpath(experiment.path)
    lines = [f"<!-- generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC by zoo {__version__} ({zoo_commit()}) "
             f"on {cpu_model()}; the rest of this file is a function of the records and the experiment file -->",
             f"# {config.name}: comparison report", ""]
    if config.description:
        lines += [config.description.strip(), ""]
    lines += [f"Made from the records in `{Path(records_root).name}/` with `{command}`.", "",
              "## Grid status", "", *grid_status(report)]
    if len(report.tasks) > 1:
        lines += ["## Overview", "",
                  "Per task: the mean test primary metric over trained seeds, the unstable (stalled + diverged) runs, "
                  f"and the verdict against {config.baseline_label}; each task's section has the intervals and "
                  "p-values.", "", md_table(*overview_rows(experiment, report.tasks, report.analyst)), ""]
        png = plots.instability(experiment, report.tasks, out_dir / "plots" / "instability.png")
        lines += [f"![unstable runs per task]({png.relative_to(out_dir).as_posix()})", ""]
    for analysis in report.tasks:
        lines += task_section(report, analysis, out_dir)
    if report.transfers:
        lines += ["## Transfer between tasks", "",
                  *transfer_section(report.transfers, config.name, config.analysis.min_seeds, out_dir,
                                    config.analysis.correction)]
    lines += ["## Placebo pairs (the noise floor)", "", *placebo_section(report)]
    lines += ["## Equivalence of the variants", "",
              "Cell (A, B): ≡ if B, given A's (generic) weights, computes A's log-probabilities (zoo.equivalence); "
              "a pair is equivalent when both directions say ≡.", "", matrix_markdown(report.matrix), ""]
    lines += [f"- spec of {name}: {source}" for name, source in report.matrix.sources.items()]
    lines += [f"- {note}" for note in report.matrix.notes] + [""]
    lines += ["## Findings", "", *findings_section(report), ""]
    png = plots.throughput(experiment, report.frame, out_dir / "plots" / "throughput.png")
    lines += ["## Throughput (descriptive)", "", f"![throughput]({png.relative_to(out_dir).as_posix()})", ""]
    lines += ["## Method", "", *method_section(report), "", "## Provenance", "", *provenance(report), "",
              f"## Experiment file `{where}`", "", f"```{experiment.path.suffix.lstrip('.') or 'text'}",
              experiment.path.read_text(encoding="utf-8").strip("\n"), "```", "",
              "All runs, one row each: [results.csv](results.csv); per-run records: "
              f"[{Path(records_root).name}/]({Path(records_root).name}/).", ""]
    path = out_dir / "report.md"
    write_text_atomic(path, "\n".join(lines))
    return path, report


