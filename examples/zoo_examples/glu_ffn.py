"""A new feed-forward variant in one file: GLU (Shazeer 2020), gated by the configured activation.

    pip install ./examples     # registers ffn.glu in every zoo command (entry point zoo.plugins)
    zoo.build(zoo.load_spec("paper-base", {"ffn.kind": "glu", "ffn.activation": "gelu"}))  # GeGLU
"""

from torch import nn

from zoo import register
from zoo.components.ffn import FeedForward, FFNParams


@register("ffn", "glu", params=FFNParams)
class GLUFeedForward(FeedForward):
    """w2(dropout(act(w1 x) * w3 x)): ReGLU with relu, GeGLU with gelu (Shazeer 2020)."""

    def __init__(self, d_model: int, d_ff: int, params: FFNParams, dropout: float):
        super().__init__(d_model, d_ff, params, dropout)
        self.w1 = nn.Linear(d_model, d_ff)
        self.w3 = nn.Linear(d_model, d_ff)  # the gate's linear half
        self.w2 = nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.w2(self.dropout(self.activation(self.w1(x)) * self.w3(x)))  # (B, L, D)
