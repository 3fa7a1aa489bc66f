"""Slot `ffn`: the position-wise feed-forward network, w2(dropout(act(w1 x))), or gated (GLU variants).

Shape: (B, L, D) -> (B, L, D); inner width F = spec.d_ff.
Canonical layout (for transplant): w1.weight (F, D), w1.bias (F,), w2.weight (D, F), w2.bias (D,).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from zoo.components.slots import SlotParams, register, registry
from zoo.config_io import Number

ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


class FFNParams(SlotParams):
    activation: Literal["relu", "gelu"] = "relu"
    dropout: Number | None = Field(None, ge=0, lt=1, description="dropout after the activation; None = spec.dropout")


class FeedForward(nn.Module):
    """Base class: holds the activation and the inner dropout; subclasses own w1 and w2."""

    def __init__(self, d_model: int, d_ff: int, params: FFNParams, dropout: float):
        super().__init__()
        self.activation = self.activation_for(params)
        self.dropout = nn.Dropout(dropout)

    def activation_for(self, params: FFNParams) -> Callable[[torch.Tensor], torch.Tensor]:
        """The configured activation; gated variants fix their own."""
        return ACTIVATIONS[params.activation]


registry.define_slot("ffn", base=FeedForward, default="linear", doc="position-wise feed-forward network")


@register("ffn", "linear", params=FFNParams)
class LinearFFN(FeedForward):
    """Two nn.Linear layers (the paper's formula; 000, 002-004, torch.nn.Transformer)."""

    def __init__(self, d_model: int, d_ff: int, params: FFNParams, dropout: float):
        super().__init__(d_model, d_ff, params, dropout)
        self.w1 = nn.Linear(d_model, d_ff)
        self.w2 = nn.Linear(d_ff, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(self.dropout(self.activation(self.w1(x))))  # (B, L, D) -> (B, L, F) -> (B, L, D)


@register("ffn", "conv1d", params=FFNParams)
class Conv1dFFN(FeedForward):
    """Two kernel-size-1 nn.Conv1d layers over (B, D, L), as 001 writes it: the same function as `linear`."""

    def __init__(self, d_model: int, d_ff: int, params: FFNParams, dropout: float):
        super().__init__(d_model, d_ff, params, dropout)
        self.w1 = nn.Conv1d(d_model, d_ff, kernel_size=1)
        self.w2 = nn.Conv1d(d_ff, d_model, kernel_size=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.transpose(1, 2)  # (B, D, L)
        h = self.w2(self.dropout(self.activation(self.w1(h))))  # (B, F, L) -> (B, D, L)
        return h.transpose(1, 2)  # (B, L, D)

    def canonical_state(self) -> dict[str, torch.Tensor]:
        return {
            "w1.weight": self.w1.weight.squeeze(-1), "w1.bias": self.w1.bias,
            "w2.weight": self.w2.weight.squeeze(-1), "w2.bias": self.w2.bias,
        }


class GLUParams(SlotParams):
    dropout: Number | None = Field(None, ge=0, lt=1, description="dropout on the gated product; None = spec.dropout")
    bias: bool = Field(False, description="biases on w1, w3, w2 (Shazeer 2020 has none)")


class GatedFFN(FeedForward):
    """w2(dropout(act(w1 x) * w3 x)) (Shazeer 2020, "GLU Variants Improve Transformer").

    Three matrices instead of two: with inner width d_ff = 2/3 of a ReLU FFN's (and bias = false) it has
    the ReLU FFN's 2 * D * F weights, Shazeer's setting (paper-base: d_ff 1365 or 1366 for 2048).
    Canonical layout adds w3.weight (F, D), the linear (ungated) half.
    """

    gate: Callable[[torch.Tensor], torch.Tensor]

    def __init__(self, d_model: int, d_ff: int, params: GLUParams, dropout: float):
        super().__init__(d_model, d_ff, params, dropout)
        self.w1 = nn.Linear(d_model, d_ff, bias=params.bias)
        self.w3 = nn.Linear(d_model, d_ff, bias=params.bias)
        self.w2 = nn.Linear(d_ff, d_model, bias=params.bias)

    def activation_for(self, params: GLUParams) -> Callable[[torch.Tensor], torch.Tensor]:
        return type(self).gate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(self.dropout(self.activation(self.w1(x)) * self.w3(x)))  # (B, L, F) gated -> (B, L, D)


@register("ffn", "reglu", params=GLUParams)
class ReGLU(GatedFFN):
    """ReGLU: relu(x W) * x V, then W2 (Shazeer 2020)."""

    gate = staticmethod(F.relu)


@register("ffn", "geglu", params=GLUParams)
class GEGLU(GatedFFN):
    """GEGLU: gelu(x W) * x V, then W2 (Shazeer 2020)."""

    gate = staticmethod(F.gelu)


@register("ffn", "swiglu", params=GLUParams)
class SwiGLU(GatedFFN):
    """SwiGLU: swish(x W) * x V with swish = SiLU (beta = 1), then W2 (Shazeer 2020)."""

    gate = staticmethod(F.silu)
