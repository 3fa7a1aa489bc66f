"""Each preset starts its weights tied as its writeup's `make_model` ties them.

`test_writeups` loads zoo's weights into the references, so it proves the function and cannot see
the initialisation. Here the writeup's own code initialises one reference, zoo's starting weights
are loaded into a second through the same name map, and the two must hold the same pairs of equal
parameters. The values are random on both sides and are not compared; which parameters start
identical (layers deep-copied from one, zeroed biases, unit gains) is the initialisation's
structure, and a random draw never repeats. 000 is checked as written: `ref000` keeps the shared
prototypes its code has, a slip `writeup-000` fixes (tests/writeups/test_slips.py).
"""

from __future__ import annotations

import pytest
import torch

import zoo
from zoo.proofs.equivalence import canonical_state

from . import ref000, ref001, ref002, ref003, ref004
from ._harness import load_canonical

STARTS = {"writeup-000-as-written": ref000, "writeup-001": ref001, "writeup-002": ref002,
          "writeup-003": ref003, "writeup-004": ref004, "writeup-004-as-written": ref004}
SMALL = {"d_model": 32, "n_heads": 4, "d_ff": 64, "encoder_layers": 3, "decoder_layers": 3,
         "src_vocab": 50, "tgt_vocab": 50}


def equal_pairs(module: torch.nn.Module, mapping) -> set[frozenset[str]]:
    """Pairs of learned parameters, by the reference's names, that hold the same values."""
    params = [(name, p.detach()) for name, p in module.named_parameters() if mapping[name] is not None]
    return {frozenset((a, b)) for i, (a, x) in enumerate(params) for b, y in params[i + 1:]
            if x.shape == y.shape and torch.equal(x, y)}


@pytest.mark.parametrize("preset", STARTS)
def test_same_starting_ties(preset):
    ref = STARTS[preset]
    spec = zoo.load_spec(preset, SMALL)
    mapping = ref.canonical_map(spec)
    torch.manual_seed(0)
    theirs = equal_pairs(ref.make(spec), mapping)
    ours_loaded = ref.make(spec)
    load_canonical(ours_loaded, canonical_state(zoo.build(spec, seed=0)), mapping)
    ours = equal_pairs(ours_loaded, mapping)
    assert theirs, "every writeup starts some parameters equal (unit gains at least)"
    assert theirs == ours, (f"equal in the writeup, not in zoo: {sorted(map(sorted, theirs - ours))[:4]}; "
                            f"in zoo, not in the writeup: {sorted(map(sorted, ours - theirs))[:4]}")
