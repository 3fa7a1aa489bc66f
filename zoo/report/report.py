"""build_report: run directories -> reports/<exp>/report.md + results.csv + plots/*.png.

The report is written for someone who did not run the experiment: it names the command and the
machine, quotes the experiment file, says which runs are missing or broken before showing any
number, and gives every comparison as a test with a plain-words verdict. It reads only what the
runs wrote (see collect.py); it never trains or decodes.
"""

from __future__ import annotations

import os
import platform
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import torch

from zoo.atomic import write_text_atomic
from zoo.experiment import Experiment
from zoo.experiment.config import TaskEntry
from zoo.report import plots
from zoo.report.collect import STATUSES, collect, curves, main_metric, references, task_kind
from zoo.report.compare import (Comparer, FindingCheck, check_findings, comparison_rows, fmt_difference, fmt_p,
                                label, results_rows)
from zoo.report.equiv import Matrix, equivalence_matrix, matrix_markdown
from zoo.report.stats import ALPHA, BOOTSTRAP_SEED, RESAMPLES


def md_table(header: list[str], rows: list[list[str]]) -> str:
    def cell(text: object) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def machine(frame: pd.DataFrame) -> list[str]:
    """Where the report was made, and where the runs were trained (which may be elsewhere)."""
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none visible to PyTorch"
    trained = Counter(d for d in frame.device if isinstance(d, str) and d)
    return [
        f"- CPU: {cpu_model()} ({os.cpu_count()} logical cores)",
        f"- GPU: {gpu}",
        f"- PyTorch {torch.__version__}, Python {platform.python_version()}, {platform.platform()}",
        "- runs trained on (summary.json): " + (", ".join(f"{d} ({n} runs)" for d, n in trained.most_common())
                                                  or "no finished runs"),
    ]


def grid_status(frame: pd.DataFrame, experiment: Experiment) -> list[str]:
    counts = Counter(frame.status)
    lines = [f"{len(frame)} runs planned: " + ", ".join(f"{counts[s]} {s}" for s in STATUSES if counts[s]) + ".", ""]
    header = ["variant", *(t.key for t in experiment.config.tasks)]
    rows = []
    for variant in (v.label for v in experiment.config.variants):
        row = [variant]
        for task in experiment.config.tasks:
            mine = frame[(frame.variant == variant) & (frame.task == task.key)]
            by_status = {s: [str(x) for x in mine[mine.status == s].seed] for s in STATUSES}
            row.append("; ".join(f"{s}: seed {', '.join(seeds)}" for s, seeds in by_status.items() if seeds))
        rows.append(row)
    lines.append(md_table(header, rows))
    problems = frame[frame.status != "complete"]
    notes = [f"- `{r.variant} / {r.task} / seed-{r.seed}`: **{r.status}** — {r.reason}" for r in problems.itertuples()]
    untested = frame[(frame.status == "complete") & (frame.reason.fillna("") != "")]
    notes += [f"- `{r.variant} / {r.task} / seed-{r.seed}`: complete, but {r.reason}" for r in untested.itertuples()]
    return lines + (["", "Not counted in any statistic (or only partly):", "", *notes] if notes else [])


def task_section(experiment: Experiment, task: TaskEntry, frame: pd.DataFrame, logged: pd.DataFrame,
                 comparer: Comparer, out_dir: Path) -> list[str]:
    metric = main_metric(task)
    kind = "translation, scored by BLEU and chrF (sacreBLEU)" if task_kind(task) == "text" else \
        "synthetic, scored by exact match of the whole sequence"
    threshold = f"; threshold: valid {metric.replace('_', ' ')} ≥ {task.threshold:g}" if task.threshold is not None else ""
    lines = [f"## Task `{task.key}`", "", f"`{task.name}`: {kind}{threshold}. "
             f"Baseline: **{experiment.config.baseline_label}**.", "",
             "Mean ± half-width of the 95% confidence interval over complete seeds (Student t); "
             "one seed shows its value and n=1. Validation numbers are from the last evaluation, test "
             "metrics from the test set decoded after training.", ""]
    lines += [md_table(*results_rows(frame, experiment, task)), ""]
    comparisons = comparer.task_comparisons(task)
    if comparisons:
        lines += [f"Each variant against the baseline (alpha {ALPHA}; verdicts take the measure's direction: "
                  "higher is better for BLEU, chrF, exact match and tokens/s, lower for loss, perplexity and steps):", ""]
        lines += [md_table(*comparison_rows(comparisons, task)), ""]
        for note in comparer.notes.get(task.key, []):
            lines += [f"Note: {note}", ""]
        lines += loss_caveat(experiment, task)
    stem = plots.file_stem(task.key)
    curves_png = plots.learning_curves(experiment, task, logged, out_dir / "plots" / f"{stem}-curves.png")
    bars_png = plots.metric_bars(experiment, task, frame, out_dir / "plots" / f"{stem}-metrics.png")
    for title, png in (("learning curves", curves_png), ("test metrics", bars_png)):
        lines += [f"![{task.key}: {title}]({png.relative_to(out_dir).as_posix()})", ""]
    return lines


def loss_caveat(experiment: Experiment, task: TaskEntry) -> list[str]:
    """Validation loss is each variant's training objective; say so where the objectives differ."""
    objectives: dict[tuple[str, float], list[str]] = {}
    for variant in experiment.config.variants:
        smoothing = experiment.train_config(task, experiment.config.seeds[0], variant.label).label_smoothing
        objectives.setdefault((experiment.specs[variant.label].output.kind, smoothing), []).append(variant.label)
    if len(objectives) < 2:
        return []
    groups = "; ".join(f"{', '.join(labels)}: {kind} head, label smoothing {smoothing:g}"
                       for (kind, smoothing), labels in objectives.items())
    return [f"Note: valid loss is each variant's own training objective (see zoo/loss.py), and the objectives "
            f"differ here ({groups}), so its differences are partly definitional. Valid perplexity, from the "
            "unsmoothed negative log-likelihood, is comparable across all of them.", ""]


def findings_section(checks: list[FindingCheck], baseline: str, matrix: Matrix | None = None) -> list[str]:
    if not checks:
        return ["The experiment file lists no findings to check."]
    lines = []
    for check in checks:
        f, test = check.finding, check.test
        evidence = ""
        if test is not None and test.n_baseline and test.n_variant:
            difference = fmt_difference(test.difference, check.metric)
            evidence = (f": {test.verdict} (difference {difference}, p {fmt_p(test.p_value)}, {test.method}, "
                        f"seeds {test.n_baseline} vs {test.n_variant})")
        reference = f.against or baseline
        expected = (f"no difference between {f.variant} and {reference}" if f.expect == "no difference"
                    else f"{f.variant} to be *{f.expect}* than {reference}")
        alike = ""
        if matrix is not None and matrix.alike(f.variant, reference):
            alike = (f" The equivalence check shows that {f.variant} and {reference} compute the same function and "
                     "train alike: a gap between them is training noise (seeds, rounding), not an effect.")
        lines.append(f"- **{check.outcome}** — “{f.claim}” ({f.source}). Expected {expected} on "
                     f"{label(check.metric)}; on `{check.task}` the data say{evidence or ' nothing: ' + check.outcome}."
                     + alike)
    return lines


def method_section() -> list[str]:
    return [
        "- Only complete runs enter a statistic; diverged, failed, incomplete and missing runs are listed above.",
        "- Confidence intervals: mean ± t(0.975, n−1)·s/√n over seeds (s with n−1 in the denominator).",
        "- BLEU: paired bootstrap over test sentences (Koehn 2004), "
        f"{RESAMPLES} resamples (seed {BOOTSTRAP_SEED}) shared by both systems, corpus BLEU from sacreBLEU's "
        "sentence statistics, averaged over the seeds both variants completed; "
        "p = min(1, 2(k+1)/(R+1)) where k counts resamples whose difference does not have the observed sign. "
        "It resamples sentences with the trained models held fixed, so it asks whether a difference would "
        "survive another test set, not another seed: where seeds disagree (a wide interval in the table), "
        "read the per-seed values in results.csv before trusting a verdict.",
        "- Every other measure: Welch's t-test over seeds (scipy.stats.ttest_ind, equal_var=False); fewer than "
        "two seeds on a side gives “not enough seeds”.",
        f"- A difference is called better/worse when p < {ALPHA}, otherwise “no detectable difference” "
        "(which is not evidence of equality).",
        "- Steps to threshold are averaged over the runs that reached it; the table says how many did.",
    ]


def build_report(experiment: Experiment, runs_root: Path, out_dir: Path, command: str) -> Path:
    """Write report.md, results.csv and plots/ into `out_dir`; return the path of report.md."""
    runs_root, out_dir = Path(runs_root), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    frame = collect(experiment, runs_root)
    write_text_atomic(out_dir / "results.csv", frame.to_csv(index=False))
    logged = curves(frame)
    comparer = Comparer(experiment, frame, references)
    config = experiment.config
    lines = [f"# {config.name}: comparison report", ""]
    if config.description:
        lines += [config.description, ""]
    lines += [f"Generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC from `{runs_root}` with:", "",
              "```", command, "```", "", "## Machine", "", *machine(frame), "",
              f"## Experiment file `{experiment.path}`", "",
              f"```{experiment.path.suffix.lstrip('.') or 'text'}", experiment.path.read_text().strip("\n"), "```", "",
              "## Grid status", "", *grid_status(frame, experiment), ""]
    for task in config.tasks:
        lines += task_section(experiment, task, frame, logged, comparer, out_dir)
    png = plots.throughput(experiment, frame, out_dir / "plots" / "throughput.png")
    lines += ["## Throughput", "", f"![throughput against trainable parameters]({png.relative_to(out_dir).as_posix()})", ""]
    matrix = equivalence_matrix(experiment, runs_root)
    lines += ["## Equivalence of the variants", "",
              "Cell (A, B): ≡ if B, given A's (generic) weights, computes A's log-probabilities (zoo.equivalence); "
              "a pair is equivalent when both directions say ≡.", "", matrix_markdown(matrix), ""]
    lines += [f"- spec of {name}: {source}" for name, source in matrix.sources.items()]
    lines += [f"- {note}" for note in matrix.notes] + [""]
    lines += ["## Findings", "", *findings_section(check_findings(experiment, comparer), config.baseline_label, matrix),
              ""]
    lines += ["## Method", "", *method_section(), "", "All runs, one row each: [results.csv](results.csv).", ""]
    report = out_dir / "report.md"
    write_text_atomic(report, "\n".join(lines))
    return report
