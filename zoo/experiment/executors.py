"""Executors: how a grid's cells get run. An open registry, like tasks and metrics (zoo/catalogue.py).

An executor derives from `Executor`, declares its typed options (a pydantic model, unknown keys refused) and
registers under a name; `zoo run --executor NAME` then uses it, and a plugin adds one the same way:

    from zoo.experiment.executors import Executor, ExecutorOptions, register_executor

    class PBSOptions(ExecutorOptions):
        queue: str = "batch"

    @register_executor("pbs")
    class PBS(Executor):
        Options = PBSOptions
        def run(self, grid, results): ...   # results[cell.name] = execute(cell, threads, wait=True), on a node

Whatever runs a cell calls `zoo.experiment.cell.execute`, which never raises, takes the cell's lock, loads
the cell's plugins and records the outcome in the store; the live view reads only the store, so it shows
every executor's cells the same way. Built-ins: `local` (in this process, or N worker processes splitting the
CPU threads; worker processes exit when their parent dies), `ray` (each cell a Ray task; run directories
and records on a filesystem every node shares) and `slurm` (each cell a job of a Slurm job array: its own module,
zoo/experiment/slurm.py, registered when the package zoo.experiment is imported; it imports this one).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from zoo.catalogue import Catalogue
from zoo.config_io import Count, describe_error
from zoo.errors import ZooError, install_hint
from zoo.experiment import store
from zoo.experiment.cell import execute, record_death
from zoo.experiment.grid import Cell
from zoo.machine import device_type_here
from zoo.plugins import PluginError, load_all

Results = dict[str, tuple[str, str]]  # cell name -> (status, reason), as `execute` returns them


class ExecutorOptions(BaseModel):
    """Base of every executor's typed options. Unknown keys are errors, never silently dropped."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Executor:
    """Base of every executor: `run` runs every cell of a grid and fills `results`; `registry_name` is the
    name it was registered under, `Options` its options' model, `options` their validated values."""

    registry_name: ClassVar[str]
    Options: ClassVar[type[ExecutorOptions]] = ExecutorOptions

    def __init__(self, options: ExecutorOptions) -> None:
        self.options = options

    @property
    def name(self) -> str:
        return self.registry_name

    @property
    def concurrent(self) -> int:
        """Runs sharing one machine with each cell, recorded as provenance (1 where cells get their own CPUs)."""
        return 1

    def run(self, grid: list[Cell], results: Results) -> None:
        raise NotImplementedError


EXECUTORS: Catalogue[type[Executor]] = Catalogue("executor", Executor)
register_executor = EXECUTORS.register


class ExecutorError(ZooError):
    """An executor's options are invalid, or it cannot start; the message names the option or what is missing."""


def create(name: str, **options) -> Executor:
    """The executor registered as `name`, with its options validated (a one-line error naming a bad one)."""
    kind = EXECUTORS.get(name)
    try:
        return kind(kind.Options(**options))
    except ValidationError as err:
        raise ExecutorError(f"executor {name}: " + "; ".join(describe_error(e, kind.Options)
                                                             for e in err.errors())) from None


def _load_plugins(plugins: tuple[str, ...]) -> str:
    """Load the plugins in a worker; the reason they cannot be loaded there, or ''."""
    try:
        load_all(plugins, environment=False)
    except PluginError as err:
        return str(err)
    return ""


def _preflight(load_in_worker, grid: list[Cell], where: str) -> None:
    """Load the grid's plugins in one worker before any cell starts (workers are started alike, so one stands
    for all): a plugin missing there is one PluginError, and nothing trains; without the probe every cell
    would fail on its own."""
    plugins = grid[0].plugins if grid else ()
    problem = load_in_worker(plugins) if plugins else ""
    if problem:
        raise PluginError(f"on {where}: {problem}")


# -- local -----------------------------------------------------------------------------------------
CUDA_VISIBLE = "CUDA_VISIBLE_DEVICES"
REIMPORTED = 87  # a worker's exit code: importing the caller's script, it reached a grid started at its top level


def refuse_in_a_workers_import() -> None:
    """Where a grid starts. A spawned worker imports the script the caller started from (`__main__`); a grid
    started at that script's top level would start in every worker again, each starting workers of its own: a
    flood of multiprocessing tracebacks. In a worker still importing (multiprocessing's `_inheriting`), leave at
    once; the parent sees the exit code and says why in one line (`_reimported`)."""
    import multiprocessing

    if getattr(multiprocessing.current_process(), "_inheriting", False):
        os._exit(REIMPORTED)


def _reimported(worker: _Worker) -> None:
    """Raise the one line a worker that left with REIMPORTED calls for (refuse_in_a_workers_import)."""
    if worker.process.exitcode == REIMPORTED:
        import sys

        script = getattr(sys.modules["__main__"], "__file__", "your script")
        raise ExecutorError(f"each worker process imports {script}, and its top level starts the grid again "
                            "(study.run): put the script's calls under `if __name__ == \"__main__\":`, or run with "
                            "workers=1") from None


class LocalOptions(ExecutorOptions):
    workers: Count = Field(1, ge=1, description="worker processes; the CPU threads are split between them")


def _init_worker(parent: int) -> None:
    """In a worker: take locks in the parent's name, leave Ctrl-C to the parent, and exit as soon as the parent
    is gone.

    A terminal's Ctrl-C reaches every process of the group. The parent answers it (one line, exit 130) and
    ends its workers, so a worker has nothing to add but a traceback of its own.
    A kill -9 of `zoo run` must not leave workers training into the store: they watch for their parent
    (their locks are released by the kernel when they exit; checkpoints and records are written atomically)."""
    store.work_for(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES names them: its entries where it is set (empty:
    none), else every device PyTorch counts (none without CUDA)."""
    listed = os.environ.get(CUDA_VISIBLE)
    if listed is not None:
        return [entry.strip() for entry in listed.split(",") if entry.strip()]
    import torch

    return [str(index) for index in range(torch.cuda.device_count())] if torch.cuda.is_available() else []


def gpu_of_worker(index: int, gpus: list[str]) -> str | None:
    """The GPU worker `index` trains on: the visible GPUs in turn, so N workers spread over them (worker 0 and
    worker len(gpus) share the first); None without a GPU."""
    return gpus[index % len(gpus)] if gpus else None


def _serve(connection, parent: int, gpu: str | None) -> None:
    """A worker process's loop: call each (function, arguments) it is sent and send back the result, until
    it is sent None or its parent's end of the pipe closes (the parent stopped or was killed: nothing more will
    come, and no one reads a result; a traceback would only bury the parent's line saying how to resume).
    With `gpu`, that GPU is the only one it sees (as cuda:0), set before CUDA starts."""
    if gpu is not None:
        os.environ[CUDA_VISIBLE] = gpu
    _init_worker(parent)
    try:
        while (job := connection.recv()) is not None:
            function, arguments = job
            connection.send(function(*arguments))
    except (EOFError, BrokenPipeError, ConnectionResetError):
        return


def death(exitcode: int | None) -> str:
    """How a worker process died, for its cell's failed record: a signal (9 is what the kernel's
    out-of-memory killer sends), or an exit the cell's code forced (os._exit) without a result."""
    if exitcode is not None and exitcode < 0:
        number = -exitcode
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        hint = "; out of memory?" if number == signal.SIGKILL else ""
        return f"worker killed by signal {number} ({name}){hint}"
    return f"worker exited with code {exitcode} before returning a result (os._exit in the cell's code?)"


class _Worker:
    """One worker process of the local executor, with the pipe its jobs and results travel through. Unlike a
    multiprocessing.Pool, whose starmap waits forever for the task of a worker that was killed, the caller
    watches the process itself (`sentinel`) and learns of its death at once."""

    def __init__(self, context, parent: int, gpu: str | None = None) -> None:
        self.connection, theirs = context.Pipe()
        self.gpu = gpu
        self.process = context.Process(target=_serve, args=(theirs, parent, gpu), daemon=True)
        self.process.start()
        theirs.close()
        self.cell: Cell | None = None

    def send(self, function, *arguments) -> None:
        self.connection.send((function, arguments))

    def result(self):
        """The result of the job sent last, or raises EOFError when the worker died before sending one."""
        from multiprocessing.connection import wait

        while not self.connection.poll():
            wait([self.connection, self.process.sentinel])
            if not self.connection.poll() and not self.process.is_alive():
                raise EOFError
        return self.connection.recv()

    def stop(self) -> None:
        if self.process.is_alive():
            try:
                self.connection.send(None)
            except OSError:
                pass
            self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.connection.close()


def worker_threads(workers: int, cores: int | None = None) -> int:
    """The CPU threads each of `workers` local worker processes gives a run that sets none: the cores split."""
    return max(1, (cores or os.cpu_count() or 1) // workers)


@register_executor("local")
class Local(Executor):
    """In this process, or in `workers` processes; cells another `zoo run` holds are waited for at the end.
    A worker that dies under its cell (killed by a signal, or its code exiting) gives that cell a failed record
    saying how it died, a fresh worker takes its place, and the other cells go on."""

    Options = LocalOptions
    options: LocalOptions

    @property
    def concurrent(self) -> int:
        return self.options.workers

    def oversubscribed(self, experiment, grid: list[Cell], cores: int | None = None) -> str | None:
        """A warning where the workers' CPU runs set more threads (TrainConfig.threads) in all than the machine
        has cores: the runs then share the cores, and the grid is no faster than with fewer workers. Runs that
        train on a GPU here are not counted: their threads only feed the GPU, and no core count bounds them."""
        cores = cores or os.cpu_count() or 1
        tasks = {entry.key: entry for entry in experiment.config.tasks}
        configs = [experiment.train_config(tasks[cell.task], cell.seed, cell.variant)
                   for cell in {(cell.variant, cell.task): cell for cell in grid}.values()]
        threads = max((config.threads or 0 for config in configs if device_type_here(config.device) == "cpu"),
                      default=0)
        at_once = min(self.options.workers, len(grid))
        if at_once < 2 or not threads or at_once * threads <= cores:
            return None
        return (f"{at_once} workers of runs with {threads} threads each want {at_once * threads} CPU threads on "
                f"{cores} cores: the runs share the cores, so --workers {max(1, cores // threads)} trains the grid "
                "about as fast")

    def run(self, grid: list[Cell], results: Results) -> None:
        self._phase(grid, results, wait=False)
        self._phase([cell for cell in grid if results[cell.name][0] == "locked"], results, wait=True)

    def _phase(self, todo: list[Cell], results: Results, wait: bool) -> None:
        workers = self.options.workers
        if workers <= 1 or len(todo) <= 1:
            for cell in todo:
                results[cell.name] = execute(cell, None, wait)
            return
        import multiprocessing

        threads = worker_threads(workers)
        context = multiprocessing.get_context("spawn")
        gpus = visible_gpus()
        pool = [_Worker(context, os.getpid(), gpu_of_worker(i, gpus)) for i in range(min(workers, len(todo)))]
        try:
            _preflight(lambda plugins: _probe(pool[0], plugins), todo, "a worker process")
            self._dispatch(todo, results, wait, threads, pool, lambda gpu: _Worker(context, os.getpid(), gpu))
        finally:
            for worker in pool:
                worker.stop()

    @staticmethod
    def _dispatch(todo: list[Cell], results: Results, wait: bool, threads: int, pool: list[_Worker],
                  fresh) -> None:
        """Send the cells in grid order to idle workers; collect each result as it comes, and a dead worker's
        cell as failed (its worker replaced while cells remain)."""
        from multiprocessing.connection import wait as ready

        queue = list(reversed(todo))
        while queue or any(worker.cell for worker in pool):
            for worker in pool:
                if worker.cell is None and queue:
                    worker.cell = queue.pop()
                    worker.send(execute, worker.cell, threads, wait)
            busy = [worker for worker in pool if worker.cell]
            ready([handle for worker in busy for handle in (worker.connection, worker.process.sentinel)])
            for index, worker in enumerate(pool):
                cell = worker.cell
                if cell is None or not (worker.connection.poll() or not worker.process.is_alive()):
                    continue
                try:
                    results[cell.name] = worker.result()
                    worker.cell = None
                except (EOFError, OSError):
                    worker.process.join()
                    _reimported(worker)
                    results[cell.name] = record_death(cell, death(worker.process.exitcode))
                    worker.stop()
                    pool[index] = fresh(worker.gpu)  # the replacement trains on the dead worker's GPU


def _probe(worker: _Worker, plugins: tuple[str, ...]) -> str:
    """Load the plugins in `worker`; the reason they cannot be loaded there, or ''."""
    worker.send(_load_plugins, plugins)
    try:
        return worker.result()
    except EOFError:
        worker.process.join()
        _reimported(worker)
        return f"loading the plugins ended the worker: {death(worker.process.exitcode)}"


# -- ray -------------------------------------------------------------------------------------------
class RayOptions(ExecutorOptions):
    address: str | None = Field(None, description="an existing cluster's address; None = start a local Ray")
    threads: Count = Field(1, ge=1, description="CPUs (and torch threads) per run")
    gpus_per_run: float = Field(0.0, ge=0, description="GPUs per run, fractional to pack runs: 0.25 puts four on a "
                                "GPU (Ray sets each run's CUDA_VISIBLE_DEVICES); 0 = CPU runs")
    gpu_resource: str = Field("GPU", description="the Ray resource gpus_per_run asks for: GPU, or a custom "
                              "resource a cluster declares for its accelerators")

    @field_validator("gpus_per_run")
    @classmethod
    def _whole_above_one(cls, value: float) -> float:
        if value > 1 and value != int(value):
            raise ValueError(f"gpus_per_run: {value:g} is not allowed; a run asking for more than one GPU asks "
                             "for whole GPUs, as Ray requires (2, not 1.5)")
        return value

    def requests(self) -> dict:
        """What each run asks Ray for: CPUs, and GPUs (or the resource standing in for them)."""
        asked: dict = {"num_cpus": self.threads}
        if self.gpus_per_run and self.gpu_resource == "GPU":
            asked["num_gpus"] = self.gpus_per_run
        elif self.gpus_per_run:
            asked["resources"] = {self.gpu_resource: self.gpus_per_run}
        return asked


def _execute_for(run_pid: int, cell: Cell, threads: int, wait: bool):
    """`execute` in a Ray worker, with the cell's lock taken in the name of the `zoo run` that sent it."""
    store.work_for(run_pid)
    return execute(cell, threads, wait)


@register_executor("ray")
class Ray(Executor):
    """Each cell a Ray task (the ray extra); run directories and records on a filesystem every node shares."""

    Options = RayOptions
    options: RayOptions

    def run(self, grid: list[Cell], results: Results) -> None:
        try:
            import ray
        except ImportError:
            raise ExecutorError("executor: 'ray' needs the ray extra: " + install_hint("ray")) from None
        threads, asked = self.options.threads, self.options.requests()
        ray.init(address=self.options.address, ignore_reinit_error=True, include_dashboard=False,
                 log_to_driver=False)
        self._check_resources(ray.cluster_resources(), asked)
        _preflight(lambda plugins: ray.get(ray.remote(**asked)(_load_plugins).remote(plugins)), grid, "a Ray worker")
        # no retries: a cell whose worker died gets a failed record saying so; `zoo run` again retries it
        remote = ray.remote(max_retries=0, **asked)(_execute_for)
        run_pid = os.getpid()
        pending = {remote.remote(run_pid, cell, threads, True): cell for cell in grid}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                cell = pending.pop(ref)
                try:
                    results[cell.name] = ray.get(ref)
                except ray.exceptions.RayError as err:  # the worker died (killed, out of memory) or Ray lost it
                    results[cell.name] = record_death(cell, ray_death(err))


    def _check_resources(self, cluster: dict, asked: dict) -> None:
        """One line where no node of the cluster could ever take a run (Ray would wait for it forever)."""
        wanted = {"CPU": asked["num_cpus"], "GPU": asked.get("num_gpus", 0), **asked.get("resources", {})}
        for name, amount in wanted.items():
            if amount and cluster.get(name, 0) < amount:
                flag = {"CPU": "--threads"}.get(name, "--executor-option gpus_per_run=...")
                raise ExecutorError(f"executor ray: each run asks for {amount:g} {name}, but the cluster has "
                                    f"{cluster.get(name, 0):g} ({flag}; a cluster declares custom resources with "
                                    "`ray start --resources`)")


def ray_death(err: Exception) -> str:
    """One line for a Ray task that ended without a result: which of Ray's failures it was, and its first line."""
    first = next((line.strip() for line in str(err).splitlines() if line.strip()), "")
    hint = "; out of memory?" if "memory" in f"{type(err).__name__} {err}".lower() or "SIGKILL" in str(err) else ""
    return f"Ray worker died ({type(err).__name__}: {first[:200]}){hint}"
