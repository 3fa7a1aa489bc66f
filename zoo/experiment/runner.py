"""`zoo run`: expand an experiment's grid and run each cell into its run directory.

    runs/<experiment>/<variant>/<task>/seed-<n>/    (see zoo/train/run.py for what it holds)

Idempotent and resumable: a finished cell (summary.json, and test.json when complete) is
skipped; an interrupted one resumes from its checkpoint; a cell that raises is recorded in
failed.json with its reason (and retried by the next `zoo run`), and the grid goes on.
Executors: `local` (in this process, or N worker processes splitting the CPU threads) and `ray`
(each cell a Ray task on an existing cluster; run directories on a filesystem every node shares).
The live display reads only run directories, so it works the same for every executor.
"""

from __future__ import annotations

import json
import os
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table

from zoo.errors import ZooError
from zoo.train.run import read_metrics, write_json


@dataclass(frozen=True)
class Cell:
    """One (variant, task, seed) of the grid; plain data so it can travel to a worker or a Ray node."""

    experiment: str  # path of the experiment file
    variant: str
    task: str  # TaskEntry.key
    seed: int
    out: str  # run directory

    @property
    def name(self) -> str:
        return f"{self.variant}/{self.task}/seed-{self.seed}"


def cells(experiment, runs_root: Path) -> list[Cell]:
    return [Cell(str(experiment.path.resolve()), variant, task.key, seed,
                 str((runs_root / variant / task.key / f"seed-{seed}").resolve()))
            for variant, task, seed in experiment.grid()]


def status(out: Path) -> str:
    """pending | started | evaluating | complete | diverged | failed, from the files alone."""
    if (out / "failed.json").exists():
        return "failed"
    summary = out / "summary.json"
    if summary.exists():
        state = json.loads(summary.read_text())["status"]
        return "evaluating" if state == "complete" and not (out / "test.json").exists() else state
    return "started" if (out / "metrics.jsonl").exists() else "pending"


def execute(cell: Cell, threads: int | None = None) -> str:
    """Run one cell to the end (train, then decode the test set); never raises: failures are recorded."""
    import torch

    from zoo.data import load_task
    from zoo.decode import DecodeConfig
    from zoo.evaluate import evaluate
    from zoo.experiment.config import load_experiment
    from zoo.train import Trainer, fit_to_task, load_run, save_evaluation

    out = Path(cell.out)
    if threads:
        torch.set_num_threads(threads)
    if status(out) in ("complete", "diverged"):
        return status(out)
    (out / "failed.json").unlink(missing_ok=True)
    try:
        experiment = load_experiment(cell.experiment)
        entry = next(t for t in experiment.config.tasks if t.key == cell.task)
        spec = experiment.specs[cell.variant]
        task = load_task(experiment.task_config(entry), pad_id=spec.pad_id)
        spec = fit_to_task(spec, task)
        summary = Trainer(spec, task, experiment.train_config(entry, cell.seed, cell.variant), out, resume=True, progress=False).run()
        if summary["status"] == "complete":
            model, task, _ = load_run(out)
            settings = experiment.config.decode
            metrics, hypotheses = evaluate(model, task, "test", DecodeConfig(
                beam=settings.beam, alpha=settings.alpha, max_ratio=settings.max_ratio, max_extra=settings.max_extra))
            save_evaluation(out, "test", metrics, hypotheses)  # test.json last: it marks the cell finished
    except Exception as err:  # noqa: BLE001 - a failing cell is recorded, and the grid goes on
        out.mkdir(parents=True, exist_ok=True)
        write_json(out / "failed.json", {"reason": f"{type(err).__name__}: {err}", "traceback": traceback.format_exc()})
    return status(out)


def _progress(out: Path) -> tuple[str, float | None]:
    """A short line on a started cell (step, loss, tokens/s) and its fraction done, from its files."""
    rows = [r for r in read_metrics(out / "metrics.jsonl") if "event" not in r]
    if not rows:
        return "", None
    last = rows[-1]
    fraction = None
    try:
        config = json.loads((out / "train.json").read_text())
        parts = [last["step"] / config["steps"] if config.get("steps") else 0.0,
                 last["epoch"] / config["epochs"] if config.get("epochs") else 0.0,
                 last["seconds"] / (60 * config["minutes"]) if config.get("minutes") else 0.0]
        fraction = min(1.0, max(parts))
    except (OSError, ValueError, KeyError):
        pass
    return f"step {last['step']}  loss {last['loss']:.3f}  {last['tok_per_s']:,.0f} tok/s", fraction


STYLE = {"complete": "green", "diverged": "yellow", "failed": "red", "started": "cyan", "evaluating": "cyan",
         "pending": "dim"}


class GridView:
    """Rich renderable of the grid, re-read from the run directories on every refresh."""

    def __init__(self, title: str, grid: list[Cell]):
        self.title, self.grid, self.started = title, grid, time.time()
        self.first_seen: dict[str, float] = {}

    def __rich__(self):
        states = {cell.name: status(Path(cell.out)) for cell in self.grid}
        table = Table(title=self.title, title_justify="left", expand=False)
        for column in ("variant", "task", "seed", "status", "progress"):
            table.add_column(column)
        for cell in self.grid:
            state = states[cell.name]
            detail = ""
            if state in ("started", "evaluating"):
                line, fraction = _progress(Path(cell.out))
                seen = self.first_seen.setdefault(cell.name, time.time())
                eta = ""
                if fraction and fraction > 0.02:
                    eta = f"  ETA {max(0.0, (time.time() - seen) * (1 - fraction) / fraction):.0f} s"
                detail = line + (f"  {fraction:.0%}" if fraction is not None else "") + eta
            elif state == "failed":
                detail = json.loads((Path(cell.out) / "failed.json").read_text())["reason"][:80]
            elif state == "diverged":
                detail = json.loads((Path(cell.out) / "summary.json").read_text())["reason"]
            table.add_row(cell.variant, cell.task, str(cell.seed), f"[{STYLE[state]}]{state}[/]", detail)
        counts = {s: sum(1 for v in states.values() if v == s) for s in STYLE}
        summary = "  ".join(f"{k}: {v}" for k, v in counts.items() if v)
        return Group(table, f"{summary}   elapsed {time.time() - self.started:.0f} s")


def _local(grid: list[Cell], workers: int) -> None:
    if workers <= 1:
        for cell in grid:
            execute(cell)
        return
    import multiprocessing

    threads = max(1, (os.cpu_count() or 1) // workers)
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        pool.starmap(execute, [(cell, threads) for cell in grid])


def _ray(grid: list[Cell], address: str | None, threads: int) -> None:
    try:
        import ray
    except ImportError:
        raise ZooError("executor: 'ray' needs the ray extra: pip install '.[ray]'") from None
    ray.init(address=address, ignore_reinit_error=True, include_dashboard=False, log_to_driver=False)
    remote = ray.remote(num_cpus=threads)(execute)
    ray.get([remote.remote(cell, threads) for cell in grid])


def run_grid(experiment, runs_root: Path, *, executor: str = "local", workers: int = 1, address: str | None = None,
             threads: int = 1, console: Console | None = None, live: bool = True) -> dict[str, str]:
    """Run every cell; returns {cell name: final status}."""
    grid = cells(experiment, runs_root)
    runner: Callable[[], None]
    if executor == "local":
        runner = lambda: _local(grid, workers)  # noqa: E731
    elif executor == "ray":
        runner = lambda: _ray(grid, address, threads)  # noqa: E731
    else:
        raise ZooError(f"executor: {executor!r} is not one of local, ray")
    errors: list[BaseException] = []

    def guarded() -> None:
        try:
            runner()
        except BaseException as err:  # noqa: BLE001 - re-raised in the main thread
            errors.append(err)

    worker = threading.Thread(target=guarded, daemon=True)
    view = GridView(f"zoo run {experiment.name}: {len(grid)} runs -> {runs_root}", grid)
    console = console or Console(stderr=True)
    with Live(view, console=console, refresh_per_second=2, transient=False) if live else _Quiet():
        worker.start()
        while worker.is_alive():
            worker.join(timeout=0.5)
    if errors:
        raise errors[0]
    return {cell.name: status(Path(cell.out)) for cell in grid}


class _Quiet:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
