"""Slot `attention`: multi-head attention, softmax(Q K^T / sqrt(Dh)) V per head, then W_O.

Shape: query (B, Lq, D), key_value (B, Lk, D), mask: AttentionMask over (B, 1, Lq, Lk) -> (B, Lq, D).
Heads: Q, K, V are split into (B, H, L, Dh) with Dh = D / H.

Implementations declare what they support; the spec refuses pairings they cannot honour:
- `supports_rezero`: can zero blocked weights again after the softmax (mask `bool-blocked-rezero`);
- `supports_incremental`: can decode one step at a time against cached keys and values.

Canonical layout (for transplant): q/k/v/o .weight (D, D) and .bias (D,), whatever the storage
(separate Linears, or one fused (3D, D) in-projection as torch.nn.MultiheadAttention keeps it). The storage
still shapes the starting weights: an initialiser sees a fused in-projection as one (3D, D) matrix, so
xavier-uniform's bound for each block is 1/sqrt(2) of what three separate (D, D) ones get, as in
torch.nn.MultiheadAttention's own initialisation.
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
from zoo.components.positional import NO_POSITIONS, RelativePositions
from zoo.components.slots import SlotParams, register, registry
from zoo.config_io import Count, Number
from zoo.errors import ZooError
from zoo.kernels.attention_recompute import scaled_dot_product_attention

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
    dropout: Number | None = Field(None, ge=0, lt=1, description="dropout on attention weights; None = spec.dropout")
    share_self_cross: bool = Field(
        False, description="the decoder uses one attention module, and its norm, for self- and cross-attention (001)"
    )


class ProjectionParams(AttentionParams):
    dropout_in_eval: bool = Field(
        False, description="attention dropout stays on in eval mode, as 004's Attention (not an nn.Module) has it"
    )
    qkv: Literal["separate", "fused"] = Field(
        "separate", description="three Q/K/V Linears, or one fused (3D, D) in-projection (torch.nn.MultiheadAttention)"
    )
    bias: bool = Field(True, description="biases on the Q, K, V projections")
    out_bias: bool = Field(True, description="bias on the output projection W_O (004 has none)")
    unused_projection: bool = Field(
        False, description="create a fourth (D, D) Linear that is never used, as 004 does (counts as parameters)"
    )
    heads: Literal["transpose", "view"] = Field(
        "transpose",
        description="split heads with a transpose, or with view(B * H, -1, Dh) and masks repeated head-major "
        "as 001 writes it (positions mixed across heads; not causal, no cached decoding)",
    )


class Attention(nn.Module):
    """Base class of every attention implementation.

    `positions` (from the positional slot) rotates self-attention queries and keys or biases their
    scores (rotary, ALiBi); `NO_POSITIONS` does neither.
    """

    supports_rezero: bool = True
    supports_incremental: bool = True
    supports_relative_positions: bool = True
    dropout_in_eval: bool = False

    def __init__(self, d_model: int, n_heads: int, params: AttentionParams, dropout: float, *,
                 positions: RelativePositions = NO_POSITIONS):
        super().__init__()
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        self.dropout_p = dropout
        self.positions = positions

    @property
    def active_dropout(self) -> float:
        """The attention-dropout rate in effect now: 0 in eval mode unless `dropout_in_eval`."""
        return self.dropout_p if self.training or self.dropout_in_eval else 0.0


registry.define_slot("attention", base=Attention, default="sdpa", doc="multi-head attention")


class SeparateQKV(nn.Module):
    """Three (D, D) Linears q, k, v."""

    def __init__(self, d_model: int, bias: bool):
        super().__init__()
        self.q = nn.Linear(d_model, d_model, bias=bias)
        self.k = nn.Linear(d_model, d_model, bias=bias)
        self.v = nn.Linear(d_model, d_model, bias=bias)

    def stacked(self) -> tuple[Tensor, Tensor | None]:
        """The (3D, D) in-projection, stacked (a small copy that buys one large matmul instead of three)."""
        bias = torch.cat([self.q.bias, self.k.bias, self.v.bias]) if self.q.bias is not None else None
        return torch.cat([self.q.weight, self.k.weight, self.v.weight]), bias

    def project_q(self, x: Tensor) -> Tensor:
        return self.q(x)

    def project_kv(self, x: Tensor) -> tuple[Tensor, Tensor]:
        return self.k(x), self.v(x)

    def canonical_state(self) -> dict[str, Tensor]:
        return {f"{name}.{p}": t for name in "qkv" for p, t in getattr(self, name).named_parameters()}


class FusedQKV(nn.Linear):
    """One (3D, D) Linear, rows ordered q, k, v, as torch.nn.MultiheadAttention's in_proj_weight."""

    def __init__(self, d_model: int, bias: bool):
        super().__init__(d_model, 3 * d_model, bias=bias)

    def stacked(self) -> tuple[Tensor, Tensor | None]:
        return self.weight, self.bias

    def project_q(self, x: Tensor) -> Tensor:
        d_model = self.in_features
        return F.linear(x, self.weight[:d_model], self.bias[:d_model] if self.bias is not None else None)

    def project_kv(self, x: Tensor) -> tuple[Tensor, Tensor]:
        d_model = self.in_features
        bias = self.bias[d_model:] if self.bias is not None else None
        return F.linear(x, self.weight[d_model:], bias).chunk(2, dim=-1)  # (B, L, D) x2

    def canonical_state(self) -> dict[str, Tensor]:
        state = {f"{name}.weight": w for name, w in zip("qkv", self.weight.chunk(3))}
        if self.bias is not None:
            state.update({f"{name}.bias": b for name, b in zip("qkv", self.bias.chunk(3))})
        return state


QKV_LAYOUTS = {"separate": SeparateQKV, "fused": FusedQKV}


class ProjectedAttention(Attention):
    """Owns the Q/K/V (in either layout) and O projections; subclasses implement only `attend`."""

    def __init__(self, d_model: int, n_heads: int, params: ProjectionParams, dropout: float, *,
                 positions: RelativePositions = NO_POSITIONS):
        super().__init__(d_model, n_heads, params, dropout, positions=positions)
        self.in_proj = QKV_LAYOUTS[params.qkv](d_model, params.bias)
        self.o = nn.Linear(d_model, d_model, bias=params.out_bias)
        self.unused = nn.Linear(d_model, d_model) if params.unused_projection else None
        self.heads_by_view = params.heads == "view"
        self.dropout_in_eval = params.dropout_in_eval
        self.scale = 1 / math.sqrt(self.d_head)  # on Q K^T

    def _split_heads(self, x: Tensor) -> Tensor:
        batch, length, _ = x.shape
        if self.heads_by_view:  # 001 as written: view(B * H, -1, Dh), no transpose
            return x.reshape(batch, self.n_heads, length, self.d_head)  # (B, H, L, Dh), positions mixed
        return x.view(batch, length, self.n_heads, self.d_head).transpose(1, 2)  # (B, H, L, Dh)

    def _merge_heads(self, x: Tensor) -> Tensor:
        batch, _, length, _ = x.shape
        if self.heads_by_view:
            return x.reshape(batch, length, -1)  # 001: context.view(B, -1, Dh * H)
        return x.transpose(1, 2).reshape(batch, length, -1)  # (B, L, D)

    def project(self, query: Tensor, key_value: Tensor, cache: KVCache | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """Q from `query`, K and V from `key_value` (or the cache), each split into (B, H, L, Dh).

        Self-attention (key_value is query) gets the relative positions' rotation, at positions
        that continue the cached ones.
        """
        if self.heads_by_view and cache is not None:
            raise ZooError('attention.heads: "view" mixes positions across heads, so cached keys cannot be '
                           "extended step by step; decode with use_cache = false")
        is_self = key_value is query
        if cache is None and is_self:  # one (B, L, 3D) matmul whatever the layout
            q, k, v = (self._split_heads(t) for t in F.linear(query, *self.in_proj.stacked()).chunk(3, dim=-1))
        else:
            q = self._split_heads(self.in_proj.project_q(query))
            if cache is not None and cache.static and cache.k is not None:
                return q, cache.k, cache.v
            k, v = (self._split_heads(t) for t in self.in_proj.project_kv(key_value))
        extends = cache is not None and not cache.static and cache.k is not None
        if is_self:
            offset = cache.k.size(2) if extends else 0
            q, k = self.positions.rotate(q, offset), self.positions.rotate(k, offset)
        if cache is not None:
            if extends:
                k, v = torch.cat([cache.k, k], dim=2), torch.cat([cache.v, v], dim=2)  # (B, H, t + 1, Dh)
            cache.k, cache.v = k, v
        return q, k, v

    def forward(self, query: Tensor, key_value: Tensor, mask: AttentionMask | None,
                cache: KVCache | None = None) -> Tensor:
        is_self = key_value is query
        q, k, v = self.project(query, key_value, cache)  # (B, H, Lq, Dh), (B, H, Lk, Dh) x2
        if mask is not None and self.heads_by_view:
            mask = mask.repeated_head_major(self.n_heads)
        bias = self.positions.bias(q.size(2), k.size(2), q.device) if is_self else None  # (H, Lq, Lk) or None
        return self.o(self._merge_heads(self.attend(q, k, v, mask, bias)))  # (B, H, Lq, Dh) -> (B, Lq, D)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: AttentionMask | None, bias: Tensor | None) -> Tensor:
        raise NotImplementedError

    def canonical_state(self) -> dict[str, Tensor]:
        state = dict(self.in_proj.canonical_state())
        state.update({n: p for n, p in self._parameters.items() if p is not None})  # a subclass's own (QK-norm's g)
        state.update({f"o.{n}": p for n, p in self.o.named_parameters()})
        if self.unused is not None:
            state.update({f"unused.{n}": p for n, p in self.unused.named_parameters()})
        return state


@register("attention", "sdpa", params=ProjectionParams)
class SDPAAttention(ProjectedAttention):
    """F.scaled_dot_product_attention: fused kernels; masks passed as bool (-inf fill) or additive float."""

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: AttentionMask | None, bias: Tensor | None) -> Tensor:
        attn_mask = bias
        if mask is not None:
            attn_mask = mask.for_kernel(q.dtype, bias)
        out = scaled_dot_product_attention(q, k, v, attn_mask, self.active_dropout, self.scale)
        if mask is not None and mask.rezero:
            # Re-zeroing blocked weights changes only rows where every key is blocked (elsewhere
            # they are already exactly 0): those rows' outputs become 0.
            out = out * mask.has_key
        return out


@register("attention", "matmul", params=ProjectionParams)
class MatmulAttention(ProjectedAttention):
    """Explicit softmax(Q K^T / sqrt(Dh)) V with masked_fill, as every writeup spells it out."""

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: AttentionMask | None, bias: Tensor | None) -> Tensor:
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale  # (B, H, Lq, Lk)
        if bias is not None:
            scores = scores + bias
        if mask is not None:
            scores = scores.masked_fill(~mask.keep, mask.fill)
        weights = F.softmax(scores, dim=-1)
        if mask is not None and mask.rezero:
            weights = weights.masked_fill(~mask.keep, 0.0)
        weights = F.dropout(weights, self.active_dropout, training=self.active_dropout > 0)
        return torch.matmul(weights, v)  # (B, H, Lq, Dh)


class QKNormParams(ProjectionParams):
    length: Count = Field(64, gt=1, le=2**20,
                          description="L in the initial scale g0 = log2(L^2 - L) (Henry et al. 2020)")


@register("attention", "qk-norm", params=QKNormParams)
class QKNormAttention(SDPAAttention):
    """QK-norm (Henry et al. 2020, "Query-Key Normalization for Transformers"): queries and keys
    L2-normalised per head, scores g * q^ . k^ with one learned scale g, initialised to log2(L^2 - L)."""

    def __init__(self, d_model: int, n_heads: int, params: QKNormParams, dropout: float, *,
                 positions: RelativePositions = NO_POSITIONS):
        super().__init__(d_model, n_heads, params, dropout, positions=positions)
        self.g = nn.Parameter(torch.tensor(math.log2(params.length**2 - params.length)))
        self.scale = 1.0  # g multiplies the normalised queries instead

    def project(self, query: Tensor, key_value: Tensor, cache: KVCache | None = None) -> tuple[Tensor, Tensor, Tensor]:
        q, k, v = super().project(query, key_value, cache)  # (B, H, L, Dh); the cache keeps raw keys
        return F.normalize(q, dim=-1) * self.g, F.normalize(k, dim=-1), v


@register("attention", "torch-mha", params=AttentionParams)
class TorchMultiheadAttention(Attention):
    """torch.nn.MultiheadAttention itself (002 uses PyTorch's built-in layers); always fused Q/K/V.

    It takes masks only as bool "blocked" or additive float tensors, so it cannot re-zero weights
    after the softmax. For step-by-step decoding it caches its *inputs* (it has no hook to keep
    projected keys and values), so each step re-projects the prefix: correct, not fast.
    """

    supports_rezero = False
    supports_relative_positions = False

    def __init__(self, d_model: int, n_heads: int, params: AttentionParams, dropout: float, *,
                 positions: RelativePositions = NO_POSITIONS):
        super().__init__(d_model, n_heads, params, dropout, positions=positions)
        self.mha = nn.MultiheadAttention(d_model, n_heads, dropout=dropout, batch_first=True)

    def reset_parameters(self) -> None:
        """As nn.MultiheadAttention.__init__ does: out_proj's Linear init, then xavier in_proj, zero biases."""
        self.mha.out_proj.reset_parameters()
        self.mha._reset_parameters()

    def forward(self, query: Tensor, key_value: Tensor, mask: AttentionMask | None,
                cache: KVCache | None = None) -> Tensor:
        if cache is not None:
            if not cache.static:
                key_value = query if cache.k is None else torch.cat([cache.k, query], dim=1)  # (B, t + 1, D)
            elif cache.k is not None:
                key_value = cache.k
            cache.k = key_value
        attn_mask = None
        if mask is not None:  # (B, 1, Lq, Lk) -> (B * H, Lq, Lk), True = blocked or additive
            batch, len_q, len_k = query.size(0), query.size(1), key_value.size(1)
            kernel = mask.for_kernel(query.dtype)
            blocked = ~kernel if kernel.dtype == torch.bool else kernel
            attn_mask = blocked.expand(batch, self.n_heads, len_q, len_k).reshape(-1, len_q, len_k)
        out, _ = self.mha(query, key_value, key_value, attn_mask=attn_mask, need_weights=False)
        return out

    def canonical_state(self) -> dict[str, Tensor]:
        state = {f"{n}.weight": w for n, w in zip("qkv", self.mha.in_proj_weight.chunk(3))}
        state.update({f"{n}.bias": b for n, b in zip("qkv", self.mha.in_proj_bias.chunk(3))})
        state.update({"o.weight": self.mha.out_proj.weight, "o.bias": self.mha.out_proj.bias})
        return state
