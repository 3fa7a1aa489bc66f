"""Every registered nn.Module component, swapped into a tiny model: shapes, gradients, causality;
build determinism; the init slot; the output heads."""

from __future__ import annotations

import math
import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import zoo
from zoo.proofs.equivalence import canonical_state
from zoo.registry import registry
from zoo.testing import MODULE_SLOTS, contracts_for, tiny_spec

ALL_ENTRIES = registry.entries()


def test_module_slots_cover_every_nn_module_slot():
    module_slots = {s for s in registry.slots() if issubclass(registry.slot(s).base, nn.Module)}
    assert module_slots == set(MODULE_SLOTS)


def swapped(tiny, slot: str, name: str) -> zoo.ModelSpec:
    """The tiny spec with `name` in `slot`."""
    return tiny(**{f"{slot}.{registry.slot(slot).key}": name})


# -- the contracts every entry keeps (zoo/testing/__init__.py; `zoo check` runs them on a user's entry) ---------
CASES = [(entry, contract) for entry in ALL_ENTRIES for contract in contracts_for(entry)]


@pytest.mark.parametrize("entry, contract", CASES, ids=[f"{e.qualified}:{c.name}" for e, c in CASES])
def test_component_contract(entry, contract):
    contract.check(entry, tiny_spec(entry))


def test_every_module_entry_gets_every_module_contract():
    names = {c.name for c in contracts_for(registry.get("ffn", "linear"))}
    assert names == {"swapped-in", "shapes", "gradients", "causal", "padded-rows", "deterministic", "incremental",
                     "transplant"} | ({"gpu"} if torch.cuda.is_available() else set())
    assert "swapped-in" not in {c.name for c in contracts_for(registry.get("mask", "bool-keep"))}


@pytest.mark.parametrize("init", registry.names("init"))
def test_sdpa_and_matmul_get_identical_initial_weights(tiny, init):
    sdpa = zoo.build(tiny(**{"attention.kind": "sdpa", "init.kind": init}), seed=3)
    matmul = zoo.build(tiny(**{"attention.kind": "matmul", "init.kind": init}), seed=3)
    state_s, state_m = sdpa.state_dict(), matmul.state_dict()
    assert state_s.keys() == state_m.keys()
    for key in state_s:
        assert torch.equal(state_s[key], state_m[key]), key


# -- init slot -----------------------------------------------------------------------------------
def test_xavier_and_torch_default_differ(tiny):
    xavier = zoo.build(tiny(**{"init.kind": "xavier-uniform"}), seed=0).state_dict()
    default = zoo.build(tiny(**{"init.kind": "torch-default"}), seed=0).state_dict()
    assert xavier.keys() == default.keys()
    matrices = [k for k, v in xavier.items() if v.dim() > 1]
    assert matrices
    for key in matrices:
        assert not torch.equal(xavier[key], default[key]), key


def test_xavier_over_copied_layers_differs_from_xavier_in_the_later_layers_biases_only(tiny):
    """004's order (copy the layers, then xavier): xavier-uniform's matrices, seed for seed; every
    layer's biases are its stack's first layer's, and the first layer's are xavier-uniform's."""
    sizes = {"encoder_layers": 3, "decoder_layers": 3}
    xavier = zoo.build(tiny(**sizes, **{"init.kind": "xavier-uniform"}), seed=0).state_dict()
    copied = zoo.build(tiny(**sizes, **{"init.kind": "xavier-uniform-copied-layers"}), seed=0).state_dict()
    assert xavier.keys() == copied.keys()
    later_biases = 0
    for key, value in copied.items():
        first = re.sub(r"^(encoder|decoder)\.layers\.\d+\.", r"\1.layers.0.", key)
        if value.dim() > 1 or first == key:
            assert torch.equal(value, xavier[key]), key
        else:
            assert torch.equal(value, copied[first]), key
            if key.endswith("bias") and not torch.equal(value, xavier[key]):
                later_biases += 1
    assert later_biases >= 2 * 2 * 4  # layers 1 and 2 of both stacks: at least q, k, v and ffn biases

def test_xavier_uniform_bounds(tiny):
    model = zoo.build(tiny(**{"init.kind": "xavier-uniform"}), seed=0)
    for name, param in model.named_parameters():
        if param.dim() > 1:
            fan_out, fan_in = param.shape[0], param[0].numel()
            bound = math.sqrt(6.0 / (fan_in + fan_out))
            assert param.abs().max() <= bound + 1e-6, name
            assert param.abs().max() > 0.8 * bound, name  # actually spread over the range



def test_a_fused_in_projection_starts_narrower_under_xavier(tiny):
    """An initialiser sees the fused (3D, D) in-projection as one matrix (attention.py's docstring): each block's
    xavier bound is sqrt(6 / 4D), 1/sqrt(2) of three separate (D, D) matrices' sqrt(6 / 2D)."""
    widths = {}
    for qkv in ("separate", "fused"):
        state = canonical_state(zoo.build(tiny(**{"init.kind": "xavier-uniform", "attention.qkv": qkv}), seed=0))
        blocks = [w for k, w in state.items() if re.search(r"\.[qkv]\.weight$", k)]
        assert blocks and all(w.shape == (tiny().d_model,) * 2 for w in blocks)
        widths[qkv] = max(w.abs().max().item() for w in blocks)
    d = tiny().d_model
    assert math.sqrt(6 / (4 * d)) * 0.9 < widths["fused"] <= math.sqrt(6 / (4 * d)) + 1e-6
    assert math.sqrt(6 / (4 * d)) < widths["separate"] <= math.sqrt(6 / (2 * d)) + 1e-6

def test_torch_default_linear_bounds(tiny):
    model = zoo.build(tiny(**{"init.kind": "torch-default", "embedding.sharing": "none"}), seed=0)
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    assert linears
    for linear in linears:  # kaiming_uniform_(a=sqrt(5)): bound 1/sqrt(fan_in)
        assert linear.weight.abs().max() <= 1 / math.sqrt(linear.in_features) + 1e-6
    table = model.src_embed.tokens.table.weight  # nn.Embedding: N(0, 1)
    assert 0.8 < table.std().item() < 1.2


@pytest.mark.parametrize("init", registry.names("init"))
def test_identical_layers(tiny, init):
    same = zoo.build(tiny(**{"init.kind": init, "init.identical_layers": True,
                            "encoder_layers": 3, "decoder_layers": 3}), seed=0)
    for stack in (same.encoder.layers, same.decoder.layers):
        reference = stack[0].state_dict()
        for layer in stack[1:]:
            state = layer.state_dict()
            assert state.keys() == reference.keys()
            for key in reference:
                assert torch.equal(state[key], reference[key]), key
        # copies, not one shared module
        assert stack[1].ffn.w1.weight.data_ptr() != stack[0].ffn.w1.weight.data_ptr()

    different = zoo.build(tiny(**{"init.kind": init, "encoder_layers": 3, "decoder_layers": 3}), seed=0)
    for stack in (different.encoder.layers, different.decoder.layers):
        assert not torch.equal(stack[0].ffn.w1.weight, stack[1].ffn.w1.weight)


@pytest.mark.parametrize("init", registry.names("init"))
def test_padding_row_is_zero_after_init(tiny, init):
    spec = tiny(**{"init.kind": init, "embedding.padding_idx": True, "embedding.sharing": "none", "pad_id": 2})
    model = zoo.build(spec, seed=0)
    for embed in (model.src_embed, model.tgt_embed):
        table = embed.tokens.table.weight
        assert torch.all(table[2] == 0)
        assert torch.all(table[1] != 0)


# -- output heads --------------------------------------------------------------------------------
@pytest.mark.parametrize("head", registry.names("output"))
def test_output_head_log_probs_match_log_softmax_of_logits(tiny, batch, head):
    reference = zoo.build(tiny(**{"output.kind": "logits"}), seed=0).eval()
    model = zoo.build(tiny(**{"output.kind": head}), seed=0).eval()
    src, tgt_in = batch(reference.spec)
    with torch.no_grad():
        logits = reference(src, tgt_in)
        scores = model(src, tgt_in)
    expected = F.log_softmax(logits, dim=-1)
    torch.testing.assert_close(model.log_probs(scores), expected, atol=1e-5, rtol=1e-5)


def test_output_scores_relate(tiny, batch):
    models = {head: zoo.build(tiny(**{"output.kind": head}), seed=0).eval()
              for head in ("logits", "log-softmax", "softmax")}
    src, tgt_in = batch(models["logits"].spec)
    with torch.no_grad():
        scores = {head: model(src, tgt_in) for head, model in models.items()}
    logits = scores["logits"]
    torch.testing.assert_close(scores["log-softmax"], F.log_softmax(logits, -1))
    torch.testing.assert_close(scores["softmax"], F.softmax(logits, -1))
    torch.testing.assert_close(scores["softmax"].sum(-1), torch.ones(logits.shape[:2]))
    torch.testing.assert_close(scores["log-softmax"].exp(), scores["softmax"], atol=1e-6, rtol=1e-5)
    for head, model in models.items():
        torch.testing.assert_close(model.log_probs(scores[head]), F.log_softmax(logits, -1), atol=1e-5, rtol=1e-5)


def test_tied_output_weight_is_the_embedding_table(tiny):
    tied = zoo.build(tiny(**{"embedding.sharing": "all"}), seed=0)
    table = tied.tgt_embed.tokens.table.weight
    assert tied.output.proj.weight is table
    assert tied.src_embed.tokens is tied.tgt_embed.tokens
    shared = zoo.build(tiny(**{"embedding.sharing": "src-tgt"}), seed=0)
    assert shared.src_embed.tokens is shared.tgt_embed.tokens
    assert shared.output.proj.weight is not shared.tgt_embed.tokens.table.weight
    separate = zoo.build(tiny(**{"embedding.sharing": "none"}), seed=0)
    assert separate.src_embed.tokens is not separate.tgt_embed.tokens


def test_embedding_scale(tiny):
    ids = torch.tensor([[3, 4, 5]])
    scaled = zoo.build(tiny(**{"embedding.scale": True}), seed=0)
    plain = zoo.build(tiny(**{"embedding.scale": False}), seed=0)
    torch.testing.assert_close(scaled.src_embed.tokens(ids), plain.src_embed.tokens(ids) * math.sqrt(32))


# -- every preset, shrunk ------------------------------------------------------------------------
@pytest.mark.parametrize("name", zoo.preset_names())
def test_shrunk_preset_runs(tiny, batch, name):
    spec = tiny(name)
    model = zoo.build(spec, seed=0).eval()
    src, tgt_in = batch(spec)
    with torch.no_grad():
        scores = model(src, tgt_in)
    assert scores.shape == (*tgt_in.shape, spec.tgt_vocab)
    assert torch.isfinite(model.log_probs(scores)[tgt_in.ne(spec.pad_id)]).all()


@pytest.mark.parametrize("kind", zoo.registry.names("positional"))
def test_sequence_beyond_max_len_is_a_clear_error(tiny, kind):
    spec = tiny(**{"positional.kind": kind, "positional.max_len": 6})
    model = zoo.build(spec)
    with pytest.raises(zoo.ZooError, match="positional.max_len"):
        model(torch.ones(1, 7, dtype=torch.long), torch.ones(1, 3, dtype=torch.long))


@pytest.mark.parametrize("vocab, token_std, ratio_unscaled, ratio_scaled", [
    (4000, 0.0222, 1 / 32, 0.25),  # the ablations' translation tasks: a joint BPE of 4000, specials included
    (14, 0.161, 0.23, 1.82),       # reverse: 10 symbols + 4 specials
])
def test_embedding_to_position_ratio_depends_on_vocabulary(vocab, token_std, ratio_unscaled, ratio_scaled):
    """The numbers behind the no-embedding-scale verdicts (experiments/ablations.toml): paper-base initialises
    the tied table Xavier-uniform, std sqrt(2 / (V + D)), so a token vector's length depends on the vocabulary,
    while a sinusoid row has length sqrt(D / 2) at every position. Without the sqrt(D) scale tokens are about
    1/32 of the positions at vocab 4000, about a quarter at vocab 14."""
    from zoo.components.positional import sinusoid_table

    spec = zoo.load_spec("paper-base", overrides={"d_model": 64, "n_heads": 4, "d_ff": 256, "encoder_layers": 2,
                                                  "decoder_layers": 2, "src_vocab": vocab, "tgt_vocab": vocab})
    table = zoo.build(spec, seed=0).src_embed.tokens.table.weight.detach()
    assert table.std().item() == pytest.approx(token_std, rel=0.02)
    assert table.std().item() == pytest.approx(math.sqrt(2 / (vocab + 64)), rel=0.02)
    token_length = table[4:].norm(dim=-1).mean().item()
    position_length = sinusoid_table(100, 64).norm(dim=-1)
    assert torch.allclose(position_length, torch.full_like(position_length, math.sqrt(32)))
    assert token_length / math.sqrt(32) == pytest.approx(ratio_unscaled, rel=0.05)
    assert 8 * token_length / math.sqrt(32) == pytest.approx(ratio_scaled, rel=0.05)


def test_the_sinusoid_table_is_the_papers_formula_computed_once_and_copied():
    """PE[pos, 2i] = sin(pos / 10000^(2i/D)), PE[pos, 2i+1] = cos(...) by hand at a few entries; every model gets
    its own copy (writing into one model's buffer leaves the next build's alone), on the build's device."""
    from zoo.components.positional import sinusoid_table

    table = sinusoid_table(50, 8)
    for pos, i in ((0, 0), (7, 1), (49, 3)):
        angle = pos / 10000 ** (2 * i / 8)
        assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
        assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)
    first, second = sinusoid_table(50, 8), sinusoid_table(50, 8)
    first.zero_()
    assert torch.equal(second, table) and second.data_ptr() != table.data_ptr()
    with torch.device("meta"):
        assert sinusoid_table(50, 8).device.type == "meta"
    assert sinusoid_table(50, 8).device.type == "cpu"
