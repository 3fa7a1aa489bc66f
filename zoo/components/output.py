"""Slot `output`: the projection to the target vocabulary and what the model returns.

Shape: (B, T, D) -> (B, T, V) scores: logits, log-probabilities or probabilities per `kind`.
With `embedding.sharing = "all"` the projection's weight is the target embedding table.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from zoo.components.slots import SlotParams, register, registry
from zoo.kernels.loss import annotated_kl_smoothing, uniform_smoothing


class OutputParams(SlotParams):
    bias: bool = Field(True, description="bias on the vocabulary projection (001 has none)")


class OutputHead(nn.Module):
    """Base class: a (V, D) projection, optionally tied to an embedding table, then `scores`.

    A head owns what training needs from it (zoo/kernels/loss.py): `log_probs` and `smoothing`, the
    per-token label-smoothed loss for its kind of scores (cross-entropy's by default).
    """

    smoothing = staticmethod(uniform_smoothing)
    # Whether log_probs(scores(z)) is exactly log_softmax(z): then the fast path may fuse the projection with the
    # loss (zoo/kernels/loss_fused.py); a head that says nothing trains on the reference path.
    log_softmax_of_logits = False

    def __init__(self, d_model: int, vocab: int, params: OutputParams, tied_weight: nn.Parameter | None = None):
        super().__init__()
        self.proj = nn.Linear(d_model, vocab, bias=params.bias)
        if tied_weight is not None:
            self.proj.weight = tied_weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scores(self.proj(x))  # (B, T, V)

    def scores(self, logits: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def log_probs(self, scores: torch.Tensor) -> torch.Tensor:
        """Log-probabilities from what `forward` returned, for losses, decoding and equivalence."""
        raise NotImplementedError

    def canonical_state(self) -> dict[str, torch.Tensor]:
        return dict(self.proj.named_parameters())


registry.define_slot("output", base=OutputHead, default="logits", doc="vocabulary projection and output scores")


@register("output", "logits", params=OutputParams)
class Logits(OutputHead):
    """Unnormalised scores (002, 003, torch.nn.Transformer users); the loss applies log-softmax."""

    log_softmax_of_logits = True

    def scores(self, logits: torch.Tensor) -> torch.Tensor:
        return logits

    def log_probs(self, scores: torch.Tensor) -> torch.Tensor:
        return F.log_softmax(scores.float(), dim=-1)


@register("output", "log-softmax", params=OutputParams)
class LogSoftmax(OutputHead):
    """Log-probabilities (000, 004), trained with the Annotated Transformer's KL-divergence."""

    smoothing = staticmethod(annotated_kl_smoothing)
    log_softmax_of_logits = True

    def scores(self, logits: torch.Tensor) -> torch.Tensor:
        return F.log_softmax(logits, dim=-1)

    def log_probs(self, scores: torch.Tensor) -> torch.Tensor:
        return scores.float()


@register("output", "softmax", params=OutputParams)
class Softmax(OutputHead):
    """Probabilities (001 ends in nn.Softmax), trained with the KL-divergence of 000 and 004.

    log(p) is taken with p clamped at the smallest normal float: an underflowed probability gives a
    large finite loss (and score) instead of -inf.
    """

    smoothing = staticmethod(annotated_kl_smoothing)

    def scores(self, logits: torch.Tensor) -> torch.Tensor:
        return F.softmax(logits, dim=-1)

    def log_probs(self, scores: torch.Tensor) -> torch.Tensor:
        scores = scores.float()
        return torch.log(scores.clamp_min(torch.finfo(scores.dtype).tiny))
