"""Checkpoints: safetensors only; pickles and damaged files are refused with one line, never executed."""

import json
import pickle
import shutil

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

import zoo
from zoo.cli import main
from zoo.data import load_task
from zoo.train import RunError, TrainConfig, Trainer, load_run
from zoo.train import checkpoint as checkpoints

TINY = {"d_model": 16, "n_heads": 2, "d_ff": 32, "encoder_layers": 1, "decoder_layers": 1}
CONFIG = {"steps": 4, "batch_tokens": 256, "warmup": 2, "lr": 3e-3, "eval_interval": 4, "eval_sentences": 10,
          "checkpoint_interval": 2, "device": "cpu"}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    task = load_task("copy", symbols=8, min_len=3, max_len=6, train_size=200, valid_size=20, test_size=20)
    spec = zoo.load_spec("paper-base", {**TINY, "src_vocab": task.src_vocab, "tgt_vocab": task.tgt_vocab})
    run_dir = tmp_path_factory.mktemp("ckpt") / "run"
    Trainer(spec, task, TrainConfig(**CONFIG), run_dir, progress=False).run()
    return spec, task, run_dir


def copy_run(trained, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(trained[2], run_dir)
    return run_dir


class Exploit:
    """Unpickling this calls Path.touch(marker): what a malicious checkpoint could do."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        from pathlib import Path

        return Path.touch, (Path(self.marker),)


def cli(capsys, *argv):
    code = main(list(argv))
    err = capsys.readouterr().err
    return code, err


def test_round_trip_keeps_weights_optimizer_and_rng(trained):
    spec, _, run_dir = trained
    state = checkpoints.load(run_dir / checkpoints.FILE)
    model = zoo.build(spec, seed=123)
    optimizer = torch.optim.Adam(model.parameters(), betas=(0.9, 0.98))
    checkpoints.restore(state, model, optimizer)
    assert all(torch.equal(model.state_dict()[k], v) for k, v in state.model.items())
    assert optimizer.param_groups[0]["betas"] == (0.9, 0.98) and state.position["step"] == 4
    assert torch.equal(torch.get_rng_state(), state.rng) and len(optimizer.state) == len(list(model.parameters()))


@pytest.mark.parametrize("name", [checkpoints.LEGACY_FILE, checkpoints.FILE])
def test_a_crafted_pickle_is_refused_and_never_runs(trained, tmp_path, capsys, name):
    run_dir = copy_run(trained, tmp_path)
    (run_dir / checkpoints.FILE).unlink()
    marker = tmp_path / "pwned"
    (run_dir / name).write_bytes(pickle.dumps({"model": Exploit(marker)}))
    with pytest.raises(RunError, match=name.replace(".", r"\.")):
        load_run(run_dir)
    assert not marker.exists()
    for argv in (["evaluate", str(run_dir)], ["translate", str(run_dir)]):
        code, err = cli(capsys, *argv)
        assert code == 2 and len(err.strip().splitlines()) == 1 and name in err and "Traceback" not in err
    assert not marker.exists()


def test_torch_zip_checkpoint_is_refused_too(trained, tmp_path):
    run_dir = copy_run(trained, tmp_path)
    (run_dir / checkpoints.FILE).unlink()
    torch.save({"model": {}}, run_dir / checkpoints.LEGACY_FILE)
    with pytest.raises(RunError, match="refuses to load"):
        load_run(run_dir)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_a_damaged_checkpoint_is_one_line_exit_2(trained, tmp_path, capsys, monkeypatch, damage):
    run_dir = copy_run(trained, tmp_path)
    path = run_dir / checkpoints.FILE
    data = path.read_bytes()
    path.write_bytes({"truncate": data[: len(data) // 2], "garbage": b"\x00\xff" * 64, "empty": b""}[damage])
    code, err = cli(capsys, "evaluate", str(run_dir))
    assert code == 2 and len(err.strip().splitlines()) == 1 and checkpoints.FILE in err and "Traceback" not in err
    with pytest.raises(RunError, match="not a readable zoo checkpoint"):
        checkpoints.load(path)


def test_resume_refuses_a_damaged_checkpoint(trained, tmp_path):
    spec, task, _ = trained
    run_dir = copy_run(trained, tmp_path)
    (run_dir / "summary.json").unlink()
    (run_dir / checkpoints.FILE).write_bytes(b"not a checkpoint")
    with pytest.raises(RunError, match=checkpoints.FILE):
        Trainer(spec, task, TrainConfig(**CONFIG), run_dir, resume=True, progress=False).run()


def test_killed_between_final_checkpoint_and_summary_resumes_with_the_same_final(trained, tmp_path):
    spec, task, _ = trained
    run_dir = copy_run(trained, tmp_path)
    expected = json.loads((run_dir / "summary.json").read_text())
    (run_dir / "summary.json").unlink()
    summary = Trainer(spec, task, TrainConfig(**CONFIG), run_dir, resume=True, progress=False).run()
    assert summary["final"] is not None and summary["final"] == expected["final"]
    assert summary["steps"] == expected["steps"]


def test_non_utf8_stdin_to_translate_is_one_line(trained, tmp_path, capsys, monkeypatch):
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"5 6 7\n8 \xff 9\n")))
    code, err = cli(capsys, "translate", str(trained[2]))
    assert code == 2 and "stdin: line 2: not valid UTF-8" in err and len(err.strip().splitlines()) == 1


def test_translate_reads_lines_as_before(trained, capsys, monkeypatch):
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"5 6 7\r\n8 9 10\n")))
    assert main(["translate", str(trained[2]), "--beam", "1"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2


def test_evaluate_on_a_read_only_run_prints_metrics_then_one_line(trained, tmp_path, capsys, monkeypatch):
    run_dir = copy_run(trained, tmp_path)

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("zoo.cli.train.save_evaluation", refuse)  # chmod is no obstacle when tests run as root
    code = main(["evaluate", str(run_dir), "--limit", "5"])
    out, err = capsys.readouterr()
    assert code == 2 and "exact_match" in out
    assert "could not save eval-test-beam1-first5.json (Permission denied)" in err
    assert len(err.strip().splitlines()) == 1


def test_atomic_writes_follow_the_umask(tmp_path):
    import os

    from zoo.atomic import _MODE, write_text_atomic

    write_text_atomic(tmp_path / "f.txt", "x")
    assert (tmp_path / "f.txt").stat().st_mode & 0o777 == _MODE
    current = os.umask(0o022)
    os.umask(current)
    assert _MODE == 0o666 & ~current


def craft(run_dir, meta=None, tensors=None, raw_meta=None):
    """Rewrite the run's checkpoint with metadata fields or tensors replaced, as a crafted file would be."""
    path = run_dir / checkpoints.FILE
    with safe_open(str(path), framework="pt") as file:
        old_meta = json.loads(file.metadata()["zoo"])
        old_tensors = {name: file.get_tensor(name) for name in file.keys()}  # noqa: SIM118
    (run_dir / "summary.json").unlink()
    text = raw_meta if raw_meta is not None else json.dumps({**old_meta, **(meta or {})})
    save_file({**old_tensors, **(tensors or {})}, str(path), metadata={"zoo": text})
    return path


@pytest.mark.parametrize("damage", [
    {"raw_meta": "[" * 100_000 + "]" * 100_000},  # RecursionError
    {"meta": {"position": {"step": "x"}}},  # TypeError in the loop
    {"meta": {"position": {"step": 0, "index": -1000}}},  # IndexError in the loop
    {"meta": {"position": {"step": 0, "epoch": True}}},
    {"meta": {"position": {"step": 0, "lap": 1}}},
    {"meta": {"position": "x"}},
    {"meta": {"param_groups": "x"}},  # AttributeError in restore
    {"meta": {"param_groups": [{"params": "x"}]}},
    {"meta": {"state": {"0": {"step": [1]}}}},
    {"tensors": {"rng/cpu": torch.zeros(5)}},  # RuntimeError in torch.set_rng_state
    {"tensors": {"rng/cpu": torch.zeros(5, dtype=torch.uint8)}},
], ids=["deep-json", "position-str", "position-negative", "position-bool", "position-unknown", "position-not-a-table",
        "param-groups-str", "param-groups-params", "state-entry", "rng-float", "rng-short"])
def test_a_crafted_checkpoint_is_one_run_error_naming_the_file(trained, tmp_path, damage):
    spec, task, _ = trained
    run_dir = copy_run(trained, tmp_path)
    path = craft(run_dir, **damage)
    with pytest.raises(RunError) as caught:
        Trainer(spec, task, TrainConfig(**CONFIG), run_dir, resume=True, progress=False).run()
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)
