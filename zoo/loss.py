"""The training loss follows the output head, as each writeup trains it.

Each head (zoo/components/output.py) owns what the loss needs: `log_probs(scores)` and `smoothing`,
one of the two functions below; a head registered from outside declares its own.

- `logits` heads (002, 003, torch users): cross-entropy with label smoothing as
  `nn.CrossEntropyLoss(label_smoothing=eps)` computes it: (1 - eps) * NLL + eps * mean over the
  vocabulary of -log p (003's loss, with ignore_index = pad).
- `log-softmax` heads (000, 004): KL divergence to a smoothed target that puts 1 - eps on the
  true token, eps / (V - 2) on every other token except padding, and 0 on padding (the Annotated
  Transformer's LabelSmoothing with nn.KLDivLoss, which 000 and 004 follow).
- `softmax` heads (001): 001's code ends in probabilities and shows no loss; zoo takes log(p),
  with p clamped at the smallest normal float so that an underflowed probability gives a large
  finite loss instead of inf, and trains it with the same KL divergence. Log of a softmax is
  numerically worse than a log-softmax: that is part of what this head costs.

Every loss also reports the plain NLL (no smoothing) so that perplexity is comparable across heads.
Sums over non-padding target tokens are returned; the caller normalises.

A head computes its per-token losses in `token_losses`; the default composes `log_probs` and
`smoothing` and lets autograd differentiate them. The `logits` head, the one most presets train,
uses `logits_cross_entropy` instead: the same numbers with a hand-written backward, one
(B, T, V) pass where autograd makes five (the vocabulary-sized tensors are most of a small
model's training step).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

Tensor = torch.Tensor


@dataclass
class LossSums:
    loss: Tensor  # the training objective, summed over target tokens
    nll: Tensor  # -log p(target), summed
    tokens: int


def uniform_smoothing(log_p: Tensor, nll: Tensor, target: Tensor, pad: int, eps: float) -> Tensor:
    """nn.CrossEntropyLoss(label_smoothing=eps) per token: (1 - eps) NLL + eps * mean over V of -log p."""
    return (1 - eps) * nll - eps * log_p.mean(dim=-1)


def annotated_kl_smoothing(log_p: Tensor, nll: Tensor, target: Tensor, pad: int, eps: float) -> Tensor:
    """KL(t || p) per token to t = 1 - eps on the target, eps / (V - 2) elsewhere, 0 on padding."""
    vocab = log_p.size(-1)
    off = eps / (vocab - 2)
    keep = torch.ones(vocab, dtype=torch.bool, device=log_p.device)
    keep[pad] = False
    # KL(t || p) = sum t log t - sum t log p; the first term is a constant per token.
    entropy = (1 - eps) * math.log(1 - eps) + eps * math.log(off)
    spread = -(log_p * keep).sum(dim=-1) + log_p.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # -sum over others
    return entropy + (1 - eps) * nll + off * spread


def composed_token_losses(head, scores: Tensor, target: Tensor, pad: int, eps: float) -> tuple[Tensor, Tensor]:
    """Per-token (loss, nll), each (B, T), from the head's `log_probs` and `smoothing`."""
    log_p = head.log_probs(scores)  # (B, T, V) float32
    nll = -log_p.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # (B, T)
    return (nll if eps == 0 else head.smoothing(log_p, nll, target, pad, eps)), nll


class _LogitsCrossEntropy(torch.autograd.Function):
    """uniform_smoothing on log_softmax(logits), differentiated by hand.

    d loss / d logits = softmax(logits) - eps / V - (1 - eps) * onehot(target), per token: one
    vocabulary-sized tensor, built in place from the saved log-probabilities.
    """

    @staticmethod
    def forward(ctx, logits: Tensor, target: Tensor, eps: float) -> tuple[Tensor, Tensor]:
        log_p = torch.log_softmax(logits.float(), dim=-1)  # (B, T, V)
        nll = -log_p.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # (B, T)
        loss = (1 - eps) * nll - eps * log_p.mean(dim=-1) if eps else nll.clone()
        ctx.save_for_backward(log_p, target)
        ctx.eps, ctx.dtype = eps, logits.dtype
        ctx.mark_non_differentiable(nll)
        return loss, nll

    @staticmethod
    def backward(ctx, grad_loss: Tensor, _grad_nll: Tensor) -> tuple[Tensor, None, None]:
        log_p, target = ctx.saved_tensors
        eps, vocab = ctx.eps, log_p.size(-1)
        grad = log_p.exp()  # (B, T, V) softmax
        if eps:
            grad.sub_(eps / vocab)
        grad.scatter_add_(-1, target.unsqueeze(-1), grad.new_full((*target.shape, 1), eps - 1))
        grad.mul_(grad_loss.unsqueeze(-1))
        return grad.to(ctx.dtype), None, None


def logits_cross_entropy(logits: Tensor, target: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    """Per-token (loss, nll) of nn.CrossEntropyLoss(label_smoothing=eps) on logits (B, T, V); only
    the loss carries a gradient."""
    return _LogitsCrossEntropy.apply(logits, target, eps)


def loss_sums(scores: Tensor, target: Tensor, head, pad: int, smoothing: float) -> LossSums:
    """scores (B, T, V) as the model returns them, target (B, T) token ids; `head` is the model's
    output head (`model.output`), whose `token_losses` says how its scores are trained (its
    log-probabilities and how label smoothing applies to them)."""
    loss, nll = head.token_losses(scores, target, pad, smoothing)  # (B, T) each
    real = target.ne(pad)  # (B, T)
    real_f = real.to(loss.dtype)
    return LossSums((loss * real_f).sum(), (nll * real_f).sum(), int(real.sum()))
