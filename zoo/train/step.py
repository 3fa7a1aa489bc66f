"""One optimizer step: the loss of its batches (gradient accumulation included), the gradient norm, clipped
or only measured, and Adam's update. The trainer's eager step and the CUDA-graphed one (zoo/train/graphs.py)
both take it, so a graph records exactly the step the trainer would have taken."""

from __future__ import annotations

import torch

from zoo.kernels.loss_fused import training_loss

Tensor = torch.Tensor


def optimizer_step(model, optimizer, batches: list[tuple[Tensor, Tensor, Tensor]], total: int | Tensor, *,
                   pad: int, smoothing: float, clip_norm: float, kernels: str, bf16: bool) -> Tensor:
    """One step over `batches` of (src, tgt_in, tgt_out) on the model's device, the loss divided by `total`,
    the step's target tokens (a number, or a tensor a graph sets); `clip_norm` inf measures the norm without
    clipping. Returns (3,) float64 on the device: loss sum, NLL sum, gradient norm. Nothing waits for it."""
    # float64 sums, added in the order Python added the floats they replace: the logged numbers stay the same
    sums = torch.zeros(2, dtype=torch.float64, device=next(model.parameters()).device)
    optimizer.zero_grad(set_to_none=True)
    for src, tgt_in, tgt_out in batches:
        step_sums = training_loss(model, src, tgt_in, tgt_out, pad, smoothing, kernels=kernels, bf16=bf16)
        (step_sums.loss / total).backward()
        sums = sums + torch.stack((step_sums.loss.detach(), step_sums.nll.detach())).double()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
    optimizer.step()
    return torch.cat((sums, grad_norm.detach().double().reshape(1)))
