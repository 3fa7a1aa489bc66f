"""Slot `embedding`: token lookup tables, their sharing and scaling.

Shape: tokens (B, L) -> (B, L, D), multiplied by sqrt(D) when `scale` is on.
`sharing`: "none" (separate source and target tables), "src-tgt" (one table for both), "all" (one
table for both, also used as the output projection's weight, Press & Wolf 2017).
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from pydantic import Field
from torch import nn

from zoo.components.slots import SlotParams, register, registry
from zoo.config_io import Count, Number


class EmbeddingParams(SlotParams):
    sharing: Literal["none", "src-tgt", "all"] = "none"
    scale: bool = Field(True, description="multiply embeddings by sqrt(d_model)")
    padding_idx: bool = Field(False, description="nn.Embedding(padding_idx=pad_id): pad row zero, "
                                                 "never updated (000, 001)")
    extra_rows: Count = Field(0, ge=0, le=2**24,
                              description="table rows beyond the vocabulary (001 allocates vocab + 1)")
    norm: bool = Field(False, description="apply the spec's norm after embedding + position + dropout (000)")


class TokenEmbedding(nn.Module):
    """Base class: forward(tokens) -> (B, L, D)."""


registry.define_slot("embedding", base=TokenEmbedding, default="lookup", doc="token embedding tables")


@register("embedding", "lookup", params=EmbeddingParams)
class LookupEmbedding(TokenEmbedding):
    """An nn.Embedding table, optionally scaled by sqrt(d_model) (every writeup but 001 and 002 scales)."""

    def __init__(self, vocab: int, d_model: int, params: EmbeddingParams, pad_id: int):
        super().__init__()
        self.vocab = vocab
        self.table = nn.Embedding(vocab + params.extra_rows, d_model,
                                  padding_idx=pad_id if params.padding_idx else None)
        self.scale = math.sqrt(d_model) if params.scale else 1.0

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.table(tokens)  # (B, L, D)
        return x * self.scale if self.scale != 1.0 else x

    def canonical_state(self) -> dict[str, torch.Tensor]:
        state = {"weight": self.table.weight[: self.vocab]}
        if self.table.num_embeddings > self.vocab:
            state["extra_rows"] = self.table.weight[self.vocab :]
        return state


class FixNormParams(EmbeddingParams):
    radius: Number = Field(1.0, gt=0, description="the length every embedding is fixed to, before the sqrt(d) scale")


@register("embedding", "fixnorm", params=FixNormParams)
class FixNormEmbedding(LookupEmbedding):
    """FixNorm (Nguyen & Chiang 2018, used with ScaleNorm by Nguyen & Salazar 2019): each looked-up
    embedding rescaled to a fixed length `radius` (then x sqrt(D) with `scale`); a tied output
    projection uses the table itself."""

    def __init__(self, vocab: int, d_model: int, params: FixNormParams, pad_id: int):
        super().__init__(vocab, d_model, params, pad_id)
        self.radius = params.radius

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.table(tokens)  # (B, L, D)
        return x * (self.radius * self.scale / x.norm(dim=-1, keepdim=True).clamp_min(1e-12))
