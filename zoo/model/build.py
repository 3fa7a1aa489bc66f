"""build: ModelSpec -> components looked up in the registry -> Seq2Seq."""

from __future__ import annotations

import contextlib
from pathlib import Path

import torch
from torch import nn

from zoo.components.residual import Placement
from zoo.model.seq2seq import Decoder, DecoderLayer, Embedder, Encoder, EncoderLayer, Seq2Seq
from zoo.model.spec import ModelSpec, check_compatible, load_spec
from zoo.registry import registry


def component(spec: ModelSpec, slot: str, *args, **kwargs):
    """Instantiate the implementation `spec` chose for `slot` with its typed options."""
    config = getattr(spec, slot)
    entry = registry.get(slot, getattr(config, registry.slot(slot).key))
    return entry.impl(*args, config, **kwargs)


class _Assembler:
    """Builds each piece from the spec; one method per piece so the wiring reads top to bottom."""

    def __init__(self, spec: ModelSpec):
        self.spec = spec

    def norm(self) -> nn.Module:
        return component(self.spec, "norm", self.spec.d_model)

    def residuals(self, stack: str, sublayers: list[str]) -> list[nn.Module]:
        """The residual wrappers of one block, built like every slot from the spec's own options."""
        spec = self.spec
        norms = spec.impl("residual").make_norms(spec.residual, len(sublayers), self.norm)
        return [
            component(spec, "residual", norm, dropout=spec.rate("residual"),
                      placement=Placement(stack, name, spec.encoder_layers, spec.decoder_layers))
            for name, norm in zip(sublayers, norms)
        ]

    def attention(self) -> nn.Module:
        spec = self.spec
        positions = spec.impl("positional").relative(spec.positional, spec.n_heads, spec.d_model // spec.n_heads)
        return component(spec, "attention", spec.d_model, spec.n_heads, dropout=spec.rate("attention"),
                         positions=positions)

    def ffn(self) -> nn.Module:
        return component(self.spec, "ffn", self.spec.d_model, self.spec.d_ff, dropout=self.spec.rate("ffn"))

    def encoder_layer(self) -> EncoderLayer:
        res_attn, res_ffn = self.residuals("encoder", ["self_attn", "ffn"])
        return EncoderLayer(self.attention(), self.ffn(), res_attn, res_ffn)

    def decoder_layer(self) -> DecoderLayer:
        if self.spec.attention.share_self_cross:  # 001: one module (and its norm) serves both
            attn = self.attention()
            res_attn, res_ffn = self.residuals("decoder", ["self_attn", "ffn"])
            return DecoderLayer(attn, attn, self.ffn(), res_attn, res_attn, res_ffn)
        res_self, res_cross, res_ffn = self.residuals("decoder", ["self_attn", "cross_attn", "ffn"])
        return DecoderLayer(self.attention(), self.attention(), self.ffn(), res_self, res_cross, res_ffn)

    def final_norm(self) -> nn.Module | None:
        return self.norm() if self.spec.residual.final_norm else None

    def embedders(self) -> tuple[Embedder, Embedder]:
        spec = self.spec
        src_tokens = component(spec, "embedding", spec.src_vocab, spec.d_model, pad_id=spec.pad_id)
        tgt_tokens = src_tokens if spec.embedding.sharing != "none" else component(
            spec, "embedding", spec.tgt_vocab, spec.d_model, pad_id=spec.pad_id
        )
        embedders = []
        for tokens in (src_tokens, tgt_tokens):
            positions = component(spec, "positional", spec.d_model, dropout=spec.rate("positional"), pad_id=spec.pad_id)
            embedders.append(Embedder(tokens, positions, self.norm() if spec.embedding.norm else None))
        return embedders[0], embedders[1]

    def output(self, tgt_embed: Embedder) -> nn.Module:
        tied = tgt_embed.tokens.table.weight if self.spec.embedding.sharing == "all" else None
        return component(self.spec, "output", self.spec.d_model, self.spec.tgt_vocab, tied_weight=tied)

    def model(self) -> Seq2Seq:
        spec = self.spec
        src_embed, tgt_embed = self.embedders()
        encoder = Encoder([self.encoder_layer() for _ in range(spec.encoder_layers)], self.final_norm())
        decoder = Decoder([self.decoder_layer() for _ in range(spec.decoder_layers)], self.final_norm())
        return Seq2Seq(spec, src_embed, tgt_embed, encoder, decoder, self.output(tgt_embed), component(spec, "mask"))


def build(spec_or_name: ModelSpec | str | Path, seed: int = 0, device: str | torch.device | None = None) -> Seq2Seq:
    """Assemble the model a spec (or preset name, or spec file) describes, initialised under `seed`.

    Initialisation runs after assembly with the seed reset, so the same seed and the same parameter
    layout give identical weights. `device="meta"` builds without allocating (for counting).
    The global RNG state is left as it was.
    """
    spec = spec_or_name if isinstance(spec_or_name, ModelSpec) else load_spec(spec_or_name)
    check_compatible(spec)
    device = torch.device(device) if device is not None else None
    with torch.random.fork_rng(devices=[]), (device or contextlib.nullcontext()):
        torch.manual_seed(seed)
        model = _Assembler(spec).model()
        if device is None or device.type != "meta":
            torch.manual_seed(seed)
            component(spec, "init")(model)
    model.seed = seed
    return model
