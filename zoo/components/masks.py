"""Slot `mask`: the five mask conventions of the writeups, each building masks exactly as its code does.

A convention turns token ids into *native* masks (the writeup's dtype, shape and meaning of True/1)
and converts each to one *canonical* form: bool, True = may attend, broadcastable to (B, 1, Lq, Lk).
Attention layers apply a mask through `AttentionMask`: the canonical `keep`, the writeup's `fill`
value for blocked scores, and whether blocked weights are zeroed again after the softmax.

| convention            | writeup | native form                                                               | fill  |
|-----------------------|---------|---------------------------------------------------------------------------|-------|
| `bool-blocked-rezero` | 000     | bool True = blocked, (B,1,1,S) and (B,1,T,T); weights re-zeroed           | -1e9  |
| `uint8-expanded`      | 001     | bool True = blocked, expanded to (B,Lq,Lk); padding + uint8 sequence > 0  | -inf  |
| `torch-additive`      | 002     | float causal (T,T) (-inf above the diagonal) + bool key padding (B,L)     | -inf  |
| `bool-keep`           | 003     | bool True = may attend, (B,1,1,S) and (B,1,T,T), padding AND look-ahead   | -inf  |
| `int-keep`            | 004     | int64 1 = keep, (B,1,S) and (B,T,T); heads added by `mask.unsqueeze(1)`   | -1e9  |

Every convention masks the decoder's self-attention with "causal AND key is not padding" and the
encoder self- and the cross-attention with "key is not source padding". On every row that has at
least one key to attend to, all five give the same attention weights (exp(-1e9 - max) is exactly 0
in float32), which `zoo.equivalence` proves. They differ only on a *fully padded row* (a query with
no key to attend to, e.g. a source that is all padding):

| convention            | `matmul` (explicit softmax)     | `sdpa` (F.scaled_dot_product_attention)   | `torch-mha`    |
|-----------------------|---------------------------------|-------------------------------------------|----------------|
| `bool-blocked-rezero` | zeros (re-zeroed after softmax) | zeros (re-zeroing emulated on the output) | not supported  |
| `uint8-expanded`      | NaN (softmax over all -inf)     | zeros (PyTorch >= 2.5 returns 0 there)    | zeros; NaN (*) |
| `torch-additive`      | NaN                             | zeros                                     | zeros; NaN (*) |
| `bool-keep`           | NaN                             | zeros                                     | zeros; NaN (*) |
| `int-keep`            | uniform over all keys, pads too | uniform                                   | uniform        |

(*) nn.MultiheadAttention gives zeros on its regular path, but NaN in self-attention at inference
(eval mode, no grad), where PyTorch runs its fused fast path: the same model, the same weights,
different outputs for a fully padded source between training-mode and inference calls.

Slips in the writeups, and what is implemented instead:
- 001 builds its cross-attention mask as `padding_mask(tgt_seq, src_seq)`: shape (B, S, T), padding of
  the *target* as keys. The intended mask, `padding_mask(src_seq, tgt_seq)` (B, T, S), is built by
  default; `cross_from_target = true` reproduces the slip. 001 also repeats masks with
  `repeat(num_heads, 1, 1)` (head-major) while splitting heads batch-major; the intended per-head
  broadcast is used unless `attention.heads = "view"` (both halves of that slip, in attention.py).
- 003's comments say the source mask is (B,1,1,S) while `_get_pad_mask` first builds (B,1,S); the
  code's final `unsqueeze(1)` does give (B,1,1,S), which is built here.
- 004's usage example passes a (B, T) padding-only target mask; the Annotated Transformer it follows
  builds (B,1,S) and (B,T,T) (padding AND subsequent), which is built here.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, NamedTuple

import torch
from pydantic import Field

from zoo.components.slots import SlotParams, register, registry
from zoo.errors import ZooError

Tensor = torch.Tensor


@dataclass(frozen=True)
class AttentionMask:
    """A mask as attention applies it: canonical `keep`, the convention's `fill`, optional re-zeroing."""

    keep: Tensor  # bool, True = may attend, broadcastable to (B, 1, Lq, Lk)
    fill: float
    rezero: bool

    @cached_property
    def additive(self) -> Tensor:
        """Float mask to add to the scores: 0 where kept, `fill` where blocked."""
        zeros = torch.zeros(self.keep.shape, dtype=torch.float32, device=self.keep.device)
        return zeros.masked_fill(~self.keep, self.fill)

    def last_query(self) -> AttentionMask:
        """The mask of the last query row only (step-by-step decoding): keep (B, 1, 1, Lk)."""
        keep = self.keep[..., -1:, :] if self.keep.size(-2) > 1 else self.keep
        return AttentionMask(keep, self.fill, self.rezero)

    def for_kernel(self, dtype: torch.dtype, bias: Tensor | None = None) -> Tensor:
        """The mask a fused kernel (F.scaled_dot_product_attention) takes: bool `keep` when blocked
        scores are -inf and there is no `bias` (H, Lq, Lk) to add (ALiBi), else the additive float mask."""
        if bias is None:
            return self.keep if self.fill == float("-inf") else self.additive.to(dtype)
        return self.additive.to(dtype) + bias.to(dtype)  # (B, H, Lq, Lk)

    def repeated_head_major(self, n_heads: int) -> AttentionMask:
        """001 as written: masks repeated with `repeat(n_heads, 1, 1)` (row h * B + b) while heads are
        split batch-major (row b * H + h), so head h of sequence b gets the mask of sequence (b * H + h) mod B."""
        keep = self.keep.expand(self.keep.size(0), n_heads, *self.keep.shape[2:])  # (B, H, Lq, Lk)
        batch = keep.size(0)
        rows = torch.arange(batch * n_heads, device=keep.device) % batch
        return AttentionMask(keep[:, 0][rows].view_as(keep), self.fill, self.rezero)

    @cached_property
    def has_key(self) -> Tensor:
        """(B, 1, Lq, 1) bool: whether a query row has at least one key it may attend to."""
        return self.keep.any(dim=-1, keepdim=True)


@dataclass(frozen=True)
class CanonicalMasks:
    """Bool masks, True = may attend, broadcastable to (B, 1, Lq, Lk); `None` where not built."""

    enc_self: Tensor
    dec_self: Tensor | None
    dec_cross: Tensor | None


class TorchMasks(NamedTuple):
    """torch.nn.Transformer's pair: additive float attn_mask (Lq, Lk) and bool key_padding_mask (B, Lk)."""

    attn_mask: Tensor | None
    key_padding_mask: Tensor


@dataclass(frozen=True)
class NativeMasks:
    """The masks in the writeup's own form; `canonical()` converts them."""

    convention: MaskConvention
    enc_self: Any
    dec_self: Any | None
    dec_cross: Any | None

    def canonical(self) -> CanonicalMasks:
        conv = self.convention
        return CanonicalMasks(
            conv.to_canonical(self.enc_self),
            None if self.dec_self is None else conv.to_canonical(self.dec_self),
            None if self.dec_cross is None else conv.to_canonical(self.dec_cross),
        )

    def for_attention(self) -> tuple[AttentionMask, AttentionMask | None, AttentionMask | None]:
        canon = self.canonical()
        conv = self.convention

        def wrap(keep: Tensor | None) -> AttentionMask | None:
            return None if keep is None else AttentionMask(keep, conv.fill, conv.rezero)

        return wrap(canon.enc_self), wrap(canon.dec_self), wrap(canon.dec_cross)  # type: ignore[return-value]


class MaskConvention:
    """Base class. Subclasses set `fill`, `rezero` and `writeup`, and implement the three builders."""

    fill: float
    rezero: bool = False
    writeup: str

    def __init__(self, params: SlotParams | None = None):
        self.params = params

    def build(self, src: Tensor, tgt_in: Tensor | None, pad_id: int) -> NativeMasks:
        """src (B, S) and tgt_in (B, T) token ids -> native masks; tgt_in None builds the encoder's only."""
        src_pad = src.eq(pad_id)  # (B, S) True = padding
        if tgt_in is None:
            return NativeMasks(self, self.encoder(src_pad), None, None)
        tgt_pad = tgt_in.eq(pad_id)  # (B, T)
        return NativeMasks(self, self.encoder(src_pad), self.decoder(tgt_pad), self.cross(src_pad, tgt_pad))

    def encoder(self, src_pad: Tensor) -> Any:
        raise NotImplementedError

    def decoder(self, tgt_pad: Tensor) -> Any:
        raise NotImplementedError

    def cross(self, src_pad: Tensor, tgt_pad: Tensor) -> Any:
        raise NotImplementedError

    def to_canonical(self, native: Any) -> Tensor:
        raise NotImplementedError


registry.define_slot("mask", base=MaskConvention, key="convention", default="bool-keep",
                     doc="attention mask convention")


def _subsequent(length: int, device: torch.device) -> Tensor:
    """(T, T) bool, True above the diagonal: the future positions a decoder query may not see."""
    return torch.ones(length, length, dtype=torch.bool, device=device).triu(1)


@register("mask", "bool-blocked-rezero")
class BoolBlockedRezero(MaskConvention):
    """000: bool True = blocked, fill -1e9, blocked weights zeroed again after the softmax."""

    fill, rezero, writeup = -1e9, True, "000"

    def encoder(self, src_pad: Tensor) -> Tensor:
        return src_pad.unsqueeze(1).unsqueeze(2)  # (B, 1, 1, S)

    def decoder(self, tgt_pad: Tensor) -> Tensor:
        upper = _subsequent(tgt_pad.size(1), tgt_pad.device).unsqueeze(0)  # (1, T, T)
        return (upper + tgt_pad.unsqueeze(1)).unsqueeze(1).bool()  # (B, 1, T, T): subsequent OR padding

    def cross(self, src_pad: Tensor, tgt_pad: Tensor) -> Tensor:
        return self.encoder(src_pad)  # (B, 1, 1, S)

    def to_canonical(self, native: Tensor) -> Tensor:
        return ~native


class Uint8Params(SlotParams):
    cross_from_target: bool = Field(
        False, description="001 as written: the cross-attention mask is padding_mask(tgt_seq, src_seq), (B, S, T), "
        "target padding as keys; it fits only when S == T"
    )


@register("mask", "uint8-expanded", params=Uint8Params)
class Uint8Expanded(MaskConvention):
    """001: True/1 = blocked, expanded to (B, Lq, Lk); padding + uint8 sequence mask summed, then > 0; fill -inf."""

    fill, writeup = float("-inf"), "001"

    @staticmethod
    def _padding(key_pad: Tensor, len_q: int) -> Tensor:
        return key_pad.unsqueeze(1).expand(-1, len_q, -1)  # (B, Lq, Lk) bool, True = key is padding

    def encoder(self, src_pad: Tensor) -> Tensor:
        return self._padding(src_pad, src_pad.size(1))  # (B, S, S)

    def decoder(self, tgt_pad: Tensor) -> Tensor:
        batch, length = tgt_pad.shape
        sequence = torch.triu(torch.ones(length, length, dtype=torch.uint8, device=tgt_pad.device), diagonal=1)
        sequence = sequence.unsqueeze(0).expand(batch, -1, -1)  # (B, T, T) uint8
        return torch.gt(self._padding(tgt_pad, length) + sequence, 0)  # (B, T, T) bool

    def cross(self, src_pad: Tensor, tgt_pad: Tensor) -> Tensor:
        if self.params is not None and self.params.cross_from_target:  # padding_mask(tgt_seq, src_seq)
            if src_pad.size(1) != tgt_pad.size(1):
                raise ZooError(f"mask.cross_from_target: 001's cross-attention mask (B, S, T) fits the (B, T, S) "
                               f"scores only when S == T (got S = {src_pad.size(1)}, T = {tgt_pad.size(1)})")
            return self._padding(tgt_pad, src_pad.size(1))  # (B, S, T): target padding as keys
        return self._padding(src_pad, tgt_pad.size(1))  # (B, T, S): the intended padding_mask(src_seq, tgt_seq)

    def to_canonical(self, native: Tensor) -> Tensor:
        return ~native.bool().unsqueeze(1)  # (B, 1, Lq, Lk)


@register("mask", "torch-additive")
class TorchAdditive(MaskConvention):
    """002: float additive causal mask plus bool key-padding masks (True = pad), as torch.nn.Transformer takes them."""

    fill, writeup = float("-inf"), "002"

    def encoder(self, src_pad: Tensor) -> TorchMasks:
        return TorchMasks(None, src_pad)

    def decoder(self, tgt_pad: Tensor) -> TorchMasks:
        length = tgt_pad.size(1)
        causal = torch.triu(torch.ones(length, length, device=tgt_pad.device) * float("-inf"), diagonal=1)
        return TorchMasks(causal, tgt_pad)  # generate_square_subsequent_mask, as 002 writes it

    def cross(self, src_pad: Tensor, tgt_pad: Tensor) -> TorchMasks:
        return TorchMasks(None, src_pad)

    def to_canonical(self, native: TorchMasks) -> Tensor:
        keep = ~native.key_padding_mask[:, None, None, :]  # (B, 1, 1, Lk)
        if native.attn_mask is not None:
            keep = keep & torch.isfinite(native.attn_mask)[None, None]  # (B, 1, Lq, Lk)
        return keep


@register("mask", "bool-keep")
class BoolKeep(MaskConvention):
    """003: bool True = may attend, (B,1,1,S) and (B,1,T,T), padding AND look-ahead; fill -inf where mask == 0."""

    fill, writeup = float("-inf"), "003"

    def encoder(self, src_pad: Tensor) -> Tensor:
        return (~src_pad).unsqueeze(-2).unsqueeze(1)  # (B, 1, 1, S)

    def decoder(self, tgt_pad: Tensor) -> Tensor:
        lookahead = ~_subsequent(tgt_pad.size(1), tgt_pad.device)[None, None]  # (1, 1, T, T)
        return self.encoder(tgt_pad) & lookahead  # (B, 1, T, T)

    def cross(self, src_pad: Tensor, tgt_pad: Tensor) -> Tensor:
        return self.encoder(src_pad)

    def to_canonical(self, native: Tensor) -> Tensor:
        return native


@register("mask", "int-keep")
class IntKeep(MaskConvention):
    """004: integer 1 = keep, (B,1,S) and (B,T,T), `mask.unsqueeze(1)` for heads; fill -1e9 where mask == 0."""

    fill, writeup = -1e9, "004"

    def encoder(self, src_pad: Tensor) -> Tensor:
        return (~src_pad).unsqueeze(-2).long()  # (B, 1, S)

    def decoder(self, tgt_pad: Tensor) -> Tensor:
        subsequent = (~_subsequent(tgt_pad.size(1), tgt_pad.device)).unsqueeze(0)  # (1, T, T)
        return ((~tgt_pad).unsqueeze(-2) & subsequent).long()  # (B, T, T)

    def cross(self, src_pad: Tensor, tgt_pad: Tensor) -> Tensor:
        return self.encoder(src_pad)

    def to_canonical(self, native: Tensor) -> Tensor:
        return native.unsqueeze(1) != 0  # heads broadcast where 004 puts them: (B, 1, Lq, Lk)


def get(convention: str) -> MaskConvention:
    entry = registry.get("mask", convention)
    return entry.impl(entry.config())


def build(convention: str, src: Tensor, tgt_in: Tensor | None, pad_id: int) -> NativeMasks:
    """Native masks of `convention` for src (B, S) and tgt_in (B, T); `.canonical()` converts them."""
    return get(convention).build(src, tgt_in, pad_id)
