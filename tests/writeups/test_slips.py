"""The writeups' slips as written: each `*-as-written` preset (or slip option) against the writeup's own
code with the slip restored, and the equivalence check's verdict on each slip against its intended version."""

from __future__ import annotations

import pytest
import torch

import zoo
from zoo.proofs.equivalence import canonical_state, genericize

from . import ref000, ref001, ref003, ref004
from ._harness import load_canonical, random_batch
from .test_writeups import SMALL, TOLERANCE


def test_001_as_written_is_the_writeups_code_with_its_slips():
    """View-split heads, head-major mask repeat and the target-built cross mask, as 001 writes them;
    S == T, the only case 001's cross mask runs."""
    spec = zoo.load_spec("writeup-001-as-written", SMALL)
    model = zoo.build(spec, seed=0).eval()
    genericize(model, torch.Generator().manual_seed(1))
    reference = ref001.make(spec, as_written=True).eval()
    load_canonical(reference, canonical_state(model), ref001.canonical_map(spec))
    generator = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for _ in range(3):
            src, tgt_in = random_batch(spec.src_vocab, spec.tgt_vocab, spec.pad_id, generator, src_len=7, tgt_len=7)
            ours, theirs = model(src, tgt_in), ref001.run(reference, src, tgt_in, spec.pad_id)
            real = tgt_in.ne(spec.pad_id)
            assert (ours - theirs).abs()[real].max().item() <= TOLERANCE


@pytest.mark.parametrize("slip", [{"mask.cross_from_target": True}, {"attention.heads": "view"}],
                         ids=["cross_from_target", "heads-view"])
def test_each_001_slip_is_not_equivalent_to_the_intent(slip):
    spec = zoo.load_spec("writeup-001", SMALL)
    verdict = zoo.equivalence(spec, spec.with_overrides(slip))
    assert not verdict.equivalent and "max |log p_A - log p_B|" in verdict.reason


def test_001_cross_mask_from_target_refuses_unequal_lengths():
    model = zoo.build(zoo.load_spec("writeup-001", {**SMALL, "mask.cross_from_target": True}))
    with pytest.raises(zoo.ZooError, match="mask.cross_from_target"):
        model(torch.ones(2, 5, dtype=torch.long), torch.ones(2, 4, dtype=torch.long))


def _eval_twice(module, run):
    with torch.no_grad():
        return run(module), run(module)


def test_004_attention_dropout_stays_on_in_eval_as_in_the_writeup():
    """004's Attention is a plain class: model.eval() does not reach its nn.Dropout. The reference with
    that restored (its attention dropouts left in training mode after eval()) and zoo's as-written
    preset both give different outputs on two eval-mode calls; the intended versions do not."""
    spec = zoo.load_spec("writeup-004-as-written", {**SMALL, "dropout": 0.3})
    src, tgt_in = random_batch(spec.src_vocab, spec.tgt_vocab, spec.pad_id, torch.Generator().manual_seed(0))
    reference = ref004.make(spec).eval()
    for module in reference.modules():
        if isinstance(module, ref004.MultiHeadAttention):
            module.attn.dropout.train()  # what eval() never reaches in the writeup
    for model, run in ((zoo.build(spec).eval(), lambda m: m(src, tgt_in)),
                       (reference, lambda m: ref004.run(m, src, tgt_in, spec.pad_id))):
        first, second = _eval_twice(model, run)
        assert not torch.equal(first, second)
    intended = zoo.build(spec.with_overrides({"attention.dropout_in_eval": False})).eval()
    assert torch.equal(*_eval_twice(intended, lambda m: m(src, tgt_in)))
    verdict = zoo.equivalence(spec.with_overrides({"attention.dropout_in_eval": False}), spec)
    assert not verdict.equivalent  # eval mode does not switch it off, so the check sees it


def _identical(modules):
    states = [m.state_dict() for m in modules]
    return all(torch.equal(s[k], states[0][k]) for s in states[1:] for k in states[0])


def test_000_prototypes_give_identical_starting_weights_as_in_the_writeup():
    spec = zoo.load_spec("writeup-000-as-written", SMALL)
    torch.manual_seed(0)
    reference = ref000.make(spec)
    ref_attentions = [b.att for b in reference.encoder.encoder_blocks] + [
        m for b in reference.decoder.decoder_blocks for m in (b.masked_att, b.att)]
    ref_ffns = [b.feedforward for b in (*reference.encoder.encoder_blocks, *reference.decoder.decoder_blocks)]
    assert _identical(ref_attentions) and _identical(ref_ffns)

    model = zoo.build(spec, seed=0)
    layers = [*model.encoder.layers, *model.decoder.layers]
    attentions = [model.encoder.layers[0].self_attn] + [
        m for layer in model.decoder.layers for m in (layer.self_attn, layer.cross_attn)]
    assert _identical(attentions) and _identical([layer.ffn for layer in layers])
    intended = zoo.build(zoo.load_spec("writeup-000", SMALL), seed=0)
    assert not _identical([intended.decoder.layers[0].self_attn, intended.decoder.layers[0].cross_attn])


def test_000_prototypes_are_invisible_to_the_equivalence_check():
    """Only the starting weights differ; equivalence compares functions given the same weights."""
    assert zoo.equivalence(zoo.load_spec("writeup-000", SMALL), zoo.load_spec("writeup-000-as-written", SMALL))


def test_003_training_loop_as_written_never_steps():
    """003's loop, transcribed: cur_step starts at 1 and moves only inside the step branch, so over more
    batches than GRAD_ACCUMULATION_STEPS the optimizer never steps. Why it is documented, not an option."""
    spec = zoo.load_spec("writeup-003", SMALL)
    torch.manual_seed(0)
    model = ref003.make(spec)
    start = {k: v.clone() for k, v in model.state_dict().items()}
    optimizer = torch.optim.Adam(model.parameters(), betas=(0.9, 0.98), eps=1e-9)
    grad_accumulation_steps = 2048 // 48
    loss_func = torch.nn.CrossEntropyLoss(ignore_index=0, label_smoothing=0.1)
    generator = torch.Generator().manual_seed(0)
    cur_step = 1
    for _ in range(grad_accumulation_steps + 1):
        src, tgt = random_batch(spec.src_vocab, spec.tgt_vocab, spec.pad_id, generator)
        preds = model(src, tgt)
        loss = loss_func(preds.reshape(-1, preds.size(-1)), tgt[:, 1:].contiguous().view(-1))
        loss.backward()
        if cur_step % grad_accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
            cur_step += 1
    assert cur_step == 1 and all(torch.equal(v, start[k]) for k, v in model.state_dict().items())


def test_heads_by_view_decodes_without_the_cache_instead_of_failing():
    """001's heads split by view refuse cached decoding (they mix positions); greedy decoding, which caches
    by default, falls back to re-running the decoder on the prefix, so runs with that slip can be evaluated.
    (001's other slip, the cross mask built from the target, cannot decode at all: see the next test.)"""
    from zoo.model.decode import DecodeConfig, greedy

    spec = zoo.load_spec("writeup-001", {"d_model": 16, "n_heads": 2, "d_ff": 32, "encoder_layers": 1,
                                         "decoder_layers": 1, "src_vocab": 12, "tgt_vocab": 12,
                                         "attention.heads": "view"})
    model = zoo.build(spec, seed=0).eval()
    assert not model.decodes_step_by_step and zoo.build(zoo.load_spec("writeup-001"), seed=0).decodes_step_by_step
    src = torch.tensor([[3, 4, 5, 6, 2]])
    cached = greedy(model, src, bos=1, eos=2, config=DecodeConfig(use_cache=True, max_extra=3))
    assert cached == greedy(model, src, bos=1, eos=2, config=DecodeConfig(use_cache=False, max_extra=3))


def test_cross_mask_from_the_target_cannot_decode():
    """001's cross mask, padding_mask(tgt_seq, src_seq), fits the scores only when the target is as long as
    the source; a decoder that emits one token at a time never is, so 001 as written cannot translate (it can
    only be trained, with teacher forcing, on pairs padded to one length)."""
    from zoo.errors import ZooError
    from zoo.model.decode import DecodeConfig, greedy

    spec = zoo.load_spec("writeup-001-as-written", {"d_model": 16, "n_heads": 2, "d_ff": 32, "encoder_layers": 1,
                                                     "decoder_layers": 1, "src_vocab": 12, "tgt_vocab": 12})
    model = zoo.build(spec, seed=0).eval()
    with pytest.raises(ZooError, match="only when S == T"):
        greedy(model, torch.tensor([[3, 4, 5, 6, 2]]), bos=1, eos=2, config=DecodeConfig(use_cache=False))
