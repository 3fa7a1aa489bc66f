"""Greedy and beam-search decoding, batched, with or without the key/value cache.

With `use_cache=True` each step runs the decoder on the newest position only (`Seq2Seq.decode_step`);
without it, each step re-runs the decoder over the whole prefix. Both give the same tokens. A model whose
attention cannot be cached step by step (001 as written) is always decoded the second way.

Output length is limited per sentence to `max_ratio * source_length + max_extra` tokens (EOS excluded),
and never beyond the positions the decoder's positional table covers.
Hypotheses are returned as token ids without BOS and EOS.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from pydantic import BaseModel, ConfigDict, Field

from zoo.config_io import Count, Number
from zoo.errors import ZooError
from zoo.model.seq2seq import DecodeState, Seq2Seq

Tensor = torch.Tensor


MAX_RATIO = 10.0  # no translation is ten times its source; a larger ratio only lets a broken model babble
MAX_BEAM = 64  # published NMT gains stop near beam 4-10; a beam of 100000 only never finishes


@dataclass(frozen=True)
class DecodeConfig:
    beam: int = 1
    alpha: float = 0.6  # GNMT length penalty exponent (Wu et al. 2016); 0 = raw log-probability
    max_ratio: float = 1.5
    max_extra: int = 10
    use_cache: bool = True

    def __post_init__(self) -> None:
        """Checked here, so `zoo translate --max-ratio nan` is one line, not a tensor of garbage lengths."""
        checks = {"beam": (self.beam, f"an integer in [1, {MAX_BEAM}]", lambda v: _integer(v) and 1 <= v <= MAX_BEAM),
                  "alpha": (self.alpha, "a finite number >= 0", lambda v: _finite(v) and v >= 0),
                  "max_ratio": (self.max_ratio, f"a finite number in [0, {MAX_RATIO:g}]",
                                lambda v: _finite(v) and 0 <= v <= MAX_RATIO),
                  "max_extra": (self.max_extra, "an integer >= 0", lambda v: _integer(v) and v >= 0)}
        for name, (value, allowed, ok) in checks.items():
            if not ok(value):
                raise ZooError(f"{name}: {value!r} is not allowed; expected {allowed}")


class DecodeSettings(BaseModel):
    """An experiment's [decode] table: the DecodeConfig its test sets are decoded with, part of each cell's
    definition (zoo/experiment/store.py reads recorded ones back with it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    beam: Count = Field(1, gt=0, le=MAX_BEAM)
    alpha: Number = Field(0.6, ge=0)
    max_ratio: Number = Field(1.5, gt=0, le=MAX_RATIO)
    max_extra: Count = Field(10, ge=0)


def _integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class _Stepper:
    """Next-token log-probabilities (N, V) for N prefixes, cached or recomputed."""

    def __init__(self, model: Seq2Seq, memory: Tensor, src: Tensor, use_cache: bool):
        self.model, self.memory, self.src = model, memory, src
        cached = use_cache and model.decodes_step_by_step
        self.state: DecodeState | None = model.start_decoding() if cached else None

    def __call__(self, prefix: Tensor) -> Tensor:
        if self.state is not None:
            scores = self.model.decode_step(prefix, self.memory, self.src, self.state)  # (N, 1, V)
        else:
            scores = self.model.decode(prefix, self.memory, self.src)[:, -1:]  # (N, t + 1, V) -> last
        return self.model.log_probs(scores)[:, 0].float()  # (N, V)

    def keep(self, index: Tensor) -> None:
        """Continue with rows `index` of the current batch (finished or reordered hypotheses)."""
        self.memory, self.src = self.memory.index_select(0, index), self.src.index_select(0, index)
        if self.state is not None:
            self.state.reorder(index)


def _limits(model: Seq2Seq, src: Tensor, config: DecodeConfig) -> Tensor:
    """Output tokens allowed per sentence (B,): the ratio limit, clamped to what the decoder's positional
    table can represent (the prefix holds BOS plus the tokens so far, one position each)."""
    lengths = src.ne(model.pad_id).sum(dim=1)  # (B,)
    limits = (lengths.float() * config.max_ratio).long() + config.max_extra
    table = getattr(model.spec.positional, "max_len", None)
    return limits if table is None else limits.clamp(max=table - 1)


@torch.no_grad()
def greedy(model: Seq2Seq, src: Tensor, bos: int, eos: int, config: DecodeConfig = DecodeConfig()) -> list[list[int]]:
    """Most probable next token at each step, for a batch of sources (B, S)."""
    batch = src.size(0)
    limits = _limits(model, src, config)
    step = _Stepper(model, model.encode(src), src, config.use_cache)
    prefix = torch.full((batch, 1), bos, dtype=torch.long, device=src.device)
    done = torch.zeros(batch, dtype=torch.bool, device=src.device)
    for t in range(int(limits.max()) + 1):
        token = step(prefix).argmax(dim=-1)  # (B,)
        token = torch.where(done, torch.full_like(token, eos), token)
        token = torch.where(limits <= t, torch.full_like(token, eos), token)  # at the limit: stop
        prefix = torch.cat([prefix, token[:, None]], dim=1)
        done |= token.eq(eos)
        if bool(done.all()):
            break
    return [_strip(row, eos) for row in prefix[:, 1:].tolist()]


def _strip(ids: list[int], eos: int) -> list[int]:
    return ids[: ids.index(eos)] if eos in ids else ids


def length_penalty(length: int, alpha: float) -> float:
    """GNMT: ((5 + length) / 6) ** alpha."""
    return ((5.0 + length) / 6.0) ** alpha


@torch.no_grad()
def beam_search(model: Seq2Seq, src: Tensor, bos: int, eos: int,
                config: DecodeConfig = DecodeConfig(beam=4)) -> list[list[int]]:
    """Beam search over a batch of sources (B, S); the best finished hypothesis by GNMT-normalised score.

    Each step keeps the `beam` best continuations that do not end in EOS and moves those that do
    into the sentence's finished list, as fairseq does; a sentence is done when it has `beam`
    finished hypotheses, or at its length limit, where its live beams are finished as they are.
    With beam 1 this is greedy decoding.
    """
    beam, batch, device = config.beam, src.size(0), src.device
    limits = _limits(model, src, config).tolist()
    rows = torch.arange(batch, device=device).repeat_interleave(beam)  # (B * K,) source row of each beam
    step = _Stepper(model, model.encode(src).index_select(0, rows), src.index_select(0, rows), config.use_cache)
    prefix = torch.full((batch * beam, 1), bos, dtype=torch.long, device=device)
    scores = torch.full((batch, beam), float("-inf"), device=device)
    scores[:, 0] = 0.0  # all beams start identical: only the first may expand
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(batch)]
    active = list(range(batch))  # sentences still searching, in the order of the current rows
    for t in range(max(limits) + 1):
        log_probs = step(prefix)  # (A * K, V)
        vocab = log_probs.size(-1)
        candidates = (scores[:, :, None] + log_probs.view(len(active), beam, vocab)).view(len(active), -1)
        top_scores, top_ids = candidates.topk(min(2 * beam, candidates.size(-1)), dim=-1)  # (A, 2K)
        keep_rows, keep_tokens, keep_scores, still = [], [], [], []
        for a, sentence in enumerate(active):
            beams = prefix[a * beam: (a + 1) * beam, 1:]  # (K, t): this sentence's beams so far
            if t >= limits[sentence]:  # as greedy: no token beyond the limit, live beams end here
                for k in range(beam):
                    if scores[a, k] > float("-inf"):
                        _finish(finished[sentence], scores[a, k].item(), beams[k].tolist(), config.alpha)
                continue
            chosen = _continuations(top_scores[a].tolist(), top_ids[a].tolist(), vocab, eos, finished[sentence],
                                    beams, config)
            if len(finished[sentence]) >= beam or not chosen:
                continue
            still.append(sentence)
            for i in range(beam):  # fewer than `beam` continuations: fill with dead (-inf) copies
                score, k, token = chosen[min(i, len(chosen) - 1)]
                keep_rows.append(a * beam + k)
                keep_tokens.append(token)
                keep_scores.append(score if i < len(chosen) else float("-inf"))
        if not still:
            break
        index = torch.tensor(keep_rows, device=device)
        prefix = torch.cat([prefix.index_select(0, index), torch.tensor(keep_tokens, device=device)[:, None]], dim=1)
        scores = torch.tensor(keep_scores, device=device).view(len(still), beam)
        step.keep(index)
        active = still
    return [max(hyps, key=lambda h: h[0])[1] if hyps else [] for hyps in finished]


def _finish(finished: list[tuple[float, list[int]]], score: float, hyp: list[int], alpha: float) -> None:
    """Add a finished hypothesis to its sentence's list with its GNMT-normalised score."""
    finished.append((score / length_penalty(len(hyp), alpha), hyp))


def _continuations(top_scores: list[float], top_ids: list[int], vocab: int, eos: int,
                   finished: list[tuple[float, list[int]]], beams: Tensor, config: DecodeConfig
                   ) -> list[tuple[float, int, int]]:
    """A sentence's best continuations (score, beam, token), best first, that do not end in EOS: at most `beam`,
    and none once the sentence has `beam` finished hypotheses. Those ending in EOS on the way are finished (into
    `finished`); `top_scores` and `top_ids` are its best candidates over beam x vocabulary, `beams` its beams."""
    chosen: list[tuple[float, int, int]] = []
    for score, flat in zip(top_scores, top_ids):
        k, token = divmod(flat, vocab)
        if score == float("-inf") or len(finished) >= config.beam or len(chosen) == config.beam:
            break
        if token == eos:
            _finish(finished, score, beams[k].tolist(), config.alpha)
        else:
            chosen.append((score, k, token))
    return chosen


def decode(model: Seq2Seq, src: Tensor, bos: int, eos: int, config: DecodeConfig = DecodeConfig()) -> list[list[int]]:
    return greedy(model, src, bos, eos, config) if config.beam == 1 else beam_search(model, src, bos, eos, config)
