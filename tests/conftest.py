"""Shared helpers: tiny specs and random right-padded batches.

`tiny(name, **overrides)` shrinks a preset to d_model 32, 4 heads, d_ff 64, 2 + 2 layers and a
40-token vocabulary on both sides (paper-base ties its embeddings, so src_vocab must equal
tgt_vocab). Dotted overrides are passed as `tiny(**{"ffn.kind": "conv1d"})`.
"""

from __future__ import annotations

import os

import pytest
import torch
from fake_study import write_study
from hypothesis import settings

import zoo
from zoo.equivalence import random_batch
from zoo.report import analyse

# The fuzz and property tests draw the same examples on every run, so that a red CI names a bug in the change and
# not a new draw: a draw that found positional.max_len = 10^40 overflowing failed one CI run and passed the next.
# ZOO_FUZZ=explore draws new examples each run (and keeps failing ones in .hypothesis/), to look for more.
settings.register_profile("suite", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile("explore" if os.environ.get("ZOO_FUZZ") == "explore" else "suite")

# Tiny tensors gain nothing from intra-op threads, and on a small shared machine they oversubscribe.
torch.set_num_threads(1)

VOCAB = 40
TINY = {
    "d_model": 32,
    "n_heads": 4,
    "d_ff": 64,
    "encoder_layers": 2,
    "decoder_layers": 2,
    "src_vocab": VOCAB,
    "tgt_vocab": VOCAB,
}



def make_tiny(name: str = "paper-base", **overrides) -> zoo.ModelSpec:
    """A small version of preset `name`; `overrides` (dotted keys allowed) win over the tiny sizes."""
    return zoo.load_spec(name, {**TINY, **overrides})


def make_batch(spec: zoo.ModelSpec, seed: int = 0, batch: int = 4, max_len: int = 7,
               fully_padded_rows: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Random right-padded (src, tgt_in) for `spec`; the first row is full length."""
    generator = torch.Generator().manual_seed(seed)
    return random_batch(spec, generator, batch=batch, max_len=max_len, fully_padded_rows=fully_padded_rows)


def switch(slot: str, name: str) -> dict[str, str]:
    """The override that selects implementation `name` for `slot` ('kind', or 'convention' for masks)."""
    return {f"{slot}.{zoo.registry.slot(slot).key}": name}


@pytest.fixture
def tiny():
    return make_tiny


@pytest.fixture
def batch():
    return make_batch


@pytest.fixture(scope="session")
def fake(tmp_path_factory):
    """The fabricated study of tests/fake_study.py: (experiment, records folder). Tests copy it before changing it."""
    return write_study(tmp_path_factory.mktemp("fake"))


@pytest.fixture(scope="session")
def report(fake):
    """The fabricated study's analysis, as `zoo report` computes it."""
    return analyse(*fake)


def tiny_experiment(name: str, seeds: tuple[int, ...] = (0,), plugin: str = "", ffn: str = "", steps: int = 4,
                    train_size: int = 100, label: str = "") -> str:
    """An experiment file's text: one variant (paper-base at d_model 16, 1 + 1 layers; its FFN `ffn` when given,
    from `plugin`; labelled `label`, else by its FFN) on a small copy task, a few steps of training: seconds per
    cell, for tests of the grid."""
    plugins = f'plugins = ["{plugin}"]\n' if plugin else ""
    override = f'set = {{"ffn.kind" = "{ffn}"}}\n' if ffn else ""
    small = max(8, train_size // 10)
    sizes = f"train_size = {train_size}, valid_size = {small}, test_size = {small}"
    return f"""
name = "{name}"
seeds = {list(seeds)}
{plugins}shared = {{d_model = 16, n_heads = 2, d_ff = 32, encoder_layers = 1, decoder_layers = 1}}

[[variants]]
label = "{label or ffn or 'post-norm'}"
base = "paper-base"
{override}
[[tasks]]
name = "copy"
options = {{symbols = 6, min_len = 2, max_len = 4, {sizes}}}

[train]
steps = {steps}
batch_tokens = {64 if train_size < 100 else 128}
warmup = 1
eval_interval = 2
eval_sentences = {small}
checkpoint_interval = 2
device = "cpu"
threads = 1
"""


def ffn_plugin(name: str, forward: str = "return self.w(x)", prelude: str = "", init: str = "") -> str:
    """The source of a plugin file registering ffn.`name`: a FeedForward with one Linear `w`, whose forward runs
    `forward` (its body, unindented) after `init` ran in __init__; `prelude` goes at module level (imports, helpers).
    What a user would write from examples/, for tests of what zoo does with a plugin's code."""
    def body(code: str) -> str:
        return "".join(f"        {line}\n" if line else "\n" for line in code.strip("\n").splitlines())

    return f'''
import os
import signal
import sys

from torch import nn

from zoo import register
from zoo.components.ffn import FeedForward, FFNParams
{prelude}

@register("ffn", "{name}", params=FFNParams)
class Plugged(FeedForward):
    def __init__(self, d_model, d_ff, params, dropout):
        super().__init__(d_model, d_ff, params, dropout)
        self.w = nn.Linear(d_model, d_model)
{body(init)}
    def forward(self, x):
{body(forward)}'''
