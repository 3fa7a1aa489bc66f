"""Slot `norm`: the normalisation used by residual wrappers, final norms and the optional input norm.

LayerNorm (torch's and the Annotated Transformer's), RMSNorm (Zhang & Sennrich 2019) and ScaleNorm
(Nguyen & Salazar 2019).

Shape: (..., D) -> (..., D) for every implementation.
"""

from __future__ import annotations

import torch
from pydantic import Field
from torch import nn

from zoo.components.slots import SlotParams, register, registry
from zoo.config_io import Number


class Norm(nn.Module):
    """Base class: normalises over the last dimension."""

    def __init__(self, dim: int, params: SlotParams):
        super().__init__()


registry.define_slot("norm", base=Norm, default="layernorm", doc="normalisation over the model dimension")


class LayerNormParams(SlotParams):
    eps: Number = Field(1e-5, gt=0, description="added to the variance inside the square root")


@register("norm", "layernorm", params=LayerNormParams)
class LayerNorm(Norm):
    """torch.nn.LayerNorm: biased variance, eps inside the square root (000-003, torch.nn.Transformer)."""

    def __init__(self, dim: int, params: LayerNormParams):
        super().__init__(dim, params)
        self.norm = nn.LayerNorm(dim, eps=params.eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)

    def canonical_state(self) -> dict[str, torch.Tensor]:
        return {"weight": self.norm.weight, "bias": self.norm.bias}


class AnnotatedLayerNormParams(SlotParams):
    eps: Number = Field(1e-6, gt=0, description="added to the standard deviation")


@register("norm", "layernorm-annotated", params=AnnotatedLayerNormParams)
class AnnotatedLayerNorm(Norm):
    """The Annotated Transformer's LayerNorm (004): unbiased std, eps added to the std, not the variance."""

    def __init__(self, dim: int, params: AnnotatedLayerNormParams):
        super().__init__(dim, params)
        self.eps = params.eps
        self.weight = nn.Parameter(torch.ones(dim))  # 004 calls these gamma and beta
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(-1, keepdim=True)
        std = x.std(-1, keepdim=True)  # unbiased (N - 1), as torch.std defaults to
        return self.weight * (x - mean) / (std + self.eps) + self.bias

    def reset_parameters(self) -> None:
        nn.init.ones_(self.weight)
        nn.init.zeros_(self.bias)

    def canonical_state(self) -> dict[str, torch.Tensor]:
        return {"weight": self.weight, "bias": self.bias}


class RMSNormParams(SlotParams):
    eps: Number = Field(1e-6, gt=0, description="added to the mean square inside the square root")


@register("norm", "rmsnorm", params=RMSNormParams)
class RMSNorm(Norm):
    """RMSNorm (Zhang & Sennrich 2019): g * x / sqrt(mean(x^2) + eps); no centring, no bias.

    The same function as torch.nn.RMSNorm(dim, eps), written out (tested against it).
    """

    def __init__(self, dim: int, params: RMSNormParams):
        super().__init__(dim, params)
        self.eps = params.eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def reset_parameters(self) -> None:
        nn.init.ones_(self.weight)


class ScaleNormParams(SlotParams):
    eps: Number = Field(1e-5, gt=0, description="lower bound on the norm ||x||")


@register("norm", "scalenorm", params=ScaleNormParams)
class ScaleNorm(Norm):
    """ScaleNorm (Nguyen & Salazar 2019, "Transformers without Tears"): g * x / max(||x||, eps) with
    ONE learned scalar g, initialised to sqrt(d) (so a unit-RMS vector keeps its length)."""

    def __init__(self, dim: int, params: ScaleNormParams):
        super().__init__(dim, params)
        self.dim, self.eps = dim, params.eps
        self.g = nn.Parameter(torch.tensor(float(dim) ** 0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.g * x / x.norm(dim=-1, keepdim=True).clamp_min(self.eps)

    def reset_parameters(self) -> None:
        nn.init.constant_(self.g, float(self.dim) ** 0.5)
