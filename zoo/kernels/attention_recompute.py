"""Attention's bf16 backward recomputed, for bf16 training on the CPU (TrainConfig.kernels = "fast-attention").

PyTorch's CPU flash-attention kernel, which `F.scaled_dot_product_attention` picks for training, has a bf16
backward about ten times slower than its forward: at the scale study's size (d_model 256, 4 heads, batches of
about 3,500 target tokens) it is a third of a training step. This module keeps that kernel's forward, bit for
bit, and replaces its backward with the textbook one: the probabilities recomputed from the saved logsumexp and
five batched matmuls, the two that feed the softmax's backward in float32 and the other three in bf16, as the
kernel has them. That is about four times faster than the kernel's bf16 backward and as close to the exact
gradient (tests/test_attention_recompute.py checks both against a float64 reference). In float32 the kernel's
own backward is the faster one, so the recomputed backward is used only for bf16.

The switch is a context (`recomputed_backward`), entered around a training step's forward pass by
`zoo.kernels.loss_fused.training_loss`: the attention modules call `scaled_dot_product_attention` here, which takes the
recomputed path only inside it, so decoding, evaluation and the reference path are untouched.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

Tensor = torch.Tensor

_ACTIVE: ContextVar[bool] = ContextVar("zoo_recomputed_attention_backward", default=False)


@contextmanager
def recomputed_backward(enabled: bool = True) -> Iterator[None]:
    """Within this context, bf16 attention on the CPU records the recomputed backward."""
    token = _ACTIVE.set(enabled)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def scaled_dot_product_attention(q: Tensor, k: Tensor, v: Tensor, attn_mask: Tensor | None, dropout_p: float,
                                 scale: float) -> Tensor:
    """`F.scaled_dot_product_attention` (no causal flag), or the same forward with the recomputed backward where
    that applies: inside `recomputed_backward`, on the CPU, in bf16, recording gradients, without dropout (whose
    random mask only the kernel knows) and with a mask that needs no gradient of its own."""
    if (_ACTIVE.get() and q.device.type == "cpu" and q.dtype == torch.bfloat16 and dropout_p == 0
            and torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)
            and (attn_mask is None or not attn_mask.requires_grad)):
        return _RecomputedBackward.apply(q, k, v, attn_mask, scale)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, scale=scale)


class _RecomputedBackward(torch.autograd.Function):
    """softmax(Q K^T * scale + mask) V: the CPU flash kernel's forward, the textbook backward."""

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, v: Tensor, attn_mask: Tensor | None, scale: float) -> Tensor:
        if attn_mask is not None and attn_mask.dtype == torch.bool:  # as F.scaled_dot_product_attention does
            blocked = ~attn_mask
            attn_mask = torch.zeros(blocked.shape, dtype=q.dtype, device=q.device).masked_fill_(blocked, float("-inf"))
        # the kernel F.scaled_dot_product_attention runs here, looked up when first used (a private op)
        flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
        out, logsumexp = flash(q, k, v, 0.0, False, attn_mask=attn_mask, scale=scale)  # (B, H, Lq, Dh), (B, H, Lq)
        ctx.save_for_backward(q, k, v, attn_mask, logsumexp)
        ctx.scale = scale
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out: Tensor) -> tuple[Tensor, Tensor, Tensor, None, None]:
        q, k, v, attn_mask, logsumexp = ctx.saved_tensors
        # The scores and the gradient of the probabilities in float32: the softmax's backward subtracts nearly
        # equal numbers there. The three products that only carry a gradient on take bf16 inputs, as the kernel's.
        scores = q.float() @ k.float().transpose(-2, -1) * ctx.scale  # (B, H, Lq, Lk)
        if attn_mask is not None:
            scores = scores + attn_mask.float()
        # A row whose keys are all blocked has logsumexp 0 from the kernel (and output 0): its probabilities
        # come out exp(-inf) = 0 here, so it passes no gradient, as the kernel's own backward has it.
        probs = torch.exp(scores - logsumexp.unsqueeze(-1))  # (B, H, Lq, Lk)
        grad_v = probs.to(v.dtype).transpose(-2, -1) @ grad_out  # (B, H, Lk, Dh)
        grad_probs = grad_out.float() @ v.float().transpose(-2, -1)  # (B, H, Lq, Lk)
        row_dot = (probs * grad_probs).sum(-1, keepdim=True)  # (B, H, Lq, 1): sum_j P_ij dP_ij
        grad_scores = (probs * (grad_probs - row_dot) * ctx.scale).to(q.dtype)
        return grad_scores @ k, grad_scores.transpose(-2, -1) @ q, grad_v, None, None  # (B, H, L, Dh) each
