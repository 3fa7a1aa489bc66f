"""zoo.equivalence verdicts between layouts and variants, and zoo.transplant's refusals."""

from __future__ import annotations

import math

import pytest
import torch

import zoo
from zoo.proofs.equivalence import canonical_state, genericize


def verdict_for(tiny, a: dict, b: dict) -> zoo.Verdict:
    verdict = zoo.equivalence(tiny(**a), tiny(**b))
    assert isinstance(verdict, zoo.Verdict)
    assert isinstance(verdict.max_abs_diff, float)
    assert bool(verdict) is verdict.equivalent
    assert verdict.tolerance == 1e-5
    return verdict


EQUIVALENT = {
    "ffn-conv1d-vs-linear": ({"ffn.kind": "conv1d"}, {"ffn.kind": "linear"}),
    "attention-sdpa-vs-matmul": ({"attention.kind": "sdpa"}, {"attention.kind": "matmul"}),
    "attention-sdpa-vs-torch-mha": ({"attention.kind": "sdpa"}, {"attention.kind": "torch-mha"}),
    "attention-matmul-vs-torch-mha": ({"attention.kind": "matmul"}, {"attention.kind": "torch-mha"}),
    "attention-torch-mha-vs-sdpa": ({"attention.kind": "torch-mha"}, {"attention.kind": "sdpa"}),
    "qkv-separate-vs-fused": ({"attention.qkv": "separate"}, {"attention.qkv": "fused"}),
    "qkv-fused-vs-separate": ({"attention.qkv": "fused"}, {"attention.qkv": "separate"}),
    "qkv-fused-matmul-vs-torch-mha": ({"attention.qkv": "fused", "attention.kind": "matmul"},
                                      {"attention.kind": "torch-mha"}),
    "embedding-tied-vs-separate": ({"embedding.sharing": "all"}, {"embedding.sharing": "none"}),
    "same-spec": ({}, {}),
    # 001's pad-aware table differs only at padding positions, which are never attended to nor compared
    "sinusoidal-vs-pad-aware": ({"positional.kind": "sinusoidal"}, {"positional.kind": "sinusoidal-pad-aware"}),
}

NOT_EQUIVALENT = {
    "post-norm-vs-pre-norm": ({"residual.kind": "post-norm"},
                              {"residual.kind": "pre-norm", "residual.final_norm": False}),
    "post-norm-vs-pre-norm-final-norm": ({"residual.kind": "post-norm"},
                                         {"residual.kind": "pre-norm", "residual.final_norm": True}),
    "layernorm-vs-annotated": ({"norm.kind": "layernorm"}, {"norm.kind": "layernorm-annotated"}),
    "embedding-scale-on-vs-off": ({"embedding.scale": True}, {"embedding.scale": False}),
    "relu-vs-gelu": ({"ffn.activation": "relu"}, {"ffn.activation": "gelu"}),
}


@pytest.mark.parametrize("a, b", EQUIVALENT.values(), ids=list(EQUIVALENT))
def test_equivalent(tiny, a, b):
    verdict = verdict_for(tiny, a, b)
    assert verdict.equivalent, verdict.reason
    assert 0.0 <= verdict.max_abs_diff <= 1e-5
    assert verdict.positions > 0
    assert f"{verdict.max_abs_diff:.3g}" in verdict.reason
    assert verdict.missing == () and verdict.dropped == ()


@pytest.mark.parametrize("a, b", NOT_EQUIVALENT.values(), ids=list(NOT_EQUIVALENT))
def test_not_equivalent(tiny, a, b):
    verdict = verdict_for(tiny, a, b)
    assert not verdict.equivalent
    assert math.isfinite(verdict.max_abs_diff), verdict.reason  # transplantable, so a real difference
    assert verdict.max_abs_diff > 1e-5
    assert f"{verdict.max_abs_diff:.3g}" in verdict.reason and ">" in verdict.reason


def test_different_vocabularies_are_not_equivalent(tiny):
    verdict = zoo.equivalence(tiny(**{"embedding.sharing": "none"}),
                              tiny(**{"embedding.sharing": "none", "tgt_vocab": 41}))
    assert not verdict.equivalent
    assert verdict.max_abs_diff == math.inf
    assert "tgt_vocab" in verdict.reason


def test_equivalence_is_deterministic(tiny):
    spec_a, spec_b = tiny(**{"ffn.kind": "conv1d"}), tiny()
    first = zoo.equivalence(spec_a, spec_b, seed=5)
    second = zoo.equivalence(spec_a, spec_b, seed=5)
    assert first == second


def test_extra_parameters_are_reported(tiny):
    verdict = zoo.equivalence(tiny(), tiny(**{"attention.unused_projection": True}))
    assert verdict.equivalent  # the unused projection does not take part in the computation
    assert verdict.missing and all(".unused." in name for name in verdict.missing)
    assert "no counterpart" in verdict.reason


# -- transplant ---------------------------------------------------------------------------------------
def generic(spec, seed=0):
    model = zoo.build(spec, seed=seed)
    genericize(model, torch.Generator().manual_seed(seed + 100))
    return model


def test_transplant_copies_across_layouts(tiny, batch):
    source_spec = tiny(**{"attention.qkv": "separate", "ffn.kind": "linear"})
    model = generic(source_spec)
    target = zoo.transplant(model, tiny(**{"attention.qkv": "fused", "ffn.kind": "conv1d"}))
    assert target.spec.attention.qkv == "fused"
    source_state, target_state = canonical_state(model), canonical_state(target)
    assert source_state.keys() == target_state.keys()
    for name in source_state:
        assert torch.equal(source_state[name], target_state[name]), name
    assert sorted(target.transplant_report.copied) == sorted(target_state)
    model.eval(), target.eval()
    src, tgt_in = batch(source_spec)
    with torch.no_grad():
        torch.testing.assert_close(target(src, tgt_in), model(src, tgt_in), atol=1e-5, rtol=1e-5)


def test_transplant_refuses_parameters_without_counterpart(tiny):
    model = zoo.build(tiny(), seed=0)
    with pytest.raises(zoo.NotTransplantable) as info:
        zoo.transplant(model, tiny(**{"attention.unused_projection": True}))
    error = info.value
    assert isinstance(error, zoo.ZooError)
    assert error.parameters
    assert all(".unused." in name for name in error.parameters)
    assert "encoder.layers.0.self_attn.unused.weight" in error.parameters
    assert "encoder.layers.0.self_attn.unused.weight (only in the target)" in str(error)
    # and the other way round: the source has parameters the target lacks
    with pytest.raises(zoo.NotTransplantable, match=r"unused\.weight \(only in the source\)"):
        zoo.transplant(zoo.build(tiny(**{"attention.unused_projection": True})), tiny())


def test_transplant_non_strict_reports_missing(tiny):
    model = zoo.build(tiny(), seed=0)
    target = zoo.transplant(model, tiny(**{"attention.unused_projection": True}), strict=False)
    report = target.transplant_report
    assert report.missing and all(".unused." in n for n in report.missing)
    assert not report.dropped
    assert "encoder.layers.0.self_attn.q.weight" in report.copied


def test_transplant_refuses_conflicting_sources_for_a_shared_norm(tiny):
    model = generic(tiny(**{"residual.norms": "per-sublayer"}))
    with pytest.raises(zoo.NotTransplantable, match="share one weight") as info:
        zoo.transplant(model, tiny(**{"residual.norms": "per-block"}))
    names = info.value.parameters
    assert "encoder.layers.0.res_attn.norm.weight" in names
    assert "encoder.layers.0.res_ffn.norm.weight" in names
    for name in names:
        assert name in str(info.value)


def test_transplant_into_shared_norm_accepts_agreeing_sources(tiny):
    # freshly initialised norms are all ones and zeros, so they agree and can share one weight
    model = zoo.build(tiny(**{"residual.norms": "per-sublayer"}), seed=0)
    target = zoo.transplant(model, tiny(**{"residual.norms": "per-block"}))
    layer = target.encoder.layers[0]
    assert layer.res_attn.norm is layer.res_ffn.norm


def test_tied_to_separate_transplants_and_is_equivalent(tiny, batch):
    tied_spec = tiny(**{"embedding.sharing": "all"})
    model = generic(tied_spec)
    separate = zoo.transplant(model, tiny(**{"embedding.sharing": "none"}))
    table = model.src_embed.tokens.table.weight
    for weight in (separate.src_embed.tokens.table.weight, separate.tgt_embed.tokens.table.weight,
                   separate.output.proj.weight):
        assert torch.equal(weight, table)
    assert separate.src_embed.tokens.table.weight.data_ptr() != separate.tgt_embed.tokens.table.weight.data_ptr()
    model.eval(), separate.eval()
    src, tgt_in = batch(tied_spec)
    with torch.no_grad():
        torch.testing.assert_close(separate(src, tgt_in), model(src, tgt_in))
    verdict = zoo.equivalence(tied_spec, tiny(**{"embedding.sharing": "none"}))
    assert verdict.equivalent and verdict.max_abs_diff <= 1e-5, verdict.reason


def test_separate_to_tied_is_not_transplantable(tiny):
    separate_spec, tied_spec = tiny(**{"embedding.sharing": "none"}), tiny(**{"embedding.sharing": "all"})
    with pytest.raises(zoo.NotTransplantable, match="share one weight") as info:
        zoo.transplant(generic(separate_spec), tied_spec)
    assert {"src_embed.tokens.weight", "tgt_embed.tokens.weight", "output.weight"} <= set(info.value.parameters)
    verdict = zoo.equivalence(separate_spec, tied_spec)
    assert not verdict.equivalent
    assert verdict.max_abs_diff == math.inf
    assert "not transplantable" in verdict.reason


def test_transplant_refuses_shape_mismatch(tiny):
    model = zoo.build(tiny(), seed=0)
    with pytest.raises(zoo.NotTransplantable, match="shape"):
        zoo.transplant(model, tiny(d_ff=128))


def test_a_model_of_nan_outputs_is_not_equivalent(tiny):
    """max(0.0, nan) is 0.0 in Python: a B whose every log-probability is NaN was certified equivalent, difference 0."""
    spec = tiny()
    broken = zoo.build(spec, seed=0)
    broken.output.register_forward_hook(lambda module, inputs, out: torch.full_like(out, float("nan")))
    verdict = zoo.equivalence(spec, spec, side_b=broken)
    assert not verdict.equivalent and math.isnan(verdict.max_abs_diff) and verdict.reason.startswith("NaN")
