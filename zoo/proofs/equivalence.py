"""Transplant weights between layouts, and decide whether two specs compute the same function.

Every model has a *canonical state*: a name for each weight that does not depend on how it is
stored (`encoder.layers.0.self_attn.q.weight` is (D, D) whether Q/K/V are separate Linears or
slices of a fused in-projection; an FFN's `w1.weight` is (F, D) for Linear and Conv1d alike).
Components whose storage differs from that layout define `canonical_state()` returning *views*
of their parameters, so writing into the canonical tensors writes the parameters.

A weight shared under several names (tied embeddings, 001's decoder attention serving self- and
cross-attention, 000's one norm per block) appears under each name with the same storage.
Transplanting into a shared weight from a model where those names hold different values is
refused: no setting of the target reproduces the source.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from zoo.errors import NotTransplantable
from zoo.model.build import build
from zoo.model.spec import ModelSpec, load_spec

Tensor = torch.Tensor


def canonical_state(module: nn.Module, prefix: str = "") -> dict[str, Tensor]:
    """Canonical name -> tensor (a parameter or a view of one), shared modules under every name."""
    own = getattr(type(module), "canonical_state", None)
    if own is not None:
        return {f"{prefix}{name}": tensor for name, tensor in module.canonical_state().items()}
    state = {f"{prefix}{name}": p for name, p in module._parameters.items() if p is not None}
    for name, child in module._modules.items():
        if child is not None:
            state.update(canonical_state(child, f"{prefix}{name}."))
    return state


def _storage_key(tensor: Tensor) -> tuple:
    return (tensor.data_ptr(), tuple(tensor.shape), tuple(tensor.stride()))


@dataclass
class TransplantReport:
    copied: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # in the target, no counterpart in the source
    dropped: list[str] = field(default_factory=list)  # in the source, no counterpart in the target


def transplant(model: nn.Module, spec: ModelSpec | str | Path, *, strict: bool = True,
               target: nn.Module | None = None) -> nn.Module:
    """Build `spec` and copy `model`'s weights into it, layout differences mapped through canonical names.

    Raises NotTransplantable naming the parameters without a counterpart (with `strict=False`, target
    weights without a source keep their seeded initialisation and the report lists them), and always
    when a weight shared in the target holds different values in the source, or shapes differ.
    The returned model carries the report as `.transplant_report`. `target`: `spec` already built with
    `model`'s seed and untouched since (an equivalence matrix builds each column once), to copy into.
    """
    spec = spec if isinstance(spec, ModelSpec) else load_spec(spec)
    if target is None:
        target = build(spec, seed=getattr(model, "seed", 0))
    source_state, target_state = canonical_state(model), canonical_state(target)
    report = TransplantReport(
        missing=[n for n in target_state if n not in source_state],
        dropped=[n for n in source_state if n not in target_state],
    )
    if strict and (report.missing or report.dropped):
        names = ([f"{n} (only in the target)" for n in report.missing]
                 + [f"{n} (only in the source)" for n in report.dropped])
        raise NotTransplantable(f"parameters without a counterpart: {', '.join(names)}",
                                report.missing + report.dropped)

    groups: dict[tuple, list[str]] = {}
    for name, tensor in target_state.items():
        if name in source_state:
            groups.setdefault(_storage_key(tensor), []).append(name)
    with torch.no_grad():
        for names in groups.values():
            first = source_state[names[0]]
            for name in names:
                if source_state[name].shape != target_state[name].shape:
                    raise NotTransplantable(
                        f"{name}: shape {tuple(source_state[name].shape)} in the source, "
                        f"{tuple(target_state[name].shape)} in the target", [name])
            differing = [n for n in names[1:] if not torch.equal(source_state[n], first)]
            if differing:
                raise NotTransplantable(
                    f"{', '.join(names)} share one weight in the target but differ in the source", names)
            target_state[names[0]].copy_(first)
            report.copied.extend(names)
    target.transplant_report = report
    return target


@dataclass(frozen=True)
class Verdict:
    """Result of `equivalence`: whether B, given A's weights, computes A's log-probabilities."""

    equivalent: bool
    max_abs_diff: float
    reason: str
    tolerance: float
    positions: int = 0
    missing: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return self.equivalent


def random_batch(spec: ModelSpec, generator: torch.Generator, batch: int = 6, max_len: int = 12,
                 fully_padded_rows: bool = False) -> tuple[Tensor, Tensor]:
    """Right-padded random src (B, S) and tgt_in (B, T) with no pad inside; lengths 1..max_len
    (0 allowed with `fully_padded_rows`); the first row is always full length."""

    def tokens(vocab: int) -> Tensor:
        ids = torch.randint(0, vocab - 1, (batch, max_len), generator=generator)
        ids = ids + (ids >= spec.pad_id).long()  # every id but pad_id
        low = 0 if fully_padded_rows else 1
        lengths = torch.randint(low, max_len + 1, (batch,), generator=generator)
        lengths[0] = max_len
        return ids.masked_fill(torch.arange(max_len)[None, :] >= lengths[:, None], spec.pad_id)

    return tokens(spec.src_vocab), tokens(spec.tgt_vocab)


def genericize(model: nn.Module, generator: torch.Generator, scale: float = 0.1) -> None:
    """Perturb every weight by noise of `scale` times its own mean magnitude (1 for all-zero
    biases), so that coincidences of initialisation (unit norm gains, zero biases, identical
    layers) cannot make two different functions agree, while activations keep their scale."""
    with torch.no_grad():
        for param in model.parameters():
            magnitude = param.abs().mean().item() or 1.0
            noise = torch.randn(param.shape, generator=generator, dtype=param.dtype)
            param.add_(noise * (scale * magnitude))


@dataclass
class Reference:
    """Side A of equivalence checks: its model (built with the seed, then made generic) in eval mode, the
    random batches, and A's log-probabilities on them. They depend on A's spec and the seed alone, so one
    Reference serves every B that A is compared with (an equivalence matrix builds each variant once)."""

    spec: ModelSpec
    model: nn.Module
    batches: list[tuple[Tensor, Tensor]]  # (src (B, S), tgt_in (B, T))
    log_probs: list[Tensor]  # (B, T, V) each


def reference(spec_a: ModelSpec, seed: int = 0, batches: int = 3) -> Reference:
    generator = torch.Generator().manual_seed(seed)
    model_a = build(spec_a, seed=seed)
    genericize(model_a, generator)
    model_a.eval()
    drawn = [random_batch(spec_a, generator) for _ in range(batches)]
    with torch.no_grad():
        log_a = [model_a.log_probs(model_a(src, tgt_in)) for src, tgt_in in drawn]
    return Reference(spec_a, model_a, drawn, log_a)


def equivalence(spec_a: ModelSpec | str | Path, spec_b: ModelSpec | str | Path, seed: int = 0, *,
                batches: int = 3, tolerance: float = 1e-5, side_a: Reference | None = None,
                side_b: nn.Module | None = None) -> Verdict:
    """Build A (seed, then generic weights), transplant into B, compare log-probabilities in eval mode.

    Compared on random right-padded batches with no fully padded row, at every non-padding target
    position, in float32. Equivalent when the largest absolute difference is at most `tolerance`.
    `side_a`: A already built for this spec and seed (`reference`), to compare with many B; `side_b`: B built
    with the seed and untouched since, to transplant into (it gets A's weights).
    """
    spec_a = spec_a if isinstance(spec_a, ModelSpec) else load_spec(spec_a)
    spec_b = spec_b if isinstance(spec_b, ModelSpec) else load_spec(spec_b)
    for field_name in ("src_vocab", "tgt_vocab", "pad_id"):
        if getattr(spec_a, field_name) != getattr(spec_b, field_name):
            return Verdict(False, math.inf, f"{field_name} differs ({getattr(spec_a, field_name)} vs "
                           f"{getattr(spec_b, field_name)}): the two models do not share an input/output space",
                           tolerance)
    side_a = side_a or reference(spec_a, seed, batches)
    try:
        model_b = transplant(side_a.model, spec_b, strict=False, target=side_b)
    except NotTransplantable as err:
        return Verdict(False, math.inf, f"not transplantable: {err}", tolerance)
    report = model_b.transplant_report
    model_b.eval()

    worst, positions = 0.0, 0
    with torch.no_grad():
        for (src, tgt_in), log_a in zip(side_a.batches, side_a.log_probs):
            log_b = model_b.log_probs(model_b(src, tgt_in))
            real = tgt_in.ne(spec_a.pad_id)  # (B, T) compare where the target is not padding
            same = log_a == log_b  # also where both are -inf (a probability head underflowing)
            diff = torch.where(same, torch.zeros_like(log_a), (log_a - log_b).abs())[real]
            # NaN stays NaN: max(0.0, nan) is 0.0, which certified a model of NaN outputs as equivalent
            worst = math.nan if math.isnan(worst) or diff.isnan().any() else max(worst, diff.max().item())
            positions += int(real.sum())

    unmatched = ""
    if report.missing:
        unmatched += f"; B's {', '.join(report.missing)} had no counterpart in A and kept their initialisation"
    if report.dropped:
        unmatched += f"; A's {', '.join(report.dropped)} had no counterpart in B"
    equivalent = worst <= tolerance  # False for NaN
    relation = "<=" if equivalent else ">"
    reason = (f"max |log p_A - log p_B| = {worst:.3g} {relation} {tolerance:g} "
              f"over {positions} target positions{unmatched}")
    if math.isnan(worst):
        reason = f"NaN in the log-probabilities over {positions} target positions{unmatched}"
    return Verdict(equivalent, worst, reason, tolerance, positions, tuple(report.missing), tuple(report.dropped))
