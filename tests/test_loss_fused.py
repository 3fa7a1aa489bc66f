"""The fast path's fused loss computes the reference loss and its gradients: for every registered output head
(the ones it cannot fuse fall back, and are then the reference itself), tied and untied projections, with and
without bias, label smoothing 0 and two others, padding in the targets, fp32 and bf16 autocast."""

from __future__ import annotations

import pytest
import torch

import zoo
from zoo.kernels.loss_fused import chunk_rows, fusable, fused_loss_sums, training_loss
from zoo.registry import registry


def _losses(model, src, tgt, smoothing: float, fast: bool, bf16: bool = False):
    """(loss sum, NLL sum, every parameter's gradient) through the reference or the fast path."""
    model.zero_grad(set_to_none=True)
    sums = training_loss(model, src, tgt[:, :-1], tgt[:, 1:], 0, smoothing, kernels="fast" if fast else "reference",
                         bf16=bf16)
    (sums.loss / 17).backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    return sums.loss.detach(), sums.nll.detach(), grads


def _batch(vocab: int, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(1, vocab, (5, 7), generator=generator)
    tgt = torch.randint(1, vocab, (5, 9), generator=generator)
    src[1, 4:] = 0
    tgt[2, 5:] = 0  # padded targets carry no loss
    tgt[4, 1:] = 0
    return src, tgt


@pytest.mark.parametrize("head", registry.names("output"))
@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
@pytest.mark.parametrize("layout", ["tied", "untied-no-bias"])
def test_the_fused_loss_and_gradients_match_the_reference(tiny, head, smoothing, layout):
    overrides = {"output.kind": head, "dropout": 0.0}
    if layout != "tied":
        overrides.update({"embedding.sharing": "none", "output.bias": False})
    model = zoo.build(tiny(**overrides), seed=0)
    src, tgt = _batch(model.spec.tgt_vocab)
    reference, fast = _losses(model, src, tgt, smoothing, False), _losses(model, src, tgt, smoothing, True)
    torch.testing.assert_close(fast[0], reference[0], rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(fast[1], reference[1], rtol=1e-5, atol=1e-4)
    assert fast[2].keys() == reference[2].keys()
    for name, grad in reference[2].items():
        torch.testing.assert_close(fast[2][name], grad, rtol=1e-4, atol=1e-6, msg=name)


def test_the_heads_that_fuse_are_the_ones_whose_log_probabilities_are_a_log_softmax(tiny):
    fused = {name for name in registry.names("output") if fusable(zoo.build(tiny(**{"output.kind": name})).output)}
    assert fused == {"logits", "log-softmax"}  # softmax clamps its log: the reference path trains it


def test_many_chunks_give_what_one_gives(tiny, monkeypatch):
    model = zoo.build(tiny(dropout=0.0), seed=0)
    src, tgt = _batch(model.spec.tgt_vocab, seed=3)
    whole = _losses(model, src, tgt, 0.1, True)
    assert chunk_rows(model.spec.tgt_vocab, model.spec.d_model) >= 5 * 8  # the whole batch is one chunk
    monkeypatch.setattr("zoo.kernels.loss_fused.chunk_rows", lambda *shape: 3)  # 14 chunks, the last of 1 row
    chunked = _losses(model, src, tgt, 0.1, True)
    torch.testing.assert_close(chunked[0], whole[0])
    for name, grad in whole[2].items():
        torch.testing.assert_close(chunked[2][name], grad, msg=name)


def test_under_bf16_autocast_the_fused_loss_stays_close_to_the_reference(tiny):
    model = zoo.build(tiny(dropout=0.0), seed=0)
    src, tgt = _batch(model.spec.tgt_vocab)
    reference, fast = _losses(model, src, tgt, 0.1, False, bf16=True), _losses(model, src, tgt, 0.1, True, bf16=True)
    torch.testing.assert_close(fast[0], reference[0], rtol=2e-2, atol=0.5)
    for name, grad in reference[2].items():
        torch.testing.assert_close(fast[2][name], grad, rtol=5e-2, atol=5e-3, msg=name)


def test_a_known_answer_uniform_logits(tiny):
    """By hand: one token, V = 4 logits (0, 0, 0, ln 3): p = (1/6, 1/6, 1/6, 1/2); target 3, eps 0.2.
    NLL = ln 2; loss = 0.8 ln 2 + 0.2 * mean(-log p) = 0.8 ln 2 + 0.2 * (3 ln 6 + ln 2) / 4;
    dL/dz = p - 0.8 onehot - 0.05 = (7/60, 7/60, 7/60, -7/20)."""
    import math

    head = zoo.build(tiny(**{"output.kind": "logits", "embedding.sharing": "none", "output.bias": False})).output
    with torch.no_grad():
        head.proj.weight.zero_()
        head.proj.weight[3, 0] = math.log(3)
    head.proj.weight.data = head.proj.weight.data[:4]
    hidden = torch.zeros(1, 1, head.proj.weight.size(1))
    hidden[0, 0, 0] = 1.0
    hidden.requires_grad_(True)
    sums = fused_loss_sums(hidden, torch.tensor([[3]]), head, pad=0, smoothing=0.2)
    assert sums.nll.item() == pytest.approx(math.log(2))
    assert sums.loss.item() == pytest.approx(0.8 * math.log(2) + 0.2 * (3 * math.log(6) + math.log(2)) / 4)
    sums.loss.backward()
    grad_z = torch.tensor([7 / 60, 7 / 60, 7 / 60, -7 / 20])
    torch.testing.assert_close(head.proj.weight.grad[:, 0], grad_z)  # dL/dW[j, 0] = dL/dz_j * h_0 = dL/dz_j


@pytest.mark.parametrize("head", ["logits", "log-softmax", "softmax"])
def test_a_run_on_the_fast_path_logs_the_reference_runs_numbers(tmp_path, head):
    """Trained end to end (dropout on: the same masks are drawn in the same order on both paths), the logged
    losses agree to float tolerance; the softmax head, which cannot fuse, trains on the reference path."""
    import json

    from zoo.data import load_task
    from zoo.train import TrainConfig, Trainer

    task = load_task("copy", symbols=8, min_len=3, max_len=6, train_size=200, valid_size=20, test_size=20)
    spec = zoo.load_spec("paper-base", {"d_model": 16, "n_heads": 2, "d_ff": 32, "encoder_layers": 1,
                                        "decoder_layers": 1, "src_vocab": task.src_vocab,
                                        "tgt_vocab": task.tgt_vocab, "output.kind": head})
    logged = {}
    for kernels in ("reference", "fast"):
        config = TrainConfig(steps=12, batch_tokens=256, warmup=4, lr=3e-3, eval_interval=6, eval_sentences=10,
                             checkpoint_interval=6, log_interval=2, device="cpu", kernels=kernels)
        Trainer(spec, task, config, tmp_path / kernels, progress=False).run()
        rows = [json.loads(line) for line in (tmp_path / kernels / "metrics.jsonl").read_text().splitlines()]
        logged[kernels] = [(row["step"], row.get("loss"), row.get("nll"), row.get("valid_loss")) for row in rows]
    for reference, fast in zip(logged["reference"], logged["fast"], strict=True):
        assert reference[0] == fast[0]
        for a, b in zip(reference[1:], fast[1:]):
            assert (a is None) == (b is None) and (a is None or a == pytest.approx(b, rel=1e-4)), (reference, fast)
