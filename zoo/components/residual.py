"""Slot `residual`: how a sublayer is wrapped with its residual connection, norm and dropout.

Post-norm and pre-norm are two registered modules, never an `if norm_first:` inside a layer.
Each wrapper owns (or, with `norms = "per-block"`, shares) one norm module, unless the
implementation uses none (`uses_norm = False`, ReZero). A wrapper receives its own options and
its `Placement` (stack, sublayer, depths), so depth-dependent schemes such as DeepNorm compute
their constants from it; `init_sublayer` lets a wrapper re-initialise the sublayer it wraps
(called by the init slot after initialisation).

Shape: x (B, L, D) and sublayer: (B, L, D) -> (B, L, D); returns (B, L, D).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
from pydantic import Field
from torch import nn

from zoo.registry import SlotParams, register, registry

Sublayer = Callable[[torch.Tensor], torch.Tensor]
SublayerName = Literal["self_attn", "cross_attn", "ffn"]


@dataclass(frozen=True)
class Placement:
    """Where a residual wrapper sits: its stack and sublayer, and the depth of both stacks."""

    stack: Literal["encoder", "decoder"]
    sublayer: SublayerName
    encoder_layers: int
    decoder_layers: int


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

    uses_norm: bool = True

    def __init__(self, norm: nn.Module | None, params: ResidualParams, *, dropout: float, placement: Placement):
        super().__init__()
        self.norm = norm
        self.dropout = nn.Dropout(dropout if placement.sublayer in params.dropout_on else 0.0)

    @classmethod
    def make_norms(cls, params: ResidualParams, count: int, make_norm: Callable[[], nn.Module]) -> list[nn.Module | None]:
        """The norms for a block's `count` wrappers: one each, one shared (`per-block`), or none."""
        if not cls.uses_norm:
            return [None] * count
        if params.norms == "per-block":
            return [make_norm()] * count
        return [make_norm() for _ in range(count)]

    def init_sublayer(self, sublayer: nn.Module) -> None:
        """Re-initialise the wrapped sublayer after the init slot ran; most wrappers leave it alone."""


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
