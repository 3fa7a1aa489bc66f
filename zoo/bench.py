"""`zoo bench`: throughput ratios measured side by side in one process, interleaved.

1. Training tokens/s of a zoo spec against the same model run through torch.nn.Transformer
   (`zoo.interop.to_torch`: identical embeddings, output head, loss and optimizer, so only the
   encoder/decoder layers differ), in fp32 and with bf16 autocast. A spec torch.nn.Transformer cannot
   express (RMSNorm, rotary, ...) gets zoo's own rates and the reason there is no reference.
2. Greedy decoding tokens/s with the key/value cache against without it, 64 output tokens.
3. Achieved FLOP/s of the zoo training step (FLOPs counted by torch.utils.flop_counter) as a
   fraction of this machine's measured fp32 matmul peak.

Rounds alternate between the contenders and each ratio is the median of per-round ratios, so
background noise on a shared machine hits both sides alike. Ratios are the result; absolute
numbers depend on the machine.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable

import torch
from torch.utils.flop_counter import FlopCounterMode

from zoo.build import build
from zoo.errors import NotExpressible
from zoo.interop import to_torch
from zoo.loss import loss_sums
from zoo.spec import ModelSpec, load_spec

Tensor = torch.Tensor


@dataclass(frozen=True)
class BenchConfig:
    spec: str = "paper-base"
    d_model: int = 256
    n_heads: int = 4
    d_ff: int = 1024
    layers: int = 3
    vocab: int = 8000
    batch: int = 64
    length: int = 24  # mean sentence length; lengths vary +-50% and are padded per batch
    rounds: int = 7
    steps_per_round: int = 3
    decode_batch: int = 16
    decode_tokens: int = 64
    seed: int = 0


def bench_spec(config: BenchConfig, overrides: dict | None = None) -> ModelSpec:
    return load_spec(config.spec, {
        "d_model": config.d_model, "n_heads": config.n_heads, "d_ff": config.d_ff,
        "encoder_layers": config.layers, "decoder_layers": config.layers,
        "src_vocab": config.vocab, "tgt_vocab": config.vocab, **(overrides or {}),
    })


def make_batch(config: BenchConfig, generator: torch.Generator, pad: int) -> tuple[Tensor, Tensor, Tensor]:
    def ids(length_scale: float) -> Tensor:
        mean = int(config.length * length_scale)
        lengths = torch.randint(mean // 2, mean + mean // 2 + 1, (config.batch,), generator=generator)
        tokens = torch.randint(4, config.vocab, (config.batch, int(lengths.max())), generator=generator)
        return tokens.masked_fill(torch.arange(tokens.size(1))[None] >= lengths[:, None], pad)

    src, tgt = ids(1.0), ids(1.1)
    return src, tgt[:, :-1], tgt[:, 1:]


def training_step(model, optimizer, batch, pad: int, bf16: bool) -> int:
    src, tgt_in, tgt_out = batch
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        scores = model(src, tgt_in)
    sums = loss_sums(scores, tgt_out, model.output, pad, 0.1)
    (sums.loss / sums.tokens).backward()
    optimizer.step()
    return sums.tokens


def _training_round(model, optimizer, batches, pad: int, bf16: bool, steps: int) -> Callable[[], int]:
    """One round of a contender: `steps` training steps cycling through `batches`; returns its tokens."""
    return lambda: sum(training_step(model, optimizer, batches[i % len(batches)], pad, bf16) for i in range(steps))


def _interleaved(contenders: dict[str, Callable[[], int]], rounds: int) -> dict[str, list[float]]:
    """Tokens/s of each contender per round, alternating which goes first."""
    rates: dict[str, list[float]] = {name: [] for name in contenders}
    names = list(contenders)
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            start = time.perf_counter()
            tokens = contenders[name]()
            rates[name].append(tokens / (time.perf_counter() - start))
    return rates


def _ratio(rates: dict[str, list[float]], a: str, b: str) -> float:
    return statistics.median(x / y for x, y in zip(rates[a], rates[b]))


def matmul_peak(size: int = 1536, repeats: int = 5) -> float:
    """fp32 FLOP/s of a large square matmul, the best of several runs."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = max(best, 2 * size ** 3 / (time.perf_counter() - start))
    return best


@torch.no_grad()
def greedy_steps(model, src: Tensor, steps: int, use_cache: bool) -> int:
    """Decode exactly `steps` tokens greedily (no early stop), cached or recomputing the prefix."""
    model.eval()
    memory = model.encode(src)
    prefix = torch.full((src.size(0), 1), 2, dtype=torch.long)
    state = model.start_decoding() if use_cache else None
    for _ in range(steps):
        if state is not None:
            scores = model.decode_step(prefix, memory, src, state)
        else:
            scores = model.decode(prefix, memory, src)[:, -1:]
        prefix = torch.cat([prefix, scores[:, -1].argmax(-1, keepdim=True)], dim=1)
    return src.size(0) * steps


def run(config: BenchConfig = BenchConfig(), report: Callable[[str], None] = print) -> dict:
    torch.manual_seed(config.seed)
    generator = torch.Generator().manual_seed(config.seed)
    spec = bench_spec(config)
    pad = spec.pad_id
    zoo_model = build(spec, seed=config.seed).train()
    batches = [make_batch(config, generator, pad) for _ in range(4)]
    results: dict = {"spec": spec.name, "digest": spec.digest(), "threads": torch.get_num_threads(),
                     "d_model": config.d_model, "layers": config.layers, "vocab": config.vocab}
    models = {"zoo": zoo_model}
    try:
        models["torch"] = to_torch(zoo_model).train()
    except NotExpressible as err:  # e.g. RMSNorm, rotary: zoo's own rates are still worth measuring
        results["no_reference"] = str(err)

    for precision, bf16 in (("fp32", False), ("bf16", True)):
        contenders = {name: _training_round(m, torch.optim.Adam(m.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9),
                                            batches, pad, bf16, config.steps_per_round) for name, m in models.items()}
        for go in contenders.values():
            go()  # warm-up
        report(f"training, {precision}: {config.rounds} interleaved rounds")
        rates = _interleaved(contenders, config.rounds)
        for name in models:
            results[f"train_{precision}_{name}_tok_s"] = statistics.median(rates[name])
        if "torch" in models:
            results[f"train_{precision}_ratio"] = _ratio(rates, "zoo", "torch")

    src = batches[0][0][: config.decode_batch]
    greedy_steps(zoo_model, src, 4, True)
    report(f"greedy decoding of {config.decode_tokens} tokens: cached vs uncached")
    rates = _interleaved({
        "cached": lambda: greedy_steps(zoo_model, src, config.decode_tokens, True),
        "uncached": lambda: greedy_steps(zoo_model, src, config.decode_tokens, False),
    }, max(3, config.rounds // 2))
    results["decode_cached_tok_s"] = statistics.median(rates["cached"])
    results["decode_uncached_tok_s"] = statistics.median(rates["uncached"])
    results["decode_cache_ratio"] = _ratio(rates, "cached", "uncached")

    zoo_model.train()
    optimizer = torch.optim.Adam(zoo_model.parameters(), lr=1e-4)
    with FlopCounterMode(display=False) as counter:
        tokens = training_step(zoo_model, optimizer, batches[0], pad, False)
    flops_per_token = counter.get_total_flops() / tokens
    report("measuring the fp32 matmul peak")
    peak = matmul_peak()
    results["train_flops_per_token"] = flops_per_token
    results["matmul_peak_flop_s"] = peak
    results["train_fp32_achieved_flop_s"] = flops_per_token * results["train_fp32_zoo_tok_s"]
    results["train_fp32_peak_fraction"] = results["train_fp32_achieved_flop_s"] / peak
    return results
