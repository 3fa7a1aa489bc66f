"""Interop with torch.nn.Transformer: prove zoo's layers against PyTorch's own.

`to_torch(model)` returns a `TorchSeq2Seq`: a real `torch.nn.Transformer` holding the model's
encoder/decoder weights, between copies of the model's embedders and output head, which computes
the same function in eval mode. `from_torch(module, spec)` goes the other way.

One name map serves both directions: zoo's canonical weight names (see zoo/proofs/equivalence.py) ->
the torch.nn.Transformer tensors (views for the fused in-projection) holding the same weight.
Masks need no mapping: TorchSeq2Seq builds the additive causal and key-padding masks
torch.nn.Transformer takes; on rows with at least one key to attend to every zoo convention
computes the same weights (fully padded rows differ, as zoo.masks documents).
"""

from __future__ import annotations

import copy
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from zoo.errors import NotExpressible, SpecError
from zoo.model.build import build
from zoo.model.seq2seq import Seq2Seq
from zoo.model.spec import ModelSpec, load_spec
from zoo.proofs.equivalence import canonical_state

Tensor = torch.Tensor

EXPRESSIBLE = {
    "residual": {"post-norm", "pre-norm"},
    "norm": {"layernorm"},
    "ffn": {"linear", "conv1d"},
    "attention": {"sdpa", "matmul", "torch-mha"},
}


def check_expressible(spec: ModelSpec) -> None:
    """Raise NotExpressible naming the first choice torch.nn.Transformer cannot make."""
    for slot, allowed in EXPRESSIBLE.items():
        kind = getattr(spec, slot).kind
        if kind not in allowed:
            raise NotExpressible(f"{slot}.kind = {kind!r}: torch.nn.Transformer has only {', '.join(sorted(allowed))}")
    if spec.residual.norms != "per-sublayer":
        raise NotExpressible('residual.norms = "per-block": torch.nn.Transformer layers have one norm per sublayer')
    if spec.impl("positional").relative_positions:
        raise NotExpressible(f"positional.kind = {spec.positional.kind!r}: torch.nn.Transformer's attention has no "
                             "hook for relative positions")
    attention = spec.attention
    for option in ("dropout_in_eval", "heads"):
        value = getattr(attention, option, None)
        if value not in (None, False, "transpose"):
            raise NotExpressible(f"attention.{option} = {value!r}: torch.nn.MultiheadAttention has no such choice")
    if attention.share_self_cross:
        raise NotExpressible("attention.share_self_cross: "
                             "torch.nn.TransformerDecoderLayer has separate self- and cross-attention")
    if getattr(spec.mask, "cross_from_target", False):  # 001's slip: built here, it was silently dropped
        raise NotExpressible("mask.cross_from_target: torch.nn.Transformer masks cross-attention by the source's "
                             "padding (memory_key_padding_mask)")
    if getattr(attention, "bias", True) is False or getattr(attention, "out_bias", True) is False:
        raise NotExpressible("attention.bias/out_bias = false: "
                             "torch.nn.Transformer(bias=False) removes every bias at once")


def _weight_map(transformer: nn.Transformer) -> dict[str, Tensor]:
    """zoo canonical name -> the torch.nn.Transformer tensor (or view) holding that weight."""
    names: dict[str, Tensor] = {}

    def attention(prefix: str, mha: nn.MultiheadAttention) -> None:
        for part, weight, bias in zip("qkv", mha.in_proj_weight.chunk(3), mha.in_proj_bias.chunk(3)):
            names[f"{prefix}.{part}.weight"], names[f"{prefix}.{part}.bias"] = weight, bias
        names[f"{prefix}.o.weight"], names[f"{prefix}.o.bias"] = mha.out_proj.weight, mha.out_proj.bias

    def norm(prefix: str, layer_norm: nn.LayerNorm) -> None:
        names[f"{prefix}.weight"], names[f"{prefix}.bias"] = layer_norm.weight, layer_norm.bias

    def ffn(prefix: str, layer: nn.Module) -> None:
        for zoo_name, linear in (("w1", layer.linear1), ("w2", layer.linear2)):
            names[f"{prefix}.{zoo_name}.weight"], names[f"{prefix}.{zoo_name}.bias"] = linear.weight, linear.bias

    for i, layer in enumerate(transformer.encoder.layers):
        prefix = f"encoder.layers.{i}"
        attention(f"{prefix}.self_attn", layer.self_attn)
        ffn(f"{prefix}.ffn", layer)
        norm(f"{prefix}.res_attn.norm", layer.norm1)
        norm(f"{prefix}.res_ffn.norm", layer.norm2)
    for i, layer in enumerate(transformer.decoder.layers):
        prefix = f"decoder.layers.{i}"
        attention(f"{prefix}.self_attn", layer.self_attn)
        attention(f"{prefix}.cross_attn", layer.multihead_attn)
        ffn(f"{prefix}.ffn", layer)
        norm(f"{prefix}.res_self.norm", layer.norm1)
        norm(f"{prefix}.res_cross.norm", layer.norm2)
        norm(f"{prefix}.res_ffn.norm", layer.norm3)
    for stack in ("encoder", "decoder"):
        final = getattr(transformer, stack).norm
        if final is not None:
            norm(f"{stack}.final_norm", final)
    return names


def _stack_state(model: Seq2Seq) -> dict[str, Tensor]:
    """The model's encoder/decoder weights, without 004's never-used projections."""
    return {n: t for n, t in canonical_state(model).items()
            if n.startswith(("encoder.", "decoder.")) and ".unused." not in n}


def torch_transformer(spec: ModelSpec) -> nn.Transformer:
    """An (uninitialised-weights) torch.nn.Transformer with the structure `spec` describes."""
    check_expressible(spec)
    options = dict(
        d_model=spec.d_model, nhead=spec.n_heads, dim_feedforward=spec.d_ff, dropout=spec.dropout,
        activation=spec.ffn.activation, layer_norm_eps=spec.norm.eps, batch_first=True,
        norm_first=spec.residual.kind == "pre-norm",
    )
    layer_options = {k: v for k, v in options.items()}
    final = spec.residual.final_norm
    encoder = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(**layer_options), spec.encoder_layers,
        norm=nn.LayerNorm(spec.d_model, eps=spec.norm.eps) if final else None, enable_nested_tensor=False,
    )
    decoder = nn.TransformerDecoder(
        nn.TransformerDecoderLayer(**layer_options), spec.decoder_layers,
        norm=nn.LayerNorm(spec.d_model, eps=spec.norm.eps) if final else None,
    )
    return nn.Transformer(custom_encoder=encoder, custom_decoder=decoder, **options)


class TorchSeq2Seq(nn.Module):
    """torch.nn.Transformer between the zoo model's embedders and output head; same call signature."""

    def __init__(self, spec: ModelSpec, transformer: nn.Transformer, edges: nn.ModuleDict):
        super().__init__()
        self.spec = spec
        self.transformer = transformer
        self.edges = edges  # src_embed, tgt_embed, output: deep-copied together so ties survive

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        pad = self.spec.pad_id
        length = tgt_in.size(1)
        causal = torch.ones(length, length, dtype=torch.bool, device=tgt_in.device).triu(1)  # (T, T) True = future
        hidden = self.transformer(
            self.edges["src_embed"](src), self.edges["tgt_embed"](tgt_in),
            tgt_mask=causal, src_key_padding_mask=src.eq(pad), tgt_key_padding_mask=tgt_in.eq(pad),
            memory_key_padding_mask=src.eq(pad), tgt_is_causal=True,
        )  # (B, T, D)
        return self.edges["output"](hidden)  # (B, T, V)

    @property
    def output(self) -> nn.Module:
        """The zoo output head (what the loss asks for its log-probabilities and smoothing)."""
        return self.edges["output"]

    def log_probs(self, scores: Tensor) -> Tensor:
        return self.output.log_probs(scores)


def to_torch(model: Seq2Seq) -> TorchSeq2Seq:
    """A module built around a real torch.nn.Transformer computing `model`'s function (eval mode).

    Raises NotExpressible when the spec makes a choice torch.nn.Transformer cannot.
    """
    spec = model.spec
    reference = next(model.parameters())
    transformer = torch_transformer(spec).to(device=reference.device, dtype=reference.dtype)
    targets, sources = _weight_map(transformer), _stack_state(model)
    unmapped = sorted(set(sources) - set(targets))
    if unmapped:
        raise NotExpressible(f"no torch.nn.Transformer counterpart for {', '.join(unmapped)}")
    with torch.no_grad():
        for name, tensor in targets.items():
            tensor.copy_(sources[name])
    edges = copy.deepcopy(nn.ModuleDict({"src_embed": model.src_embed, "tgt_embed": model.tgt_embed,
                                         "output": model.output}))
    wrapped = TorchSeq2Seq(spec, transformer, edges)
    return wrapped.train(model.training)


def _activation(layer: nn.Module) -> str:
    """'relu' or 'gelu' (exact), the activation of one torch layer; NotExpressible for any other."""
    activation = layer.activation
    if isinstance(activation, nn.GELU) and activation.approximate != "none":
        raise NotExpressible(f"activation GELU(approximate={activation.approximate!r}): zoo's gelu is the exact one")
    if activation in (F.relu, "relu") or isinstance(activation, nn.ReLU):
        return "relu"
    if activation in (F.gelu, "gelu") or isinstance(activation, nn.GELU):
        return "gelu"
    raise NotExpressible(f"activation {activation!r}: zoo's ffn slot has relu and gelu")


def spec_of(transformer: nn.Transformer, base: ModelSpec) -> ModelSpec:
    """`base` with the structure of `transformer` (sizes, norm placement, activation, eps, final norms)."""
    enc_layer = transformer.encoder.layers[0]
    acts = {_activation(layer) for layer in [*transformer.encoder.layers, *transformer.decoder.layers]}
    if len(acts) > 1:  # e.g. nn.Transformer(activation=nn.GELU()): its deep-copied decoder layers fall back to ReLU
        raise NotExpressible(f"activations {' and '.join(sorted(acts))} in one model: zoo's ffn slot has one "
                             "activation for every layer")
    (act,) = acts
    return base.with_overrides({
        "d_model": enc_layer.self_attn.embed_dim, "n_heads": enc_layer.self_attn.num_heads,
        "d_ff": enc_layer.linear1.out_features, "encoder_layers": len(transformer.encoder.layers),
        "decoder_layers": len(transformer.decoder.layers), "ffn.activation": act,
        "residual.kind": "pre-norm" if enc_layer.norm_first else "post-norm",
        "residual.final_norm": transformer.encoder.norm is not None, "norm.kind": "layernorm",
        "norm.eps": enc_layer.norm1.eps,
    })


def from_torch(module: TorchSeq2Seq | nn.Transformer, spec: ModelSpec | str | Path | None = None,
               seed: int = 0) -> Seq2Seq:
    """A zoo model holding the weights of a TorchSeq2Seq, or of a bare torch.nn.Transformer.

    For a bare nn.Transformer, `spec` supplies what it lacks (vocabularies, embeddings, positions,
    output head, masks): its structure is overridden by the transformer's, its embedders and
    output head keep their seeded initialisation. For a TorchSeq2Seq they are copied too.
    """
    if isinstance(module, TorchSeq2Seq):
        transformer, base = module.transformer, module.spec if spec is None else spec
    elif isinstance(module, nn.Transformer):
        if spec is None:
            raise SpecError("from_torch(nn.Transformer) needs a spec for vocabularies, embeddings and the output head")
        transformer, base = module, spec
    else:
        raise TypeError(f"from_torch takes a TorchSeq2Seq or a torch.nn.Transformer, not {type(module).__name__}")
    base = base if isinstance(base, ModelSpec) else load_spec(base)
    if transformer.encoder.norm is None and transformer.decoder.norm is not None or \
       transformer.encoder.norm is not None and transformer.decoder.norm is None:
        raise NotExpressible("zoo's residual.final_norm puts a final norm on both stacks or neither")
    reference = next(transformer.parameters())
    model = build(spec_of(transformer, base), seed=seed).to(device=reference.device, dtype=reference.dtype)
    sources, targets = _weight_map(transformer), _stack_state(model)
    with torch.no_grad():
        for name, tensor in targets.items():
            tensor.copy_(sources[name])
        if isinstance(module, TorchSeq2Seq):
            for part in ("src_embed", "tgt_embed", "output"):
                theirs = canonical_state(module.edges[part])
                for name, tensor in canonical_state(getattr(model, part)).items():
                    tensor.copy_(theirs[name])
    return model.train(transformer.training)
