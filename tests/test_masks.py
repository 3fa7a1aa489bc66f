"""The five mask conventions: native forms as documented in zoo/components/masks.py, their canonical
form, the fully-padded-row behaviour table, and their equivalence on ordinary batches."""

from __future__ import annotations

import itertools
import json
import math

import pytest
import torch

import zoo
from zoo.components.masks import AttentionMask, TorchMasks
from zoo.proofs.equivalence import canonical_state
from zoo.registry import registry

PAD = 0
CONVENTIONS = registry.names("mask")
DOCUMENTED = ["bool-blocked-rezero", "uint8-expanded", "torch-additive", "bool-keep", "int-keep"]
ATTENTIONS = registry.names("attention")


def test_the_five_documented_conventions_are_registered():
    assert set(DOCUMENTED) <= set(CONVENTIONS)


@pytest.mark.parametrize(
    "convention, writeup, fill, rezero",
    [
        ("bool-blocked-rezero", "000", -1e9, True),
        ("uint8-expanded", "001", -math.inf, False),
        ("torch-additive", "002", -math.inf, False),
        ("bool-keep", "003", -math.inf, False),
        ("int-keep", "004", -1e9, False),
    ],
)
def test_convention_attributes_match_the_table(convention, writeup, fill, rezero):
    conv = zoo.masks.get(convention)
    assert conv.writeup == writeup
    assert conv.fill == fill
    assert conv.rezero is rezero


# -- batches -----------------------------------------------------------------------------------------
def _pad_right(rows: list[list[int]], length: int) -> torch.Tensor:
    return torch.tensor([row + [PAD] * (length - len(row)) for row in rows])


CASES = {
    # name: (src, tgt_in)
    "ragged": (_pad_right([[5, 6, 7, 8, 9], [3, 4], [7, 7, 7, 1]], 5), _pad_right([[2, 3, 4, 5], [6], [1, 2, 3]], 4)),
    "no-padding": (torch.tensor([[5, 6, 7], [8, 9, 10]]), torch.tensor([[1, 2, 3, 4], [4, 3, 2, 1]])),
    "length-one": (torch.tensor([[5], [6]]), torch.tensor([[7], [8]])),
    "length-one-padded": (torch.tensor([[5], [PAD]]), torch.tensor([[7], [PAD]])),
    "fully-padded-row": (_pad_right([[5, 6, 7], []], 3), _pad_right([[1, 2, 3, 4], []], 4)),
    "target-shorter-than-source": (torch.tensor([[1, 2, 0], [3, 0, 0]]), torch.tensor([[4, 0], [5, 6]])),
}


def expected_masks(src: torch.Tensor, tgt_in: torch.Tensor, pad_id: int = PAD):
    """True = may attend, computed element by element: enc_self / dec_cross = key is not padding,
    dec_self = key not after the query AND key is not padding. Shapes (B, 1, Lq, Lk)."""
    batch, src_len = src.shape
    tgt_len = tgt_in.shape[1]
    enc = torch.zeros(batch, 1, src_len, src_len, dtype=torch.bool)
    dec = torch.zeros(batch, 1, tgt_len, tgt_len, dtype=torch.bool)
    cross = torch.zeros(batch, 1, tgt_len, src_len, dtype=torch.bool)
    for b in range(batch):
        for q in range(src_len):
            for k in range(src_len):
                enc[b, 0, q, k] = int(src[b, k]) != pad_id
        for q in range(tgt_len):
            for k in range(tgt_len):
                dec[b, 0, q, k] = k <= q and int(tgt_in[b, k]) != pad_id
            for k in range(src_len):
                cross[b, 0, q, k] = int(src[b, k]) != pad_id
    return enc, dec, cross


# -- native forms ------------------------------------------------------------------------------------
def check_native(convention: str, native, src: torch.Tensor, tgt_in: torch.Tensor) -> None:
    """Assert the native masks have exactly the documented dtype, shape and meaning of True/1."""
    enc_keep, dec_keep, cross_keep = expected_masks(src, tgt_in)
    batch, src_len = src.shape
    tgt_len = tgt_in.shape[1]
    src_pad, tgt_pad = src.eq(PAD), tgt_in.eq(PAD)

    if convention == "bool-blocked-rezero":  # 000: bool True = blocked, (B,1,1,S) and (B,1,T,T)
        for mask in (native.enc_self, native.dec_cross):
            assert mask.dtype == torch.bool and mask.shape == (batch, 1, 1, src_len)
            assert torch.equal(mask[:, 0, 0, :], src_pad)
        assert native.dec_self.dtype == torch.bool and native.dec_self.shape == (batch, 1, tgt_len, tgt_len)
        assert torch.equal(native.dec_self, ~dec_keep)
    elif convention == "uint8-expanded":  # 001: bool True = blocked, expanded (B, Lq, Lk)
        assert native.enc_self.dtype == torch.bool and native.enc_self.shape == (batch, src_len, src_len)
        assert torch.equal(native.enc_self, ~enc_keep[:, 0])
        assert native.dec_self.dtype == torch.bool and native.dec_self.shape == (batch, tgt_len, tgt_len)
        assert torch.equal(native.dec_self, ~dec_keep[:, 0])
        # the intended cross mask: (B, T, S), source padding as keys
        assert native.dec_cross.dtype == torch.bool and native.dec_cross.shape == (batch, tgt_len, src_len)
        assert torch.equal(native.dec_cross, ~cross_keep[:, 0])
    elif convention == "torch-additive":  # 002: (float (T,T) causal or None, bool key padding (B, L))
        for mask, pad in ((native.enc_self, src_pad), (native.dec_self, tgt_pad), (native.dec_cross, src_pad)):
            assert isinstance(mask, TorchMasks)
            assert mask.key_padding_mask.dtype == torch.bool
            assert torch.equal(mask.key_padding_mask, pad)  # True = padding
        assert native.enc_self.attn_mask is None and native.dec_cross.attn_mask is None
        causal = native.dec_self.attn_mask
        assert causal.dtype == torch.float32 and causal.shape == (tgt_len, tgt_len)
        for q in range(tgt_len):
            for k in range(tgt_len):
                assert causal[q, k].item() == (-math.inf if k > q else 0.0)
    elif convention == "bool-keep":  # 003: bool True = may attend, (B,1,1,S) and (B,1,T,T)
        for mask in (native.enc_self, native.dec_cross):
            assert mask.dtype == torch.bool and mask.shape == (batch, 1, 1, src_len)
            assert torch.equal(mask[:, 0, 0, :], ~src_pad)
        assert native.dec_self.dtype == torch.bool and native.dec_self.shape == (batch, 1, tgt_len, tgt_len)
        assert torch.equal(native.dec_self, dec_keep)
    elif convention == "int-keep":  # 004: int64 1 = keep, (B,1,S) and (B,T,T)
        for mask in (native.enc_self, native.dec_cross):
            assert mask.dtype == torch.int64 and mask.shape == (batch, 1, src_len)
            assert torch.equal(mask[:, 0, :], (~src_pad).long())
        assert native.dec_self.dtype == torch.int64 and native.dec_self.shape == (batch, tgt_len, tgt_len)
        assert torch.equal(native.dec_self, dec_keep[:, 0].long())
        assert set(native.dec_self.unique().tolist()) <= {0, 1}
    else:
        pytest.skip(f"no documented native form for {convention!r}")


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("convention", DOCUMENTED)
def test_native_form(convention, case):
    src, tgt_in = CASES[case]
    native = zoo.masks.build(convention, src, tgt_in, PAD)
    assert native.convention.registry_name == convention
    check_native(convention, native, src, tgt_in)


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("convention", CONVENTIONS)
def test_canonical_form(convention, case):
    src, tgt_in = CASES[case]
    canon = zoo.masks.build(convention, src, tgt_in, PAD).canonical()
    for got, want in zip((canon.enc_self, canon.dec_self, canon.dec_cross), expected_masks(src, tgt_in)):
        assert got.dtype == torch.bool
        assert got.dim() == 4 and got.shape[1] == 1
        assert torch.broadcast_shapes(got.shape, want.shape) == want.shape
        assert torch.equal(got.expand(want.shape), want)


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_encoder_only_masks(convention):
    src, _ = CASES["ragged"]
    native = zoo.masks.build(convention, src, None, PAD)
    assert native.dec_self is None and native.dec_cross is None
    canon = native.canonical()
    assert canon.dec_self is None and canon.dec_cross is None
    want = expected_masks(src, src)[0]
    assert torch.equal(canon.enc_self.expand(want.shape), want)


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_nonzero_pad_id(convention):
    pad = 3
    src = torch.tensor([[5, 6, 3], [3, 3, 3]])
    tgt_in = torch.tensor([[1, 3], [2, 0]])
    canon = zoo.masks.build(convention, src, tgt_in, pad).canonical()
    for got, want in zip((canon.enc_self, canon.dec_self, canon.dec_cross), expected_masks(src, tgt_in, pad)):
        assert torch.equal(got.expand(want.shape), want)


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_for_attention_wraps_canonical_with_fill(convention):
    src, tgt_in = CASES["ragged"]
    native = zoo.masks.build(convention, src, tgt_in, PAD)
    conv = zoo.masks.get(convention)
    wrapped = native.for_attention()
    for mask, keep in zip(wrapped, (native.canonical().enc_self, native.canonical().dec_self,
                                    native.canonical().dec_cross)):
        assert isinstance(mask, AttentionMask)
        assert torch.equal(mask.keep, keep)
        assert mask.fill == conv.fill and mask.rezero == conv.rezero
        additive = mask.additive
        assert additive.dtype == torch.float32
        assert torch.all(additive[mask.keep.expand(additive.shape)] == 0)
        assert torch.all(additive[~mask.keep.expand(additive.shape)] == conv.fill)
        assert torch.equal(mask.has_key, mask.keep.any(-1, keepdim=True))


# -- fully padded rows -------------------------------------------------------------------------------
def documented_outcome(attention: str, convention: str, fast_path: bool = False) -> str | None:
    """The fully-padded-row table of zoo/components/masks.py, as a rule on the convention's fill:
    'zeros' | 'nan' | 'uniform' | 'rejected'; None for an attention kind the table does not cover.

    `fast_path`: eval-mode self-attention under no_grad, where nn.MultiheadAttention runs PyTorch's
    fused kernel, which gives NaN where its regular path gives zeros (as the table documents)."""
    conv = zoo.masks.get(convention)
    if attention not in ("matmul", "sdpa", "torch-mha"):
        return None
    if conv.rezero:
        return "rejected" if attention == "torch-mha" else "zeros"
    if conv.fill == -math.inf:
        if attention == "torch-mha" and fast_path:
            return "nan"
        return "nan" if attention == "matmul" else "zeros"
    return "uniform"  # a finite fill: every key gets the same score


def _pairs():
    params = []
    for convention in CONVENTIONS:
        for attention in ATTENTIONS:
            for grad in (True, False):
                params.append(pytest.param(convention, attention, grad,
                                           id=f"{convention}-{attention}-{'grad' if grad else 'no_grad'}"))
    return params


def _classify(row: torch.Tensor, zeros: torch.Tensor, uniform: torch.Tensor) -> str:
    if torch.isnan(row).all():
        return "nan"
    if torch.allclose(row, zeros.expand_as(row), atol=1e-6):
        return "zeros"
    if torch.allclose(row, uniform.expand_as(row), atol=1e-5):
        return "uniform"
    return "other"


@pytest.mark.parametrize("convention, attention, grad", _pairs())
def test_fully_padded_row_in_attention(tiny, convention, attention, grad):
    expected = documented_outcome(attention, convention)
    if expected is None:
        pytest.skip(f"the masks.py table documents no behaviour for attention {attention!r}")
    overrides = {"attention.kind": attention, "mask.convention": convention}
    if expected == "rejected":
        with pytest.raises(zoo.SpecError, match="attention.kind"):
            tiny(**overrides)
        return
    spec = tiny(**overrides)
    model = zoo.build(spec, seed=0).eval()
    src = torch.tensor([[5, 6, 7, 8], [PAD] * 4])
    tgt_in = torch.tensor([[1, 2, 3], [4, 5, PAD]])
    enc_mask, _, cross_mask = zoo.masks.build(convention, src, tgt_in, PAD).for_attention()
    generator = torch.Generator().manual_seed(1)
    memory = torch.randn(2, 4, spec.d_model, generator=generator)
    queries = torch.randn(2, 3, spec.d_model, generator=generator)

    checks = [  # (module, query, key_value, mask, fast path): self-attention and cross-attention
        (model.encoder.layers[0].self_attn, memory, memory, enc_mask, not grad),
        (model.decoder.layers[0].cross_attn, queries, memory, cross_mask, False),
    ]
    for module, query, key_value, mask, fast_path in checks:
        expected = documented_outcome(attention, convention, fast_path)
        with torch.set_grad_enabled(grad):
            out = module(query, key_value, mask)  # (B, Lq, D)
        state = {k: v.detach() for k, v in canonical_state(module).items()}
        out_bias = state.get("o.bias", torch.zeros(spec.d_model))
        values = key_value[1] @ state["v.weight"].T + state.get("v.bias", 0)  # (Lk, D): row 1's values
        uniform = values.mean(0) @ state["o.weight"].T + out_bias  # equal weights on every key, pads too
        assert _classify(out[1].detach(), out_bias, uniform) == expected
        assert torch.isfinite(out[0]).all()  # the row with keys is unaffected


def _model_pairs():
    params = []
    for convention in CONVENTIONS:
        for attention in ATTENTIONS:
            expected = documented_outcome(attention, convention)
            if expected in (None, "rejected"):
                continue
            for grad in (True, False):
                params.append(pytest.param(convention, attention, grad,
                                           id=f"{convention}-{attention}-{'grad' if grad else 'no_grad'}"))
    return params


@pytest.mark.parametrize("convention, attention, grad", _model_pairs())
def test_fully_padded_source_row_in_whole_model(tiny, convention, attention, grad):
    """NaN spreads to the whole row exactly where the table says NaN; other rows are the same as
    when the model sees them without the fully padded row."""
    spec = tiny(**{"attention.kind": attention, "mask.convention": convention})
    model = zoo.build(spec, seed=0).eval()
    src = torch.tensor([[5, 6, 7, 8], [9, 10, PAD, PAD], [PAD] * 4])
    tgt_in = torch.tensor([[1, 2, 3], [4, 5, PAD], [6, 7, 8]])
    with torch.set_grad_enabled(grad):
        out = model(src, tgt_in).detach()
        alone = model(src[:2], tgt_in[:2]).detach()
    torch.testing.assert_close(out[:2], alone, atol=1e-5, rtol=1e-5)
    if documented_outcome(attention, convention, fast_path=not grad) == "nan":
        assert torch.isnan(out[2]).all()
    else:
        assert torch.isfinite(out[2]).all()


# -- equivalence of the conventions ------------------------------------------------------------------
@pytest.mark.parametrize("attention", ["sdpa", "matmul"])
@pytest.mark.parametrize("pair", list(itertools.combinations(CONVENTIONS, 2)), ids="-vs-".join)
def test_conventions_are_equivalent(tiny, pair, attention):
    first, second = pair
    spec_a = tiny(**{"mask.convention": first, "attention.kind": attention})
    spec_b = tiny(**{"mask.convention": second, "attention.kind": attention})
    verdict = zoo.equivalence(spec_a, spec_b)
    assert verdict.equivalent, verdict.reason
    assert verdict.max_abs_diff <= 1e-5
    assert verdict.positions > 0


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_each_convention_equivalent_to_tiny_default(tiny, convention):
    verdict = zoo.equivalence(tiny(), tiny(**{"mask.convention": convention}))
    assert verdict.equivalent and verdict.max_abs_diff <= 1e-5, verdict.reason


# -- training ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("convention", [c for c in CONVENTIONS if c != "bool-keep"])
def test_training_with_each_convention_is_bit_identical(tmp_path, convention):
    """Why the ablations do not train the mask conventions again: on batches with padding (copy of mixed
    lengths), twelve steps of training give the same losses, gradient norms, validation metrics and final
    weights, bit for bit, as the default convention."""
    from zoo.data import load_task
    from zoo.train import TrainConfig, Trainer, load_run

    task = load_task("copy", symbols=8, min_len=2, max_len=9, train_size=300, valid_size=40, test_size=40)
    config = TrainConfig(steps=12, batch_tokens=256, warmup=4, lr=3e-3, eval_interval=6, eval_sentences=20,
                         checkpoint_interval=12, device="cpu", threads=1)
    sizes = {"d_model": 16, "n_heads": 2, "d_ff": 32, "encoder_layers": 1, "decoder_layers": 1,
             "src_vocab": task.src_vocab, "tgt_vocab": task.tgt_vocab}
    runs = {}
    for name in ("bool-keep", convention):
        spec = zoo.load_spec("paper-base", {**sizes, "mask.convention": name})
        Trainer(spec, task, config, tmp_path / name, progress=False).run()
        lines = (tmp_path / name / "metrics.jsonl").read_text().splitlines()
        rows = [{k: v for k, v in json.loads(line).items() if k not in ("tok_per_s", "seconds")} for line in lines]
        runs[name] = rows, load_run(tmp_path / name)[0].state_dict()
    (rows_a, weights_a), (rows_b, weights_b) = runs["bool-keep"], runs[convention]
    assert rows_a == rows_b
    assert weights_a.keys() == weights_b.keys()
    assert all(torch.equal(weights_a[k], weights_b[k]) for k in weights_a)
