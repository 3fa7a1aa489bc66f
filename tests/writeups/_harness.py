"""Plumbing shared by the writeup references and their tests; knows nothing about any one writeup.

- `tap(module)`: records the arguments of a module's first call, so a test can read the masks a
  reference really hands its blocks instead of re-deriving them beside the reference's code.
- `random_batch`: right-padded token batches like the writeups' collate functions produce.
- `load_canonical`: copies zoo's canonical weights into a reference through a declared name map,
  and proves the map is complete in both directions.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Iterator

import torch
from torch import nn

Tensor = torch.Tensor

# reference parameter name -> canonical zoo names concatenated (dim 0) to fill it, or None for a
# parameter that is not a learned weight (001's frozen sinusoid table keeps its own value)
CanonicalMap = dict[str, "tuple[str, ...] | None"]


@dataclass
class Tap:
    """The positional and keyword arguments of the first call of the tapped module."""

    args: tuple = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    called: bool = False


@contextlib.contextmanager
def tap(module: nn.Module) -> Iterator[Tap]:
    """Record what `module` is first called with while the block runs (a forward pre-hook)."""
    record = Tap()

    def hook(_module, args, kwargs):
        if not record.called:
            record.args, record.kwargs, record.called = args, dict(kwargs), True

    handle = module.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        yield record
    finally:
        handle.remove()
    assert record.called, f"{type(module).__name__} was never called"


def random_batch(vocab_src: int, vocab_tgt: int, pad_id: int, generator: torch.Generator, *,
                 batch: int = 5, src_len: int = 9, tgt_len: int = 7) -> tuple[Tensor, Tensor]:
    """Right-padded src (B, S) and tgt_in (B, T): no pad inside a row, no fully padded row.

    The first row is full length, as a batch padded to its longest sequence is (001's positional
    lookup needs that: it pads positions only up to the longest length). S != T so that a mask
    built with source and target swapped cannot pass by accident.
    """

    def tokens(vocab: int, length: int) -> Tensor:
        ids = torch.randint(0, vocab - 1, (batch, length), generator=generator)
        ids = ids + (ids >= pad_id).long()  # any id but pad_id, uniformly
        lengths = torch.randint(1, length + 1, (batch,), generator=generator)
        lengths[0] = length
        return ids.masked_fill(torch.arange(length)[None, :] >= lengths[:, None], pad_id)  # (B, L)

    return tokens(vocab_src, src_len), tokens(vocab_tgt, tgt_len)


def _storage_key(tensor: Tensor) -> tuple:
    return tensor.data_ptr(), tuple(tensor.shape), tuple(tensor.stride())


def load_canonical(reference: nn.Module, canonical: dict[str, Tensor], mapping: CanonicalMap) -> None:
    """Write zoo's canonical weights into `reference` as `mapping` says.

    Checked on the way: every reference parameter (each alias of a tied one) has an entry, every
    entry names a real parameter, and every zoo weight is read by some entry (a zoo weight shared
    under several canonical names counts once), so no weight on either side is left out; a weight
    tied in the reference must receive one value under all its names.
    """
    params = dict(reference.named_parameters(remove_duplicate=False))
    assert set(mapping) == set(params), (
        f"unmapped reference parameters: {sorted(set(params) - set(mapping))}; "
        f"entries naming no parameter: {sorted(set(mapping) - set(params))}"
    )
    wanted = {s for sources in mapping.values() if sources is not None for s in sources}
    assert wanted <= set(canonical), f"zoo has no weights named {sorted(wanted - set(canonical))}"
    read: set[tuple] = set()
    written: dict[tuple, tuple[str, Tensor]] = {}  # reference storage -> first name and value written
    with torch.no_grad():
        for name, sources in mapping.items():
            if sources is None:
                continue
            value = torch.cat([canonical[s] for s in sources])  # e.g. q, k, v (D, D) each -> (3D, D)
            value = value.reshape(params[name].shape)  # e.g. zoo's (F, D) -> Conv1d's (F, D, 1)
            key = _storage_key(params[name])
            if key in written:  # a tied weight: zoo must hold one value under all its names
                first, earlier = written[key]
                assert torch.equal(earlier, value), f"{name} is tied to {first} in the writeup; zoo's values differ"
            written.setdefault(key, (name, value.clone()))
            params[name].copy_(value)
            read.update(_storage_key(canonical[s]) for s in sources)
    unread = [n for n, t in canonical.items() if _storage_key(t) not in read]
    assert not unread, f"zoo weights with no counterpart in the reference: {unread}"
