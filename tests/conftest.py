"""Shared helpers: tiny specs and random right-padded batches.

`tiny(name, **overrides)` shrinks a preset to d_model 32, 4 heads, d_ff 64, 2 + 2 layers and a
40-token vocabulary on both sides (paper-base ties its embeddings, so src_vocab must equal
tgt_vocab). Dotted overrides are passed as `tiny(**{"ffn.kind": "conv1d"})`.
"""

from __future__ import annotations

import os
from pathlib import Path

# zoo's consoles are built when zoo is imported, and rich keeps a COLUMNS it finds then for good: an inherited
# COLUMNS (pytest-xdist's workers get 80; a shell may export its own) would pin every console, and the tests that
# set the width they print at (test_terminal, test_cli) would print at another. Without it, a console reads the
# width each time it prints, as in a `zoo` process.
for _pinned in ("COLUMNS", "LINES"):
    os.environ.pop(_pinned, None)

import pytest
import torch
from fake_study import write_study
from hypothesis import settings

import zoo
from zoo.proofs.equivalence import random_batch
from zoo.report import analyse

# The fuzz and property tests draw the same examples on every run, so that a red CI names a bug in the change and
# not a new draw: a draw that found positional.max_len = 10^40 overflowing failed one CI run and passed the next.
# ZOO_FUZZ=explore draws new examples each run (and keeps failing ones in .hypothesis/), to look for more.
settings.register_profile("suite", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile("explore" if os.environ.get("ZOO_FUZZ") == "explore" else "suite")

# Tiny tensors gain nothing from intra-op threads, and on a small shared machine they oversubscribe.
torch.set_num_threads(1)

# The development corpora (multi30k, wmt-ende-10k) live outside the repository, in ../shared/data beside the project
# root, or in $ZOO_DATA_DIR. A user's clone has no ../shared: every test that reads them takes the `corpora` fixture,
# which skips it, with the reason, where they are absent (CI has them and runs every such test).
CORPORA = Path(os.environ.get("ZOO_DATA_DIR") or Path(__file__).resolve().parents[1].parent / "shared" / "data")

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


@pytest.fixture(autouse=True)
def _plugins_loaded_by_a_test_end_with_it():
    """A plugin a test loads stays loaded in this process, and every later grid carries the loaded plugins to its
    workers (Cell.plugins): the fuzzed plugins of test_fuzz_plugins, run before test_devices, made a Ray worker of
    the latter refuse two plugins registering one name. Each test ends with the plugins loaded before it, and the
    modules noted as they ran (zoo/experiment/executed.py), which every later cell of a plugin would record."""
    from zoo import plugins
    from zoo.experiment import executed

    before, noted = dict(plugins._loaded), dict(executed._noted)
    yield
    plugins._loaded.clear()
    plugins._loaded.update(before)
    executed._noted.clear()
    executed._noted.update(noted)


@pytest.fixture(scope="session")
def corpora():
    """`corpora(*names)`: the folder holding the development corpora `names`, or a skip of the test (or of every test
    using a fixture that asked) naming the missing ones and where they were looked for."""

    def folder(*names: str) -> Path:
        missing = [name for name in names if not (CORPORA / name).is_dir()]
        if missing:
            pytest.skip(f"development corpora {', '.join(missing)} not found in {CORPORA} "
                        "(../shared/data beside the project, or set ZOO_DATA_DIR to their folder)")
        return CORPORA

    return folder


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
