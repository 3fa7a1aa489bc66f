"""Slot `positional`: position information added to the embedded tokens, then dropout; or, for
relative schemes (rotary, ALiBi), given to self-attention instead.

Shape: x (B, L, D), tokens (B, L) -> (B, L, D). `offset` shifts positions for step-by-step decoding.
A relative scheme's `relative()` returns a `RelativePositions` that every attention module gets:
it rotates self-attention queries and keys (B, H, L, Dh) or adds a bias (H, Lq, Lk) to their scores.
Cross-attention gets neither. It holds no parameters and no buffers (computed on the device used).
"""

from __future__ import annotations

import functools
import math

import torch
from pydantic import Field
from torch import nn

from zoo.components.slots import SlotParams, register, registry
from zoo.config_io import Count, Number
from zoo.errors import ZooError

Tensor = torch.Tensor


class RelativePositions:
    """No relative positions: the identity rotation and no score bias (absolute schemes)."""

    def rotate(self, x: Tensor, offset: int) -> Tensor:
        """x (B, H, L, Dh) at positions offset .. offset + L - 1."""
        return x

    def bias(self, len_q: int, len_k: int, device: torch.device) -> Tensor | None:
        """(H, Lq, Lk) added to the scores; queries are the last Lq of the Lk positions."""
        return None


NO_POSITIONS = RelativePositions()


class PositionalParams(SlotParams):
    dropout: Number | None = Field(None, ge=0, lt=1, description="dropout on embedding + position; None = spec.dropout")
    max_len: Count = Field(5000, gt=0, le=2**20, description="longest sequence the table covers")


class Positional(nn.Module):
    """Base class: forward(x, tokens, offset=0) adds positions and applies dropout."""

    relative_positions: bool = False  # whether attention must honour `relative()`
    head_dim_multiple: int = 1  # what d_head = d_model / n_heads must be a multiple of (rotary turns pairs)

    @classmethod
    def relative(cls, params: PositionalParams, n_heads: int, d_head: int) -> RelativePositions:
        return NO_POSITIONS

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
    """(max_len, D): PE[pos, 2i] = sin(pos / 10000^(2i/D)), PE[pos, 2i+1] = cos(pos / 10000^(2i/D)).

    A copy of one table computed per size, on the device new tensors go to (meta in a counting build): 5000
    rows took 23 ms each time, most of a small model's build, which an equivalence matrix does hundreds of."""
    return _sinusoids(max_len, d_model).to(torch.empty(0).device, copy=True)


@functools.lru_cache(maxsize=8)
def _sinusoids(max_len: int, d_model: int) -> torch.Tensor:
    cpu = torch.device("cpu")  # whatever the default device of the build that asks first
    position = torch.arange(max_len, dtype=torch.float32, device=cpu).unsqueeze(1)  # (max_len, 1)
    div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32, device=cpu)
                         * (-math.log(10000.0) / d_model))
    table = torch.zeros(max_len, d_model, device=cpu)
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


class RelativeOnly(Positional):
    """Base of relative schemes: nothing is added to the embeddings (only dropout)."""

    relative_positions = True

    def forward(self, x: Tensor, tokens: Tensor, offset: int = 0) -> Tensor:
        self.check_length(offset + tokens.size(1))
        return self.dropout(x)


class RotaryParams(PositionalParams):
    base: Number = Field(10000.0, gt=1, description="theta_i = base^(-2i/Dh), the paper's 10000")


class RotaryPositions(RelativePositions):
    """Rotates each pair (x[2i], x[2i+1]) by the angle position * base^(-2i/Dh) (Su et al. 2021, eq. 34)."""

    def __init__(self, d_head: int, base: float):
        self.d_head, self.base = d_head, base

    def rotate(self, x: Tensor, offset: int) -> Tensor:
        length = x.size(-2)
        inv_freq = self.base ** (-torch.arange(0, self.d_head, 2, device=x.device, dtype=torch.float32) / self.d_head)
        positions = torch.arange(offset, offset + length, device=x.device, dtype=torch.float32)
        angle = positions[:, None] * inv_freq  # (L, Dh/2)
        cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
        even, odd = x[..., 0::2], x[..., 1::2]  # (B, H, L, Dh/2)
        return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)  # (B, H, L, Dh)


@register("positional", "rotary", params=RotaryParams)
class Rotary(RelativeOnly):
    """Rotary position embedding, RoFormer (Su et al. 2021): queries and keys rotated by position,
    so q_m . k_n depends on m - n only. Applied in self-attention, not cross-attention. Its pairs need an even
    d_head: with an odd one a dimension would have no partner (the spec refuses it)."""

    head_dim_multiple = 2

    @classmethod
    def relative(cls, params: RotaryParams, n_heads: int, d_head: int) -> RelativePositions:
        return RotaryPositions(d_head, params.base)


def alibi_slopes(n_heads: int) -> list[float]:
    """The geometric head slopes 2^(-8/n), 2^(-16/n), ...; for n not a power of two, those of the
    nearest lower power of two and then every other slope of the next one (Press et al. 2022, sec. 3)."""
    lower = 2 ** math.floor(math.log2(n_heads))
    slopes = [2 ** (-8 * (i + 1) / lower) for i in range(lower)]
    extra = [2 ** (-8 * (i + 1) / (2 * lower)) for i in range(2 * lower)][0::2]
    return slopes + extra[: n_heads - lower]


class ALiBiPositions(RelativePositions):
    """Adds -m_h * |i - j| to head h's scores (the decoder's mask keeps j <= i, where it is -m_h (i - j))."""

    def __init__(self, n_heads: int):
        self.slopes = alibi_slopes(n_heads)

    def bias(self, len_q: int, len_k: int, device: torch.device) -> Tensor:
        query = torch.arange(len_k - len_q, len_k, device=device)[:, None]  # (Lq, 1) the last Lq positions
        distance = (query - torch.arange(len_k, device=device)[None, :]).abs().float()  # (Lq, Lk)
        return -torch.tensor(self.slopes, device=device)[:, None, None] * distance  # (H, Lq, Lk)


@register("positional", "alibi", params=PositionalParams)
class ALiBi(RelativeOnly):
    """Attention with Linear Biases (Press et al. 2022): no position embedding, a per-head linear
    distance penalty on self-attention scores; symmetric |i - j| in the (bidirectional) encoder."""

    @classmethod
    def relative(cls, params: PositionalParams, n_heads: int, d_head: int) -> RelativePositions:
        return ALiBiPositions(n_heads)
