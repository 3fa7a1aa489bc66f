"""Slot `init`: how parameters are initialised after the model is assembled.

Initialisation runs after construction, under the build seed, in the order of
`model.named_parameters()`, so two specs with the same parameter layout get identical weights
whatever their module classes (e.g. `sdpa` and `matmul` attention).
"""

from __future__ import annotations

import torch
from pydantic import Field
from torch import nn

from zoo.components.slots import SlotParams, register, registry


class InitParams(SlotParams):
    identical_layers: bool = Field(
        False,
        description="every layer of a stack starts as a copy of the first, as copy.deepcopy of one initialised "
        "layer gives (000, and 002 through nn.TransformerEncoder/Decoder)",
    )
    shared_prototypes: bool = Field(
        False,
        description="000 as written: every attention (encoder self, decoder self and cross) starts as a copy of one "
        "prototype, and every FFN of both stacks as a copy of another",
    )


class Initializer:
    """Base class: `__call__(model)` initialises every parameter in place."""

    def __init__(self, params: InitParams):
        self.params = params

    def __call__(self, model: nn.Module) -> None:
        with torch.no_grad():
            self.initialize(model)
            for layer in [*model.encoder.layers, *model.decoder.layers]:
                for residual, sublayer in layer.wrapped():  # e.g. DeepNorm's beta-scaled weights
                    residual.init_sublayer(sublayer)
            _zero_padding_rows(model)
            if self.params.shared_prototypes:
                _copy_prototypes(model)
            if self.params.identical_layers:
                _copy_first_layer(model)

    def initialize(self, model: nn.Module) -> None:
        raise NotImplementedError


registry.define_slot("init", base=Initializer, default="torch-default", doc="parameter initialisation")


def _torch_defaults(module: nn.Module) -> None:
    """Call each module's own `reset_parameters`; a module that has one initialises its children."""
    for child in module.children():
        reset = getattr(child, "reset_parameters", None)
        if callable(reset):
            reset()
        else:
            _torch_defaults(child)


def _copy_first_layer(model: nn.Module) -> None:
    """Load each stack's first layer into every other layer of the stack."""
    for stack in (model.encoder.layers, model.decoder.layers):
        for layer in stack[1:]:
            layer.load_state_dict(stack[0].state_dict())


def _xavier_matrices(model: nn.Module) -> None:
    """xavier_uniform_ on every parameter with more than one dimension, a tied one once."""
    for param in model.parameters():  # deduplicated
        if param.dim() > 1:
            nn.init.xavier_uniform_(param)


def _copy_prototypes(model: nn.Module) -> None:
    """Load the first encoder layer's attention into every attention module, and its FFN into every FFN."""
    first = model.encoder.layers[0]
    attention, ffn = first.self_attn.state_dict(), first.ffn.state_dict()
    for layer in [*model.encoder.layers, *model.decoder.layers]:
        for name in ("self_attn", "cross_attn"):
            if hasattr(layer, name):
                getattr(layer, name).load_state_dict(attention)
        layer.ffn.load_state_dict(ffn)


def _zero_padding_rows(model: nn.Module) -> None:
    """nn.Embedding(padding_idx=...) promises a zero pad row; keep that promise after any init."""
    for module in model.modules():
        if isinstance(module, nn.Embedding) and module.padding_idx is not None:
            module.weight[module.padding_idx].zero_()


@register("init", "torch-default", params=InitParams)
class TorchDefault(Initializer):
    """Each module's own PyTorch initialisation (000-002): kaiming-uniform Linear/Conv1d, N(0, 1) embeddings."""

    def initialize(self, model: nn.Module) -> None:
        _torch_defaults(model)


@register("init", "xavier-uniform", params=InitParams)
class XavierUniform(Initializer):
    """PyTorch defaults, then xavier_uniform_ on every parameter with more than one dimension (003, 004).

    Embedding tables count (they are 2-D), biases and norm gains keep their defaults: 004's text says
    "all biases are initialized with 0", but its code leaves them at PyTorch's default, as here.
    """

    def initialize(self, model: nn.Module) -> None:
        _torch_defaults(model)
        _xavier_matrices(model)


@register("init", "xavier-uniform-copied-layers", params=InitParams)
class XavierUniformCopiedLayers(Initializer):
    """004's order: each stack's layers are deep copies of one layer made with PyTorch's defaults, and only
    then does xavier_uniform_ redraw every parameter with more than one dimension.

    So each layer draws its own matrices, but every layer of a stack starts with the first layer's biases
    (norm gains start at one in any case). The random draws are xavier-uniform's, in the same order, so the
    matrices equal xavier-uniform's under the same seed and only the biases differ.
    """

    def initialize(self, model: nn.Module) -> None:
        _torch_defaults(model)
        _copy_first_layer(model)
        _xavier_matrices(model)
