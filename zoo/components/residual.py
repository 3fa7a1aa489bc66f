"""Slot `residual`: how a sublayer is wrapped with its residual connection, norm and dropout.

Post-norm and pre-norm are two registered modules, never an `if norm_first:` inside a layer.
Each wrapper owns (or, with `norms = "per-block"`, shares) one norm module.

Shape: x (B, L, D) and sublayer: (B, L, D) -> (B, L, D); returns (B, L, D).
"""

from __future__ import annotations

from typing import Callable, Literal

import torch
from pydantic import Field
from torch import nn

from zoo.registry import SlotParams, register, registry

Sublayer = Callable[[torch.Tensor], torch.Tensor]
SublayerName = Literal["self_attn", "cross_attn", "ffn"]


class ResidualParams(SlotParams):
    final_norm: bool = Field(description="a norm after the last encoder and decoder layer")
    dropout: float | None = Field(None, ge=0, lt=1, description="dropout on the sublayer output; None = spec.dropout")
    dropout_on: list[SublayerName] = Field(
        default_factory=lambda: ["self_attn", "cross_attn", "ffn"],
        description="which sublayers' outputs get residual dropout (000 drops only the FFN branch)",
    )
    norms: Literal["per-sublayer", "per-block"] = Field(
        "per-sublayer", description="one norm per sublayer, or one norm shared by a whole block (000)"
    )


class PostNormParams(ResidualParams):
    final_norm: bool = False


class PreNormParams(ResidualParams):
    final_norm: bool = True


class Residual(nn.Module):
    """Base class: `forward(x, sublayer)` combines x with sublayer's output through `self.norm`."""

    def __init__(self, norm: nn.Module, dropout: float):
        super().__init__()
        self.norm = norm
        self.dropout = nn.Dropout(dropout)


registry.define_slot("residual", base=Residual, default="post-norm", doc="residual connection and norm placement")


@register("residual", "post-norm", params=PostNormParams)
class PostNorm(Residual):
    """norm(x + dropout(sublayer(x))): the paper, 000-003 and torch.nn.Transformer's default."""

    def forward(self, x: torch.Tensor, sublayer: Sublayer) -> torch.Tensor:
        return self.norm(x + self.dropout(sublayer(x)))


@register("residual", "pre-norm", params=PreNormParams)
class PreNorm(Residual):
    """x + dropout(sublayer(norm(x))): 004 (the Annotated Transformer) and norm_first=True in torch."""

    def forward(self, x: torch.Tensor, sublayer: Sublayer) -> torch.Tensor:
        return x + self.dropout(sublayer(self.norm(x)))
