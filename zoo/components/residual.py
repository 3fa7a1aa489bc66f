"""Slot `residual`: how a sublayer is wrapped with its residual connection, norm and dropout.

post-norm, pre-norm; for depth, DeepNorm (Wang et al. 2022) and ReZero (Bachlechner et al. 2020).

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

from zoo.components.slots import SlotParams, register, registry
from zoo.config_io import Number

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
    dropout: Number | None = Field(None, ge=0, lt=1, description="dropout on the sublayer output; None = spec.dropout")
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
    def make_norms(cls, params: ResidualParams, count: int,
                   make_norm: Callable[[], nn.Module]) -> list[nn.Module | None]:
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


def deepnorm_constants(placement: Placement) -> tuple[float, float]:
    """(alpha, beta) for an encoder-decoder of N encoder and M decoder layers (Wang et al. 2022, section 4.3
    and appendix B): encoder alpha = 0.81 (N^4 M)^(1/16), beta = 0.87 (N^4 M)^(-1/16);
    decoder alpha = (3M)^(1/4), beta = (12M)^(-1/4). The paper's constants: microsoft/torchscale's encoder
    beta is 1.15 (N^4 M)^(-1/16) instead (experiments/published-findings.md, item 9)."""
    n, m = placement.encoder_layers, placement.decoder_layers
    if placement.stack == "encoder":
        return 0.81 * (n**4 * m) ** (1 / 16), 0.87 * (n**4 * m) ** (-1 / 16)
    return (3 * m) ** (1 / 4), (12 * m) ** (-1 / 4)


@register("residual", "deepnorm", params=PostNormParams)
class DeepNorm(Residual):
    """DeepNorm (Wang et al. 2022, "DeepNet"): norm(alpha * x + dropout(sublayer(x))), and the sublayer's
    FFN, value and output projections re-initialised xavier-normal with gain beta (queries and keys gain 1),
    alpha and beta from the depths of both stacks."""

    def __init__(self, norm: nn.Module | None, params: PostNormParams, *, dropout: float, placement: Placement):
        super().__init__(norm, params, dropout=dropout, placement=placement)
        self.alpha, self.beta = deepnorm_constants(placement)

    def forward(self, x: torch.Tensor, sublayer: Sublayer) -> torch.Tensor:
        return self.norm(x * self.alpha + self.dropout(sublayer(x)))

    def init_sublayer(self, sublayer: nn.Module) -> None:
        own = getattr(sublayer, "canonical_state", None)
        state = own() if own is not None else dict(sublayer.named_parameters())
        for name, weight in state.items():
            if weight.dim() > 1:
                gain = 1.0 if name.split(".")[0] in ("q", "k") else self.beta
                nn.init.xavier_normal_(weight, gain=gain)


class ReZeroParams(ResidualParams):
    final_norm: bool = False


@register("residual", "rezero", params=ReZeroParams)
class ReZero(Residual):
    """ReZero (Bachlechner et al. 2020): x + alpha * dropout(sublayer(x)), one learned scalar alpha per
    wrapper initialised to 0 (every layer starts as the identity), and no norm."""

    uses_norm = False

    def __init__(self, norm: nn.Module | None, params: ReZeroParams, *, dropout: float, placement: Placement):
        super().__init__(norm, params, dropout=dropout, placement=placement)
        self.alpha = nn.Parameter(torch.zeros(()))

    def forward(self, x: torch.Tensor, sublayer: Sublayer) -> torch.Tensor:
        return x + self.alpha * self.dropout(sublayer(x))

    def reset_parameters(self) -> None:
        nn.init.zeros_(self.alpha)
