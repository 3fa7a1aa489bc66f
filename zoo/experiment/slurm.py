"""The `slurm` executor: each cell a job of one Slurm job array, submitted with submitit (the slurm extra).

A job runs zoo's own `execute` on its node, as a Ray task or a local worker does, so the clone, the runs folder and
the records folder must be on a filesystem every node shares (the usual Slurm set-up; submitit keeps each job's
pickle and logs in `folder` there too). The cell's lock is taken on the node; a job whose cell another `zoo run`
holds waits for it.

Resuming is the store's own. Slurm signals a job before its time limit and, where the cluster sends it, before a
preemption; submitit then calls the job's `checkpoint` and requeues the job. Here the signal ends the training where
Ctrl-C would (the lock released, nothing recorded, the run directory's checkpoints kept), `checkpoint` gives back
the same job, unchanged, and the requeued job trains on from the cell's last checkpoint to the numbers an
uninterrupted run ends with. A job that ends without a result otherwise (scancel, a lost node, the out-of-memory
killer, `max_timeouts` used up) gives its cell a failed record saying so, as a local worker's death does, and the
next `zoo run` resumes that cell from its checkpoint.

`cluster="local"` runs each job as a process on this machine with submitit's LocalExecutor, signals and requeues
included: what the tests use, on a machine without Slurm.
"""

from __future__ import annotations

import difflib
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from zoo.config_io import Count
from zoo.errors import install_hint
from zoo.experiment import store
from zoo.experiment.cell import execute, record_death
from zoo.experiment.executors import Executor, ExecutorError, ExecutorOptions, Results, register_executor
from zoo.experiment.grid import Cell

Extra = str | int | float | bool | list[str] | dict[str, str]
# what `extra` may not set: the options of their own (submitit's names for them, and the names it translates)
OWN = {"partition": "partition", "time": "timeout_min", "timeout_min": "timeout_min", "cpus_per_task": "cpus_per_task",
       "gpus_per_node": "gpus_per_job", "mem": "mem_gb", "mem_gb": "mem_gb", "account": "account", "qos": "qos",
       "constraint": "constraint", "array_parallelism": "array_parallelism", "job_name": "the job's name",
       "name": "the job's name"}
# how often each job is asked whether it is done: for its result file, which on a cluster is a look at the shared
# filesystem per job (submitit asks Slurm itself for the jobs' states at most every 10 minutes, after their start)
POLL_S = {"local": 0.5, "debug": 0.5, "slurm": 10.0}


class SlurmOptions(ExecutorOptions):
    cluster: Literal["slurm", "local", "debug"] | None = Field(
        None, description="where the jobs run: None = submitit's choice, Slurm on a cluster; 'slurm'; "
        "'local' = each job a process on this machine (submitit's LocalExecutor; what the tests use); "
        "'debug' = one after another in this process")
    folder: str | None = Field(None, description="where submitit keeps each job's pickle and logs (%j: the job's id); "
                               "None = <runs>/.slurm, beside the run directories on the shared filesystem")
    partition: str | None = Field(None, description="the Slurm partition; None = the cluster's default")
    timeout_min: Count = Field(60, ge=1, description="each job's time limit in minutes; a cell that needs longer is "
                               "requeued at the limit and trains on from its checkpoint (max_timeouts times)")
    max_timeouts: Count = Field(3, ge=0, description="how often a cell's job may reach timeout_min and be requeued; "
                                "preemptions are not counted")
    cpus_per_task: Count = Field(1, ge=1, description="CPUs per job, and the torch threads of a run that sets none")
    gpus_per_job: Count = Field(0, ge=0, description="GPUs per job (--gpus-per-node); 0 = CPU jobs")
    mem_gb: float | None = Field(None, gt=0, description="memory per job in GB; None = the partition's default")
    account: str | None = Field(None, description="the Slurm account charged")
    qos: str | None = Field(None, description="the Slurm quality of service")
    constraint: str | None = Field(None, description="node features the jobs need (--constraint)")
    array_parallelism: Count = Field(256, ge=1, description="jobs of the array running at once (--array=...%N)")
    extra: dict[str, Extra] = Field(default_factory=dict, description="more parameters of submitit's Slurm "
                                    "executor, without its slurm_ prefix: {exclude = \"node7\", setup = "
                                    "[\"module load cuda\"], signal_delay_s = 120}")

    @field_validator("extra")
    @classmethod
    def _not_an_option(cls, extra: dict) -> dict:
        for key in extra:
            if key in OWN:
                raise ValueError(f"extra: {key!r} is set by an option of its own ({OWN[key]}), not by extra")
        return extra


class CellJob:
    """What each job of the array runs: `execute` on its cell (under the cell's lock, waiting for it, in the name of
    the `zoo run` that submitted it). submitit's requeue signal stops the training as Ctrl-C does, and then
    submitit's own handler takes over: it calls `checkpoint`, which gives back this job unchanged (where the cell
    stands is in its run directory), and requeues it. Never raises but for that."""

    def __init__(self, cell: Cell, threads: int, run_pid: int) -> None:
        self.cell, self.threads, self.run_pid = cell, threads, run_pid

    def __call__(self) -> tuple[str, str]:
        print(f"zoo: {self.cell.experiment_name} {self.cell.name}", flush=True)  # the job's log says which cell
        store.work_for(self.run_pid)
        signum, requeue = _requeue_signal()
        if requeue is None:  # not in a job's main thread (cluster="debug"): nothing signals it
            return execute(self.cell, self.threads, wait=True)

        def stop(number: int, frame: object) -> None:
            raise Requeued(number)

        signal.signal(signum, stop)
        try:
            try:
                return execute(self.cell, self.threads, wait=True)
            finally:
                signal.signal(signum, requeue)
        except Requeued:  # also where the signal came as execute returned: the requeued job finds the record
            requeue(signum, None)  # checkpoint() and requeue: it leaves the process (SystemExit)
            raise

    def checkpoint(self, *args, **kwargs):
        """The job to requeue: this one. submitit calls it on the requeue signal."""
        from submitit.helpers import DelayedSubmission

        return DelayedSubmission(self, *args, **kwargs)


class Requeued(KeyboardInterrupt):
    """The requeue signal arrived while a cell trained: raised where Ctrl-C raises KeyboardInterrupt, which `execute`
    lets through (nothing recorded, the lock released), so that submitit can requeue the job."""


def _requeue_signal():
    """The signal submitit requeues a job on (USR2 unless $SUBMITIT_PREEMPT_SIGNAL says otherwise) and the handler
    it set for it; (signal, None) where there is none to stand in for (outside a job, or not the main thread)."""
    import threading

    from submitit import JobEnvironment

    signum = JobEnvironment._usr_sig()
    handler = signal.getsignal(signum)
    if threading.current_thread() is not threading.main_thread() or not callable(handler):
        return signum, None
    return signum, handler


@register_executor("slurm")
class Slurm(Executor):
    """Each cell a job of one Slurm job array, through submitit (the slurm extra); runs and records on a filesystem
    every node shares. A job preempted or at its time limit is requeued and resumes from its checkpoint."""

    Options = SlurmOptions
    options: SlurmOptions

    def __init__(self, options: SlurmOptions) -> None:
        """Everything checked here, before anything is written: submitit, Slurm, and `extra`'s keys."""
        super().__init__(options)
        try:
            import submitit
        except ImportError:
            raise ExecutorError("executor: 'slurm' needs the slurm extra: " + install_hint("slurm")) from None
        if options.cluster in (None, "slurm") and shutil.which("sbatch") is None:
            raise ExecutorError("executor slurm: no Slurm here (sbatch is not on PATH): run zoo where jobs are "
                                "submitted, or --executor-option cluster=local to run each job as a process on this "
                                "machine")
        known = submitit.SlurmExecutor._valid_parameters()
        for key in options.extra:  # submitit would raise a page of text for it
            if key not in known:
                close = difflib.get_close_matches(key, sorted(known), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else " (sbatch's long options, with _ for -)"
                raise ExecutorError(f"executor slurm: extra: {key!r} is not a parameter of submitit's Slurm "
                                    f"executor{hint}")

    def run(self, grid: list[Cell], results: Results) -> None:
        jobs = self._submit(grid)
        poll = POLL_S.get(self.options.cluster or "slurm", POLL_S["slurm"])
        pending = list(zip(jobs, grid))
        while pending:
            waiting = []
            for job, cell in pending:
                if job.done():
                    results[cell.name] = _outcome(job, cell, self.options.cluster == "local")
                else:
                    waiting.append((job, cell))
            pending = waiting
            if pending:
                time.sleep(poll)

    def _submit(self, grid: list[Cell]) -> list:
        """Submit the grid as one job array; its jobs, in grid order."""
        import submitit

        options = self.options
        folder = options.folder or str(Path(grid[0].runs_root) / ".slurm")
        executor = submitit.AutoExecutor(folder=folder, cluster=options.cluster,
                                         slurm_max_num_timeout=options.max_timeouts,
                                         local_max_num_timeout=options.max_timeouts)
        executor.update_parameters(
            name=f"zoo-{grid[0].experiment_name}", timeout_min=options.timeout_min, cpus_per_task=options.cpus_per_task,
            gpus_per_node=options.gpus_per_job or None, mem_gb=options.mem_gb, slurm_partition=options.partition,
            slurm_account=options.account, slurm_qos=options.qos, slurm_constraint=options.constraint,
            slurm_array_parallelism=options.array_parallelism,
            **{f"slurm_{key}": value for key, value in options.extra.items()})
        run_pid = os.getpid()
        with executor.batch():
            jobs = [executor.submit(CellJob(cell, options.cpus_per_task, run_pid)) for cell in grid]
        return jobs


def _outcome(job, cell: Cell, local: bool) -> tuple[str, str]:
    """A finished job's (status, reason): its cell's, or, for a job that ended without a result, a failed record
    saying so. `local`: the job ran on this machine, whose filesystem shows its result at once (submitit waits 15 s
    for a result to appear, for a cluster's shared filesystem)."""
    from submitit.core.utils import FailedJobError, UncompletedJobError

    if local and not job.paths.result_pickle.exists():
        return record_death(cell, slurm_death(job))
    try:
        return job.result()
    except FailedJobError as err:  # the job itself raised: zoo or the cell's pickle cannot be loaded on the node
        last = next((line.strip() for line in reversed(str(err).splitlines()) if line.strip()), "")
        return record_death(cell, f"Slurm job {job.job_id} failed ({last[:200]}); its log: {job.paths.stderr}")
    except UncompletedJobError:
        return record_death(cell, slurm_death(job))


def slurm_death(job) -> str:
    """One line for a job that ended without a result: its Slurm state, what that state means, and its log."""
    state = str(job.state)
    hints = {"OUT_OF_MEMORY": "; out of memory: raise mem_gb", "TIMEOUT": "; out of time: raise timeout_min or "
             "max_timeouts", "CANCELLED": "; cancelled (scancel?)", "NODE_FAIL": "; its node failed"}
    hint = next((text for name, text in hints.items() if state.startswith(name)), "; killed?")
    return f"Slurm job {job.job_id} ended without a result (state {state}){hint}; its log: {job.paths.stderr}"
