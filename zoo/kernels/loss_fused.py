"""The training loss of zoo/kernels/loss.py and its gradient, fused with the vocabulary projection: the fast path.

At the studies' size (d_model 64, a 4000-token vocabulary) the reference path spends about a third of a
training step on the (tokens, V) tensors around the loss: log-softmax forward and backward, the backward of
the smoothing term's mean over the vocabulary, and the zero-filled scatter of the target's gather. Here the
projection, the log-sum-exp, both losses and the gradient with respect to the logits are computed for a chunk
of tokens at a time, while the chunk's logits are in cache, and the gradient is pushed through the projection
at once; no (tokens, V) tensor is ever held whole, in the forward pass or the backward one.

The gradient is computed in the forward pass (the loss is the end of the graph, so its backward only scales
it), from the closed forms of the two losses of zoo/kernels/loss.py, with z the logits, p = softmax(z), t the target:

    uniform (cross-entropy with label smoothing eps):   dL/dz = p - (1 - eps) onehot(t) - eps / V
    Annotated KL (off = eps / (V - 2), pad excluded):    dL/dz = p - (1 - eps - off) onehot(t) - off [j != pad]

A head can take this path only where its log-probabilities are exactly log_softmax of the logits (the
`logits` and `log-softmax` heads; not `softmax`, whose log clamps) and its smoothing is one of those two:
`fusable` says so, and the trainer uses the reference path otherwise. tests/test_loss_fused.py checks loss
and gradients against the reference for every registered head and several smoothings.
"""

from __future__ import annotations

import math

import torch

from zoo.kernels.attention_recompute import recomputed_backward
from zoo.kernels.loss import LossSums, annotated_kl_smoothing, loss_sums, uniform_smoothing

Tensor = torch.Tensor
CHUNK_ELEMENTS = 1 << 18  # logits per chunk (rows x V): 1 MiB of float32, about what a core's L2 cache holds
# On a GPU a chunk is a round of a dozen kernel launches, and launches, not memory, set a small model's pace there
# (measured on an H200 at d_model 64, vocab 4000: 65-row chunks made the eager step 0.37x the reference path's), so
# a chunk holds up to 128 MiB of float32 logits: a whole batch of the studies' sizes at once.
GPU_CHUNK_ELEMENTS = 1 << 25
SMOOTHINGS = {uniform_smoothing: "uniform", annotated_kl_smoothing: "kl"}


def fusable(head) -> bool:
    """Whether `head`'s loss can be fused: its log-probabilities are log_softmax of its logits, and its label
    smoothing is one whose gradient this module knows."""
    return getattr(head, "log_softmax_of_logits", False) and head.smoothing in SMOOTHINGS


class _Targets:
    """The per-token loss's constants: the weight of the target's one-hot and of every other token in the
    gradient, and the constant entropy term of the KL form."""

    def __init__(self, kind: str, eps: float, vocab: int, pad: int):
        self.kind, self.eps, self.pad = kind, eps, pad
        if eps == 0:  # no smoothing: the plain NLL, whatever the head
            self.on, self.off, self.entropy = 1.0, 0.0, 0.0
        elif kind == "uniform":
            self.on, self.off, self.entropy = 1 - eps, eps / vocab, 0.0
        else:
            off = eps / (vocab - 2)
            self.on, self.off = 1 - eps - off, off
            self.entropy = (1 - eps) * math.log(1 - eps) + eps * math.log(off)

    def losses(self, z: Tensor, lse: Tensor, z_t: Tensor) -> tuple[Tensor, Tensor]:
        """(the training loss, the NLL) per token of a chunk of shifted logits z (rows, V), their log-sum-exp
        and the target's logit, both (rows,)."""
        nll = lse - z_t
        if self.eps == 0:
            return nll, nll
        if self.kind == "uniform":  # (1 - eps) NLL + eps * mean over V of -log p
            return (1 - self.eps) * nll + self.eps * (lse - z.mean(dim=1)), nll
        # entropy + (1 - eps) NLL + off * (log p_t - sum over non-pad tokens of log p)
        vocab = z.size(1)
        others = z.sum(dim=1) - z[:, self.pad] - (vocab - 1) * lse
        return self.entropy + (1 - self.eps) * nll + self.off * ((z_t - lse) - others), nll

    def gradient(self, p: Tensor, target: Tensor) -> Tensor:
        """dL/dz in place of the chunk's probabilities p (rows, V)."""
        if self.off:
            p.sub_(self.off)
            if self.kind == "kl":
                p[:, self.pad] += self.off  # padding gets no smoothing mass
        return p.scatter_add_(1, target.unsqueeze(1), p.new_full((p.size(0), 1), -self.on))


def chunk_rows(vocab: int, d_model: int, device: str = "cpu") -> int:
    """Tokens per chunk: as many as keep a chunk's logits within CHUNK_ELEMENTS (in cache for the elementwise
    passes), but at least d_model / 2, since every chunk reads and writes the whole (V, D) weight gradient once,
    and with fewer rows that traffic outweighs the chunk's own matmuls (measured: at d_model 256, vocab 8000,
    32-row chunks ran at 0.83x the reference path, 131-row ones at 1.13x)."""
    if device == "cuda":
        return max(1, GPU_CHUNK_ELEMENTS // vocab)
    return max(1, CHUNK_ELEMENTS // vocab, d_model // 2)


class _FusedLoss(torch.autograd.Function):
    """(loss sum, NLL sum) over the real tokens of hidden (N, D) through the projection (V, D) + bias (V,)."""

    @staticmethod
    def forward(ctx, hidden: Tensor, weight: Tensor, bias: Tensor | None, target: Tensor, real: Tensor,
                targets: _Targets, dtype: torch.dtype):
        rows = chunk_rows(*weight.shape, hidden.device.type)
        w = weight.to(dtype)  # the matmuls in autocast's precision, as the reference projection runs
        grad_h = torch.empty(hidden.shape, dtype=dtype, device=hidden.device)
        grad_w = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device)
        grad_b = torch.zeros(weight.size(0), dtype=torch.float32, device=weight.device) if bias is not None else None
        sums = torch.zeros(2, dtype=torch.float32, device=hidden.device)
        for start in range(0, hidden.size(0), rows):
            h, t = hidden[start:start + rows].to(dtype), target[start:start + rows]
            keep = real[start:start + rows].to(torch.float32).unsqueeze(1)  # (rows, 1)
            z = (h @ w.t()).float()  # (rows, V)
            if bias is not None:
                z += bias.float()
            z -= z.amax(dim=1, keepdim=True)
            p = torch.exp(z)
            total = p.sum(dim=1, keepdim=True)  # (rows, 1)
            lse, z_t = total.log().squeeze(1), z.gather(1, t.unsqueeze(1)).squeeze(1)
            loss, nll = targets.losses(z, lse, z_t)
            sums += torch.stack(((loss * keep.squeeze(1)).sum(), (nll * keep.squeeze(1)).sum()))
            grad_z = targets.gradient(p.div_(total), t).mul_(keep)  # (rows, V); padding rows are zero
            if grad_b is not None:
                grad_b += grad_z.sum(dim=0)
            grad_w.addmm_(grad_z.t(), h.float())  # (V, D), accumulated in float32
            grad_h[start:start + rows] = grad_z.to(dtype) @ w  # (rows, D)
        ctx.save_for_backward(grad_h, grad_w, grad_b)
        ctx.dtypes = (hidden.dtype, weight.dtype, None if bias is None else bias.dtype)
        loss_sum, nll_sum = sums.unbind()
        ctx.mark_non_differentiable(nll_sum)
        return loss_sum, nll_sum

    @staticmethod
    def backward(ctx, grad_loss: Tensor, _grad_nll: Tensor):
        grad_h, grad_w, grad_b = ctx.saved_tensors
        h_type, w_type, b_type = ctx.dtypes
        return ((grad_h * grad_loss).to(h_type), (grad_w * grad_loss).to(w_type),
                None if grad_b is None else (grad_b * grad_loss).to(b_type), None, None, None, None)


def fused_loss_sums(hidden: Tensor, target: Tensor, head, pad: int, smoothing: float,
                    dtype: torch.dtype = torch.float32) -> LossSums:
    """What zoo.loss.loss_sums(head(hidden), ...) returns, for a `fusable` head: hidden (B, T, D) the decoder's
    output, target (B, T) token ids; `dtype` the precision of the projection's matmuls (bfloat16 where the
    reference would run the head under bf16 autocast)."""
    proj = head.proj
    real = target.ne(pad)  # (B, T)
    targets = _Targets(SMOOTHINGS[head.smoothing], smoothing, proj.weight.size(0), pad)
    loss, nll = _FusedLoss.apply(hidden.reshape(-1, hidden.size(-1)), proj.weight, proj.bias, target.reshape(-1),
                                 real.reshape(-1), targets, dtype)
    return LossSums(loss, nll, real)


def training_loss(model, src: Tensor, tgt_in: Tensor, tgt_out: Tensor, pad: int, smoothing: float, *,
                  kernels: str = "reference", bf16: bool = False) -> LossSums:
    """The loss of one training batch, src (B, S), tgt_in and tgt_out (B, T), through the path `kernels` names
    (TrainConfig.kernels): "reference", the model's scores (under bf16 autocast if `bf16`) and zoo.loss.loss_sums;
    "fast", the decoder's output and the fused loss where the model's head is `fusable` (else the reference); or
    "fast-attention", "fast" with attention's backward recomputed from the softmax where that pays (bf16 on the
    CPU: zoo/kernels/attention_recompute.py). The trainer and `zoo bench` both train through it."""
    fast = kernels != "reference" and fusable(model.output)
    with (torch.autocast(src.device.type, dtype=torch.bfloat16, enabled=bf16),
          recomputed_backward(kernels == "fast-attention")):
        out = model.features(src, tgt_in) if fast else model(src, tgt_in)  # (B, T, D) or (B, T, V)
    if fast:
        return fused_loss_sums(out, tgt_out, model.output, pad, smoothing, torch.bfloat16 if bf16 else torch.float32)
    return loss_sums(out, tgt_out, model.output, pad, smoothing)
