"""kernels = "fast-attention": attention's bf16 backward recomputed in float32 (zoo/kernels/attention_recompute.py)
keeps the CPU flash kernel's forward bit for bit, and its gradients are at least as close to a float64 reference as
the kernel's own; outside bf16 training on the CPU it changes nothing."""

from __future__ import annotations

import pytest
import torch

import zoo
from zoo.kernels.attention_recompute import recomputed_backward, scaled_dot_product_attention
from zoo.kernels.loss_fused import training_loss

SCALE = 0.125


def _inputs(mask_kind: str, dtype=torch.bfloat16, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(3, 2, 6, 8, generator=generator).to(dtype).requires_grad_() for _ in range(3))
    keep = torch.rand(3, 1, 6, 6, generator=generator) > 0.3
    keep[..., 0] = True
    keep[1, 0, 2] = False  # one query row with every key blocked
    masks = {"none": None, "bool": keep,
             "additive": torch.randn(3, 1, 6, 6, generator=generator).masked_fill(~keep, float("-inf")).to(dtype)}
    grad_out = torch.randn(3, 2, 6, 8, generator=generator).to(dtype)
    return (q, k, v), masks[mask_kind], grad_out


def _run(qkv, mask, grad_out, recomputed: bool, dropout: float = 0.0):
    for t in qkv:
        t.grad = None
    with recomputed_backward(recomputed):
        out = scaled_dot_product_attention(*qkv, mask, dropout, SCALE)
    out.backward(grad_out)
    return out.detach(), out.grad_fn, [t.grad.clone() for t in qkv]


def _exact(qkv, mask, grad_out):
    """float64 softmax attention, its mask as F.scaled_dot_product_attention reads it."""
    q, k, v = (t.detach().double().requires_grad_() for t in qkv)
    scores = q @ k.transpose(-2, -1) * SCALE
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask.double()
    dead = scores.isneginf().all(-1, keepdim=True)  # a row with every key blocked: no weights, as in the kernel
    probs = torch.softmax(scores.masked_fill(dead, 0.0), -1).masked_fill(dead, 0.0)
    (probs @ v).backward(grad_out.double())
    return [t.grad for t in (q, k, v)]


@pytest.mark.parametrize("mask_kind", ["none", "bool", "additive"])
def test_the_forward_is_the_kernels_and_the_gradients_are_as_close_to_exact(mask_kind):
    qkv, mask, grad_out = _inputs(mask_kind)
    kernel_out, kernel_fn, kernel_grads = _run(qkv, mask, grad_out, recomputed=False)
    out, fn, grads = _run(qkv, mask, grad_out, recomputed=True)
    assert type(fn).__name__ == "_RecomputedBackwardBackward" and type(kernel_fn).__name__ != type(fn).__name__
    assert torch.equal(out, kernel_out)
    for name, exact, mine, kernel in zip("qkv", _exact(qkv, mask, grad_out), grads, kernel_grads):
        mine_error, kernel_error = (mine.double() - exact).abs().max(), (kernel.double() - exact).abs().max()
        assert mine_error <= kernel_error, (name, mine_error, kernel_error)
        torch.testing.assert_close(mine.double(), exact, rtol=2e-2, atol=2e-2, msg=name)


def test_a_query_whose_keys_are_all_blocked_passes_no_gradient():
    qkv, mask, grad_out = _inputs("bool")
    _, _, grads = _run(qkv, mask, grad_out, recomputed=True)
    assert grads[0][1, :, 2].abs().sum() == 0  # row 2 of batch 1 sees no key
    assert all(torch.isfinite(g).all() for g in grads)


@pytest.mark.parametrize("case", ["outside the context", "float32", "dropout", "mask with a gradient", "no grad"])
def test_elsewhere_it_is_the_kernel_itself(case):
    qkv, mask, grad_out = _inputs("additive", torch.float32 if case == "float32" else torch.bfloat16)
    if case == "mask with a gradient":
        mask = mask.float().clamp(min=-1e4).to(torch.bfloat16).requires_grad_()
    with recomputed_backward(case != "outside the context"), torch.set_grad_enabled(case != "no grad"):
        out = scaled_dot_product_attention(*qkv, mask, 0.1 if case == "dropout" else 0.0, SCALE)
    assert out.grad_fn is None or "Recomputed" not in type(out.grad_fn).__name__


def _step(model, batch, kernels: str, bf16: bool):
    model.zero_grad(set_to_none=True)
    src, tgt = batch
    sums = training_loss(model, src, tgt[:, :-1], tgt[:, 1:], 0, 0.1, kernels=kernels, bf16=bf16)
    sums.loss.backward()
    return sums.loss.detach(), {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


def _model_and_batch(tiny):
    model = zoo.build(tiny(dropout=0.0), seed=0)
    generator = torch.Generator().manual_seed(1)
    src = torch.randint(1, model.spec.src_vocab, (4, 7), generator=generator)
    tgt = torch.randint(1, model.spec.tgt_vocab, (4, 9), generator=generator)
    src[1, 5:], tgt[2, 6:] = 0, 0
    return model, (src, tgt)


def test_a_bf16_training_step_keeps_the_fast_paths_loss_and_is_as_close_to_the_float32_step(tiny):
    """bf16 moves every gradient about 1% from the float32 step's, on either path; the recomputed backward moves it
    no further than the kernel's does, over the model's gradients as a whole."""
    model, batch = _model_and_batch(tiny)
    _, exact = _step(model, batch, "fast", bf16=False)
    fast_loss, fast_grads = _step(model, batch, "fast", bf16=True)
    loss, grads = _step(model, batch, "fast-attention", bf16=True)
    assert torch.equal(loss, fast_loss)  # the forward pass is the same kernels
    assert grads.keys() == fast_grads.keys() == exact.keys()
    assert any(not torch.equal(grads[name], fast_grads[name]) for name in grads)  # the backward is not

    def distance(got: dict) -> float:
        return sum(float(((got[name] - grad) ** 2).sum()) for name, grad in exact.items()) ** 0.5

    assert distance(grads) <= 1.05 * distance(fast_grads), (distance(grads), distance(fast_grads))


def test_in_float32_it_is_the_fast_path_bit_for_bit(tiny):
    model, batch = _model_and_batch(tiny)
    fast_loss, fast_grads = _step(model, batch, "fast", bf16=False)
    loss, grads = _step(model, batch, "fast-attention", bf16=False)
    assert torch.equal(loss, fast_loss)
    assert all(torch.equal(grads[name], grad) for name, grad in fast_grads.items())


def test_the_trainer_takes_it_from_its_config_and_logs_the_fast_paths_losses_to_bf16_tolerance(tmp_path, monkeypatch):
    """kernels = "fast-attention" reaches the attention layers through the trainer, and only there: the recomputed
    backward runs in training steps, and the run logs what the fast path logs, to bf16's tolerance."""
    import json

    import zoo.kernels.attention_recompute as recompute
    from zoo.data import load_task
    from zoo.train import TrainConfig, Trainer

    calls = []
    backward = recompute._RecomputedBackward.backward
    monkeypatch.setattr(recompute._RecomputedBackward, "backward",
                        staticmethod(lambda ctx, grad: calls.append(1) or backward(ctx, grad)))
    task = load_task("copy", symbols=8, min_len=3, max_len=6, train_size=200, valid_size=20, test_size=20)
    spec = zoo.load_spec("paper-base", {"d_model": 16, "n_heads": 2, "d_ff": 32, "encoder_layers": 1,
                                        "decoder_layers": 1, "src_vocab": task.src_vocab, "tgt_vocab": task.tgt_vocab})
    logged = {}
    for kernels in ("fast", "fast-attention"):
        calls.clear()
        config = TrainConfig(steps=8, batch_tokens=256, warmup=4, lr=3e-3, eval_interval=8, eval_sentences=10,
                             checkpoint_interval=8, log_interval=2, device="cpu", precision="bf16", kernels=kernels)
        Trainer(spec, task, config, tmp_path / kernels, progress=False).run()
        rows = [json.loads(line) for line in (tmp_path / kernels / "metrics.jsonl").read_text().splitlines()]
        logged[kernels] = [(row["step"], row["loss"]) for row in rows if "loss" in row]
        # 3 attention calls a step (encoder, decoder self, cross), 8 steps; none in evaluation
        assert len(calls) == (24 if kernels == "fast-attention" else 0)
    assert [step for step, _ in logged["fast"]] == [step for step, _ in logged["fast-attention"]]
    for (_, fast), (_, recomputed) in zip(logged["fast"], logged["fast-attention"]):
        assert recomputed == pytest.approx(fast, rel=2e-2)
