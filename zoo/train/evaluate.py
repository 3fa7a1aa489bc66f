"""Evaluation: teacher-forced loss and perplexity, and decoded-output metrics.

Decoded outputs are scored by the metrics their task names (zoo/metrics.py). Text tasks: sacreBLEU on
detokenized output against the raw references, BLEU (cased, 13a tokenization), BLEU lowercased and
chrF. Synthetic tasks: exact match (whole sequence) and token accuracy (position by position against
the reference, over the reference's length).
"""

from __future__ import annotations

import math
from typing import Callable

import torch

from zoo import metrics
from zoo.data import Task, collate, token_batches
from zoo.kernels.loss import loss_sums
from zoo.model.decode import DecodeConfig, decode
from zoo.model.seq2seq import Seq2Seq


def _batches(task: Task, split: str, batch_tokens: int, limit: int | None):
    examples = task.examples(split)[:limit] if limit else task.examples(split)
    lengths = [(len(s), len(t)) for s, t in examples]
    return examples, token_batches(lengths, batch_tokens, seed=0, epoch=0, shuffle=False)


@torch.no_grad()
def validation_loss(model: Seq2Seq, task: Task, split: str = "valid", *, smoothing: float = 0.0,
                    batch_tokens: int = 8000, limit: int | None = None, device: torch.device | None = None) -> dict:
    """Teacher-forced loss and NLL per target token, and perplexity = exp(NLL)."""
    was_training = model.training
    model.eval()
    device = device or next(model.parameters()).device
    examples, batches = _batches(task, split, batch_tokens, limit)
    loss = nll = 0.0
    tokens = 0
    for batch in batches:
        src, tgt_in, tgt_out = (t.to(device) for t in collate([examples[i] for i in batch], task.specials.pad))
        sums = loss_sums(model(src, tgt_in), tgt_out, model.output, task.specials.pad, smoothing)
        loss, nll, tokens = loss + sums.loss.item(), nll + sums.nll.item(), tokens + sums.tokens
    model.train(was_training)
    mean_nll = nll / max(tokens, 1)
    return {"loss": loss / max(tokens, 1), "nll": mean_nll, "ppl": math.exp(min(mean_nll, 700)), "tokens": tokens}


@torch.no_grad()
def translate(model: Seq2Seq, task: Task, sources: list[list[int]], config: DecodeConfig, *,
              batch_tokens: int = 6000, progress: Callable[[int], None] | None = None) -> list[str]:
    """Decode source id lists in length-sorted batches; detokenized outputs in the input order."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    order = token_batches([(len(s), len(s)) for s in sources], max(batch_tokens // max(config.beam, 1), 1),
                          seed=0, epoch=0, shuffle=False)
    outputs: list[str] = [""] * len(sources)
    specials = task.specials
    for batch in order:
        src, _, _ = collate([(sources[i], [specials.bos, specials.eos]) for i in batch], specials.pad)
        hyps = decode(model, src.to(device), specials.bos, specials.eos, config)
        for i, ids in zip(batch, hyps):
            outputs[i] = task.decode_target([specials.bos, *ids, specials.eos])
        if progress:
            progress(len(batch))
    model.train(was_training)
    return outputs


def score(task: Task, hypotheses: list[str], references: list[str]) -> dict:
    """Every metric the task is scored by (Task.metrics), by name."""
    return {name: metrics.get(name).score(hypotheses, references) for name in task.metrics}


def evaluate(model: Seq2Seq, task: Task, split: str, config: DecodeConfig, *, limit: int | None = None,
             progress: Callable[[int], None] | None = None) -> tuple[dict, list[str]]:
    """Loss/perplexity and the task's metrics on `split` (first `limit` sentences); also the outputs."""
    examples = task.examples(split)[:limit] if limit else task.examples(split)
    references = task.references(split)[: len(examples)]
    hypotheses = translate(model, task, [src for src, _ in examples], config, progress=progress)
    scores = {"split": split, "sentences": len(examples), "beam": config.beam, "alpha": config.alpha,
              **score(task, hypotheses, references),
              **{f"{k}": v for k, v in validation_loss(model, task, split, limit=limit).items() if k != "loss"}}
    return scores, hypotheses
