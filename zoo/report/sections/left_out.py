"""Runs left out: every trained run the records do not hold, with the rule that left it out, and the verdicts
recomputed with them kept (zoo/report/left_out.py); no section where the report folder has no left-out/."""

from __future__ import annotations

import math
from pathlib import Path

from zoo.experiment import executed, store
from zoo.report import left_out as lo
from zoo.report.paths import shown
from zoo.report.study import Report
from zoo.report.tables import fmt, fmt_difference, label, md_table, md_text

SHOWN_MOVES = 10  # the largest moves of an estimate a sensitivity line names


class LeftOutRuns:
    def title(self, report: Report) -> str:
        return "Runs left out"

    def render(self, report: Report, out_dir: Path) -> list[str] | None:
        found = lo.read(report.experiment, report.analyst.records.root)
        if found is None:
            return None
        experiment = report.experiment
        where = shown(experiment.path, found.folder)
        primary = {analysis.task.key: analysis.primary for analysis in report.tasks}
        metrics = sorted(set(primary.values()))
        value = label(metrics[0]) if len(metrics) == 1 else "primary metric"
        lines = [f"Trained runs of this study that its records do not hold, each with the rule that left it out "
                 f"(`{where}/{lo.REASONS}`). Their records lie in `{where}/` in the records' layout, each the file as "
                 "it was committed before its removal, and are read as the records are; no number above this section "
                 "comes from them.", "",
                 md_table(["arm", "task", "seed", "device", f"test {value}", "kept run (same cell)", "rule",
                           "rule declared", "recorded", "removed in"],
                          [_row(report, found, run, primary[run.task]) for run in found.runs]), ""]
        lines += [f"- `{name}`, declared in {rule.declared}: {md_text(rule.text)}" for name, rule in found.rules.items()
                  if any(run.rule == name for run in found.runs)]
        other = _other_definitions(report, found)
        if other:
            lines.append("- recorded under another definition than the grid's now (kept as they were): "
                         + "; ".join(other))
        return [*lines, "", *_sensitivity_lines(report, found)]


def _row(report: Report, found: lo.LeftOut, run: lo.Run, metric: str) -> list[str]:
    kept = report.frame[(report.frame.variant == run.variant) & (report.frame.task == run.task)
                        & (report.frame.seed == run.seed)]
    status = str(kept.status.iloc[0]) if len(kept) else "missing"
    if status == "missing":
        kept_text = "none"
    elif status in ("stale", "refused"):
        kept_text = f"none counted (its record is {status})"
    elif status in ("diverged", "failed"):
        kept_text = status
    else:
        kept_text = (f"{fmt(float(kept[metric].iloc[0]), metric)}{'' if status == 'complete' else f' ({status})'}, "
                     f"{md_text(kept.device.iloc[0] or 'unknown')}")
    entry = run.entry
    if run.record is None:
        recorded = f"no record in the repository; the number is {md_text(entry.source)}'s"
    else:
        recorded = str(entry.recorded) if entry.recorded is not None else "—"
    return [run.variant, run.task, str(run.seed), md_text(run.device), fmt(run.value(metric), metric), kept_text,
            f"`{run.rule}`", str(found.rules[run.rule].declared), recorded,
            str(entry.removed) if entry.removed is not None else "never committed"]


def _other_definitions(report: Report, found: lo.LeftOut) -> list[str]:
    """'ARM/TASK/seed-N: what differs' for each left-out record made under another definition than its cell's now."""
    tasks = {task.key: task for task in report.experiment.config.tasks}
    out = []
    for run in found.recorded:
        if run.record.status == "failed":
            continue
        now = store.definition(report.experiment, run.variant, tasks[run.task], run.seed)
        changed = executed.what_changed(run.record, now)  # what would make it stale in records/
        if changed:
            what = "; ".join(change.replace(" -> ", " → ") for change in changed)
            out.append(f"{run.variant}/{run.task}/seed-{run.seed}: {md_text(what)}")
    return out


def _sensitivity_lines(report: Report, found: lo.LeftOut) -> list[str]:
    logged = [run for run in found.runs if run.record is None]
    lead = ("Sensitivity: the report's own analysis again, each left-out record in place of the kept record of its "
            "cell (a cell with no kept record gains it), and its verdicts (the comparisons with the baseline, their "
            "failure-rate tests, the findings, the transfers' interactions) beside this report's")
    if logged:
        lead += (f"; {_count(len(logged), 'run')} known from a log alone, with no record in the repository, "
                 f"cannot enter it ("
                 + ", ".join(f"{run.variant} seed {run.seed}" for run in logged) + ")")
    if report.sequential is not None:
        return [lead + ": not made for a study with [sequential], whose seeds are its looks'.", ""]
    if not found.recorded:
        return [lead + ": none, as no run left out has a record.", ""]
    groups = [(f"every left-out record ({_count(len(found.recorded), 'record')})", found.recorded)]
    by_rule = {name: [run for run in found.recorded if run.rule == name] for name in found.rules}
    by_rule = {name: runs for name, runs in by_rule.items() if runs}
    if len(by_rule) > 1:
        groups += [(f"the {_count(len(runs), 'record')} rule `{name}` left out", runs)
                   for name, runs in by_rule.items()]
    lines = [lead + ":", ""]
    for name, runs in groups:
        lines.append(f"- with {name}: {_said(lo.sensitivity(report, runs))}")
    return [*lines, ""]


def _said(result: lo.Sensitivity) -> str:
    if result.changed:
        verdicts = (f"verdicts that change ({len(result.changed)} of {len(result.changed) + result.unchanged}): "
                    + "; ".join(f"{md_text(what)}: {before} → {after}" for what, before, after in result.changed))
    else:
        verdicts = f"no verdict changes (of {result.unchanged})"
    several = len(result.metric) > 1
    moved = [move for move in result.moves if not math.isnan(move[3] - move[2])]
    moves = [f"{variant}{f' on {task}' if several else ''} {fmt_difference(kept, result.metric[task])} → "
             f"{fmt_difference(now, result.metric[task])}" for task, variant, kept, now in moved[:SHOWN_MOVES]]
    if len(moved) > SHOWN_MOVES:
        moves.append(f"{_count(len(moved) - SHOWN_MOVES, 'other')}, each by less")
    return verdicts + ("; the estimates against the baseline, largest move first: " + ", ".join(moves)
                       if moves else "")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
