"""The encoder-decoder skeleton. It knows no variant: every choice arrives as a built component.

Shapes: src (B, S) and tgt_in (B, T) token ids; memory (B, S, D); scores (B, T, V).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from zoo.components.attention import KVCache
from zoo.components.masks import AttentionMask, MaskConvention

Tensor = torch.Tensor


@dataclass
class LayerCache:
    self_attn: KVCache = field(default_factory=lambda: KVCache(static=False))
    cross_attn: KVCache = field(default_factory=lambda: KVCache(static=True))


@dataclass
class DecodeState:
    """Per-layer key/value caches for step-by-step decoding; `reorder` follows beam search."""

    layers: list[LayerCache]

    def reorder(self, index: Tensor) -> None:
        for cache in self.layers:
            cache.self_attn.reorder(index)
            cache.cross_attn.reorder(index)


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each inside its residual wrapper."""

    def __init__(self, self_attn: nn.Module, ffn: nn.Module, res_attn: nn.Module, res_ffn: nn.Module):
        super().__init__()
        self.self_attn, self.ffn = self_attn, ffn
        self.res_attn, self.res_ffn = res_attn, res_ffn

    def forward(self, x: Tensor, mask: AttentionMask) -> Tensor:  # (B, S, D) -> (B, S, D)
        x = self.res_attn(x, lambda h: self.self_attn(h, h, mask))
        return self.res_ffn(x, self.ffn)

    def wrapped(self) -> list[tuple[nn.Module, nn.Module]]:
        """(residual wrapper, the sublayer it wraps) pairs, for `Residual.init_sublayer`."""
        return [(self.res_attn, self.self_attn), (self.res_ffn, self.ffn)]


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the memory, then feed-forward.

    `self_attn` and `cross_attn` (and `res_self` and `res_cross`) may be one shared module (001).
    """

    def __init__(self, self_attn: nn.Module, cross_attn: nn.Module, ffn: nn.Module,
                 res_self: nn.Module, res_cross: nn.Module, res_ffn: nn.Module):
        super().__init__()
        self.self_attn, self.cross_attn, self.ffn = self_attn, cross_attn, ffn
        self.res_self, self.res_cross, self.res_ffn = res_self, res_cross, res_ffn

    def forward(self, x: Tensor, memory: Tensor, self_mask: AttentionMask, cross_mask: AttentionMask,
                cache: LayerCache | None = None) -> Tensor:
        self_cache, cross_cache = (cache.self_attn, cache.cross_attn) if cache is not None else (None, None)
        x = self.res_self(x, lambda h: self.self_attn(h, h, self_mask, self_cache))  # (B, T, D)
        x = self.res_cross(x, lambda h: self.cross_attn(h, memory, cross_mask, cross_cache))  # attends (B, S, D)
        return self.res_ffn(x, self.ffn)

    def wrapped(self) -> list[tuple[nn.Module, nn.Module]]:
        return [(self.res_self, self.self_attn), (self.res_cross, self.cross_attn), (self.res_ffn, self.ffn)]


class Encoder(nn.Module):
    def __init__(self, layers: list[EncoderLayer], final_norm: nn.Module | None):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.final_norm = final_norm

    def forward(self, x: Tensor, mask: AttentionMask) -> Tensor:
        for layer in self.layers:
            x = layer(x, mask)
        return self.final_norm(x) if self.final_norm is not None else x


class Decoder(nn.Module):
    def __init__(self, layers: list[DecoderLayer], final_norm: nn.Module | None):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.final_norm = final_norm

    def forward(self, x: Tensor, memory: Tensor, self_mask: AttentionMask, cross_mask: AttentionMask,
                state: DecodeState | None = None) -> Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x, memory, self_mask, cross_mask, state.layers[i] if state is not None else None)
        return self.final_norm(x) if self.final_norm is not None else x


class Embedder(nn.Module):
    """Token embedding, then positions (+ dropout), then an optional norm (000's LayerNorm)."""

    def __init__(self, tokens: nn.Module, positions: nn.Module, norm: nn.Module | None):
        super().__init__()
        self.tokens, self.positions, self.norm = tokens, positions, norm

    def forward(self, ids: Tensor, offset: int = 0) -> Tensor:  # (B, L) -> (B, L, D)
        x = self.positions(self.tokens(ids), ids, offset)
        return self.norm(x) if self.norm is not None else x


class Seq2Seq(nn.Module):
    """Encoder-decoder Transformer, batch first: `forward(src, tgt_in) -> (B, T, V)` scores.

    What the scores are (logits, log-probabilities, probabilities) follows `spec.output.kind`;
    `log_probs(scores)` turns any of them into log-probabilities.
    """

    def __init__(self, spec, src_embed: Embedder, tgt_embed: Embedder, encoder: Encoder, decoder: Decoder,
                 output: nn.Module, masks: MaskConvention):
        super().__init__()
        self.spec = spec
        self.src_embed, self.tgt_embed = src_embed, tgt_embed
        self.encoder, self.decoder = encoder, decoder
        self.output = output
        self.masks = masks

    @property
    def pad_id(self) -> int:
        return self.spec.pad_id

    def encode(self, src: Tensor) -> Tensor:
        """(B, S) token ids -> memory (B, S, D)."""
        enc_mask, _, _ = self.masks.build(src, None, self.pad_id).for_attention()
        return self.encoder(self.src_embed(src), enc_mask)

    def decode(self, tgt_in: Tensor, memory: Tensor, src: Tensor) -> Tensor:
        """(B, T) target prefix, memory (B, S, D), src (B, S) for its padding -> scores (B, T, V)."""
        _, self_mask, cross_mask = self.masks.build(src, tgt_in, self.pad_id).for_attention()
        return self.output(self.decoder(self.tgt_embed(tgt_in), memory, self_mask, cross_mask))

    @property
    def decodes_step_by_step(self) -> bool:
        """Whether cached decoding (`decode_step`) can extend this model's keys and values one position at
        a time. 001 as written (attention.heads = "view") mixes positions across heads, so it cannot:
        decoding then runs the decoder on the whole prefix at every step, which is what 001 itself does."""
        return getattr(self.spec.attention, "heads", "transpose") != "view"

    def start_decoding(self) -> DecodeState:
        """Empty caches for `decode_step`."""
        return DecodeState([LayerCache() for _ in self.decoder.layers])

    def decode_step(self, prefix: Tensor, memory: Tensor, src: Tensor, state: DecodeState) -> Tensor:
        """Scores (B, 1, V) for the next token after `prefix` (B, t + 1), computing only its last position.

        Keys and values of earlier positions come from `state` (filled by earlier calls with the
        same prefix minus its last token); the masks are the convention's own, last row only.
        """
        _, self_mask, cross_mask = self.masks.build(src, prefix, self.pad_id).for_attention()
        x = self.tgt_embed(prefix[:, -1:], offset=prefix.size(1) - 1)  # (B, 1, D)
        hidden = self.decoder(x, memory, self_mask.last_query(), cross_mask.last_query(), state)
        return self.output(hidden)  # (B, 1, V)

    def features(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """The decoder's output (B, T, D) before the output head: what the fused training loss
        (zoo/kernels/loss_fused.py) projects to the vocabulary itself, a chunk of tokens at a time."""
        enc_mask, self_mask, cross_mask = self.masks.build(src, tgt_in, self.pad_id).for_attention()
        memory = self.encoder(self.src_embed(src), enc_mask)  # (B, S, D)
        return self.decoder(self.tgt_embed(tgt_in), memory, self_mask, cross_mask)  # (B, T, D)

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        return self.output(self.features(src, tgt_in))  # (B, T, V)

    def log_probs(self, scores: Tensor) -> Tensor:
        return self.output.log_probs(scores)

    def num_parameters(self, trainable: bool = True) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad or not trainable)
