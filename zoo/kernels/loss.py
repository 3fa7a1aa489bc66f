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
    real: Tensor  # (B, T) the non-padding target positions

    @property
    def tokens(self) -> int:
        """Counted only when asked: on a GPU the count is a host synchronisation, which the training loop,
        knowing its tokens from the batch on the host, never needs."""
        return int(self.real.sum())


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


def loss_sums(scores: Tensor, target: Tensor, head, pad: int, smoothing: float) -> LossSums:
    """scores (B, T, V) as the model returns them, target (B, T) token ids; `head` is the model's
    output head (`model.output`), which says how its scores become log-probabilities and how label
    smoothing applies to them."""
    log_p = head.log_probs(scores)  # (B, T, V) float32
    real = target.ne(pad)  # (B, T)
    nll = -log_p.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # (B, T)
    loss = nll if smoothing == 0 else head.smoothing(log_p, nll, target, pad, smoothing)
    real_f = real.to(loss.dtype)
    return LossSums((loss * real_f).sum(), (nll * real_f).sum(), real)
