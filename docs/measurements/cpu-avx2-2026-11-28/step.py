"""One training step of the scale study's model (paper-base at d_model 256, 3+3 layers, 4 heads, d_ff 1024, vocab
8000; zoo bench's batch of 64 sentences), fp32 against bf16 autocast, the reference path against fast-attention,
2 threads; then a profile of one bf16 fast-attention step at half the batch. Run from the repository root:
`python docs/measurements/cpu-avx2-2026-11-28/step.py`."""

import time

import torch
from torch.profiler import ProfilerActivity, profile

from zoo.model.build import build
from zoo.proofs.bench import BenchConfig, _optimizer, bench_spec, make_batch, training_step

torch.set_num_threads(2)


def batch_of(sentences: int):
    config = BenchConfig(d_model=256, n_heads=4, d_ff=1024, layers=3, vocab=8000, batch=sentences)
    return bench_spec(config), make_batch(config, torch.Generator().manual_seed(0), 0, torch.device("cpu"))


spec, batch = batch_of(64)
for name, bf16, kernels in (("fp32 reference", False, "reference"), ("fp32 fast-attention", False, "fast-attention"),
                            ("bf16 reference", True, "reference"), ("bf16 fast-attention", True, "fast-attention")):
    torch.manual_seed(0)
    model = build(spec)
    optimizer = _optimizer(model)
    training_step(model, optimizer, batch, 0, bf16, kernels)  # warm-up
    start, steps = time.perf_counter(), 2
    for _ in range(steps):
        training_step(model, optimizer, batch, 0, bf16, kernels)
    print(f"{name}: {(time.perf_counter() - start) / steps:.2f} s/step, {batch.tokens} target tokens", flush=True)

spec, batch = batch_of(32)
model = build(spec)
optimizer = _optimizer(model)
with profile(activities=[ProfilerActivity.CPU]) as profiled:
    training_step(model, optimizer, batch, 0, True, "fast-attention")
print(profiled.key_averages().table(sort_by="self_cpu_time_total", row_limit=12, max_name_column_width=50))
