"""Training: schedules, losses per output head, config validation, determinism, divergence, run dirs."""

import json
import math

import pytest
import torch
import torch.nn.functional as F

import zoo
from zoo.data import load_task
from zoo.kernels.loss import loss_sums
from zoo.registry import registry
from zoo.train import RunError, TrainConfig, Trainer, load_run, load_train_config
from zoo.train import checkpoint as checkpoints
from zoo.train.schedule import learning_rate

TINY = {"d_model": 16, "n_heads": 2, "d_ff": 32, "encoder_layers": 1, "decoder_layers": 1}


def copy_task():
    return load_task("copy", symbols=8, min_len=3, max_len=6, train_size=300, valid_size=40, test_size=40)


def tiny_spec(task, **overrides):
    return zoo.load_spec("paper-base", {**TINY, "src_vocab": task.src_vocab, "tgt_vocab": task.tgt_vocab, **overrides})


def quick_config(**overrides):
    return TrainConfig(**{"steps": 12, "batch_tokens": 256, "warmup": 4, "lr": 3e-3, "eval_interval": 6,
                          "eval_sentences": 20, "checkpoint_interval": 4, "device": "cpu", **overrides})


def deterministic(rows):
    """Metric rows without wall-clock fields (timings legitimately differ between runs)."""
    return [{k: v for k, v in row.items() if k not in ("tok_per_s", "seconds")} for row in rows]


def metrics(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


# -- schedules --------------------------------------------------------------------------------------
def test_inverse_sqrt_is_the_papers_formula():
    config = TrainConfig(steps=10, warmup=4000)
    for step in (1, 100, 4000, 4001, 20000):
        paper = 512 ** -0.5 * min(step ** -0.5, step * 4000 ** -1.5)
        assert learning_rate(step, config, 512) == pytest.approx(paper, rel=1e-12)


@pytest.mark.parametrize("budget, done, fraction", [
    ({"steps": 100}, (50, 0.0, 0.0), 0.5),
    ({"epochs": 2.0}, (7, 1.0, 0.0), 0.5),
    ({"minutes": 1.0}, (7, 0.0, 15.0), 0.25),
    ({"steps": 100, "epochs": 4.0, "minutes": 10.0}, (10, 2.0, 60.0), 0.5),  # the budget reached first leads
    ({"steps": 10}, (12, 0.0, 0.0), 1.0),  # capped
])
def test_the_budget_fraction_is_the_largest_share_capped_at_one(budget, done, fraction):
    assert TrainConfig(**budget).fraction_done(*done) == pytest.approx(fraction)


def test_the_live_view_and_the_loop_share_the_budget_rule(tmp_path):
    """`zoo run`'s view reads the run's train.json and last metrics row and asks TrainConfig, as the loop does."""
    from zoo.experiment.view import _progress
    from zoo.rundir import METRICS, TRAIN, write_json

    write_json(tmp_path / TRAIN, TrainConfig(steps=100, epochs=4.0).model_dump(mode="json"))
    rows = [{"step": 10, "epoch": 0.5, "seconds": 1.0, "loss": 3.0, "tok_per_s": 100.0},
            {"event": "eval", "step": 10}, {"step": 20, "epoch": 1.5, "seconds": 2.0, "loss": 2.0, "tok_per_s": 100.0}]
    (tmp_path / METRICS).write_text("".join(json.dumps(row) + "\n" for row in rows))
    line, fraction = _progress(tmp_path)
    assert line.startswith("step 20  loss 2.000") and fraction == pytest.approx(1.5 / 4)


def test_constant_and_linear_decay_schedules():
    constant = TrainConfig(steps=100, warmup=10, lr=1e-3, schedule="constant")
    assert learning_rate(5, constant, 64) == pytest.approx(5e-4)
    assert learning_rate(50, constant, 64) == pytest.approx(1e-3)
    decay = TrainConfig(steps=110, warmup=10, lr=1e-3, schedule="linear-decay")
    assert learning_rate(10, decay, 64) == pytest.approx(1e-3)
    assert learning_rate(60, decay, 64) == pytest.approx(5e-4)
    assert learning_rate(110, decay, 64) == 0.0
    no_warmup = TrainConfig(steps=10, warmup=0, lr=1e-3, schedule="constant")
    assert learning_rate(1, no_warmup, 64) == pytest.approx(1e-3)


# -- losses per output head -------------------------------------------------------------------------
def make_head(kind: str):
    """An output head of `kind` (the loss asks the head for log-probabilities and smoothing)."""
    entry = registry.get("output", kind)
    return entry.impl(4, 11, entry.config())


def test_logits_loss_is_torch_label_smoothed_cross_entropy():
    torch.manual_seed(0)
    logits, target = torch.randn(3, 5, 11), torch.randint(1, 11, (3, 5))
    target[0, 3:] = 0
    sums = loss_sums(logits, target, make_head("logits"), pad=0, smoothing=0.1)
    expected = F.cross_entropy(logits.view(-1, 11), target.view(-1), ignore_index=0, label_smoothing=0.1,
                               reduction="sum")
    assert sums.loss.item() == pytest.approx(expected.item(), rel=1e-5)
    assert sums.nll.item() == pytest.approx(F.cross_entropy(logits.view(-1, 11), target.view(-1), ignore_index=0,
                                                            reduction="sum").item(), rel=1e-5)
    assert sums.tokens == int(target.ne(0).sum())


def annotated_label_smoothing(log_probs, target, pad, smoothing):
    """The Annotated Transformer's LabelSmoothing + nn.KLDivLoss(reduction='sum'), as 000/004 train."""
    vocab = log_probs.size(-1)
    true_dist = torch.full_like(log_probs, smoothing / (vocab - 2))
    true_dist.scatter_(1, target.unsqueeze(1), 1 - smoothing)
    true_dist[:, pad] = 0
    true_dist[target == pad] = 0
    return torch.nn.KLDivLoss(reduction="sum")(log_probs, true_dist)


@pytest.mark.parametrize("head", ["log-softmax", "softmax"])
def test_probability_heads_use_the_annotated_kl_loss(head):
    torch.manual_seed(1)
    logits, target = torch.randn(2, 6, 9), torch.randint(1, 9, (2, 6))
    target[1, 4:] = 0
    scores = F.log_softmax(logits, -1) if head == "log-softmax" else F.softmax(logits, -1)
    sums = loss_sums(scores, target, make_head(head), pad=0, smoothing=0.1)
    expected = annotated_label_smoothing(F.log_softmax(logits, -1).view(-1, 9), target.view(-1), 0, 0.1)
    assert sums.loss.item() == pytest.approx(expected.item(), rel=1e-4)


def test_softmax_head_stays_finite_when_a_probability_underflows():
    probs = torch.zeros(1, 1, 5)
    probs[0, 0, 1] = 1.0  # the true token (2) has probability 0 in float32
    sums = loss_sums(probs, torch.tensor([[2]]), make_head("softmax"), pad=0, smoothing=0.1)
    assert math.isfinite(sums.loss.item()) and math.isfinite(sums.nll.item())


# -- config -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("data, field", [
    ({}, "steps"), ({"schedule": "linear-decay", "minutes": 1, "steps": None}, "schedule"),
    ({"steps": 5, "warmpu": 10}, "did you mean 'warmup'"), ({"steps": 0}, "steps"),
    ({"steps": 5, "precision": "fp8"}, "precision"),
])
def test_train_config_errors_name_the_field(tmp_path, data, field):
    path = tmp_path / "train.json"
    path.write_text(json.dumps(data))
    with pytest.raises(zoo.SpecError, match=field):
        load_train_config(path)


def test_train_config_file_carries_task_options(tmp_path):
    path = tmp_path / "train.toml"
    path.write_text("steps = 3\n[task]\nvocab_size = 1000\n")
    config, task = load_train_config(path, {"lr": 0.01})
    assert config.steps == 3 and config.lr == 0.01 and task == {"vocab_size": 1000}


# -- the loop ---------------------------------------------------------------------------------------
def test_same_spec_config_and_seed_give_identical_metrics(tmp_path):
    task = copy_task()
    runs = []
    for name in ("a", "b"):
        Trainer(tiny_spec(task), task, quick_config(), tmp_path / name, progress=False).run()
        runs.append(deterministic(metrics(tmp_path / name)))
    assert runs[0] == runs[1]
    # a line every log_interval (10) steps, and at every checkpoint (4) and evaluation (6)
    assert [r["step"] for r in runs[0] if "event" not in r] == [4, 6, 8, 10, 12]
    assert sum(1 for r in runs[0] if r.get("event") == "eval") == 2


def test_a_metric_line_is_the_token_weighted_mean_of_its_steps(tmp_path):
    """Training is the same whatever the log interval; a line sums up the steps since the one before it."""
    task = copy_task()
    lines = {}
    for every in (1, 5):
        Trainer(tiny_spec(task), task, quick_config(log_interval=every), tmp_path / str(every), progress=False).run()
        lines[every] = [r for r in metrics(tmp_path / str(every)) if "event" not in r]
    steps = {r["step"]: r for r in lines[1]}
    assert [r["step"] for r in lines[5]] == [4, 5, 6, 8, 10, 12]
    start = 1
    for line in lines[5]:
        covered = [steps[k] for k in range(start, line["step"] + 1)]
        tokens = sum(r["tokens"] for r in covered)
        assert line["tokens"] == tokens and line["lr"] == covered[-1]["lr"]
        assert line["loss"] == pytest.approx(sum(r["loss"] * r["tokens"] for r in covered) / tokens, rel=1e-9)
        assert line["nll"] == pytest.approx(sum(r["nll"] * r["tokens"] for r in covered) / tokens, rel=1e-9)
        assert line["grad_norm"] == pytest.approx(sum(r["grad_norm"] for r in covered) / len(covered), rel=1e-9)
        start = line["step"] + 1


def test_clip_norm_zero_logs_the_gradient_norm_without_clipping(tmp_path):
    task = copy_task()
    logged = {}
    for clip in (0, 1e-3):
        Trainer(tiny_spec(task), task, quick_config(clip_norm=clip, steps=3, log_interval=1), tmp_path / str(clip),
                progress=False).run()
        logged[clip] = [r for r in metrics(tmp_path / str(clip)) if "event" not in r]
    # the same first step (same seed and batch): the same gradient norm, measured before any clipping
    assert logged[0][0]["grad_norm"] == pytest.approx(logged[1e-3][0]["grad_norm"]) and logged[0][0]["grad_norm"] > 1e-3
    # then clipping to 1e-3 all but freezes the weights, so the losses part ways
    assert logged[0][2]["loss"] != pytest.approx(logged[1e-3][2]["loss"], rel=1e-4)


@pytest.mark.parametrize("every", [1, 3])
def test_resume_from_a_checkpoint_equals_an_uninterrupted_run(tmp_path, monkeypatch, every):
    task = copy_task()
    spec = tiny_spec(task)
    config = quick_config(log_interval=every)
    Trainer(spec, task, config, tmp_path / "whole", progress=False).run()

    real_step = Trainer._step

    def interrupted(self, model, optimizer, group, pos):
        if pos.step == 9:  # during the 10th step: checkpoint at 8, step 9 already logged
            raise KeyboardInterrupt
        return real_step(self, model, optimizer, group, pos)

    monkeypatch.setattr(Trainer, "_step", interrupted)
    with pytest.raises(KeyboardInterrupt):
        Trainer(spec, task, config, tmp_path / "part", progress=False).run()
    assert max(r["step"] for r in metrics(tmp_path / "part")) == 9
    monkeypatch.setattr(Trainer, "_step", real_step)
    summary = Trainer(spec, task, config, tmp_path / "part", resume=True, progress=False).run()
    assert summary["status"] == "complete" and summary["steps"] == 12
    assert deterministic(metrics(tmp_path / "part")) == deterministic(metrics(tmp_path / "whole"))


def poison_loss(monkeypatch, from_step: int, value: float) -> None:
    """Multiply the loss by `value` (nan, inf) from the `from_step`-th step on (one batch a step here)."""
    from zoo.train import step

    real, calls = step.training_loss, {"n": 0}

    def poisoned(*args, **kwargs):
        calls["n"] += 1
        sums = real(*args, **kwargs)
        if calls["n"] >= from_step:
            sums.loss = sums.loss * value
        return sums

    monkeypatch.setattr(step, "training_loss", poisoned)


def test_divergence_is_recorded_and_stops_cleanly(tmp_path, monkeypatch):
    poison_loss(monkeypatch, 5, float("nan"))
    task = copy_task()
    summary = Trainer(tiny_spec(task), task, quick_config(), tmp_path / "run", progress=False).run()
    assert summary["status"] == "diverged" and summary["reason"].startswith("diverged at step 5")
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["status"] == "diverged"
    checkpoint = checkpoints.load(tmp_path / "run" / checkpoints.FILE)
    assert checkpoint.position["step"] == 4  # the last good state, not the NaN one
    assert all(torch.isfinite(t).all() for t in checkpoint.model.values())


def test_a_diverged_run_logs_the_finite_steps_of_its_last_interval(tmp_path, monkeypatch):
    poison_loss(monkeypatch, 7, float("inf"))
    task = copy_task()
    config = quick_config(log_interval=5, checkpoint_interval=100, eval_interval=100)
    Trainer(tiny_spec(task), task, config, tmp_path / "run", progress=False).run()
    rows = metrics(tmp_path / "run")
    assert [(r["step"], r.get("event")) for r in rows] == [(5, None), (6, None), (7, "diverged")]
    assert rows[1]["tokens"] > 0 and math.isfinite(rows[1]["loss"])  # step 6 alone, the last finite one


def test_run_directories_are_never_overwritten_or_mixed(tmp_path):
    task = copy_task()
    spec = tiny_spec(task)
    Trainer(spec, task, quick_config(steps=2), tmp_path / "run", progress=False).run()
    with pytest.raises(RunError, match="--resume"):
        Trainer(spec, task, quick_config(steps=2), tmp_path / "run", progress=False).run()
    with pytest.raises(RunError, match="another spec"):
        Trainer(spec.with_overrides({"ffn.kind": "conv1d"}), task, quick_config(steps=2), tmp_path / "run",
                resume=True, progress=False).run()
    finished = Trainer(spec, task, quick_config(steps=2), tmp_path / "run", resume=True, progress=False).run()
    assert finished["status"] == "complete"  # a finished run is reported, not retrained


def test_load_run_restores_the_trained_model(tmp_path):
    task = copy_task()
    spec = tiny_spec(task)
    Trainer(spec, task, quick_config(steps=3), tmp_path / "run", progress=False).run()
    model, loaded_task, config = load_run(tmp_path / "run")
    saved = checkpoints.load(tmp_path / "run" / checkpoints.FILE).model
    assert all(torch.equal(model.state_dict()[k], v) for k, v in saved.items())
    assert loaded_task.src_vocab == task.src_vocab and config.steps == 3
    assert model.spec.digest() == spec.digest()


@pytest.mark.parametrize("output", ["log-softmax", "softmax"])
def test_every_output_head_trains(tmp_path, output):
    task = copy_task()
    spec = tiny_spec(task, **{"output.kind": output})
    summary = Trainer(spec, task, quick_config(steps=6), tmp_path / "run", progress=False).run()
    rows = [r for r in metrics(tmp_path / "run") if "event" not in r]
    assert summary["status"] == "complete" and rows[-1]["loss"] < rows[0]["loss"]


def test_a_head_registered_from_outside_brings_its_own_loss():
    """The loss asks the head, not its name: a new head is trained as it declares."""
    from zoo.components.output import OutputHead, OutputParams

    @zoo.register("output", "half-logits-test", params=OutputParams)
    class HalfLogits(OutputHead):
        """Logits halved (a temperature of 2), trained with cross-entropy on log_softmax(logits / 2)."""

        def scores(self, logits):
            return logits / 2

        def log_probs(self, scores):
            return F.log_softmax(scores.float(), dim=-1)

    try:
        torch.manual_seed(2)
        logits, target = torch.randn(2, 3, 11), torch.randint(1, 11, (2, 3))
        head = HalfLogits(4, 11, OutputParams())
        sums = loss_sums(head.scores(logits), target, head, pad=0, smoothing=0.1)
        expected = F.cross_entropy((logits / 2).view(-1, 11), target.view(-1), label_smoothing=0.1, reduction="sum")
        assert sums.loss.item() == pytest.approx(expected.item(), rel=1e-5)
    finally:
        registry.unregister("output", "half-logits-test")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_a_training_step_on_a_gpu_never_waits_for_it(tmp_path, monkeypatch, precision):
    """Only metric lines read numbers back from the GPU: a step that waited for it would leave it idle while
    the host prepares the next one. PyTorch's sync debug mode turns any wait inside a step into an error."""
    real_step = Trainer._step

    def strict(self, *args):
        torch.cuda.set_sync_debug_mode("error")
        try:
            return real_step(self, *args)
        finally:
            torch.cuda.set_sync_debug_mode("default")

    monkeypatch.setattr(Trainer, "_step", strict)
    task = copy_task()
    config = quick_config(device="cuda", precision=precision, log_interval=6)
    summary = Trainer(tiny_spec(task), task, config, tmp_path / "run", progress=False).run()
    assert summary["status"] == "complete" and summary["device"].startswith("cuda")
    rows = [r for r in metrics(tmp_path / "run") if "loss" in r]
    assert [r["step"] for r in rows] == [4, 6, 8, 12] and all(math.isfinite(r["loss"]) for r in rows)


def test_zoo_train_without_a_budget_says_how_to_give_one(capsys, tmp_path):
    """The README's `zoo train` line had no budget, and the error named the fields but not how to set them."""
    from zoo.cli import main

    assert main(["train", "paper-base", "--task", "copy", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "give a budget: steps, epochs or minutes" in err and "--train steps=2000" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "run").exists()


def test_zoo_trains_closing_line_keeps_the_run_folder_whole(capsys, tmp_path):
    """As the metrics table's title, the closing line wrapped to the table's two narrow columns, mid-path."""
    from zoo.cli import main

    out = tmp_path / ("a-run-folder-with-a-name-long-enough-to-wrap-" * 2)
    tiny = ["--set", "d_model=16", "--set", "d_ff=32", "--set", "n_heads=2", "--set", "encoder_layers=1",
            "--set", "decoder_layers=1"]
    assert main(["train", "paper-base", *tiny, "--task", "copy", "--train", "steps=2", "--train", "eval_interval=2",
                 "--no-progress", "--out", str(out)]) == 0
    assert f"{out}: complete after 2 steps (" in capsys.readouterr().out


def test_an_epochs_budget_with_accumulation_ends_at_the_pass_not_a_group_later(tmp_path):
    """With accumulate = 3 the last step's group ran past the epoch: 'epochs = 1' trained 1.03 epochs (4,316 target
    tokens for one pass's 4,190). The group now stops where the budget is reached."""
    import json

    from zoo.cli import main

    runs = {}
    for accumulate in (1, 3):
        out = tmp_path / f"acc{accumulate}"
        assert main(["train", "paper-base", "--set", "d_model=16", "--set", "d_ff=32", "--set", "n_heads=2",
                     "--set", "encoder_layers=1", "--set", "decoder_layers=1", "--task", "copy", "--task-set",
                     "train_size=300", "--train", "epochs=1", "--train", f"accumulate={accumulate}", "--train",
                     "batch_tokens=128", "--no-progress", "--out", str(out)]) == 0
        runs[accumulate] = json.loads((out / "summary.json").read_text())
    assert runs[3]["epochs"] == runs[1]["epochs"] == 1.0
    assert runs[3]["tokens"] == runs[1]["tokens"]  # every training target once, whatever the grouping
    assert runs[3]["steps"] == -(-runs[1]["steps"] // 3)
