"""Slot `positional`: position information added to the embedded tokens, then dropout.

Shape: x (B, L, D), tokens (B, L) -> (B, L, D). `offset` shifts positions for step-by-step decoding.
"""

from __future__ import annotations

import math

import torch
from pydantic import Field
from torch import nn

from zoo.errors import ZooError
from zoo.registry import SlotParams, register, registry


class PositionalParams(SlotParams):
    dropout: float | None = Field(None, ge=0, lt=1, description="dropout on embedding + position; None = spec.dropout")
    max_len: int = Field(5000, gt=0, description="longest sequence the table covers")


class Positional(nn.Module):
    """Base class: forward(x, tokens, offset=0) adds positions and applies dropout."""

    def __init__(self, d_model: int, params: PositionalParams, dropout: float, pad_id: int):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.pad_id = pad_id
        self.max_len = params.max_len

    def check_length(self, end: int) -> None:
        if end > self.max_len:
            raise ZooError(f"positional.max_len: a sequence reaches position {end}, beyond max_len = {self.max_len}")


registry.define_slot("positional", base=Positional, default="sinusoidal", doc="position encoding")


def sinusoid_table(max_len: int, d_model: int) -> torch.Tensor:
    """(max_len, D): PE[pos, 2i] = sin(pos / 10000^(2i/D)), PE[pos, 2i+1] = cos(pos / 10000^(2i/D))."""
    position = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)  # (max_len, 1)
    div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    table = torch.zeros(max_len, d_model)
    table[:, 0::2] = torch.sin(position * div_term)
    table[:, 1::2] = torch.cos(position * div_term[: d_model // 2])
    return table


@register("positional", "sinusoidal", params=PositionalParams)
class Sinusoidal(Positional):
    """Fixed sine/cosine table in a buffer (the paper; 000, 002-004)."""

    def __init__(self, d_model: int, params: PositionalParams, dropout: float, pad_id: int):
        super().__init__(d_model, params, dropout, pad_id)
        self.register_buffer("table", sinusoid_table(params.max_len, d_model), persistent=False)

    def positions(self, tokens: torch.Tensor, offset: int) -> torch.Tensor:
        self.check_length(offset + tokens.size(1))
        return self.table[offset : offset + tokens.size(1)]  # (L, D)

    def forward(self, x: torch.Tensor, tokens: torch.Tensor, offset: int = 0) -> torch.Tensor:
        return self.dropout(x + self.positions(tokens, offset).to(x.dtype))


@register("positional", "sinusoidal-pad-aware", params=PositionalParams)
class PadAwareSinusoidal(Sinusoidal):
    """001's table with an all-zero row for PAD: padding positions get no position signal.

    001 looks positions up from sequence lengths (1..len, then 0 for PAD) in a frozen nn.Embedding;
    with right-padded batches that is the sinusoid at real positions and zeros at padding. It
    applies no dropout there (set `dropout = 0`). 001 builds the table from a numpy array with
    `torch.cat`, which fails as written; the intended float table is used.
    """

    def forward(self, x: torch.Tensor, tokens: torch.Tensor, offset: int = 0) -> torch.Tensor:
        keep = tokens.ne(self.pad_id).unsqueeze(-1).to(x.dtype)  # (B, L, 1)
        return self.dropout(x + self.positions(tokens, offset).to(x.dtype) * keep)


@register("positional", "learned", params=PositionalParams)
class Learned(Positional):
    """A trainable (max_len, D) table (the paper's Table 3 row E alternative)."""

    def __init__(self, d_model: int, params: PositionalParams, dropout: float, pad_id: int):
        super().__init__(d_model, params, dropout, pad_id)
        self.table = nn.Embedding(params.max_len, d_model)

    def forward(self, x: torch.Tensor, tokens: torch.Tensor, offset: int = 0) -> torch.Tensor:
        self.check_length(offset + tokens.size(1))
        positions = torch.arange(offset, offset + tokens.size(1), device=tokens.device)
        return self.dropout(x + self.table(positions))  # (L, D) broadcast over B
