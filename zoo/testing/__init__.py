"""Contracts: what every registered component, task and metric must do, runnable on a user's own entry.
This module holds the components' contracts; zoo/testing/data.py those of tasks and metrics.

zoo's own test suite parametrises these over the registry (tests/test_components.py), and
`zoo check COMPONENT_OR_PLUGIN` runs them on a user's entry, so a plugin's component is held to the
same standard as the built-ins. Each contract builds a tiny paper-base model with the entry swapped
into its slot and raises AssertionError saying what is wrong:

    swapped-in        the entry's class is in the model built from the spec
    shapes            each of the entry's modules keeps its input's shape ((B, L) tokens -> (B, L, D) for an
                      embedding, (B, T, D) -> (B, T, V) for an output head): a (B, 1, D) that broadcasts is
                      caught here, not left to train; (B, T, V) float32 scores, finite normalised
                      log-probabilities, encode/decode agree
    gradients         a loss on the scores gives every trainable parameter a finite gradient
    causal            a decoder position sees no later target token, and does see its own
    padded-rows       a fully padded source row leaves every other row's scores unchanged, and finite
    deterministic     the same seed builds the same weights and outputs; another seed, other ones; the
                      global RNG is left alone
    incremental       step-by-step decoding with a cache equals full decoding (every module entry; an
                      attention entry only where it declares supports_incremental)
    transplant        weights transplanted into a fresh build of the same spec give the same outputs
    gpu               (only where PyTorch sees a CUDA device) the model moved to the GPU scores as on the CPU,
                      and decodes step by step there as in full

Mask and init entries are not modules inside the model: they get the contracts that apply to a whole
model (shapes, gradients, causal, padded-rows, deterministic).

`zoo run` holds a plugin's components to the fast ones (FAST: swapped-in, shapes, causal) before a grid's
first cell starts (`preflight`): a component that broadcasts or sees the future stops the grid in seconds,
with one line, instead of training to a "complete" record.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from zoo.errors import ZooError
from zoo.model.build import build
from zoo.model.spec import SLOTS, ModelSpec, load_spec
from zoo.plugins import one_line, touching
from zoo.proofs.equivalence import genericize, random_batch, transplant
from zoo.registry import Entry, registry

TINY = {"d_model": 32, "n_heads": 4, "d_ff": 64, "encoder_layers": 2, "decoder_layers": 2,
        "src_vocab": 40, "tgt_vocab": 40}
MODULE_SLOTS = ("attention", "ffn", "norm", "residual", "positional", "output", "embedding")
TOLERANCE = 1e-5


def tiny_spec(entry: Entry) -> ModelSpec:
    """paper-base at tiny sizes with `entry` in its slot."""
    return load_spec("paper-base", {**TINY, f"{entry.slot}.{registry.slot(entry.slot).key}": entry.name})


def _batch(spec: ModelSpec, seed: int = 0, fully_padded_rows: bool = False):
    return random_batch(spec, torch.Generator().manual_seed(seed), batch=4, max_len=7,
                        fully_padded_rows=fully_padded_rows)


def swapped_in(entry: Entry, spec: ModelSpec) -> None:
    model = build(spec, seed=0)
    assert any(type(m) is entry.impl for m in model.modules()), f"no {entry.impl.__name__} in the built model"


def shapes(entry: Entry, spec: ModelSpec) -> None:
    model = build(spec, seed=0).eval()
    src, tgt_in = _batch(spec)
    with torch.no_grad(), _keeping_shapes(entry, model, spec):
        scores = model(src, tgt_in)
    with torch.no_grad():
        assert scores.shape == (*tgt_in.shape, spec.tgt_vocab), f"scores {tuple(scores.shape)}, expected " \
                                                                 f"{(*tgt_in.shape, spec.tgt_vocab)}"
        assert scores.dtype == torch.float32, f"scores are {scores.dtype}, expected torch.float32"
        real = tgt_in.ne(spec.pad_id)
        log_probs = model.log_probs(scores)[real]
        assert torch.isfinite(log_probs).all(), "non-finite log-probabilities at real target positions"
        assert (log_probs.exp().sum(-1) - 1).abs().max() < 1e-4, "log-probabilities do not normalise"
        memory = model.encode(src)
        assert memory.shape == (*src.shape, spec.d_model), f"memory {tuple(memory.shape)}"
        assert torch.allclose(model.decode(tgt_in, memory, src), scores, atol=1e-6), "decode(encode) != forward"


@contextmanager
def _keeping_shapes(entry: Entry, model: nn.Module, spec: ModelSpec) -> Iterator[None]:
    """Check every call of the entry's modules in `model` while the block runs: its output has the shape its first
    input implies. A residual adds a (B, 1, D) feed-forward output to (B, T, D) without complaint, so the model's
    scores alone never show it."""
    seen: list[tuple[tuple[int, ...], tuple[int, ...]]] = []

    def record(module: nn.Module, args: tuple, kwargs: dict, output: object) -> None:
        given = next((a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)), None)
        made = output[0] if isinstance(output, (tuple, list)) and output else output
        if given is not None and isinstance(made, torch.Tensor):
            seen.append((tuple(given.shape), tuple(made.shape)))

    hooks = [m.register_forward_hook(record, with_kwargs=True) for m in model.modules() if type(m) is entry.impl]
    try:
        yield
    finally:
        for hook in hooks:
            hook.remove()
    for given, made in seen:
        expected = _output_shape(entry.slot, given, spec)
        assert made == expected, f"output shape {made} != {'input' if expected == given else 'expected'} shape " \
                                 f"{expected}"


def _output_shape(slot: str, given: tuple[int, ...], spec: ModelSpec) -> tuple[int, ...]:
    """What a module of `slot` returns for a first input of shape `given` (see each slot's docstring)."""
    if slot == "embedding":
        return (*given, spec.d_model)  # tokens (B, L) -> (B, L, D)
    if slot == "output":
        return (*given[:-1], spec.tgt_vocab)  # (B, T, D) -> (B, T, V)
    return given  # attention (its query), ffn, norm, residual, positional: (B, L, D) -> (B, L, D)


def gradients(entry: Entry, spec: ModelSpec) -> None:
    model = build(spec, seed=0).train()
    src, tgt_in = _batch(spec)
    targets = torch.randint(1, spec.tgt_vocab, tgt_in.shape, generator=torch.Generator().manual_seed(1))
    real = tgt_in.ne(spec.pad_id)
    loss = F.nll_loss(model.log_probs(model(src, tgt_in))[real], targets[real])
    assert torch.isfinite(loss), "the loss is not finite"
    loss.backward()
    trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    missing = [n for n, p in trainable if p.grad is None]
    assert not missing, f"no gradient reaches {', '.join(missing[:3])}"
    broken = [n for n, p in trainable if not torch.isfinite(p.grad).all()]
    assert not broken, f"non-finite gradient in {', '.join(broken[:3])}"


def causal(entry: Entry, spec: ModelSpec) -> None:
    model = build(spec, seed=0).eval()
    generator = torch.Generator().manual_seed(0)
    src = torch.randint(1, spec.src_vocab, (3, 7), generator=generator)
    tgt_in = torch.randint(1, spec.tgt_vocab, (3, 6), generator=generator)
    with torch.no_grad():
        before = model(src, tgt_in)
        for t in range(tgt_in.shape[1]):
            changed = tgt_in.clone()
            changed[:, t] = changed[:, t] % (spec.tgt_vocab - 1) + 1  # another non-pad token
            after = model(src, changed)
            assert torch.allclose(after[:, :t], before[:, :t], atol=1e-6, rtol=1e-6), \
                f"positions before {t} see the token at {t}"
            assert not torch.allclose(after[:, t], before[:, t]), f"position {t} ignores its own input"


def padded_rows(entry: Entry, spec: ModelSpec) -> None:
    model = build(spec, seed=0).eval()
    src, tgt_in = _batch(spec, seed=2)
    padded = src.clone()
    padded[-1] = spec.pad_id  # the last source row: all padding
    with torch.no_grad():
        ordinary, with_padded = model(src, tgt_in), model(padded, tgt_in)
    assert torch.allclose(with_padded[:-1], ordinary[:-1], atol=1e-6), "a fully padded row changes other rows"
    real = tgt_in[:-1].ne(spec.pad_id)
    assert torch.isfinite(with_padded[:-1][real]).all(), "non-finite scores beside a fully padded row"


def _state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.state_dict().items()}


def deterministic(entry: Entry, spec: ModelSpec) -> None:
    rng = torch.get_rng_state()
    first, second, other = build(spec, seed=0), build(spec, seed=0), build(spec, seed=1)
    assert torch.equal(torch.get_rng_state(), rng), "building changed the global RNG"
    a, b, c = _state(first), _state(second), _state(other)
    different = [k for k in a if not torch.equal(a[k], b[k])]
    assert not different, f"the same seed builds different {', '.join(different[:3])}"
    weights = [k for k, v in a.items() if v.dim() > 1 and v.is_floating_point()]
    constant = [k for k in weights if torch.equal(a[k], c[k])]
    assert weights and not constant, f"{', '.join(constant[:3]) or 'no weight'} does not depend on the seed"
    src, tgt_in = _batch(spec)
    with torch.no_grad():
        assert torch.equal(first.eval()(src, tgt_in), second.eval()(src, tgt_in)), "same seed, other outputs"


def incremental(entry: Entry, spec: ModelSpec) -> None:
    model = build(spec, seed=0)
    genericize(model, torch.Generator().manual_seed(0))  # norm-free residuals (ReZero) grow with depth
    src, tgt_in = _batch(spec, seed=1)
    gap = incremental_gap(model.eval(), spec, src, tgt_in)
    assert gap <= TOLERANCE, f"cached step-by-step decoding differs from full decoding by {gap:.2g}"


def incremental_gap(model, spec: ModelSpec, src: torch.Tensor, tgt_in: torch.Tensor) -> float:
    """Largest |Δ log p| between step-by-step decoding with the key/value cache and full decoding of `tgt_in`
    (its padding replaced by a token: a generated prefix holds none)."""
    tgt_in = tgt_in.masked_fill(tgt_in.eq(spec.pad_id), 5)
    with torch.no_grad():
        full = model.log_probs(model(src, tgt_in))
        memory, state = model.encode(src), model.start_decoding()
        steps = [model.log_probs(model.decode_step(tgt_in[:, : t + 1], memory, src, state))
                 for t in range(tgt_in.size(1))]
    return (full - torch.cat(steps, dim=1)).abs().max().item()


def transplanted(entry: Entry, spec: ModelSpec) -> None:
    model = build(spec, seed=0)
    genericize(model, torch.Generator().manual_seed(0))
    copy = transplant(model, spec)
    src, tgt_in = _batch(spec, seed=3)
    with torch.no_grad():
        gap = (model.eval()(src, tgt_in) - copy.eval()(src, tgt_in)).abs().max().item()
    assert gap <= TOLERANCE, f"a transplant into the same spec changes the outputs by {gap:.2g}"


GPU_TOLERANCE = 1e-3  # cuDNN may run convolutions (the Conv1d FFN) in TF32, with about 10 mantissa bits


def on_gpu(entry: Entry, spec: ModelSpec) -> None:
    model = build(spec, seed=0)
    genericize(model, torch.Generator().manual_seed(0))
    src, tgt_in = _batch(spec, seed=4)
    gpu = transplant(model, spec).to("cuda").eval()
    with torch.no_grad():
        on_cpu = model.log_probs(model.eval()(src, tgt_in))
        there = gpu.log_probs(gpu(src.cuda(), tgt_in.cuda()))
    assert there.device.type == "cuda", f"the scores of a model on the GPU are on {there.device}"
    gap = (there.cpu() - on_cpu).abs().max().item()
    assert gap <= GPU_TOLERANCE, f"on the GPU the log-probabilities differ from the CPU's by {gap:.2g}"
    if _module(entry) and not getattr(entry.impl, "supports_incremental", True):
        return
    gap = incremental_gap(gpu, spec, src.cuda(), tgt_in.cuda())
    assert gap <= GPU_TOLERANCE, f"on the GPU cached step-by-step decoding differs from full decoding by {gap:.2g}"


@dataclass(frozen=True)
class Contract:
    name: str
    check: Callable[[Entry, ModelSpec], None]
    applies: Callable[[Entry], bool]


def _module(entry: Entry) -> bool:
    return entry.slot in MODULE_SLOTS


CONTRACTS = (
    Contract("swapped-in", swapped_in, _module),
    Contract("shapes", shapes, lambda e: True),
    Contract("gradients", gradients, lambda e: True),
    Contract("causal", causal, lambda e: True),
    Contract("padded-rows", padded_rows, lambda e: True),
    Contract("deterministic", deterministic, lambda e: True),
    Contract("incremental", incremental, lambda e: _module(e) and getattr(e.impl, "supports_incremental", True)),
    Contract("transplant", transplanted, lambda e: True),
    Contract("gpu", on_gpu, lambda e: torch.cuda.is_available()),
)


def contracts_for(entry: Entry, names: Iterable[str] | None = None) -> list[Contract]:
    """The contracts that apply to `entry` (those of `names` alone, if given)."""
    return [c for c in CONTRACTS if c.applies(entry) and (names is None or c.name in names)]


def check(entry: Entry, names: Iterable[str] | None = None, spec: ModelSpec | None = None) -> list[tuple[str, str]]:
    """Run every contract that applies to `entry` (or those of `names`) on `spec`, by default paper-base at tiny
    sizes with the entry in its slot: [(contract, what failed)], empty when it passes all (see `failure`)."""
    try:
        spec = spec or tiny_spec(entry)
    except Exception as err:  # noqa: BLE001 - a spec the entry cannot be part of is itself a failure
        return [("spec", f"{type(err).__name__}: {err}")]
    contracts = contracts_for(entry, None if names is None else tuple(names))
    return [(c.name, reason) for c in contracts if (reason := failure(lambda c=c: c.check(entry, spec)))]


def failure(run: Callable[[], object]) -> str:
    """What broke when `run` ran a contract, '' if nothing did: its assertion, or the crash, an exit the entry's
    code asked for (sys.exit()) included, which would otherwise end `zoo check` or `zoo run` silently. Ctrl-C
    still stops them."""
    try:
        run()
    except KeyboardInterrupt:
        raise
    except AssertionError as err:
        return str(err) or "assertion failed"
    except BaseException as err:  # noqa: BLE001 - a crash or an exit of the entry's code is a failed contract
        return f"{type(err).__name__}: {one_line(err)}"
    return ""


# -- before a grid trains ----------------------------------------------------------------------------
FAST = ("swapped-in", "shapes", "causal")  # seconds per component at tiny sizes; the rest is `zoo check`'s


class ContractError(ZooError):
    """A plugin's component breaks a contract; the message names the variant, slot, component, plugin and contract."""


def preflight(experiment, variants: Iterable[str]) -> None:
    """Hold every component of `variants` that a plugin brought in or changed to the FAST contracts, on the variant's
    own spec at tiny sizes, before anything trains; ContractError on the first that breaks one. zoo's own components
    are tested by zoo's suite and skipped, so a grid of built-ins pays nothing."""
    checked = set()
    for variant in dict.fromkeys(variants):
        spec = experiment.specs[variant]
        for slot, entry, plugins in _plugin_entries(spec):
            small = _small(spec)
            if (entry.qualified, small.digest()) in checked:
                continue
            checked.add((entry.qualified, small.digest()))
            failures = check(entry, FAST, small)
            if failures:
                contract, reason = failures[0]
                raise ContractError(" ".join(
                    f"variant {variant!r}: {slot} {entry.name!r} (plugin {', '.join(map(repr, plugins))}) breaks "
                    f"the {contract} contract: {reason}; `zoo check {entry.qualified}` runs them all".split()))


def _plugin_entries(spec: ModelSpec) -> Iterator[tuple[str, Entry, list[str]]]:
    """(slot, entry, the labels of the plugins whose code it runs) for each of `spec`'s components that a plugin
    brought or changed. (A plugin's change zoo cannot pin on a component stales every cell, but checking every
    built-in for it would cost minutes and find zoo's own code.)"""
    for slot in SLOTS:
        entry = registry.get(slot, spec.impl(slot).registry_name)
        plugins = [plugin.label for plugin in touching(entry.impl)]
        if plugins:
            yield slot, entry, plugins


def _small(spec: ModelSpec) -> ModelSpec:
    """`spec` at TINY sizes, or as it is where those sizes do not fit it."""
    try:
        return load_spec(spec, TINY)
    except (ZooError, ValueError):
        return spec
