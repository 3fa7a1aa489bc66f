"""The committed records reproduce: the first training steps of each committed cell, re-run with
today's code, log the numbers its record holds.

The README promises that a fresh clone on the machine the records were made on (same CPU model,
same PyTorch) reproduces them number for number. A change that moves any float of training (a fused
loss, a reordered sum, another initialisation order) breaks that promise without failing any other
test: gradients that differ by 1e-8 end a 500-step run a point of exact match away. So this test
re-trains the first STEPS steps (to the record's next logged line) of one seed of every variant on each
study's synthetic tasks and compares the logged loss, NLL, gradient norm and learning rate exactly: the
first seed made on this kind of machine, else the first seed. On other hardware (another CPU model or
instruction set) or another PyTorch the kernels differ, and the test skips (a study whose seeds trained on a GPU
and on this CPU is checked here on its CPU seeds).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from zoo.data import load_task
from zoo.experiment import store
from zoo.experiment.config import load_experiment
from zoo.machine import cpu_model
from zoo.train import Trainer, fit_to_task

ROOT = Path(__file__).resolve().parents[1]
STEPS = 8
LOGGED = ("loss", "nll", "grad_norm", "lr", "tokens")
pytestmark = pytest.mark.slow  # about 50 cells of a second each


class _Enough(Exception):
    """Raised inside the training loop once STEPS steps are logged."""


# The instruction set of the records made before provenance named it (367 CPU records, all 'AMD EPYC', torch
# 2.13.0+cpu). Every committed CPU record that names it says AVX512; CI reproduced the unnamed ones bit for bit on
# AVX-512 machines until 2026-11-28, and on the first AVX2 machine (an AMD EPYC too) not one of the 58 cells this
# test re-ran matched its first steps. So they were made on AVX-512, and an AVX2 machine skips them.
UNNAMED_CAPABILITY = "AVX512"


def elsewhere(record: dict) -> dict[str, tuple[str, str]]:
    """What of the machine that made `record` differs from this one."""
    made_on = {"cpu_capability": UNNAMED_CAPABILITY, **record["provenance"]}
    here = {"cpu": cpu_model(), "torch": torch.__version__, "cpu_capability": torch.backends.cpu.get_cpu_capability()}
    return {key: (made_on[key], value) for key, value in here.items() if made_on.get(key, value) != value}


def test_records_that_name_their_instruction_set_on_a_cpu_name_the_one_assumed_for_the_rest():
    """The assumption above holds only while every CPU record that names its instruction set names AVX512: a record
    made elsewhere breaks it here, not by a silent skip."""
    named = set()
    for path in (ROOT / "reports").glob("*/records/**/seed-*.json"):
        record = json.loads(path.read_text())
        if (record.get("summary") or {}).get("device") == "cpu" and record["provenance"].get("cpu_capability"):
            named.add(record["provenance"]["cpu_capability"])
    assert named == {UNNAMED_CAPABILITY}


def committed_cells():
    for path in sorted((ROOT / "experiments").glob("*.toml")):
        experiment = load_experiment(path)
        folder = ROOT / "reports" / experiment.name / "records"
        for entry in experiment.config.tasks:
            if entry.task_class.kind != "synthetic":
                continue
            for variant in experiment.specs:
                records = [folder / store.cell_part(variant, entry.key, seed).with_suffix(".json")
                           for seed in experiment.config.seeds]
                records = [record for record in records if record.exists()]
                if records:
                    here = next((r for r in records if not elsewhere(json.loads(r.read_text()))), records[0])
                    yield pytest.param(path, variant, entry.key, here, id=f"{experiment.name}/{variant}/{entry.key}")


@pytest.mark.parametrize(("path", "variant", "task_key", "record_path"), list(committed_cells()))
def test_committed_record_reproduces_its_first_steps(path, variant, task_key, record_path, tmp_path, monkeypatch):
    record = json.loads(record_path.read_text())
    differs = elsewhere(record)
    if differs:
        pytest.skip("made elsewhere: " + ", ".join(f"{key} {then!r}, here {now!r}"
                                                   for key, (then, now) in differs.items()))
    experiment = load_experiment(path)
    entry = next(t for t in experiment.config.tasks if t.key == task_key)
    seed = record["cell"]["seed"]
    changed = store.changes(record["definition"], store.definition(experiment, variant, entry, seed))
    assert not changed, f"the record is stale (zoo run would re-run it): {changed}"

    # Records made before the log interval was honoured hold a line per step: re-run with the record's own
    # spacing (logging never changes the training numbers), up to its first line at or past STEPS.
    committed = record["curves"]["train"]
    until = next(step for step in committed["step"] if step >= STEPS)
    real_step = Trainer._step

    def step_until_enough(self, model, optimizer, group, pos):
        if pos.step == until:
            raise _Enough
        return real_step(self, model, optimizer, group, pos)

    monkeypatch.setattr(Trainer, "_step", step_until_enough)
    spec = experiment.specs[variant]
    task = load_task(experiment.task_config(entry), pad_id=spec.pad_id)
    config = experiment.train_config(entry, seed, variant).model_copy(update={"log_interval": committed["step"][0]})
    with pytest.raises(_Enough):
        Trainer(fit_to_task(spec, task), task, config, tmp_path, progress=False).run()
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    now = [{key: row[key] for key in LOGGED} for row in rows if "loss" in row and "event" not in row]
    then = [{key: committed[key][i] for key in LOGGED} for i, step in enumerate(committed["step"]) if step <= until]
    assert now == then, (f"{record_path.relative_to(ROOT)}: today's code trains this cell differently from the "
                         "code that made the record (see its provenance commit)")
