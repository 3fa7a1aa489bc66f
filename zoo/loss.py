"""The training loss follows the output head, as each writeup trains it.

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

from dataclasses import dataclass

import torch
import torch.nn.functional as F

Tensor = torch.Tensor


@dataclass
class LossSums:
    loss: Tensor  # the training objective, summed over target tokens
    nll: Tensor  # -log p(target), summed
    tokens: int


def log_probs_for_loss(scores: Tensor, output_kind: str) -> Tensor:
    scores = scores.float()
    if output_kind == "logits":
        return F.log_softmax(scores, dim=-1)
    if output_kind == "softmax":
        return torch.log(scores.clamp_min(torch.finfo(scores.dtype).tiny))
    return scores  # log-softmax: already log-probabilities


def loss_sums(scores: Tensor, target: Tensor, output_kind: str, pad: int, smoothing: float) -> LossSums:
    """scores (B, T, V) as the model returns them, target (B, T) token ids."""
    log_p = log_probs_for_loss(scores, output_kind)  # (B, T, V)
    real = target.ne(pad)  # (B, T)
    nll = -log_p.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # (B, T)
    if smoothing == 0:
        loss = nll
    elif output_kind == "logits":
        loss = (1 - smoothing) * nll - smoothing * log_p.mean(dim=-1)
    else:
        vocab = log_p.size(-1)
        off = smoothing / (vocab - 2)
        keep = torch.ones(vocab, dtype=torch.bool, device=log_p.device)
        keep[pad] = False
        # KL(t || p) = sum t log t - sum t log p; the first term is a constant per token.
        entropy = (1 - smoothing) * torch.log(torch.tensor(1 - smoothing)) + smoothing * torch.log(torch.tensor(off))
        spread = -(log_p * keep).sum(dim=-1) + log_p.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # -sum over others
        loss = entropy + (1 - smoothing) * nll + off * spread
    real_f = real.to(loss.dtype)
    return LossSums((loss * real_f).sum(), (nll * real_f).sum(), int(real.sum()))
