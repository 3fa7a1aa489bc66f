"""The fast path's training step on a CUDA GPU, captured as CUDA graphs and replayed.

A small model's step is a few hundred short kernels, and on a GPU the host launching them one by one sets
the pace (at d_model 64 an H200 ran at 0.1% of its bf16 peak). A CUDA graph records the whole step, forward,
backward, gradient clipping and Adam, once, and replays it with one launch. A graph fixes its tensors' shapes
and addresses, so each batch is copied into static buffers padded to a bucketed shape (`Buckets`), and there
is one graph per bucket, all drawing on one memory pool (they never run at once).

Padding changes no number a step computes: a padded source position is masked like any padding, a padded
target position is padding in the loss, and a padded row repeats the batch's first source and target input
with an all-padding target, so it adds nothing to the loss or to any gradient. What differs from the eager
fast path is only the order of float operations and the dropout masks drawn (a GPU run is not bit-identical
to another anyway). The first batch of each bucket is trained eagerly, on the same buffers, which also
initialises everything a capture must find in place (the optimizer's moments, library workspaces); the
graph is captured right after it and replayed for that bucket's later batches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from zoo.train.step import optimizer_step

Tensor = torch.Tensor


@dataclass(frozen=True)
class Buckets:
    """Padded shapes for token-budget batches (zoo.data.token_batches: rows x longest <= max_tokens). A batch
    whose longer side (source or target) is L goes to the first edge >= L, both sides padded to that edge,
    and its rows to max_tokens // (previous edge + 1), the most rows any batch of that bucket can have. The
    edges grow by `step` tokens, so a bucket pads at most `step` - 1 positions a side: few graphs to capture,
    little padding (arithmetic a launch-bound step gets for free)."""

    max_tokens: int
    step: int = 8

    def shape(self, rows: int, src_len: int, tgt_len: int) -> tuple[int, int]:
        """(rows, length) of the bucket of a batch of `rows` rows whose sides are `src_len` and `tgt_len` long."""
        length = self.step * math.ceil(max(src_len, tgt_len) / self.step)
        return max(rows, self.max_tokens // (length - self.step + 1)), length


def pad_batch(src: Tensor, tgt_in: Tensor, tgt_out: Tensor, rows: int, length: int,
              pad: int) -> tuple[Tensor, Tensor, Tensor]:
    """The batch padded to (rows, length): padding columns, and rows repeating row 0's source and target input
    with an all-padding target (a row of padding alone would leave its attention with no key to attend to)."""
    def widen(t: Tensor) -> Tensor:  # (B, L) -> (rows, length)
        out = t.new_full((rows, length), pad)
        out[:t.size(0), :t.size(1)] = t
        return out

    src_p, tgt_in_p, tgt_out_p = widen(src), widen(tgt_in), widen(tgt_out)
    src_p[src.size(0):], tgt_in_p[src.size(0):] = src_p[0], tgt_in_p[0]
    return src_p, tgt_in_p, tgt_out_p


class _Graph:
    """One bucket's static buffers and its captured step."""

    def __init__(self, rows: int, length: int, device: torch.device):
        self.src, self.tgt_in, self.tgt_out = (torch.empty(rows, length, dtype=torch.long, device=device)
                                               for _ in range(3))
        self.total = torch.ones((), dtype=torch.float32, device=device)  # the step's target tokens
        self.graph: torch.cuda.CUDAGraph | None = None
        self.values: Tensor | None = None  # (3,) float64 of the captured step: loss sum, NLL sum, grad norm

    def load(self, batch: tuple[Tensor, Tensor, Tensor], total: int) -> None:
        """Copy a batch (on the host, or already on the GPU) into the static buffers, without waiting."""
        for static, given in zip((self.src, self.tgt_in, self.tgt_out), batch):
            static.copy_(given.pin_memory() if given.device.type == "cpu" else given, non_blocking=True)
        self.total.fill_(total)


class CaptureError(RuntimeError):
    """A step CUDA could not capture; `values` are the numbers of the batch trained eagerly before it."""

    def __init__(self, message: str, values: Tensor):
        super().__init__(message)
        self.values = values


class GraphedSteps:
    """Optimizer steps of `model` on the fast path, one CUDA graph per bucket of batch shapes. Only one batch
    per step (no gradient accumulation); the trainer uses the eager step otherwise."""

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, *, pad: int, smoothing: float,
                 clip_norm: float, bf16: bool, max_tokens: int):
        self.model, self.optimizer, self.pad = model, optimizer, pad
        self.smoothing, self.clip_norm, self.bf16 = smoothing, clip_norm, bf16
        self.buckets = Buckets(max_tokens)
        self.device = next(model.parameters()).device
        self.graphs: dict[tuple[int, int], _Graph] = {}
        self.pool = torch.cuda.graph_pool_handle()
        self.lr = torch.zeros((), dtype=torch.float32, device=self.device)
        make_capturable(optimizer, self.lr)

    def step(self, batch: tuple[Tensor, Tensor, Tensor], total: int, lr: float) -> Tensor:
        """One optimizer step on host batch (src, tgt_in, tgt_out) with `total` target tokens at learning rate
        `lr`, queued without waiting for the GPU; its (3,) float64 numbers, still on the GPU."""
        rows, length = self.buckets.shape(batch[0].size(0), batch[0].size(1), batch[1].size(1))
        self.lr.fill_(lr)
        graph = self.graphs.get((rows, length))
        if graph is None:
            graph = self.graphs[rows, length] = _Graph(rows, length, self.device)
            graph.load(pad_batch(*batch, rows, length, self.pad), total)
            return self._first(graph)
        graph.load(pad_batch(*batch, rows, length, self.pad), total)
        graph.graph.replay()
        return graph.values.clone()  # the next replay of this graph overwrites its outputs

    def _first(self, graph: _Graph) -> Tensor:
        """The bucket's first batch, trained eagerly on a side stream (as a capture needs: it initialises the
        state the graph will use), then the same step captured for the bucket's later batches."""
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            values = self._compute(graph)
        torch.cuda.current_stream(self.device).wait_stream(side)
        graph.graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph.graph, pool=self.pool):
                graph.values = self._compute(graph)
        except RuntimeError as err:  # an operation that cannot be captured (a plugin's host sync, say)
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise CaptureError(f"CUDA graph capture of the training step failed: {first}", values) from None
        return values

    def _compute(self, graph: _Graph) -> Tensor:
        return optimizer_step(self.model, self.optimizer, [(graph.src, graph.tgt_in, graph.tgt_out)], graph.total,
                              pad=self.pad, smoothing=self.smoothing, clip_norm=self.clip_norm, kernels="fast",
                              bf16=self.bf16)


def make_capturable(optimizer: torch.optim.Optimizer, lr: Tensor) -> None:
    """Adam as a graph can replay it: its step counts on the GPU, and its learning rate read from the tensor
    `lr` (which the host sets before each replay) instead of a number baked into the graph."""
    for group in optimizer.param_groups:
        group["capturable"], group["lr"] = True, lr
        for param in group["params"]:
            state = optimizer.state.get(param, {})
            if "step" in state:
                state["step"] = state["step"].to(device=param.device, dtype=torch.float32)

