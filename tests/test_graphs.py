"""The CUDA-graphed training step (zoo/train/graphs.py): its padded shapes hold every batch the batcher makes,
padding changes no loss or gradient, its checkpoints resume anywhere; on a GPU, a replayed step is the eager
step and never waits for the GPU."""

from __future__ import annotations

import math
import random

import pytest
import torch

import zoo
from zoo.data import collate, load_task, token_batches
from zoo.kernels.loss_fused import training_loss
from zoo.model.build import build
from zoo.rundir import METRICS, read_metrics
from zoo.train import TrainConfig, Trainer
from zoo.train import checkpoint as checkpoints
from zoo.train.graphs import Buckets, GraphedSteps, make_capturable, pad_batch

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_a_bucket_known_answer():
    buckets = Buckets(max_tokens=256, step=8)
    assert buckets.shape(rows=10, src_len=17, tgt_len=20) == (15, 24)  # 256 // 17 rows, lengths up to 24
    assert buckets.shape(rows=32, src_len=8, tgt_len=3) == (256, 8)  # 256 // 1: lengths 1-8 share a bucket
    assert buckets.shape(rows=1, src_len=300, tgt_len=2) == (1, 304)  # one example over the budget


@pytest.mark.parametrize("max_tokens", [256, 2048, 4096])
def test_every_batch_the_batcher_makes_fits_its_bucket(max_tokens):
    rng = random.Random(max_tokens)
    lengths = [(rng.randint(1, 90), rng.randint(2, 100)) for _ in range(3000)]
    buckets, shapes = Buckets(max_tokens), set()
    for batch in token_batches(lengths, max_tokens, seed=0, epoch=0):
        longest_src = max(lengths[i][0] for i in batch)
        longest_tgt = max(lengths[i][1] for i in batch)
        rows, length = buckets.shape(len(batch), longest_src, longest_tgt)
        assert len(batch) <= rows and max(longest_src, longest_tgt) <= length < max(longest_src, longest_tgt) + 8
        assert rows == len(batch) or rows * (length - 7) <= max_tokens  # no bucket is wider than the budget allows
        shapes.add((rows, length))
    assert len(shapes) <= math.ceil(100 / 8)  # one graph per length bucket


@pytest.mark.parametrize("overrides", [{}, {"embedding.sharing": "none", "positional.kind": "rotary"}])
def test_padding_a_batch_changes_no_loss_and_no_gradient(tiny, overrides):
    spec = tiny(dropout=0.0, **overrides)
    model = build(spec, seed=0)
    task_src = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0], [11, 2, 0, 0, 0]])
    tgt = torch.tensor([[1, 12, 13, 2, 0], [1, 14, 15, 16, 2], [1, 2, 0, 0, 0]])
    batch = (task_src, tgt[:, :-1], tgt[:, 1:])

    def loss_and_grads(src, tgt_in, tgt_out):
        model.zero_grad(set_to_none=True)
        sums = training_loss(model, src, tgt_in, tgt_out, 0, 0.1, kernels="fast")
        sums.loss.backward()
        return sums.loss.detach(), sums.nll.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}

    loss, nll, grads = loss_and_grads(*batch)
    padded = pad_batch(*batch, rows=7, length=16, pad=0)
    assert [t.shape for t in padded] == [(7, 16)] * 3 and padded[2][3:].eq(0).all()
    loss_p, nll_p, grads_p = loss_and_grads(*padded)
    torch.testing.assert_close((loss_p, nll_p), (loss, nll), rtol=1e-5, atol=1e-5)
    for name, grad in grads.items():
        torch.testing.assert_close(grads_p[name], grad, rtol=1e-4, atol=1e-6, msg=name)


def test_a_checkpoint_of_a_graphed_optimizer_resumes_in_a_plain_one(tmp_path, tiny):
    spec = tiny()
    model = build(spec, seed=0)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.0)
    model(*zoo_batch(spec)).sum().backward()
    optimizer.step()  # moments and a step count to carry
    make_capturable(optimizer, torch.tensor(3e-4))
    path = tmp_path / checkpoints.FILE
    checkpoints.save(path, model, optimizer, {"step": 1}, spec.digest())
    fresh_model = build(spec, seed=1)
    fresh = torch.optim.Adam(fresh_model.parameters(), lr=0.0)
    checkpoints.restore(checkpoints.load(path), fresh_model, fresh)
    group = fresh.param_groups[0]
    assert group["lr"] == pytest.approx(3e-4) and isinstance(group["lr"], float) and group["capturable"] is False
    fresh_model(*zoo_batch(spec)).sum().backward()
    fresh.step()  # a capturable flag left on would make a CPU Adam raise here


def zoo_batch(spec):
    src = torch.tensor([[4, 5, 6, 2], [7, 2, 0, 0]])
    return src, torch.tensor([[1, 8, 9], [1, 10, 2]])


def copy_setup(device: str, **overrides):
    task = load_task("copy", symbols=8, min_len=3, max_len=12, train_size=400, valid_size=40, test_size=40)
    spec = zoo.load_spec("paper-base", {"d_model": 32, "n_heads": 2, "d_ff": 64, "encoder_layers": 1,
                                        "decoder_layers": 1, "src_vocab": task.src_vocab,
                                        "tgt_vocab": task.tgt_vocab, **overrides})
    config = TrainConfig(steps=30, batch_tokens=256, warmup=5, lr=3e-3, eval_interval=15, eval_sentences=20,
                         checkpoint_interval=15, device=device, kernels="fast", log_interval=5)
    return task, spec, config


@cuda
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_a_graphed_run_trains_and_its_replays_never_wait_for_the_gpu(tmp_path, monkeypatch, precision):
    real_step = GraphedSteps.step

    def strict(self, batch, total, lr):
        shape = self.buckets.shape(batch[0].size(0), batch[0].size(1), batch[1].size(1))
        if shape not in self.graphs:  # a capture synchronises; only replays must not
            return real_step(self, batch, total, lr)
        torch.cuda.set_sync_debug_mode("error")
        try:
            return real_step(self, batch, total, lr)
        finally:
            torch.cuda.set_sync_debug_mode("default")

    monkeypatch.setattr(GraphedSteps, "step", strict)
    task, spec, config = copy_setup("cuda")
    config = config.model_copy(update={"precision": precision})
    trainer = Trainer(spec, task, config, tmp_path / "run", progress=False)
    summary = trainer.run()
    assert summary["status"] == "complete" and trainer.graphed is not None
    assert 1 <= len(trainer.graphed.graphs) < 30  # replayed, not captured per step
    rows = [row for row in read_metrics(tmp_path / "run" / METRICS) if "loss" in row]
    assert all(math.isfinite(r["loss"]) for r in rows) and rows[-1]["loss"] < rows[0]["loss"]


@cuda
def test_a_replayed_step_is_the_eager_step():
    """Two models from one seed, no dropout: one trained by GraphedSteps (its second batch of a bucket is a
    replay), the other by the eager fast path on the unpadded batches; their weights agree after both. Adam's
    eps is 1e-6, not 1e-9: the key bias's gradient is zero in exact arithmetic (softmax ignores a constant added
    to a row's scores), and at eps 1e-9 Adam would scale its float noise, which padding changes, into full steps."""
    task, spec, config = copy_setup("cuda", dropout=0.0)
    graphed_model, eager_model = (build(spec, seed=0).cuda() for _ in range(2))
    graphed_opt, eager_opt = (torch.optim.Adam(m.parameters(), lr=0.0, betas=(0.9, 0.98), eps=1e-6)
                              for m in (graphed_model, eager_model))
    pad = task.specials.pad
    steps = GraphedSteps(graphed_model, graphed_opt, pad=pad, smoothing=0.1, clip_norm=1.0, bf16=False,
                         max_tokens=256)
    examples = task.examples("train")
    batches = [collate([examples[i] for i in range(start, start + 8)], pad) for start in (0, 8, 16, 24)]
    for batch in batches:
        total = int(batch[2].ne(pad).sum())
        steps.step(batch, total, 1e-3)
        eager_opt.zero_grad(set_to_none=True)
        for group in eager_opt.param_groups:
            group["lr"] = 1e-3
        sums = training_loss(eager_model, *(t.cuda() for t in batch), pad, 0.1, kernels="fast")
        (sums.loss / total).backward()
        torch.nn.utils.clip_grad_norm_(eager_model.parameters(), 1.0)
        eager_opt.step()
    assert len(steps.graphs) < len(batches)  # some batch was a replay
    for (name, a), b in zip(graphed_model.named_parameters(), eager_model.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=name)
