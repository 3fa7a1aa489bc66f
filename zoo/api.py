"""Experiments from Python: what `zoo run`, `zoo report` and results.csv give on the command line, for a
researcher who would rather stay in a notebook.

    study = zoo.study("experiments/quickstart.toml")   # the experiment file, validated (plugins loaded)
    frame = study.records()                            # results.csv as a DataFrame: one row per grid cell
    study.run(workers=2)                               # train the cells without a current record (`zoo run`)
    study.run(until_decided=True)                      # [sequential]: rounds of seeds until decided
    table = study.verdicts()                           # the report's verdicts as a DataFrame
    report = study.analyse()                           # everything the report says, as objects
    path = study.report()                              # report.md, results.csv and plots/ (`zoo report`)

The folders are the command line's: run directories in `runs/<name>`, records in `reports/<name>/records`,
both in the repository that holds the experiment file (its nearest folder above with a pyproject.toml or a .git;
for a file outside any, the working folder), whichever folder the command runs in, unless `runs=` and `out=` say
otherwise. The CLI's `zoo run` and
`zoo report` are this class with flags around it, so both write the same files.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from zoo.experiment import Experiment, ExperimentError, load_experiment
from zoo.experiment.grid import Part
from zoo.experiment.store import RECORDS, StoreError
from zoo.plugins import load_all

if TYPE_CHECKING:
    import pandas as pd
    from rich.console import Console

    from zoo.experiment.executors import Executor, Results
    from zoo.report.sequential import SequentialState
    from zoo.report.study import Report


class Study:
    """One experiment file and the folders its runs and records live in."""

    def __init__(self, experiment: Experiment | str | Path, *, out: str | Path | None = None,
                 runs: str | Path | None = None):
        # entry points and $ZOO_PLUGINS, as the zoo command loads them (loading is idempotent): without, a grid
        # `zoo run` recorded with such a plugin read as stale here, and study.run() moved its records aside and
        # trained them without it
        load_all()
        self.experiment = experiment if isinstance(experiment, Experiment) else load_experiment(experiment)
        self.out = folder("out=", Path(out) if out is not None else default_folder(self.experiment, "reports"))
        self.runs = folder("runs=", Path(runs) if runs is not None else default_folder(self.experiment, "runs"))

    def __repr__(self) -> str:
        return f"Study({self.experiment.name!r}, out={self.out.as_posix()!r}, runs={self.runs.as_posix()!r})"

    @property
    def name(self) -> str:
        return self.experiment.name

    @property
    def records_root(self) -> Path:
        return self.out / RECORDS

    def records(self) -> pd.DataFrame:
        """One row per cell of the grid (variant x task x seed), with results.csv's columns: status as the report
        counts it ('stalled' where the run trained to its end below its task's floor, 'missing' where nothing is
        recorded, 'stale' where the record was made under another definition), the metrics, the training cost and
        the device."""
        from zoo.report.collect import collect, load_records
        from zoo.report.sequential import called_records

        state = self.sequential()
        if state is None:
            return collect(self.experiment, load_records(self.experiment, self.records_root))
        experiment = self.experiment.with_calls(state.calls())  # the cells its plan has called, as the report
        return collect(experiment, called_records(state, experiment))

    def part(self, variants: Sequence[str] | None = None, tasks: Sequence[str] | None = None,
             seeds: Sequence[int] | None = None, *, data: bool = True) -> Part:
        """Those variants, tasks (by key) and seeds of the grid (None: all), checked against the experiment, with
        the data of their tasks found (`data=False`: not looked for, as a dry run prices a grid without it)."""
        part = Part(*(None if chosen is None else tuple(chosen) for chosen in (variants, tasks, seeds)))
        part = part.checked(self.experiment)
        if data:
            self.experiment.check_data(part.task_entries(self.experiment))
        return part

    def floors(self, tasks: list | None = None, console: Console | None = None) -> list[str]:
        """Score each task's (or `tasks`') trivial systems (zoo/experiment/floors.py) where no current floor file
        is there; the task keys scored, said on `console` when given."""
        from zoo.experiment.floors import write_floors

        if console is None:
            return write_floors(self.experiment, self.records_root, tasks)
        with console.status(f"{self.name}: scoring the tasks' trivial systems (copy the source, ...)"):
            written = write_floors(self.experiment, self.records_root, tasks)
        if written:
            console.print(f"{self.name}: trivial floors of {', '.join(written)} -> {self.records_root / '.floors'}",
                          highlight=False, markup=False, soft_wrap=True)
        return written

    def run(self, *, workers: int = 1, executor: str | Executor = "local", variants: Sequence[str] | None = None,
            tasks: Sequence[str] | None = None, seeds: Sequence[int] | None = None,
            reuse_from: Sequence[str | Path] = (), log_to: str | Path | None = None, live: bool = True,
            console: Console | None = None, until_decided: bool = False, **options: Any) -> Results:
        """Train every cell (or those of `variants`, `tasks`, `seeds`) without a current record, `workers` at a
        time; returns {cell name: (status, reason)}, the status as `records()` and the report count it. Records
        already there are kept, a stopped grid resumes, and
        `reuse_from` names other report folders whose records of a cell's very definition are copied instead.
        `executor`: a registered executor's name with its `options`, or an executor.

        With [sequential], the cells are those its plan has called for, read from the records (`called`): without
        `until_decided` the rounds already begun, never a new one; with it, round after round: train the round's
        cells, make the look, call the next round for the arms still open, until every comparison is decided or
        at its cap, or a look waits for a cell that did not train (a failure; a part of the grid that leaves cells
        out). Every round is read from the records again, so an interrupted run resumes where they leave off."""
        from zoo.experiment.owner import check_grid
        from zoo.experiment.runner import run_grid

        self._plan_needed(until_decided)
        part = self.part(variants, tasks, seeds)
        check_grid(self.experiment, self.runs, self.records_root)  # another experiment's store: refused first
        self.floors(part.task_entries(self.experiment), console)
        if isinstance(executor, str) and executor == "local":
            options.setdefault("workers", workers)
        results: Results = {}
        calls = None
        while True:
            experiment = self.called(until_decided)
            if experiment.calls == calls:  # the last round called nothing new: decided, at the cap, or waiting
                return results
            calls = experiment.calls
            results.update(run_grid(experiment, self.runs, self.records_root, executor=executor, console=console,
                                    live=live, reuse_from=[Path(folder) for folder in reuse_from],
                                    log_to=None if log_to is None else Path(log_to), part=part, **options))
            if not until_decided or self.experiment.config.sequential is None:
                return results

    def sequential(self) -> SequentialState | None:
        """With [sequential], the design's state read from the records (zoo/report/sequential.py): the looks made,
        what they decided, each arm's called seeds; None without it."""
        from zoo.report.sequential import read

        if self.experiment.config.sequential is None:
            return None
        return read(self.experiment, self.records_root)

    def called(self, until_decided: bool = False) -> Experiment:
        """The experiment with the seeds its sequential plan has called each arm for: what `zoo run --until-decided`
        trains next, or without `until_decided` those of the rounds already begun only (what plain `zoo run`
        trains); the experiment itself without [sequential] (where `until_decided` is an error)."""
        self._plan_needed(until_decided)
        state = self.sequential()
        if state is None:
            return self.experiment
        return self.experiment.with_calls(state.calls(None if until_decided else state.started()))

    def _plan_needed(self, until_decided: bool) -> None:
        if until_decided and self.experiment.config.sequential is None:
            raise ExperimentError(f"--until-decided: {self.name} has no [sequential] table; add one to "
                                  f"{self.experiment.path} (e.g. [sequential] with round_seeds = 5, max_seeds = 30) "
                                  "to train seeds in rounds until each comparison is decided")

    def analyse(self) -> Report:
        """The report's analysis of the records, without writing anything: per task the verdicts, effects and
        intervals (`report.tasks`), the findings (`report.checks`) and transfers (`report.transfers`)."""
        from zoo.report import analyse

        return analyse(self.experiment, self.records_root)

    def verdicts(self) -> pd.DataFrame:
        """One row per task and variant compared with its reference: the primary metric's difference with its
        95% interval, the p-value adjusted as the report adjusts it, the equivalence margin, and the verdict in
        one word as report.md gives it (better, worse, equivalent, undecided, no verdict)."""
        import pandas as pd

        from zoo.report.tables import verdict_class

        rows = []
        for analysis in self.analyse().tasks:
            for variant, comparison in analysis.comparisons.items():
                result, equivalence = comparison.result, comparison.equivalence
                rows.append({"task": analysis.task.key, "variant": variant, "reference": comparison.reference,
                             "metric": comparison.metric, "seeds": (result.n_variant, result.n_baseline),
                             "difference": result.difference, "ci_low": result.ci_low, "ci_high": result.ci_high,
                             "p_adjusted": result.p_adjusted,
                             "margin": equivalence.margin if equivalence is not None else float("nan"),
                             "verdict": verdict_class(comparison)})
        return pd.DataFrame(rows)

    def report(self) -> Path:
        """Write report.md, results.csv and plots/ into the report folder; returns report.md's path."""
        return self.write_report()[0]

    def write_report(self) -> tuple[Path, Report]:
        """`report`, and the analysis it was written from."""
        from zoo.report import ReportError, build_report
        from zoo.report.paths import shown

        if not self.records_root.is_dir():
            raise ReportError(f"--out: {self.out} holds no records/ folder; run the experiment first (zoo run "
                              f"{shown(self.experiment.path)}) or point --out at the report folder that holds its "
                              "records")
        return build_report(self.experiment, self.records_root, self.out, self.command())

    def command(self) -> str:
        """The `zoo report` command that makes this report, as typed at the root of the experiment's repository
        (zoo/report/paths.py): the report quotes it, the same from whichever folder it ran."""
        import shlex

        from zoo.report.paths import shown

        words = ["zoo", "report", shown(self.experiment.path)]
        if self.out.resolve() != default_folder(self.experiment, "reports").resolve():
            words += ["--out", shown(self.experiment.path, self.out)]
        return shlex.join(words)


def default_folder(experiment: Experiment, kind: str) -> Path:
    """`kind`/<name> ('reports' or 'runs') in the experiment's repository (zoo/report/paths.py `repository`), so
    that `zoo report` from another folder finds the records `zoo run` wrote, and a report's quoted command holds
    from that root; for a file outside any repository, in the working folder. Relative to the working folder where
    it lies below it (as messages show it)."""
    from zoo.report.paths import repository

    root = repository(experiment.path)
    path = (root if root is not None else Path.cwd().resolve()) / kind / experiment.name
    return path.relative_to(Path.cwd().resolve()) if path.is_relative_to(Path.cwd().resolve()) else path


def folder(name: str, path: Path) -> Path:
    """`path`, unless a file stands there: a folder given as a file is one line now, not an error at the first
    write (or, in a dry run, a grid that reads as never run). Other unusable places (read-only, a file above
    it) are said at the first write."""
    if path.exists() and not path.is_dir():
        raise StoreError(f"{name} {path}: is a file, not a folder")
    return path


def study(experiment: str | Path, *, out: str | Path | None = None, runs: str | Path | None = None) -> Study:
    """The experiment file `experiment`, with its records in `out` (default reports/<name>) and its run directories
    in `runs` (default runs/<name>): see the module docstring."""
    return Study(experiment, out=out, runs=runs)
