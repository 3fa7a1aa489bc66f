"""`zoo.masks`: the five mask conventions (implemented in zoo/components/masks.py, documented there)."""

from zoo.components.masks import (  # noqa: F401
    AttentionMask,
    CanonicalMasks,
    MaskConvention,
    NativeMasks,
    TorchMasks,
    build,
    get,
)

__all__ = ["AttentionMask", "CanonicalMasks", "MaskConvention", "NativeMasks", "TorchMasks", "build", "get"]
