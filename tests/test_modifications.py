"""Modifications beyond the writeups, each against an independent formula or PyTorch's own module:
RMSNorm, ScaleNorm, FixNorm, GLU variants, rotary, ALiBi, DeepNorm, ReZero, QK-norm; and the
equivalence, interop and listing verdicts they must get."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import zoo
from zoo.components.positional import RotaryPositions
from zoo.components.residual import Placement
from zoo.proofs.interop import to_torch
from zoo.registry import registry

NEW = {"norm": ["rmsnorm", "scalenorm"], "ffn": ["reglu", "geglu", "swiglu"], "positional": ["rotary", "alibi"],
       "residual": ["deepnorm", "rezero"], "attention": ["qk-norm"], "embedding": ["fixnorm"]}
NEW_ENTRIES = [(slot, name) for slot, names in NEW.items() for name in names]


def make(slot, name, **options):
    entry = registry.get(slot, name)
    return entry.impl, entry.config(**options)


# -- norms ---------------------------------------------------------------------------------------
def test_rmsnorm_is_torch_rmsnorm():
    impl, params = make("norm", "rmsnorm", eps=1e-6)
    norm, reference = impl(16, params), torch.nn.RMSNorm(16, eps=1e-6)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(16))
        reference.weight.copy_(norm.weight)
    x = torch.randn(3, 5, 16) * 3 + 1
    torch.testing.assert_close(norm(x), reference(x))


def test_scalenorm_formula_and_sqrt_d_init():
    impl, params = make("norm", "scalenorm")
    norm = impl(64, params)
    assert norm.g.item() == pytest.approx(8.0)  # sqrt(64)
    x = torch.randn(2, 3, 64)
    torch.testing.assert_close(norm(x), 8.0 * x / x.norm(dim=-1, keepdim=True))
    assert norm(x).norm(dim=-1).allclose(torch.full((2, 3), 8.0))


def test_fixnorm_fixes_every_embedding_length():
    impl, params = make("embedding", "fixnorm", radius=2.0, scale=True)
    embed = impl(20, 16, params, pad_id=0)
    lengths = embed(torch.arange(1, 20)[None]).norm(dim=-1)
    torch.testing.assert_close(lengths, torch.full((1, 19), 2.0 * 4.0))  # radius * sqrt(16)


# -- GLU feed-forwards ---------------------------------------------------------------------------
@pytest.mark.parametrize("name, gate", [("reglu", F.relu), ("geglu", F.gelu),
                                        ("swiglu", lambda t: t * torch.sigmoid(t))])
def test_glu_variants_formula(name, gate):
    impl, params = make("ffn", name)
    ffn = impl(8, 12, params, dropout=0.0)
    x = torch.randn(2, 3, 8)
    w, v, w2 = ffn.w1.weight, ffn.w3.weight, ffn.w2.weight
    torch.testing.assert_close(ffn(x), (gate(x @ w.T) * (x @ v.T)) @ w2.T)  # Shazeer 2020, eq. 5-6 (bias-free)


def test_glu_with_two_thirds_d_ff_has_the_relu_ffn_weights():
    d_model, d_ff = 512, 2048
    impl, params = make("ffn", "swiglu")
    glu = impl(d_model, d_ff * 2 // 3 + 1, params, dropout=0.0)  # 1366
    relu = registry.get("ffn", "linear").impl(d_model, d_ff, registry.get("ffn", "linear").config(), dropout=0.0)
    glu_weights = sum(p.numel() for n, p in glu.named_parameters() if n.endswith("weight"))
    relu_weights = sum(p.numel() for n, p in relu.named_parameters() if n.endswith("weight"))
    assert abs(glu_weights - relu_weights) / relu_weights < 1e-3


# -- positions -----------------------------------------------------------------------------------
def test_rotary_is_complex_multiplication_and_relative():
    rotary = registry.get("positional", "rotary").impl.relative(make("positional", "rotary")[1], 2, 8)
    x = torch.randn(1, 2, 5, 8)
    offset = 3
    theta = 10000.0 ** (-torch.arange(0, 8, 2).float() / 8)
    angle = torch.arange(offset, offset + 5).float()[:, None] * theta  # (L, Dh/2)
    as_complex = torch.view_as_complex(x.view(1, 2, 5, 4, 2).contiguous()) * torch.polar(torch.ones_like(angle), angle)
    torch.testing.assert_close(rotary.rotate(x, offset), torch.view_as_real(as_complex).flatten(-2))
    q, k = torch.randn(8), torch.randn(8)  # q_m . k_n depends on m - n only
    def score(m, n):
        return (rotary.rotate(q.view(1, 1, 1, 8), m) * rotary.rotate(k.view(1, 1, 1, 8), n)).sum()
    torch.testing.assert_close(score(7, 4), score(3, 0))


def official_alibi_slopes(n):
    """get_slopes from ofirpress/attention_with_linear_biases (fairseq/models/transformer.py)."""
    def power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        return [start * start**i for i in range(n)]
    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + official_alibi_slopes(2 * closest)[0::2][: n - closest]


@pytest.mark.parametrize("heads", [1, 4, 6, 8, 12, 16])
def test_alibi_slopes_and_bias(heads):
    alibi = registry.get("positional", "alibi").impl.relative(make("positional", "alibi")[1], heads, 4)
    assert alibi.slopes == pytest.approx(official_alibi_slopes(heads))
    if heads == 8:
        assert alibi.slopes == pytest.approx([2.0**-i for i in range(1, 9)])
    bias = alibi.bias(2, 5, torch.device("cpu"))  # queries at positions 3 and 4
    slope = torch.tensor(alibi.slopes)[:, None, None]
    expected = -slope * torch.tensor([[3.0, 2, 1, 0, 1], [4, 3, 2, 1, 0]])
    torch.testing.assert_close(bias, expected)


# -- depth: DeepNorm, ReZero ---------------------------------------------------------------------
def test_deepnorm_constants_are_the_papers():
    impl, params = make("residual", "deepnorm")
    norm = torch.nn.LayerNorm(8)
    for n, m in ((6, 6), (18, 18), (100, 100)):
        enc = impl(norm, params, dropout=0.0, placement=Placement("encoder", "ffn", n, m))
        dec = impl(norm, params, dropout=0.0, placement=Placement("decoder", "ffn", n, m))
        assert enc.alpha == pytest.approx(0.81 * (n**4 * m) ** (1 / 16))
        assert enc.beta == pytest.approx(0.87 * (n**4 * m) ** (-1 / 16))
        assert dec.alpha == pytest.approx((3 * m) ** 0.25) and dec.beta == pytest.approx((12 * m) ** -0.25)
        x, h = torch.randn(2, 3, 8), torch.randn(2, 3, 8)
        torch.testing.assert_close(enc(x, lambda _, h=h: h), norm(enc.alpha * x + h))


def test_deepnorm_initialises_value_output_and_ffn_with_gain_beta(tiny):
    spec = tiny(**{"residual.kind": "deepnorm", "d_model": 128, "n_heads": 4, "d_ff": 512,
                   "encoder_layers": 6, "decoder_layers": 6, "init.kind": "xavier-uniform"})
    model = zoo.build(spec, seed=0)
    beta_enc, beta_dec = 0.87 * (6**4 * 6) ** (-1 / 16), (12 * 6) ** -0.25
    for layer, beta in ((model.encoder.layers[0], beta_enc), (model.decoder.layers[0], beta_dec)):
        state = layer.self_attn.canonical_state()
        for name, gain in (("v.weight", beta), ("o.weight", beta), ("q.weight", 1.0), ("k.weight", 1.0)):
            assert state[name].std().item() == pytest.approx(gain * math.sqrt(2 / 256), rel=0.05), name
        assert layer.ffn.w1.weight.std().item() == pytest.approx(beta * math.sqrt(2 / 640), rel=0.05)


def test_rezero_starts_as_the_identity(tiny, batch):
    spec = tiny(**{"residual.kind": "rezero"})
    model = zoo.build(spec, seed=0).eval()
    assert model.encoder.final_norm is None and model.decoder.final_norm is None
    assert all(r.norm is None for layer in model.encoder.layers for r, _ in layer.wrapped())
    src, _ = batch(spec)
    with torch.no_grad():
        embedded = model.src_embed(src)
        assert torch.equal(model.encode(src), embedded)  # every layer is x + 0 * sublayer(x)


# -- attention -----------------------------------------------------------------------------------
def test_qk_norm_formula():
    impl, params = make("attention", "qk-norm", length=32)
    attention = impl(16, 2, params, dropout=0.0).eval()
    assert attention.g.item() == pytest.approx(math.log2(32**2 - 32))
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        state = attention.canonical_state()
        def heads(name):
            return F.linear(x, state[f"{name}.weight"], state[f"{name}.bias"]).view(2, 5, 2, 8).transpose(1, 2)
        q, k, v = F.normalize(heads("q"), dim=-1), F.normalize(heads("k"), dim=-1), heads("v")
        weights = torch.softmax(attention.g * q @ k.transpose(-1, -2), dim=-1)  # no 1/sqrt(Dh)
        expected = F.linear((weights @ v).transpose(1, 2).reshape(2, 5, 16), state["o.weight"], state["o.bias"])
        torch.testing.assert_close(attention(x, x, None), expected)


# -- verdicts ------------------------------------------------------------------------------------
@pytest.mark.parametrize("override", [
    {"norm.kind": "rmsnorm"}, {"norm.kind": "scalenorm"}, {"ffn.kind": "swiglu"}, {"ffn.kind": "reglu"},
    {"positional.kind": "rotary"}, {"positional.kind": "alibi"}, {"residual.kind": "deepnorm"},
    {"residual.kind": "rezero"}, {"attention.kind": "qk-norm"}, {"embedding.kind": "fixnorm"},
], ids=lambda o: next(iter(o.values())))
def test_each_modification_is_not_equivalent_to_paper_base(tiny, override):
    verdict = zoo.equivalence(tiny(), tiny(**override))
    assert not verdict.equivalent, verdict.reason
    assert verdict.reason


def test_rmsnorm_is_equivalent_to_itself_across_attention_kernels(tiny):
    a = tiny(**{"norm.kind": "rmsnorm", "positional.kind": "alibi", "attention.kind": "sdpa"})
    assert zoo.equivalence(a, a.with_overrides({"attention.kind": "matmul"})).equivalent


# to_torch keeps zoo's own embedders, so a FixNorm embedding is expressible and not listed here.
INEXPRESSIBLE = [(slot, name) for slot, name in NEW_ENTRIES if slot != "embedding"]


@pytest.mark.parametrize("slot, name", INEXPRESSIBLE, ids=[f"{s}.{n}" for s, n in INEXPRESSIBLE])
def test_to_torch_names_the_entry_it_cannot_express(tiny, slot, name):
    model = zoo.build(tiny(**{f"{slot}.kind": name}))
    with pytest.raises(zoo.NotExpressible, match=f"{slot}.kind = '{name}'"):
        to_torch(model)


def test_relative_positions_refuse_torch_mha(tiny):
    with pytest.raises(zoo.IncompatibleComponents, match="positional.kind 'rotary'"):
        tiny(**{"positional.kind": "rotary", "attention.kind": "torch-mha"})


def test_zoo_list_shows_each_new_entry_with_its_options(capsys):
    from zoo.cli import main

    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for slot, name in NEW_ENTRIES:
        assert f"{slot}.{name}" in out
    for option in ("eps", "radius", "base", "length", "bias"):
        assert option in out


def test_rotary_refuses_an_odd_head_dimension(tiny):
    """Rotary turns pairs of a head's dimensions; with d_head 3 the last one had no partner and was counted twice
    in every score (queries and keys came out 4 wide, values 3), with no error."""
    with pytest.raises(zoo.IncompatibleComponents, match=r"'rotary' needs d_model / n_heads to be a multiple of 2 "
                                                         r".*got 12 / 4 = 3"):
        tiny(**{"positional.kind": "rotary", "d_model": 12, "n_heads": 4})
    pairs = RotaryPositions(4, 10000.0).rotate(torch.randn(1, 4, 5, 4), 0)  # d_head 4: two pairs
    assert pairs.shape == (1, 4, 5, 4)
