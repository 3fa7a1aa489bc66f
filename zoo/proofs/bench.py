"""`zoo bench`: throughput ratios measured side by side in one process, interleaved.

1. Training tokens/s of a zoo spec against the same model run through torch.nn.Transformer
   (`zoo.proofs.interop.to_torch`: identical embeddings, output head, loss and optimizer, so only the
   encoder/decoder layers differ), in fp32 and with bf16 autocast. A spec torch.nn.Transformer cannot
   express (RMSNorm, rotary, ...) gets zoo's own rates and the reason there is no reference.
2. Greedy decoding tokens/s with the key/value cache against without it, 64 output tokens.
3. Achieved FLOP/s of the zoo training step (FLOPs counted by torch.utils.flop_counter), fp32 and bf16,
   as a fraction of the device's measured fp32 and bf16 matmul peaks.
4. Runs per device (`runs_per_device`, only when asked): k processes training at once, for each k.

Rounds alternate between the contenders and each ratio is the median of per-round ratios, so
background noise on a shared machine hits both sides alike. Ratios are the result; absolute
numbers depend on the machine. `BenchConfig.device` picks the CPU or a CUDA GPU; on a GPU the clock
is read only after the queued kernels have finished (one synchronisation per timed round, none per step).
"""

from __future__ import annotations

import copy
import math
import multiprocessing
import statistics
import time
from dataclasses import dataclass
from functools import partial
from typing import Callable, Sequence

import torch
from torch.utils.flop_counter import FlopCounterMode

from zoo import machine
from zoo.errors import NotExpressible
from zoo.kernels.loss_fused import training_loss
from zoo.machine import describe_device, select_device
from zoo.model.build import build
from zoo.model.spec import ModelSpec, load_spec
from zoo.plugins import load_all, loaded
from zoo.proofs.interop import to_torch
from zoo.train.graphs import GraphedSteps

Tensor = torch.Tensor

# The side of the square matmul that measures the peak: a GPU multiplies 1536 x 1536 in microseconds, about
# what a synchronisation costs, so it gets a size that keeps it busy for milliseconds.
PEAK_SIZE = {"cpu": 1536, "cuda": 8192}
PROCESS_WARMUP_STEPS = 3
MIN_LENGTH = 4  # a mean sentence length from which every drawn target has a token to predict
BARRIER_TIMEOUT_S = 600  # a worker that dies before the barrier breaks it for the others instead of hanging them


@dataclass(frozen=True)
class BenchConfig:
    spec: str = "paper-base"
    d_model: int = 256
    n_heads: int = 4
    d_ff: int = 1024
    layers: int = 3
    vocab: int = 8000
    batch: int = 64  # sentences per training batch: about 1,500 target tokens at the default length
    length: int = 24  # mean sentence length; lengths vary +-50% and are padded per batch
    rounds: int = 7
    steps_per_round: int = 3
    decode_batch: int = 16
    decode_tokens: int = 64
    seed: int = 0
    device: str = "cpu"  # cpu | cuda | auto (zoo.machine.select_device)
    process_path: str = "reference"  # the runs-per-device processes' step: reference | fast | graphed (CUDA only)


@dataclass(frozen=True)
class Batch:
    """A training batch on the bench's device. Its target tokens are counted once, on the host, when it is
    made: counting them from the device tensors every step would make the host wait for the GPU every step."""
    src: Tensor  # (B, S)
    tgt_in: Tensor  # (B, T)
    tgt_out: Tensor  # (B, T)
    tokens: int  # non-padding positions of tgt_out


def bench_spec(config: BenchConfig, overrides: dict | None = None) -> ModelSpec:
    return load_spec(config.spec, {
        "d_model": config.d_model, "n_heads": config.n_heads, "d_ff": config.d_ff,
        "encoder_layers": config.layers, "decoder_layers": config.layers,
        "src_vocab": config.vocab, "tgt_vocab": config.vocab, **(overrides or {}),
    })


def make_batch(config: BenchConfig, generator: torch.Generator, pad: int, device: torch.device) -> Batch:
    def ids(length_scale: float) -> Tensor:
        mean = int(config.length * length_scale)
        lengths = torch.randint(mean // 2, mean + mean // 2 + 1, (config.batch,), generator=generator)
        tokens = torch.randint(4, config.vocab, (config.batch, int(lengths.max())), generator=generator)
        return tokens.masked_fill(torch.arange(tokens.size(1))[None] >= lengths[:, None], pad)

    src, tgt = ids(1.0), ids(1.1)  # (B, S), (B, T + 1), drawn on the host
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]  # (B, T) each
    return Batch(src.to(device), tgt_in.to(device), tgt_out.to(device), int(tgt_out.ne(pad).sum()))


def training_step(model, optimizer, batch: Batch, pad: int, bf16: bool, kernels: str = "reference") -> int:
    """One optimizer step as the trainer takes it (zoo.kernels.loss_fused.training_loss), on the path `kernels`
    names."""
    optimizer.zero_grad(set_to_none=True)
    sums = training_loss(model, batch.src, batch.tgt_in, batch.tgt_out, pad, 0.1, kernels=kernels, bf16=bf16)
    (sums.loss / batch.tokens).backward()
    optimizer.step()
    return batch.tokens


def _graphed_steps(model, batches: list[Batch], pad: int, bf16: bool) -> Callable[[int], int]:
    """Training steps of the fast path replayed from CUDA graphs (zoo/train/graphs.py, the trainer's step on a
    GPU), on the model's own optimizer: a call takes that many steps cycling through `batches` and returns their
    tokens. The first step of each bucket of batch shapes captures its graph; later ones replay it. It clips the
    gradient norm (at infinity: the norm is computed, nothing is scaled) as the trainer does and the eager
    contenders do not: if anything, a handicap."""
    graphed = GraphedSteps(model, _optimizer(model), pad=pad, smoothing=0.1, clip_norm=math.inf, bf16=bf16,
                           max_tokens=batches[0].src.size(0))  # rows stay the batch's: every bench batch has them

    def take(steps: int) -> int:
        tokens = 0
        for i in range(steps):
            batch = batches[i % len(batches)]
            graphed.step((batch.src, batch.tgt_in, batch.tgt_out), batch.tokens, 1e-4)
            tokens += batch.tokens
        return tokens
    return take


def _optimizer(model) -> torch.optim.Optimizer:
    return torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)


def _setup(config: BenchConfig, device: torch.device) -> tuple[ModelSpec, torch.nn.Module, list[Batch]]:
    """The bench model in training mode and its four batches, on `device`: the same for the single-process
    measurements and for each of the concurrent processes. Built on the host, so every device gets the same
    weights."""
    torch.manual_seed(config.seed)
    generator = torch.Generator().manual_seed(config.seed)
    spec = bench_spec(config)
    model = build(spec, seed=config.seed).to(device).train()
    return spec, model, [make_batch(config, generator, spec.pad_id, device) for _ in range(4)]


def _training_round(model, optimizer, batches, pad: int, bf16: bool, steps: int,
                    kernels: str = "reference") -> Callable[[], int]:
    """One round of a contender: `steps` training steps cycling through `batches`; returns its tokens."""
    return lambda: sum(training_step(model, optimizer, batches[i % len(batches)], pad, bf16, kernels)
                       for i in range(steps))


def _synchronize(device: torch.device) -> None:
    """Wait for the kernels queued on a GPU: they run asynchronously, so a clock read without this times
    only their launch."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _per_second(work: Callable[[], float], device: torch.device) -> float:
    """What one call of `work` did (the amount it returns) per second, finished work only."""
    _synchronize(device)
    start = time.perf_counter()
    amount = work()
    _synchronize(device)
    return amount / (time.perf_counter() - start)


def _interleaved(contenders: dict[str, Callable[[], int]], rounds: int, device: torch.device) -> dict[str, list[float]]:
    """Tokens/s of each contender per round, alternating which goes first."""
    rates: dict[str, list[float]] = {name: [] for name in contenders}
    names = list(contenders)
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            rates[name].append(_per_second(contenders[name], device))
    return rates


def _ratio(rates: dict[str, list[float]], a: str, b: str) -> float:
    return statistics.median(x / y for x, y in zip(rates[a], rates[b]))


def matmul_peak(device: torch.device, dtype: torch.dtype, repeats: int = 5) -> float:
    """FLOP/s of a large square matmul in `dtype` on `device`, the best of several runs."""
    size = PEAK_SIZE[device.type]
    a, b = (torch.randn(size, size, device=device, dtype=dtype) for _ in range(2))

    def multiply() -> int:
        a @ b
        return 2 * size ** 3

    multiply()  # warm-up: kernel selection, and on a GPU the library's first-call setup
    return max(_per_second(multiply, device) for _ in range(repeats))


@torch.no_grad()
def greedy_steps(model, src: Tensor, steps: int, use_cache: bool) -> int:
    """Decode exactly `steps` tokens greedily (no early stop), cached or recomputing the prefix."""
    model.eval()
    memory = model.encode(src)
    prefix = torch.full((src.size(0), 1), 2, dtype=torch.long, device=src.device)  # (B, 1), grows to (B, 1 + steps)
    state = model.start_decoding() if use_cache else None
    for _ in range(steps):
        if state is not None:
            scores = model.decode_step(prefix, memory, src, state)
        else:
            scores = model.decode(prefix, memory, src)[:, -1:]
        prefix = torch.cat([prefix, scores[:, -1].argmax(-1, keepdim=True)], dim=1)
    return src.size(0) * steps


def run(config: BenchConfig = BenchConfig(), report: Callable[[str], None] = print) -> dict:
    device = select_device(config.device)  # a missing GPU is one line before anything is built
    spec, zoo_model, batches = _setup(config, device)
    results: dict = {"spec": spec.name, "digest": spec.digest(), "device": describe_device(device),
                     "threads": torch.get_num_threads(),
                     "d_model": config.d_model, "layers": config.layers, "vocab": config.vocab,
                     "batch": config.batch, "length": config.length,
                     "batch_target_tokens": statistics.mean(batch.tokens for batch in batches)}
    models, no_reference = _contenders(zoo_model, device)
    if no_reference is not None:
        results["no_reference"] = no_reference
    for precision, bf16 in (("fp32", False), ("bf16", True)):
        results.update(_training_rates(models, batches, spec.pad_id, precision, bf16, config, device, report))
    results.update(_decoding_rates(zoo_model, batches, config, device, report))
    results.update(_achieved_flops(zoo_model, batches, spec.pad_id, results, device, report))
    return results


# The fast path is "fast-attention", which is "fast" except in bf16 on the CPU, where it is the faster one.
KERNELS = {"fast": "fast-attention"}


def _contenders(zoo_model, device: torch.device) -> tuple[dict[str, torch.nn.Module], str | None]:
    """zoo's reference path, zoo's fast path (the same weights: TrainConfig.kernels), on a GPU the fast path
    replayed from CUDA graphs, and torch.nn.Transformer; with why there is no torch.nn.Transformer, if there is not
    (e.g. RMSNorm, rotary: zoo's own rates are still worth measuring)."""
    models = {"zoo": zoo_model, "fast": copy.deepcopy(zoo_model)}
    if device.type == "cuda":  # the step a GPU run takes: the fast path replayed from CUDA graphs
        models["graphed"] = copy.deepcopy(zoo_model)
    try:
        models["torch"] = to_torch(zoo_model).train()  # on zoo_model's device
    except NotExpressible as err:
        return models, str(err)
    return models, None


def _training_rates(models: dict[str, torch.nn.Module], batches: list, pad: int, precision: str, bf16: bool,
                    config: BenchConfig, device: torch.device, report: Callable[[str], None]) -> dict:
    """Training tokens/s of each contender in one precision over interleaved rounds, and their ratios."""
    contenders = {name: _training_round(m, _optimizer(m), batches, pad, bf16, config.steps_per_round,
                                        KERNELS.get(name, "reference"))
                  for name, m in models.items() if name != "graphed"}
    if "graphed" in models:
        graphed = _graphed_steps(models["graphed"], batches, pad, bf16)
        graphed(len(batches))  # captures a graph per bucket, outside the timed rounds
        contenders["graphed"] = partial(graphed, config.steps_per_round)
    for go in contenders.values():
        go()  # warm-up
    report(f"training, {precision}: {config.rounds} interleaved rounds")
    rates = _interleaved(contenders, config.rounds, device)
    results = {f"train_{precision}_{name}_tok_s": statistics.median(rates[name]) for name in models}
    results[f"train_{precision}_fast_ratio"] = _ratio(rates, "fast", "zoo")
    if "graphed" in models:
        results[f"train_{precision}_graphed_ratio"] = _ratio(rates, "graphed", "fast")
    if "torch" in models:
        results[f"train_{precision}_ratio"] = _ratio(rates, "zoo", "torch")
        results[f"train_{precision}_fast_torch_ratio"] = _ratio(rates, "fast", "torch")
    return results


def _decoding_rates(zoo_model, batches: list, config: BenchConfig, device: torch.device,
                    report: Callable[[str], None]) -> dict:
    """Greedy decoding tokens/s with the key/value cache and without it, interleaved, and their ratio."""
    src = batches[0].src[: config.decode_batch]  # (decode_batch, S)
    greedy_steps(zoo_model, src, 4, True)
    report(f"greedy decoding of {config.decode_tokens} tokens: cached vs uncached")
    rates = _interleaved({
        "cached": lambda: greedy_steps(zoo_model, src, config.decode_tokens, True),
        "uncached": lambda: greedy_steps(zoo_model, src, config.decode_tokens, False),
    }, max(3, config.rounds // 2), device)
    return {"decode_cached_tok_s": statistics.median(rates["cached"]),
            "decode_uncached_tok_s": statistics.median(rates["uncached"]),
            "decode_cache_ratio": _ratio(rates, "cached", "uncached")}


def _achieved_flops(zoo_model, batches: list, pad: int, rates: dict, device: torch.device,
                    report: Callable[[str], None]) -> dict:
    """The reference step's model FLOPs per token, the device's fp32 and bf16 matmul peaks, and what each path's
    training tokens/s (in `rates`) achieve of them."""
    zoo_model.train()
    with FlopCounterMode(display=False) as counter:
        tokens = training_step(zoo_model, _optimizer(zoo_model), batches[0], pad, False)
    results: dict = {"train_flops_per_token": counter.get_total_flops() / tokens}
    for precision, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        if precision == "bf16" and device.type == "cpu" and machine.cpu_has_bf16_matmul() is False:
            # PyTorch's slow fallback: a minute per square matmul, and no peak a training step could be held to
            results["no_bf16_peak"] = (f"this CPU ({machine.cpu_capability()}) has no oneDNN bf16 matmuls (they need "
                                       "AVX-512 or AVX-NE-CONVERT): its bf16 matmuls take a slow fallback")
            continue
        report(f"measuring the {precision} matmul peak")
        peak = matmul_peak(device, dtype)
        results[f"matmul_{precision}_peak_flop_s"] = peak
        # every path is credited with the reference step's model FLOPs per token (the model FLOP utilisation
        # convention): the fused loss does the same matmuls, and padding a graphed batch to its bucket is overhead
        for name in ("zoo", "fast", "graphed"):
            if f"train_{precision}_{name}_tok_s" in rates:
                achieved = results["train_flops_per_token"] * rates[f"train_{precision}_{name}_tok_s"]
                suffix = "" if name == "zoo" else f"_{name}"
                results[f"train_{precision}{suffix}_achieved_flop_s"] = achieved
                results[f"train_{precision}{suffix}_peak_fraction"] = achieved / peak
    return results


def _process_worker(config: BenchConfig, plugins: tuple[str, ...], threads: int, steps: int, barrier, rates) -> None:
    """One of k concurrent training runs: warm up, wait until all k have, then time `steps` fp32 training
    steps, so that every timed step runs while the other k - 1 processes train too."""
    load_all(plugins, environment=False, entry_points=False)  # a spawned process starts without the parent's
    torch.set_num_threads(threads)
    device = select_device(config.device)
    spec, model, batches = _setup(config, device)
    if config.process_path == "graphed":
        take = _graphed_steps(model, batches, spec.pad_id, False)
    else:
        optimizer = _optimizer(model)

        def take(steps: int) -> int:
            return _training_round(model, optimizer, batches, spec.pad_id, False, steps, config.process_path)()
    take(max(PROCESS_WARMUP_STEPS, len(batches)))  # graphed: each batch's graph captured before the clock starts
    _synchronize(device)  # the warm-up is finished work before this process says it is ready
    barrier.wait(timeout=BARRIER_TIMEOUT_S)
    rates.put(_per_second(partial(take, steps), device))


def _concurrent_rates(config: BenchConfig, k: int, steps: int) -> list[float]:
    """Tokens/s of each of k processes training at once. Spawned, not forked: a fresh interpreter each, as a
    separate training run would be, and CUDA cannot be used in a forked child. On the CPU the threads are
    shared out, max(1, threads // k) each; on a GPU every process runs on the same one."""
    context = multiprocessing.get_context("spawn")
    barrier, rates = context.Barrier(k), context.SimpleQueue()
    threads = max(1, torch.get_num_threads() // k)
    plugins = tuple(plugin.where for plugin in loaded())
    workers = [context.Process(target=_process_worker, args=(config, plugins, threads, steps, barrier, rates))
               for _ in range(k)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    failed = [worker.exitcode for worker in workers if worker.exitcode != 0]
    if failed:
        raise RuntimeError(f"{len(failed)} of {k} bench processes failed (exit codes {failed}); "
                           "their tracebacks are printed above")
    return [rates.get() for _ in range(k)]


def runs_per_device(config: BenchConfig, counts: Sequence[int], steps: int,
                    report: Callable[[str], None] = print) -> list[dict]:
    """For each k in `counts` (and 1, the baseline): k processes each train the bench model for `steps` fp32
    steps at once. How far the aggregate tokens/s grows with k says how many training runs one device
    carries before they only share it."""
    select_device(config.device)  # a missing GPU is one line here, not a traceback from every worker
    rates: dict[int, list[float]] = {}
    for k in sorted({1, *counts}):
        report(f"{k} training process{'es' if k > 1 else ''} at once, {steps} timed steps each")
        rates[k] = _concurrent_rates(config, k, steps)
    return [{"processes": k, "aggregate_tok_s": sum(each), "per_process_median_tok_s": statistics.median(each),
             "scaling": sum(each) / sum(rates[1])} for k, each in rates.items()]
