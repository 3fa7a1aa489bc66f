"""The training loop: resumable, deterministic on CPU, stops cleanly on divergence.

Determinism: batches come from (seed, epoch) alone, and the checkpoint keeps the position in the
data and the RNG state, so a run resumed from its last checkpoint ends with the same numbers as
one never interrupted (timings aside). The time budget counts training time only.

A checkpoint is resumed only if it is this run's, intact, and agrees with the run's log: its format,
content hash and identity (zoo/train/checkpoint.py), then its position (within the step or epochs
budget, its tokens possible in its steps), then metrics.jsonl (the lines a run that reached it wrote, their
tokens summing to its own). The first that fails is one warning line, and the checkpoint and the log are moved
aside (`set_aside`) and the run trains from step 0: a resume that reads wrong state ends in a record of
numbers no run gives, and nothing in that record would show it.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

import torch
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from zoo.data import Task, collate, token_batches
from zoo.errors import DataError
from zoo.machine import describe_device, select_device
from zoo.model.build import build
from zoo.model.decode import DecodeConfig
from zoo.model.spec import ModelSpec
from zoo.rundir import METRICS, SPEC, SUMMARY, TASK, TRAIN, RunError, atomic_write, read_metrics, read_table, write_json
from zoo.terminal import warn
from zoo.train import checkpoint as checkpoints
from zoo.train.config import TrainConfig
from zoo.train.evaluate import evaluate, validation_loss
from zoo.train.graphs import CaptureError, GraphedSteps
from zoo.train.schedule import learning_rate
from zoo.train.step import optimizer_step
from zoo.train.tensorboard import LiveTensorBoard


@dataclass
class Position:
    step: int = 0  # optimizer steps taken
    epoch: int = 0
    index: int = 0  # next batch within the epoch
    tokens: int = 0  # target tokens trained on
    seconds: float = 0.0  # training time so far

    @classmethod
    def restored(cls, values: dict[str, Any], path: Path) -> Position:
        """The position a checkpoint holds, checked first: each known field a number >= 0 of its type (an int
        where an int is kept), so a crafted checkpoint is one RunError, not a TypeError or IndexError mid-run."""
        kinds = {field.name: type(field.default) for field in fields(cls)}
        for key, value in values.items():
            number = (int, float) if kinds.get(key) is float else int
            if key not in kinds or isinstance(value, bool) or not isinstance(value, number) \
                    or not math.isfinite(value) or value < 0:
                raise RunError(f"{path}: position.{key} = {value!r} is not a position in the data (fields: "
                               f"{', '.join(kinds)}, each a number >= 0); the checkpoint is damaged or crafted")
        return cls(**values)


@dataclass
class Interval:
    """The optimizer steps since the last metric line: a line every `log_interval` steps (and at every evaluation
    and checkpoint) gives their token-weighted mean loss, mean gradient norm, tokens and throughput."""

    steps: int = 0
    loss_sum: float = 0.0
    nll_sum: float = 0.0
    grad_norm_sum: float = 0.0
    tokens: int = 0
    seconds: float = 0.0
    lr: float = 0.0

    def add(self, loss_sum: float, nll_sum: float, grad_norm: float, tokens: int, lr: float) -> None:
        self.steps += 1
        self.loss_sum, self.nll_sum = self.loss_sum + loss_sum, self.nll_sum + nll_sum
        self.grad_norm_sum += grad_norm
        self.tokens, self.lr = self.tokens + tokens, lr

    def row(self, pos: Position, epoch: float) -> dict[str, Any]:
        """The metric line at `pos`, the interval's last step."""
        return {"step": pos.step, "epoch": round(epoch, 4), "loss": self.loss_sum / self.tokens,
                "nll": self.nll_sum / self.tokens, "lr": self.lr, "grad_norm": self.grad_norm_sum / self.steps,
                "tokens": self.tokens, "tok_per_s": round(self.tokens / self.seconds, 1) if self.seconds > 0 else 0.0,
                "seconds": round(pos.seconds, 3)}


@dataclass
class Pending:
    """One optimizer step whose numbers are still on the device. The loop reads them back only where it writes
    a metric line: reading a GPU tensor waits for the GPU, and waiting every step starves it of queued work."""

    pos: Position  # after the step
    epochs: float
    lr: float
    tokens: int
    values: torch.Tensor  # (3,) float64: loss sum, NLL sum, gradient norm


class _Log:
    """The run's metrics.jsonl, appended a line at a time and flushed (a kill loses no written line), mirrored to
    TensorBoard while training when `log_to` names a folder."""

    def __init__(self, path: Path, log_to: Path | None):
        self.path, self.log_to = path, log_to

    def __enter__(self) -> _Log:
        self.file = open(self.path, "a")
        self.mirror = LiveTensorBoard(self.log_to) if self.log_to is not None else None
        return self

    def write(self, row: dict[str, Any]) -> None:
        self.file.write(json.dumps(row) + "\n")
        self.file.flush()
        if self.mirror is not None:
            self.mirror.log(row)

    def __exit__(self, *exc: object) -> None:
        self.file.close()
        if self.mirror is not None:
            self.mirror.close()


def to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A host batch on `device`. To a GPU through pinned memory and without blocking: a copy from ordinary
    memory waits for all the GPU's queued work first."""
    if device.type == "cuda":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)


class Trainer:
    def __init__(self, spec: ModelSpec, task: Task, config: TrainConfig, out: str | Path, *,
                 resume: bool = False, progress: bool = True, console: Console | None = None,
                 log_to: Path | None = None, definition: str | None = None,
                 set_aside: Callable[[Path], Path] | None = None):
        self.spec, self.task, self.config, self.out = spec, task, config, Path(out)
        self.log_to = log_to  # a TensorBoard folder the logged rows are also written to (zoo/train/tensorboard.py)
        self.definition = definition  # a grid cell's definition digest: its checkpoints carry it (checkpoint.identity)
        # moves a file of the run aside and returns where it went (zoo.experiment.store.move_aside, which this layer
        # cannot import); without it, a checkpoint that must not be resumed is a RunError, never resumed
        self.set_aside = set_aside
        self.resume, self.show_progress = resume, progress
        self.console = console or Console(stderr=True)
        self.device = select_device(config.device)
        examples = task.examples("train")
        if not examples:  # else the first step fails with an IndexError (a text task names the limit before this)
            raise DataError(f"task {task.config.name}: no training example, so there is nothing to train on")
        self.examples = examples
        self.lengths = [(len(src), len(tgt) - 1) for src, tgt in examples]
        self._epoch_batches: tuple[int, list[list[int]]] | None = None
        self.graphed: GraphedSteps | None = None  # the fast path's step on a CUDA GPU (zoo/train/graphs.py)

    # -- run directory -------------------------------------------------------------------------
    def _prepare(self) -> dict[str, Any] | None:
        """Write the run's description, or check it against what is there; a finished run's summary."""
        spec_file, config_file = self.out / SPEC, self.out / TRAIN
        described = {"digest": self.spec.digest(), "spec": self.spec.model_dump(mode="json")}
        if spec_file.exists():
            if not self.resume:
                raise RunError(f"{self.out} already holds a run; pass --resume to continue it, or choose another --out")
            if read_table(spec_file).get("digest") != described["digest"]:
                raise RunError(f"{self.out} holds a run of another spec (digest differs); choose another --out")
            if _recorded_config(config_file) != self.config:
                raise RunError(f"{self.out} holds a run with another training config; choose another --out")
            summary = self.out / SUMMARY
            if not summary.exists():
                return None
            finished = read_table(summary)
            if finished.get("status") not in ("complete", "diverged"):
                raise RunError(f"{summary}: status {finished.get('status')!r} is not 'complete' or 'diverged'; "
                               "the file is damaged (move the run directory aside to train it again)")
            return finished
        self.out.mkdir(parents=True, exist_ok=True)
        self.task.save(self.out / TASK)
        write_json(config_file, self.config.model_dump(mode="json"))
        write_json(spec_file, described)  # last: its presence marks a started run
        return None

    def _batches(self, epoch: int) -> list[list[int]]:
        if self._epoch_batches is None or self._epoch_batches[0] != epoch:
            batches = token_batches(self.lengths, self.config.batch_tokens, seed=self.config.seed, epoch=epoch)
            self._epoch_batches = (epoch, batches)
        return self._epoch_batches[1]

    def _next_group(self, pos: Position) -> list[list[int]]:
        """The `accumulate` batches of the next optimizer step; advances `pos` through epochs. An epochs budget ends
        the group where it is reached: `epochs = 1` is one pass over the data, not one and part of a group more."""
        group = []
        for _ in range(self.config.accumulate):
            if group and self.config.epochs is not None and self._epochs_done(pos) >= self.config.epochs:
                break
            batches = self._batches(pos.epoch)
            if pos.index >= len(batches):
                pos.epoch, pos.index = pos.epoch + 1, 0
                batches = self._batches(pos.epoch)
            group.append(batches[pos.index])
            pos.index += 1
        return group

    def _epochs_done(self, pos: Position) -> float:
        return pos.epoch + pos.index / max(len(self._batches(pos.epoch)), 1)

    def _fraction(self, pos: Position) -> float:
        return self.config.fraction_done(pos.step, self._epochs_done(pos), pos.seconds)

    # -- one optimizer step --------------------------------------------------------------------
    def _step(self, model, optimizer, group: list[list[int]], pos: Position) -> tuple[torch.Tensor, int, float]:
        """One optimizer step, queued without waiting for the device; returns its (3,) float64 numbers (loss
        sum, NLL sum, gradient norm, still on the device), its target tokens and its learning rate. The
        optimizer steps even on a non-finite loss: the loop finds it at its next metric line and stops there,
        before anything after it is evaluated or saved."""
        c, pad = self.config, self.task.specials.pad
        lr = learning_rate(pos.step + 1, c, self.spec.d_model)
        collated = [collate([self.examples[i] for i in batch], pad) for batch in group]
        total = sum(int(tgt_out.ne(pad).sum()) for _, _, tgt_out in collated)  # counted on the host
        if self.graphed is not None:
            try:
                return self.graphed.step(collated[0], total, lr), total, lr
            except CaptureError as err:  # that batch was trained; the rest of the run steps eagerly
                self.console.print(f"[yellow]{err}; the run goes on without CUDA graphs[/]")
                self.graphed = None
                return err.values, total, lr
        for group_ in optimizer.param_groups:
            group_["lr"] = lr
        batches = [tuple(to_device(t, self.device) for t in batch) for batch in collated]
        # the norm is logged either way; clip_norm 0 or None: measured, not clipped
        values = optimizer_step(model, optimizer, batches, total, pad=pad, smoothing=c.label_smoothing,
                                clip_norm=c.clip_norm or math.inf, kernels=c.kernels, bf16=c.precision == "bf16")
        return values, total, lr

    # -- evaluation ----------------------------------------------------------------------------
    def _evaluate(self, model, pos: Position) -> dict[str, Any]:
        valid = validation_loss(model, self.task, "valid", smoothing=self.config.label_smoothing, device=self.device)
        decoded, _ = evaluate(model, self.task, "valid", DecodeConfig(beam=1), limit=self.config.eval_sentences)
        return {"event": "eval", "step": pos.step, "epoch": round(self._epochs_done(pos), 4),
                "seconds": round(pos.seconds, 2), "valid_loss": valid["loss"], "valid_nll": valid["nll"],
                "valid_ppl": valid["ppl"], "decoded_sentences": decoded["sentences"],
                **{name: decoded[name] for name in self.task.metrics}}

    # -- the loop ------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Train to the budget, resuming from the run directory's last checkpoint; returns the summary it writes."""
        finished = self._prepare()
        if finished is not None:
            return finished
        model, optimizer, pos, kept = self._start()

        def checkpoint() -> None:
            checkpoints.save(self.out / checkpoints.FILE, model, optimizer, asdict(pos), self.spec.digest(),
                             seed=self.config.seed, definition=self.definition)

        summary: dict[str, Any] = {"status": "complete", "reason": ""}
        # A run killed after its final checkpoint has nothing left to train: its final evaluation is the logged one.
        last_eval = next((row for row in reversed(kept) if row.get("event") == "eval"), None)
        model.train()
        c, pending = self.config, []
        with _Log(self.out / METRICS, self.log_to) as log, self._progress() as bar:
            task_bar = bar.add_task("training", total=1000, loss="", speed="") if bar else None
            window_start, window_seconds = time.perf_counter(), pos.seconds
            while self._fraction(pos) < 1.0:
                started = time.perf_counter()
                values, tokens, lr = self._step(model, optimizer, self._next_group(pos), pos)
                # host time until the next read-back, which replaces it with the window's wall time
                pos.step, pos.tokens = pos.step + 1, pos.tokens + tokens
                pos.seconds += time.perf_counter() - started
                pending.append(Pending(replace(pos), self._epochs_done(pos), lr, tokens, values))
                done = self._fraction(pos) >= 1.0
                evaluating = pos.step % c.eval_interval == 0 or done
                checkpointing = pos.step % c.checkpoint_interval == 0 or done
                if not (pos.step % c.log_interval == 0 or evaluating or checkpointing):
                    continue
                # a line at every checkpoint too: a resumed run then logs exactly the lines of an uninterrupted one
                pos.seconds = window_seconds + (time.perf_counter() - window_start)
                row, diverged = self._read_back(pending, pos, pos.seconds - window_seconds, log)
                pending = []
                if diverged is not None:
                    summary, pos = diverged
                    break
                if bar is not None:
                    bar.update(task_bar, completed=1000 * self._fraction(pos),
                               loss=f"loss {row['loss']:.3f}", speed=f"{row['tok_per_s']:,.0f} tok/s")
                if evaluating:
                    last_eval = self._evaluate(model, pos)
                    log.write(last_eval)
                if checkpointing:
                    checkpoint()
                window_start, window_seconds = time.perf_counter(), pos.seconds
        return self._finish(summary, model, pos, last_eval)

    def _start(self) -> tuple[torch.nn.Module, torch.optim.Optimizer, Position, list[dict[str, Any]]]:
        """The model and optimizer, restored from the last checkpoint if there is one, the position reached, and
        the metric lines logged up to it (the file keeps only those: lines after it are replayed identically)."""
        c = self.config
        if c.threads:
            torch.set_num_threads(c.threads)
        model = build(self.spec, seed=c.seed).to(self.device)
        optimizer = torch.optim.Adam(model.parameters(), lr=0.0, betas=c.betas, eps=c.eps, weight_decay=c.weight_decay)
        torch.manual_seed(c.seed)  # dropout
        pos = self._resume(model, optimizer)
        if self.device.type == "cuda" and c.kernels != "reference" and c.accumulate == 1:
            self.graphed = GraphedSteps(model, optimizer, pad=self.task.specials.pad, smoothing=c.label_smoothing,
                                        clip_norm=c.clip_norm or math.inf, bf16=c.precision == "bf16",
                                        max_tokens=c.batch_tokens)
        metrics_file = self.out / METRICS
        kept = [row for row in read_metrics(metrics_file) if row["step"] <= pos.step]
        atomic_write(metrics_file, "".join(json.dumps(row) + "\n" for row in kept))
        return model, optimizer, pos, kept

    def _resume(self, model, optimizer) -> Position:
        """The position to train from: the last checkpoint's, restored into `model` and `optimizer`, when it may be
        resumed (the module docstring says when); else step 0, the checkpoint and the log moved aside. A file that is
        not a well-formed checkpoint at all (unreadable, a crafted position, state that does not fit) stays a
        RunError naming it: that is no run's state, and someone should look at it."""
        latest = checkpoints.find(self.out)
        if latest is None:
            return Position()
        state = checkpoints.load(latest)
        pos = Position.restored(state.position, latest)
        expected = checkpoints.identity(self.spec.digest(), self.config.seed, self.definition)
        why = (checkpoints.disagreement(state, expected) or self._impossible(pos)
               or _unlogged(read_metrics(self.out / METRICS), pos, self.config))
        if why is None:
            checkpoints.restore(state, model, optimizer)
            return pos
        if self.set_aside is None:
            raise RunError(f"{latest}: {why}; not resumed (move it and {METRICS} aside to train from step 0)")
        where = self.set_aside(latest)
        if (self.out / METRICS).exists():  # the lines of the run that checkpoint came from, or did not
            self.set_aside(self.out / METRICS)
        warn(self.console, f"{latest}: {why}; moved to {where.parent}/, training seed {self.config.seed} from step 0")
        return Position()

    def _impossible(self, pos: Position) -> str | None:
        """What makes `pos` a position no run of this config reaches, None when it is one: past the step budget, past
        the epochs budget (a run takes no batch once its passes over the data reach `epochs`, so the position before
        its last batch is short of them), or tokens a run of that many steps cannot have trained (a batch holds at
        least one target token, and at most batch_tokens of them, or one sentence longer than that on its own:
        zoo/data/batching.py)."""
        c = self.config
        if c.steps is not None and pos.step > c.steps:
            return f"step {pos.step:,} is past the budget of {c.steps:,} steps"
        if c.epochs is not None and pos.step > 0:
            before_last = pos.epoch + max(pos.index - 1, 0) / max(len(self._batches(pos.epoch)), 1)
            if before_last >= c.epochs:
                return (f"epoch {self._epochs_done(pos):.4g} is past the budget of {c.epochs:g} epochs "
                        f"(step {pos.step:,})")
        most = c.accumulate * max(c.batch_tokens, max(tgt for _, tgt in self.lengths))
        if not pos.step <= pos.tokens <= pos.step * most:
            return f"{pos.tokens:,} tokens in {pos.step:,} steps, where a step trains 1 to {most:,} target tokens"
        return None

    def _read_back(self, pending: list[Pending], pos: Position, seconds: float,
                   log: _Log) -> tuple[dict[str, Any], tuple[dict[str, Any], Position] | None]:
        """Read the pending steps' numbers back from the device (this waits for it) and log their line; where a
        step's loss is not finite, log the finite steps before it and the divergence instead, and return the
        diverged summary with the position of the step that diverged."""
        numbers = torch.stack([p.values for p in pending]).tolist()  # (steps, 3): waits for the device
        interval = Interval(seconds=seconds)
        finite: Pending | None = None  # the last step with a finite loss
        for step, (loss_sum, nll_sum, grad_norm) in zip(pending, numbers):
            if not math.isfinite(loss_sum):
                if finite is not None:  # the finite steps before it, up to the last one
                    log.write(interval.row(finite.pos, finite.epochs))
                loss = loss_sum / step.tokens
                log.write({"event": "diverged", "step": step.pos.step, "loss": str(loss)})
                return {}, ({"status": "diverged", "reason": f"diverged at step {step.pos.step}: loss is {loss}"},
                            step.pos)
            interval.add(loss_sum, nll_sum, grad_norm, step.tokens, step.lr)
            finite = step
        row = interval.row(pos, self._epochs_done(pos))
        log.write(row)
        return row, None

    def _finish(self, summary: dict[str, Any], model, pos: Position, last_eval: dict[str, Any] | None) -> dict:
        summary.update({
            "spec_digest": self.spec.digest(), "parameters": model.num_parameters(), "steps": pos.step,
            "epochs": round(self._epochs_done(pos), 4), "tokens": pos.tokens, "train_seconds": round(pos.seconds, 2),
            "device": describe_device(self.device), "precision": self.config.precision, "final": last_eval,
        })
        write_json(self.out / SUMMARY, summary)
        return summary

    def _progress(self):
        if not self.show_progress:
            from contextlib import nullcontext

            return nullcontext(None)
        return Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                        TextColumn("{task.fields[loss]}"), TextColumn("{task.fields[speed]}"),
                        TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=self.console)


def _unlogged(rows: list[dict[str, Any]], pos: Position, c: TrainConfig) -> str | None:
    """What in the run's metric lines disagrees with a checkpoint at `pos`, None when nothing does. Up to its step
    a run that reached it wrote a training line every log, eval and checkpoint interval and at the step itself,
    the tokens of those lines summing to the position's, and an evaluation every eval_interval (and one at the
    step itself where training ended there); later lines are replayed on resume."""
    step = pos.step
    logged = [row for row in rows if row["step"] <= step]
    trained = [row for row in logged if "event" not in row]
    expected = [s for s in range(1, step + 1)
                if s == step or any(s % n == 0 for n in (c.log_interval, c.eval_interval, c.checkpoint_interval))]
    if [row["step"] for row in trained] != expected:
        return (f"{METRICS} holds {len(trained)} training lines up to step {step:,} where a run that reached it "
                f"wrote {len(expected)}")
    tokens = sum(row["tokens"] for row in trained if isinstance(row.get("tokens"), int))
    if tokens != pos.tokens:
        return f"{METRICS}'s lines up to step {step:,} count {tokens:,} tokens, the checkpoint {pos.tokens:,}"
    evaluated = [(row["event"], row["step"]) for row in logged if "event" in row]
    every = [("eval", s) for s in range(c.eval_interval, step + 1, c.eval_interval)]
    ended = [("eval", step)] if step % c.eval_interval else []  # where training ended at `step`
    if evaluated not in (every, every + ended):
        return (f"{METRICS} holds {len(evaluated)} evaluations up to step {step:,} where a run that reached it "
                f"made {len(every)}")
    return None


def _recorded_config(path: Path) -> TrainConfig | None:
    """A run directory's training config read by today's code (fields added since take their defaults, which
    are what it was trained with), or None when it is not a valid one."""
    try:
        return TrainConfig.model_validate(read_table(path))
    except ValidationError:
        return None
