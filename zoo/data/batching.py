"""Token-count batching (fairseq's --max-tokens) and padding a batch into tensors.

A fixed number of sentences per batch wastes memory on short sentences and overflows it on long
ones; capping padded tokens keeps every step about the same cost. A batch's cost is
B x max(longest source, longest target), the larger of its two padded tensors. Sorting by length
before chunking keeps padding low; shuffling the order of the finished batches keeps training
from seeing lengths in order.
"""

from __future__ import annotations

import random

import torch
from torch import Tensor

from zoo.errors import DataError


def token_batches(lengths: list[tuple[int, int]], max_tokens: int, *, seed: int, epoch: int,
                  shuffle: bool = True) -> list[list[int]]:
    """Indices into `lengths` grouped so that len(batch) * max(src_len, tgt_len) <= max_tokens.

    `lengths[i]` is (len(src ids), len(tgt ids)) of example i. Examples are sorted by
    (src_len, tgt_len), ties broken by a generator seeded by (seed, epoch), chunked greedily,
    and the batches shuffled by the same generator: the same (seed, epoch) gives the same
    batches, another epoch other ones. Every index appears exactly once; an example longer than
    max_tokens on its own still gets a batch of one. shuffle=False sorts with ties in index order
    and keeps the batches in length order: deterministic, for evaluation.
    """
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise DataError(f"max_tokens: expected a positive integer, got {max_tokens!r}")
    if shuffle:
        rng = random.Random(f"zoo-batches:{seed}:{epoch}")
        tie = [rng.random() for _ in lengths]
        order = sorted(range(len(lengths)), key=lambda i: (lengths[i][0], lengths[i][1], tie[i]))
    else:
        order = sorted(range(len(lengths)), key=lambda i: (lengths[i][0], lengths[i][1], i))

    batches: list[list[int]] = []
    batch: list[int] = []
    longest = 0
    for i in order:
        size = max(lengths[i])
        if batch and max(longest, size) * (len(batch) + 1) > max_tokens:
            batches.append(batch)
            batch, longest = [], 0
        batch.append(i)
        longest = max(longest, size)
    if batch:
        batches.append(batch)
    if shuffle:
        rng.shuffle(batches)
    return batches


def collate(examples: list[tuple[list[int], list[int]]], pad: int) -> tuple[Tensor, Tensor, Tensor]:
    """Right-padded (src, tgt_in, tgt_out) from (src ids, tgt ids) pairs, all int64.

    Shape: src (B, S); tgt_in (B, T) = tgt[:-1] (starts with bos); tgt_out (B, T) = tgt[1:]
    (ends with eos): position t of tgt_in predicts position t of tgt_out. In a row shorter than
    T, tgt_in may hold the eos where tgt_out holds pad; a loss that ignores pad ignores it.
    """
    if not examples:
        raise ValueError("collate: no examples")
    if any(len(tgt) < 2 for _, tgt in examples):
        raise ValueError("collate: every target needs at least [bos, eos]")
    S = max(len(src) for src, _ in examples)
    T1 = max(len(tgt) for _, tgt in examples)  # T + 1
    src = torch.tensor([list(s) + [pad] * (S - len(s)) for s, _ in examples], dtype=torch.long)  # (B, S)
    tgt = torch.tensor([list(t) + [pad] * (T1 - len(t)) for _, t in examples], dtype=torch.long)  # (B, T + 1)
    return src, tgt[:, :-1].contiguous(), tgt[:, 1:].contiguous()  # (B, S), (B, T), (B, T)
