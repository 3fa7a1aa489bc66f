"""Grid status: which runs are missing, stale or broken (a record refused: which file, and why), said before any
number."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from zoo.report.collect import STATUSES
from zoo.report.sections.sequential import called_line
from zoo.report.study import Report
from zoo.report.tables import md_text


def grid_status(report: Report) -> list[str]:
    frame = report.frame
    counts = Counter(frame.status)
    planned = f"{len(frame)} runs planned" if report.sequential is None else called_line(report)
    lines = [f"{planned}: " + ", ".join(f"{counts[s]} {s}" for s in STATUSES if counts[s]) + ".", ""]
    problems = frame[~frame.status.isin(["complete", "stalled", "diverged", "missing"])]
    folder = Path(report.analyst.records.root).name
    notes = [f"- `{r.variant} / {r.task} / seed-{r.seed}`: **{r.status}**: "
             + (f"`{folder}/{r.record}` is not used: " if r.status == "refused" else "") + md_text(r.reason)
             for r in problems.itertuples()]
    notes += _missing(frame)
    if notes:
        lines += ["Not counted in any statistic:", "", *notes, ""]
    unchecked = sorted(report.analyst.records.unchecked_data)
    if unchecked:
        lines += [f"The data of {', '.join(unchecked)} is not on this machine: those records were matched to the "
                  "experiment file without their data fingerprint.", ""]
    return lines


def interim(frame, task: str, sequential: bool = False) -> str:
    """Why the verdicts of a task stopped part-way are interim, said wherever they are shown; "" when complete.
    With [sequential] the cells are those called so far, and what a look decided stands."""
    of_task = frame[frame.task == task]
    missing = int((of_task.status == "missing").sum())
    if not missing:
        return ""
    if sequential:
        return (f"{missing} of the {len(of_task)} cells of `{task}` called so far have no record yet: the decisions "
                "of the looks made stand, the open comparisons wait for the next look, and the fixed-sample columns "
                "use the seeds trained so far")
    return (f"{missing} of {len(of_task)} cells of `{task}` have no record yet, so these verdicts use the "
            "seeds trained so far and can change when the declared seeds are in")


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
