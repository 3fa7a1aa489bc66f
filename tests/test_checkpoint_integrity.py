"""A checkpoint is resumed only if it is this run's, intact, and agrees with the run's log (issue 56).

Each case starts from one cell of the smoke grid (its post-norm variant alone) killed during step 25, its last
checkpoint at step 20, then spoils that state as the issue did: another seed's checkpoint copied in, a flipped
bit, an edited step. The cell must say so in one line, move the checkpoint and its log aside, train from step 0
and record exactly what the uninterrupted cell records; an untouched checkpoint must still resume.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file
from smoke_runs import SMOKE, TRAIN, comparable, experiment_file, run

from zoo import rundir
from zoo.cli import main
from zoo.experiment import load_experiment, store
from zoo.experiment.cell import execute
from zoo.experiment.grid import cells
from zoo.train import RunError, TrainConfig, Trainer
from zoo.train import checkpoint as checkpoints

ONE_VARIANT = {'[[variants]]\nlabel = "pre-norm"\nbase = "paper-base"\nset = {"residual.kind" = "pre-norm"}\n': ""}
assert next(iter(ONE_VARIANT)) in SMOKE


def cell_of(root, seed):
    experiment = load_experiment(root / "smoke.toml")
    return next(c for c in cells(experiment, root / "runs", root / "records") if c.seed == seed)


def record_of(cell):
    """The cell's record without what differs between two runs of it (timings, and the digest that covers them)."""
    return {k: v for k, v in comparable(json.loads(cell.record.read_text())).items() if k != "digest"}


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    """The one-variant smoke grid, uninterrupted: seeds 0 and 1."""
    root = tmp_path_factory.mktemp("whole")
    run(experiment_file(root, **ONE_VARIANT), root)
    return root


@pytest.fixture(scope="module")
def killed(tmp_path_factory):
    """Seed 0's cell of that grid, killed during step 25: a checkpoint at step 20, metric lines up to it."""
    root = tmp_path_factory.mktemp("killed")
    experiment_file(root, **ONE_VARIANT)
    real = Trainer._step

    def step(self, model, optimizer, group, pos):
        if pos.step == 24:
            raise KeyboardInterrupt
        return real(self, model, optimizer, group, pos)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Trainer, "_step", step)
        with pytest.raises(KeyboardInterrupt):
            execute(cell_of(root, 0))
    assert checkpoints.load(cell_of(root, 0).out / checkpoints.FILE).position["step"] == 20
    return root


@pytest.fixture
def cell(killed, tmp_path):
    """A fresh copy of the killed cell to spoil."""
    shutil.copytree(killed, tmp_path / "store")
    return cell_of(tmp_path / "store", 0)


def rewrite(path, position=None, tensors=None, sign=False):
    """Write the checkpoint at `path` again with position fields or tensors replaced; with `sign`, under a content
    hash of the new content, as a zoo that wrote wrong state would."""
    with safe_open(str(path), framework="pt") as file:
        old = json.loads(file.metadata()["zoo"])
        content = {name: file.get_tensor(name) for name in file.keys()}  # noqa: SIM118
    new = {**old, "position": {**old["position"], **(position or {})}}
    content.update(tensors or {})
    if sign:
        new["content_hash"] = checkpoints.content_hash(content, new)
    save_file(content, str(path), metadata={"zoo": json.dumps(new)})


def restarted(cell, capsys, says):
    """Run the spoiled cell; check that it said `says` in one line naming its checkpoint, moved that and its log to
    where stale cells go, and trained from step 0; returns its record."""
    path = cell.out / checkpoints.FILE
    assert execute(cell) == ("complete", "")
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err and says in err, err
    assert "training seed 0 from step 0" in err
    aside = list((Path(cell.runs_root) / store.STALE).glob("*/post-norm/copy/seed-0"))
    assert len(aside) == 1 and f"moved to {aside[0]}/" in err
    assert sorted(p.name for p in aside[0].iterdir()) == [checkpoints.FILE, rundir.METRICS]
    return record_of(cell)


def test_another_seeds_checkpoint_is_not_resumed(cell, whole, capsys):
    shutil.copy(cell_of(whole, 1).out / checkpoints.FILE, cell.out / checkpoints.FILE)
    assert restarted(cell, capsys, "seed 1's checkpoint, not seed 0's") == record_of(cell_of(whole, 0))


def test_a_flipped_bit_in_a_tensor_is_not_resumed(cell, whole, capsys):
    path = cell.out / checkpoints.FILE
    with safe_open(str(path), framework="pt") as file:
        name = next(n for n in file.keys() if n.startswith("model/") and "weight" in n)  # noqa: SIM118
        weight = file.get_tensor(name)
    weight.view(torch.int32).view(-1)[0] ^= 1 << 23  # the exponent's lowest bit: the weight doubles or halves
    rewrite(path, tensors={name: weight})
    assert restarted(cell, capsys, "do not match its content hash") == record_of(cell_of(whole, 0))


@pytest.mark.parametrize("position, sign, says", [
    ({"step": 30}, False, "do not match its content hash"),  # edited by hand
    ({"step": 30}, True, "holds 2 training lines up to step 30 where a run that reached it wrote 3"),
    ({"step": 400}, True, "step 400 is past the budget of 40 steps"),
    ({"tokens": 7}, True, "7 tokens in 20 steps, where a step trains 1 to 256 target tokens"),
], ids=["step-edited", "step-signed", "past-budget", "tokens"])
def test_a_checkpoint_whose_step_and_tokens_disagree_with_the_run_is_not_resumed(cell, whole, capsys, position,
                                                                                  sign, says):
    rewrite(cell.out / checkpoints.FILE, position=position, sign=sign)
    assert restarted(cell, capsys, says) == record_of(cell_of(whole, 0))


@pytest.mark.parametrize("spoil, says", [
    (lambda row: None if row["step"] == 10 and "event" not in row else row,
     "holds 1 training lines up to step 20 where a run that reached it wrote 2"),
    (lambda row: None if row["step"] == 10 and "event" in row else row,
     "holds 1 evaluations up to step 20 where a run that reached it made 2"),
    (lambda row: {**row, "tokens": row["tokens"] + 1} if row["step"] == 10 and "event" not in row else row,
     "metrics.jsonl's lines up to step 20 count"),
], ids=["training-line", "evaluation", "tokens"])
def test_a_checkpoint_its_log_disagrees_with_is_not_resumed(cell, whole, capsys, spoil, says):
    metrics = cell.out / rundir.METRICS
    rows = [spoil(row) for row in rundir.read_metrics(metrics)]
    metrics.write_text("".join(json.dumps(row) + "\n" for row in rows if row is not None))
    assert restarted(cell, capsys, says) == record_of(cell_of(whole, 0))


def test_a_format_1_checkpoint_is_not_resumed(cell, capsys):
    path = cell.out / checkpoints.FILE
    with safe_open(str(path), framework="pt") as file:
        meta = json.loads(file.metadata()["zoo"])
        content = {name: file.get_tensor(name) for name in file.keys()}  # noqa: SIM118
    old = {key: meta[key] for key in ("position", "spec_digest", "param_groups", "state")}
    save_file(content, str(path), metadata={"zoo": json.dumps({"format": 1, **old})})
    assert checkpoints.load(path).model  # still loaded (zoo evaluate of an older run)
    restarted(cell, capsys, "a format-1 checkpoint")


def test_an_untouched_checkpoint_resumes_to_the_uninterrupted_numbers(cell, whole, capsys, monkeypatch):
    real, steps = Trainer._step, []

    def counted(self, model, optimizer, group, pos):
        steps.append(pos.step)
        return real(self, model, optimizer, group, pos)

    monkeypatch.setattr(Trainer, "_step", counted)
    assert execute(cell) == ("complete", "")
    assert steps == list(range(20, 40)) and capsys.readouterr().err == ""
    assert not (Path(cell.runs_root) / store.STALE).exists()
    assert record_of(cell) == record_of(cell_of(whole, 0))


def test_a_plain_zoo_train_run_checks_its_checkpoint_too(tmp_path, capsys):
    """`zoo train` has no cell definition: its checkpoints carry the spec's digest and the seed, and a bad one goes
    to OUT/.stale/<time>/. A Trainer given nowhere to move it refuses it instead: never a silent resume."""
    train = [*TRAIN[3:], "--train", "steps=20"]
    for seed in (0, 1):
        assert main([*train, "--train", f"seed={seed}", "--out", str(tmp_path / f"seed-{seed}")]) == 0
    run_dir = tmp_path / "seed-0"
    summary = rundir.read_table(run_dir / rundir.SUMMARY)
    (run_dir / rundir.SUMMARY).unlink()  # killed after its last checkpoint, which ended training at step 20 and
    resume = [*train, "--train", "seed=0", "--out", str(run_dir), "--resume"]  # evaluated there, off eval_interval
    assert main(resume) == 0 and "warning" not in capsys.readouterr().err  # its own: resumed, nothing to train
    (run_dir / rundir.SUMMARY).unlink()
    shutil.copy(tmp_path / "seed-1" / checkpoints.FILE, run_dir / checkpoints.FILE)
    capsys.readouterr()

    from zoo.data import load_saved
    from zoo.model.spec import validate_spec

    spec = validate_spec(rundir.read_table(run_dir / rundir.SPEC)["spec"])
    config = TrainConfig.model_validate(rundir.read_table(run_dir / rundir.TRAIN))
    with pytest.raises(RunError, match="seed 1's checkpoint, not seed 0's; not resumed"):
        Trainer(spec, load_saved(run_dir / rundir.TASK), config, run_dir, resume=True, progress=False).run()

    assert main(resume) == 0
    err = capsys.readouterr().err
    assert "seed 1's checkpoint, not seed 0's; moved to" in err and "training seed 0 from step 0" in err
    assert sorted(p.name for p in (run_dir / store.STALE).glob("*/*")) == [checkpoints.FILE, rundir.METRICS]
    assert comparable(rundir.read_table(run_dir / rundir.SUMMARY)) == comparable(summary)


@pytest.mark.parametrize("budget", [["epochs=2"], ["epochs=1.5", "accumulate=3"]], ids=["whole", "part-grouped"])
def test_a_checkpoint_past_an_epochs_budget_is_not_resumed(tmp_path, capsys, budget):
    """A run budgeted in epochs takes no batch once its passes over the data reach the budget: its last checkpoint
    (training ended there) resumes with nothing to train, and one whose position is a pass further, signed as a zoo
    that wrote wrong state would, is refused like one past a step budget."""
    run_dir = tmp_path / "run"
    train = [*TRAIN[3:], *(arg for setting in budget for arg in ("--train", setting)), "--out", str(run_dir)]
    assert main(train) == 0
    path = run_dir / checkpoints.FILE
    position = checkpoints.load(path).position
    assert position["epoch"] >= 1  # training ended in its second pass over the data
    (run_dir / rundir.SUMMARY).unlink()  # killed after its last checkpoint
    assert main([*train, "--resume"]) == 0 and "warning" not in capsys.readouterr().err

    (run_dir / rundir.SUMMARY).unlink()
    rewrite(path, position={"epoch": position["epoch"] + 1}, sign=True)
    from zoo.data import load_saved
    from zoo.model.spec import validate_spec

    spec = validate_spec(rundir.read_table(run_dir / rundir.SPEC)["spec"])
    config = TrainConfig.model_validate(rundir.read_table(run_dir / rundir.TRAIN))
    with pytest.raises(RunError, match=rf"is past the budget of {config.epochs:g} epochs \(step {position['step']}\)"):
        Trainer(spec, load_saved(run_dir / rundir.TASK), config, run_dir, resume=True, progress=False).run()


def test_a_damaged_checkpoint_is_not_evaluated(whole, tmp_path):
    """`zoo evaluate`, `zoo translate` and a cell's test decoding load a run's last checkpoint through load_run:
    one whose content no longer matches its hash is refused in one line, never scored."""
    from zoo.train.run import load_run

    run_dir = tmp_path / "run"
    shutil.copytree(cell_of(whole, 0).out, run_dir)
    load_run(run_dir)  # intact: loads
    path = run_dir / checkpoints.FILE
    with safe_open(str(path), framework="pt") as file:
        name = next(n for n in file.keys() if n.startswith("model/") and "weight" in n)  # noqa: SIM118
        weight = file.get_tensor(name)
    weight.view(torch.int32).view(-1)[0] ^= 1 << 23
    rewrite(path, tensors={name: weight})
    with pytest.raises(RunError, match="do not match its content hash"):
        load_run(run_dir)
