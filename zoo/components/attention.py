"""Slot `attention`: multi-head attention, softmax(Q K^T / sqrt(Dh)) V per head, then W_O.

Shape: query (B, Lq, D), key_value (B, Lk, D), mask: AttentionMask over (B, 1, Lq, Lk) -> (B, Lq, D).
Heads: Q, K, V are split into (B, H, L, Dh) with Dh = D / H.

Implementations declare what they support; the spec refuses pairings they cannot honour:
- `supports_rezero`: can zero blocked weights again after the softmax (mask `bool-blocked-rezero`);
- `supports_incremental`: can decode one step at a time against cached keys and values.

Canonical layout (for transplant): q/k/v/o .weight (D, D) and .bias (D,), whatever the storage
(separate Linears, or one fused (3D, D) in-projection as torch.nn.MultiheadAttention keeps it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from zoo.components.masks import AttentionMask
from zoo.registry import SlotParams, register, registry

Tensor = torch.Tensor


@dataclass
class KVCache:
    """What one attention call-site has seen, for step-by-step decoding.

    `static` (cross-attention): keys and values come from the memory and are computed once.
    Otherwise (self-attention) each step's keys and values are appended. What is stored is up to
    the implementation (projected K/V of shape (B, H, L, Dh), or raw inputs (B, L, D)).
    """

    static: bool
    k: Tensor | None = None
    v: Tensor | None = None

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows `index` (beam search reorders hypotheses)."""
        if self.k is not None:
            self.k = self.k.index_select(0, index)
        if self.v is not None:
            self.v = self.v.index_select(0, index)


class AttentionParams(SlotParams):
    dropout: float | None = Field(None, ge=0, lt=1, description="dropout on attention weights; None = spec.dropout")
    share_self_cross: bool = Field(
        False, description="the decoder uses one attention module, and its norm, for self- and cross-attention (001)"
    )


class ProjectionParams(AttentionParams):
    qkv: Literal["separate", "fused"] = Field(
        "separate", description="three Q/K/V Linears, or one fused (3D, D) in-projection (torch.nn.MultiheadAttention)"
    )
    bias: bool = Field(True, description="biases on the Q, K, V projections")
    out_bias: bool = Field(True, description="bias on the output projection W_O (004 has none)")
    unused_projection: bool = Field(
        False, description="create a fourth (D, D) Linear that is never used, as 004 does (counts as parameters)"
    )


class Attention(nn.Module):
    """Base class of every attention implementation."""

    supports_rezero: bool = True
    supports_incremental: bool = True

    def __init__(self, d_model: int, n_heads: int, params: AttentionParams, dropout: float):
        super().__init__()
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        self.dropout_p = dropout


registry.define_slot("attention", base=Attention, default="sdpa", doc="multi-head attention")


class ProjectedAttention(Attention):
    """Owns the Q/K/V/O projections in either layout; subclasses implement only `attend`."""

    def __init__(self, d_model: int, n_heads: int, params: ProjectionParams, dropout: float):
        super().__init__(d_model, n_heads, params, dropout)
        self.layout = params.qkv
        if params.qkv == "fused":
            self.qkv = nn.Linear(d_model, 3 * d_model, bias=params.bias)
        else:
            self.q = nn.Linear(d_model, d_model, bias=params.bias)
            self.k = nn.Linear(d_model, d_model, bias=params.bias)
            self.v = nn.Linear(d_model, d_model, bias=params.bias)
        self.o = nn.Linear(d_model, d_model, bias=params.out_bias)
        self.unused = nn.Linear(d_model, d_model) if params.unused_projection else None

    def _split_heads(self, x: Tensor) -> Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, self.n_heads, self.d_head).transpose(1, 2)  # (B, H, L, Dh)

    def _fused_qkv(self) -> tuple[Tensor, Tensor | None]:
        """The (3D, D) in-projection: stored as such, or the three Linears' weights stacked (a small
        copy that buys one large matmul instead of three)."""
        if self.layout == "fused":
            return self.qkv.weight, self.qkv.bias
        bias = torch.cat([self.q.bias, self.k.bias, self.v.bias]) if self.q.bias is not None else None
        return torch.cat([self.q.weight, self.k.weight, self.v.weight]), bias

    def _project_q(self, x: Tensor) -> Tensor:
        if self.layout == "separate":
            return self.q(x)
        d_model = self.o.in_features
        bias = self.qkv.bias[:d_model] if self.qkv.bias is not None else None
        return F.linear(x, self.qkv.weight[:d_model], bias)

    def _project_kv(self, x: Tensor) -> tuple[Tensor, Tensor]:
        if self.layout == "separate":
            return self.k(x), self.v(x)
        d_model = self.o.in_features
        bias = self.qkv.bias[d_model:] if self.qkv.bias is not None else None
        return F.linear(x, self.qkv.weight[d_model:], bias).chunk(2, dim=-1)

    def project(self, query: Tensor, key_value: Tensor, cache: KVCache | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """Q from `query`, K and V from `key_value` (or the cache), each split into (B, H, L, Dh)."""
        if cache is None and key_value is query:  # self-attention: one (B, L, 3D) matmul whatever the layout
            q, k, v = F.linear(query, *self._fused_qkv()).chunk(3, dim=-1)
            return self._split_heads(q), self._split_heads(k), self._split_heads(v)
        q = self._split_heads(self._project_q(query))
        if cache is not None and cache.static and cache.k is not None:
            return q, cache.k, cache.v
        k, v = (self._split_heads(t) for t in self._project_kv(key_value))
        if cache is not None:
            if not cache.static and cache.k is not None:
                k, v = torch.cat([cache.k, k], dim=2), torch.cat([cache.v, v], dim=2)  # (B, H, t + 1, Dh)
            cache.k, cache.v = k, v
        return q, k, v

    def forward(self, query: Tensor, key_value: Tensor, mask: AttentionMask | None, cache: KVCache | None = None) -> Tensor:
        q, k, v = self.project(query, key_value, cache)  # (B, H, Lq, Dh), (B, H, Lk, Dh) x2
        out = self.attend(q, k, v, mask)  # (B, H, Lq, Dh)
        batch, _, length, _ = out.shape
        return self.o(out.transpose(1, 2).reshape(batch, length, -1))  # (B, Lq, D)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: AttentionMask | None) -> Tensor:
        raise NotImplementedError

    def canonical_state(self) -> dict[str, Tensor]:
        state: dict[str, Tensor] = {}
        if self.layout == "fused":
            for name, weight in zip("qkv", self.qkv.weight.chunk(3)):
                state[f"{name}.weight"] = weight
            if self.qkv.bias is not None:
                for name, bias in zip("qkv", self.qkv.bias.chunk(3)):
                    state[f"{name}.bias"] = bias
        else:
            for name in "qkv":
                for pname, p in getattr(self, name).named_parameters():
                    state[f"{name}.{pname}"] = p
        state.update({f"o.{n}": p for n, p in self.o.named_parameters()})
        if self.unused is not None:
            state.update({f"unused.{n}": p for n, p in self.unused.named_parameters()})
        return state


@register("attention", "sdpa", params=ProjectionParams)
class SDPAAttention(ProjectedAttention):
    """F.scaled_dot_product_attention: fused kernels; masks passed as bool (-inf fill) or additive float."""

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: AttentionMask | None) -> Tensor:
        attn_mask = None
        if mask is not None:  # bool True = take part, matching a -inf fill; otherwise the convention's fill
            attn_mask = mask.keep if mask.fill == float("-inf") else mask.additive.to(q.dtype)
        dropout = self.dropout_p if self.training else 0.0
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout)
        if mask is not None and mask.rezero:
            # Re-zeroing blocked weights changes only rows where every key is blocked (elsewhere
            # they are already exactly 0): those rows' outputs become 0.
            out = out * mask.has_key
        return out


@register("attention", "matmul", params=ProjectionParams)
class MatmulAttention(ProjectedAttention):
    """Explicit softmax(Q K^T / sqrt(Dh)) V with masked_fill, as every writeup spells it out."""

    def __init__(self, d_model: int, n_heads: int, params: ProjectionParams, dropout: float):
        super().__init__(d_model, n_heads, params, dropout)
        self.dropout = nn.Dropout(dropout)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: AttentionMask | None) -> Tensor:
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.d_head)  # (B, H, Lq, Lk)
        if mask is not None:
            scores = scores.masked_fill(~mask.keep, mask.fill)
        weights = F.softmax(scores, dim=-1)
        if mask is not None and mask.rezero:
            weights = weights.masked_fill(~mask.keep, 0.0)
        return torch.matmul(self.dropout(weights), v)  # (B, H, Lq, Dh)


@register("attention", "torch-mha", params=AttentionParams)
class TorchMultiheadAttention(Attention):
    """torch.nn.MultiheadAttention itself (002 uses PyTorch's built-in layers); always fused Q/K/V.

    It takes masks only as bool "blocked" or additive float tensors, so it cannot re-zero weights
    after the softmax. For step-by-step decoding it caches its *inputs* (it has no hook to keep
    projected keys and values), so each step re-projects the prefix: correct, not fast.
    """

    supports_rezero = False

    def __init__(self, d_model: int, n_heads: int, params: AttentionParams, dropout: float):
        super().__init__(d_model, n_heads, params, dropout)
        self.mha = nn.MultiheadAttention(d_model, n_heads, dropout=dropout, batch_first=True)

    def reset_parameters(self) -> None:
        """As nn.MultiheadAttention.__init__ does: out_proj's Linear init, then xavier in_proj, zero biases."""
        self.mha.out_proj.reset_parameters()
        self.mha._reset_parameters()

    def forward(self, query: Tensor, key_value: Tensor, mask: AttentionMask | None, cache: KVCache | None = None) -> Tensor:
        if cache is not None:
            if not cache.static:
                key_value = query if cache.k is None else torch.cat([cache.k, query], dim=1)  # (B, t + 1, D)
            elif cache.k is not None:
                key_value = cache.k
            cache.k = key_value
        attn_mask = None
        if mask is not None:  # (B, 1, Lq, Lk) -> (B * H, Lq, Lk), True = blocked or additive
            batch, len_q, len_k = query.size(0), query.size(1), key_value.size(1)
            blocked = ~mask.keep if mask.fill == float("-inf") else mask.additive.to(query.dtype)
            attn_mask = blocked.expand(batch, self.n_heads, len_q, len_k).reshape(-1, len_q, len_k)
        out, _ = self.mha(query, key_value, key_value, attn_mask=attn_mask, need_weights=False)
        return out

    def canonical_state(self) -> dict[str, Tensor]:
        state = {f"{n}.weight": w for n, w in zip("qkv", self.mha.in_proj_weight.chunk(3))}
        state.update({f"{n}.bias": b for n, b in zip("qkv", self.mha.in_proj_bias.chunk(3))})
        state.update({"o.weight": self.mha.out_proj.weight, "o.bias": self.mha.out_proj.bias})
        return state
