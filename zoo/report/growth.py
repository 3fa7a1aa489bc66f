"""How the cost of `zoo report` grows with a grid: a benchmark, not a test.

    python -m zoo.report.growth 5 10 20 50      # variants; 5 seeds each, one synthetic task

For each size it writes an experiment of that many variants (paper-base at d_model 32 with a different
dropout each, so no two compute the same function), fabricates a complete record for every cell (a test
exact match drawn per cell, with the per-sentence statistics that give it, as `zoo run` would write them)
and times `zoo report` on them in a fresh process, with its peak memory. The report's parts grow differently:
the per-task analysis and the plots with the records, the equivalence matrix with the square of the variants
(every ordered pair is checked by transplant), which this benchmark shows.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np

from zoo.experiment import load_experiment, store
from zoo.experiment import record as records
from zoo.report.collect import record_path

SENTENCES = 500
SEEDS = 5
VOCAB = 12  # the copy task's, 8 symbols and 4 specials, as a trained record's fitted spec has it
EXPERIMENT = """
name = "growth"
seeds = {seeds}
baseline = "v0"
shared = {{d_model = 32, n_heads = 4, d_ff = 64, encoder_layers = 1, decoder_layers = 1}}
{variants}
[[tasks]]
name = "copy"
options = {{symbols = 8, min_len = 2, max_len = 4}}
threshold = 50.0
margin = 5.0

[train]
steps = 400
"""


def fabricated(experiment, variant: str, seed: int, value: float | None, *, task_index: int = 0,
               valid: float | None = None, steps: int | None = None, label: str | None = None,
               sentences: int = 1000, vocab: int | None = None) -> records.Record:
    """A record of cell (variant, task, seed) as `zoo run` would write it, with test exact match `value` (None: a
    diverged run), its per-sentence statistics giving that value (shuffled by `label`, default the variant: two
    cells of one label and seed get the very same record), and `steps` set in its definition when given. Its spec
    is the variant's, with both vocabularies `vocab` where given (a trained record's spec is fitted to its task)."""
    task, label = experiment.config.tasks[task_index], label or variant
    definition = store.definition(experiment, variant, task, seed)
    if steps is not None:
        definition["train"]["steps"] = steps
    head = records.base({"experiment": experiment.name, "variant": variant, "task": task.key, "seed": seed},
                        definition, store.digest(definition), 1).model_dump()
    spec = experiment.specs[variant]
    spec = (spec if vocab is None else spec.with_overrides({"src_vocab": vocab, "tgt_vocab": vocab})).model_dump(
        mode="json")
    if value is None:
        return records.Record.model_validate({
            **head, "status": "diverged", "reason": "diverged at step 7", "summary": {"steps": 7}, "spec": spec,
            "final": None, "curves": {"train": {"step": [1], "loss": [9.0], "nll": [9.5]}, "eval": {}}})
    final = value if valid is None else valid
    hits = round(value * sentences / 100)
    matches = [1] * hits + [0] * (sentences - hits)
    np.random.default_rng(zlib.crc32(f"{label}/{seed}".encode())).shuffle(matches)  # the same in every process
    steps = steps or 400
    return records.Record.model_validate({
        **head, "status": "complete", "reason": "",
        "summary": {"parameters": 1000 + (label == "prenorm"), "steps": steps, "tokens": 8000, "train_seconds": 10.0,
                    "device": "cpu"},
        "spec": spec, "final": {"exact_match": final, "valid_ppl": 2.0 + seed / 10, "valid_loss": 1.0},
        "curves": {"train": {"step": [1, 2], "loss": [3.0, 2.0 + seed / 100], "nll": [2.5, 1.5 + seed / 100]},
                   "eval": {"step": [100, 200, 300, 400], "exact_match": [final / 4, final / 2, final * 0.9, final]}},
        "test": {"exact_match": float(value), "token_accuracy": float(value), "ppl": 2.0},
        "hypotheses": [f"h{i}" for i in range(sentences)], "sentences": {"exact_match": matches}, "signatures": {}})


def grid(folder: Path, variants: int) -> Path:
    """The experiment file of `variants` variants and their fabricated records under folder/records."""
    blocks = "".join(f'\n[[variants]]\nlabel = "v{i}"\nbase = "paper-base"\nset = {{dropout = {0.05 + i / 1000:.3f}}}\n'
                     for i in range(variants))
    path = folder / "growth.toml"
    path.write_text(EXPERIMENT.format(seeds=list(range(SEEDS)), variants=blocks))
    experiment = load_experiment(path)
    rng = np.random.default_rng(0)
    for variant, task, seed in experiment.grid():
        record = fabricated(experiment, variant, seed, float(rng.integers(40, 90)), sentences=SENTENCES, vocab=VOCAB)
        records.write(record_path(folder / "out" / "records", variant, task.key, seed), record)
    return path


def timed_report(path: Path) -> dict[str, float]:
    """Seconds and peak memory (MiB) of `zoo report` on the grid, in a process of its own."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "zoo", "report", str(path), "--out", str(path.parent / "out")],
                   check=True, capture_output=True)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "peak_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("variants", type=int, nargs="+", help="grid sizes, in variants (5 seeds each)")
    args = parser.parse_args(argv)
    for variants in args.variants:
        with tempfile.TemporaryDirectory() as folder:
            measured = timed_report(grid(Path(folder), variants))
        print(json.dumps({"variants": variants, "records": variants * SEEDS, **measured}), flush=True)


if __name__ == "__main__":
    main()
