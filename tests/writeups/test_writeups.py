"""Each `writeup-00N` preset reproduces its writeup: same trainable parameters, same function, same masks.

The references (`ref000` ... `ref004`) are the writeups' own model code transcribed into plain
PyTorch, fixed only where a preset's notes name a slip. They import nothing from zoo, so agreement
is evidence that the preset builds what the writeup builds, not that zoo agrees with itself. zoo
is used only to build the preset, name its weights (`canonical_state`) and perturb them.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

import zoo
from zoo.proofs.equivalence import canonical_state, genericize

from . import ref000, ref001, ref002, ref003, ref004
from ._harness import load_canonical, random_batch

REFERENCES = {"writeup-000": ref000, "writeup-001": ref001, "writeup-002": ref002,
              "writeup-003": ref003, "writeup-004": ref004}
PRESETS = list(REFERENCES)

SMALL = {"d_model": 32, "n_heads": 4, "d_ff": 64, "encoder_layers": 2, "decoder_layers": 2,
         "src_vocab": 50, "tgt_vocab": 50}
TOLERANCE = 1e-5  # float32, what zoo.equivalence uses

pytestmark = [
    pytest.mark.parametrize("preset", PRESETS),
    # 002 runs torch's own layers as the writeup does; these are torch's notes about its internals
    pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors is in prototype stage"),
    pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask and attn_mask is deprecated"),
]


def trainable(module: torch.nn.Module) -> int:
    """Trainable parameters, a tied weight counted once (Module.parameters() deduplicates)."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


def small_spec(preset: str):
    return zoo.load_spec(preset, SMALL)


class _CpuConstantsToMeta(TorchFunctionMode):
    """Moves CPU tensors to meta as they enter an op.

    `torch.device("meta")` places what factory functions create, but a legacy constructor such as
    004's `torch.Tensor([10000.0])` still makes a CPU tensor, and meta * CPU raises. Only buffers
    (position tables) are computed from such constants, so no parameter count depends on this.
    """

    def __torch_function__(self, func, types, args=(), kwargs=None):
        def to_meta(x):
            if isinstance(x, (list, tuple)):
                return type(x)(to_meta(item) for item in x)
            return x.to("meta") if isinstance(x, torch.Tensor) and x.device.type == "cpu" else x

        return func(*to_meta(args), **{k: to_meta(v) for k, v in (kwargs or {}).items()})


def build_reference_on_meta(ref, spec) -> torch.nn.Module:
    """The reference at `spec`'s sizes without allocating (initialisation is a no-op on meta).

    001's frozen position tables are kept short: they hold no trainable parameter, and 001 builds
    them element by element in Python, which takes seconds for 5000 rows.
    """
    with torch.device("meta"), _CpuConstantsToMeta():
        reference = ref.make(spec, max_len=8) if ref is ref001 else ref.make(spec)
    assert all(p.device.type == "meta" for p in reference.parameters())
    return reference


# -- a. parameter counts ---------------------------------------------------------------------------
def test_parameter_count_small(preset):
    """At small sizes, zoo's count equals the reference's count of trainable parameters."""
    spec = small_spec(preset)
    model = zoo.build(spec, seed=0)
    reference = REFERENCES[preset].make(spec)
    assert model.num_parameters() == trainable(reference)


def test_parameter_count_full_size(preset):
    """At the preset's own sizes (meta device, nothing allocated), the two counts agree too."""
    spec = zoo.load_spec(preset)
    model = zoo.build(spec, seed=0, device="meta")
    reference = build_reference_on_meta(REFERENCES[preset], spec)
    assert model.num_parameters() == trainable(reference)


def test_parameter_count_formula(preset):
    """The preset's count at its own sizes equals the writeup's parameter formula, written by hand."""
    spec = zoo.load_spec(preset)
    model = zoo.build(spec, seed=0, device="meta")
    expected = REFERENCES[preset].formula(spec.d_model, spec.n_heads, spec.d_ff, spec.encoder_layers,
                                          spec.decoder_layers, spec.src_vocab, spec.tgt_vocab)
    assert model.num_parameters() == expected


# -- b. same function ------------------------------------------------------------------------------
def paired(preset: str):
    """zoo's small model with perturbed weights, and the reference carrying the same weights.

    Weights are perturbed first so that unit LayerNorm gains, zero biases and identical layers
    cannot hide a wrong wiring. `load_canonical` checks that every weight on each side is used.
    """
    ref = REFERENCES[preset]
    spec = small_spec(preset)
    model = zoo.build(spec, seed=0)
    genericize(model, torch.Generator().manual_seed(1))
    reference = ref.make(spec)
    load_canonical(reference, canonical_state(model), ref.canonical_map(spec))
    return spec, model, ref, reference


def compare_outputs(preset: str, *, all_positions: bool = False, train: bool = False) -> None:
    """Feed both models the same random batches; zoo's scores must equal the writeup's within TOLERANCE."""
    spec, model, ref, reference = paired(preset)
    model.train(train)
    reference.train(train)
    generator = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for _ in range(3):
            src, tgt_in = random_batch(spec.src_vocab, spec.tgt_vocab, spec.pad_id, generator)  # (B, S), (B, T)
            ours = model(src, tgt_in)  # (B, T, V)
            theirs = ref.run(reference, src, tgt_in, spec.pad_id)  # (B, T, V)
            assert ours.shape == theirs.shape
            compared = torch.ones_like(tgt_in, dtype=torch.bool) if all_positions else tgt_in.ne(spec.pad_id)  # (B, T)
            worst = (ours - theirs).abs()[compared].max().item()  # NaN fails the comparison below
            assert worst <= TOLERANCE, f"max |zoo - writeup| = {worst:.3g} over {int(compared.sum())} positions"


def test_same_function(preset):
    """In eval mode, given zoo's weights, the reference returns what zoo returns at every real target position."""
    compare_outputs(preset)


def test_same_function_at_padding_positions(preset):
    """The outputs agree at padding target positions too.

    Stricter than the equivalence zoo claims, and it holds: what a pad position sees never reaches
    a real position (pad keys are masked), so only here does e.g. 001's pad-aware position table
    (zero vector at PAD) show; a plain sinusoid passes the real-position test but fails this one.
    """
    compare_outputs(preset, all_positions=True)


def test_same_dropout(preset, monkeypatch):
    """In training mode the dropout sites and rates agree: where and how much each writeup drops.

    Dropout is made deterministic on both sides, scaling by (1 - p) instead of sampling a mask,
    so a missing, extra or misplaced dropout, or a wrong rate, changes the output. torch's
    MultiheadAttention (002) applies its attention dropout inside scaled_dot_product_attention,
    which is replaced the same way (scaling the weights by (1 - p) scales the output by it).
    """
    original_sdpa = F.scaled_dot_product_attention

    def dropout(input, p=0.5, training=True, inplace=False):
        return input * (1.0 - p) if training else input

    def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, **kwargs):
        out = original_sdpa(query, key, value, attn_mask=attn_mask, dropout_p=0.0, is_causal=is_causal, **kwargs)
        return out * (1.0 - dropout_p)

    monkeypatch.setattr(F, "dropout", dropout)
    monkeypatch.setattr(F, "scaled_dot_product_attention", sdpa)
    compare_outputs(preset, all_positions=True, train=True)


# -- c. masks --------------------------------------------------------------------------------------
def assert_same_mask(ours, theirs, what: str) -> None:
    """Same dtype, shape and values; torch's (attn_mask, key_padding_mask) pairs compared field by field."""
    if isinstance(theirs, tuple):
        assert isinstance(ours, tuple) and len(ours) == len(theirs), what
        for field, (a, b) in zip(("attn_mask", "key_padding_mask"), zip(ours, theirs)):
            assert_same_mask(a, b, f"{what}.{field}")
        return
    if theirs is None:
        assert ours is None, f"{what}: zoo builds a mask where the writeup passes None"
        return
    assert ours is not None, f"{what}: zoo builds no mask"
    assert ours.dtype == theirs.dtype, f"{what}: dtype {ours.dtype} vs the writeup's {theirs.dtype}"
    assert ours.shape == theirs.shape, f"{what}: shape {tuple(ours.shape)} vs the writeup's {tuple(theirs.shape)}"
    assert torch.equal(ours, theirs), f"{what}: values differ"


def test_native_masks(preset):
    """zoo's native masks for the preset's convention are the masks the writeup's code hands its blocks."""
    ref = REFERENCES[preset]
    spec = small_spec(preset)
    reference = ref.make(spec).eval()
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for _ in range(3):
            src, tgt_in = random_batch(spec.src_vocab, spec.tgt_vocab, spec.pad_id, generator)
            native = zoo.masks.build(spec.mask.convention, src, tgt_in, spec.pad_id)
            enc_self, dec_self, dec_cross = ref.masks(reference, src, tgt_in, spec.pad_id)
            assert_same_mask(native.enc_self, enc_self, "enc_self")
            assert_same_mask(native.dec_self, dec_self, "dec_self")
            assert_same_mask(native.dec_cross, dec_cross, "dec_cross")
