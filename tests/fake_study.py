"""A fabricated study whose right answers are known by construction, for the report's tests.

One task (copy, exact match, 1000 test sentences), six seeds per variant:

    linear   (baseline)  60 62 61 59 63, seed 5 stalled (valid exact match 2 < floor 5)
    conv1d   placebo     61 60 62 60 61 62         same function as linear, trained alike
    prenorm  better      99 98 99 97 98 99
    masked   collapsed   linear's records, bit for bit (another mask convention: same numbers)
    warm     unstable    seeds 0-3 diverged, 4 and 5 at 80 81: too few trained seeds for a verdict

`write_study(folder)` writes the experiment file and every record; tests/conftest.py serves it to the tests as
the `fake` and `report` fixtures.
"""

from __future__ import annotations

from pathlib import Path

from zoo.experiment import load_experiment
from zoo.experiment import record as records
from zoo.report.collect import record_path
from zoo.report.growth import fabricated

EXPERIMENT = """
name = "fake"
seeds = [0, 1, 2, 3, 4, 5]
baseline = "linear"
shared = {d_model = 32, n_heads = 4, d_ff = 64, encoder_layers = 1, decoder_layers = 1}

[[variants]]
label = "linear"
base = "paper-base"
[[variants]]
label = "conv1d"
base = "paper-base"
set = {"ffn.kind" = "conv1d"}
[[variants]]
label = "prenorm"
base = "paper-base"
set = {"residual.kind" = "pre-norm"}
[[variants]]
label = "masked"
base = "paper-base"
set = {"mask.convention" = "int-keep"}
[[variants]]
label = "warm"
base = "paper-base"
train = {warmup = 0}

[[tasks]]
name = "copy"
options = {symbols = 8, min_len = 2, max_len = 4}
threshold = 50.0
margin = 5.0

[train]
steps = 400

[[findings]]
kind = "direction"
variant = "prenorm"
expect = "better"
claim = "pre-norm learns copy better"
source = "Fake et al. 2024, Known Answers"
published = "+30 exact-match points (Table 1)"
effect = 30.0
[[findings]]
kind = "direction"
variant = "prenorm"
expect = "worse"
claim = "pre-norm learns copy worse"
source = "Contrarian 2023"
[[findings]]
kind = "equivalence"
variant = "conv1d"
expect = "equivalent"
claim = "Conv1d and Linear feed-forwards train to the same quality"
source = "Vaswani et al. 2017, section 3.3"
[[findings]]
kind = "same-function"
variant = "conv1d"
expect = "same function"
claim = "a kernel-1 Conv1d is a Linear layer"
source = "Vaswani et al. 2017, section 3.3"
[[findings]]
kind = "direction"
variant = "prenorm"
expect = "better"
claim = "needs more seeds than we have"
source = "Greedy 2025"
regime = {min_seeds = 10}
[[findings]]
kind = "failure-rate"
variant = "warm"
expect = "more failures"
claim = "without warmup, training fails more often"
source = "Xiong et al. 2020"
"""

VALUES = {
    "linear": [60, 62, 61, 59, 63, 40],
    "conv1d": [61, 60, 62, 60, 61, 62],
    "prenorm": [99, 98, 99, 97, 98, 99],
    "warm": [None, None, None, None, 80, 81],
}
SENTENCES = 1000


def fabricate(experiment, root: Path, variant: str, seed: int, value: float | None, source: str | None = None,
              valid: float | None = None, steps: int = 400, task_index: int = 0) -> None:
    """A record of cell (variant, task, seed) as `zoo run` would write it, with test exact match `value`
    (None: diverged); `source` names the variant whose definition it claims (for bit-identical copies)."""
    record = fabricated(experiment, variant, seed, value, task_index=task_index, valid=valid, steps=steps,
                        label=source, sentences=SENTENCES)
    records.write(record_path(root, variant, experiment.config.tasks[task_index].key, seed), record)


def write_study(folder: Path):
    """The fabricated experiment, loaded from `folder`/fake.toml, and its records' folder."""
    path = folder / "fake.toml"
    path.write_text(EXPERIMENT)
    experiment = load_experiment(path)
    root = folder / "out" / "records"
    for variant, values in VALUES.items():
        for seed, value in enumerate(values):
            fabricate(experiment, root, variant, seed, value, valid=2.0 if (variant, seed) == ("linear", 5) else None)
    for seed, value in enumerate(VALUES["linear"]):  # masked: linear's numbers, bit for bit
        fabricate(experiment, root, "masked", seed, value, source="linear",
                  valid=2.0 if seed == 5 else None)
    return experiment, root
