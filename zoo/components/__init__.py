"""One module per component slot; importing this package registers every built-in implementation."""

from zoo.components import attention, embedding, ffn, init, masks, norm, output, positional, residual  # noqa: F401
