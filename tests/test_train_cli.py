"""End to end through the `zoo` command: train, kill -9 mid-run, resume, translate, evaluate."""

import json
import signal
import subprocess
import sys
import time

import pytest
from smoke_runs import ENV, TRAIN


def steps(run_dir):
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [{k: v for k, v in r.items() if k not in ("tok_per_s", "seconds")} for r in rows]


@pytest.mark.slow
def test_kill_minus_nine_then_resume_gives_the_uninterrupted_numbers(tmp_path):
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    every = ["--train", "log_interval=3"]  # lines between checkpoints: the kill lands inside an interval or on a line
    subprocess.run(TRAIN + every + ["--train", "steps=120", "--out", str(whole)], check=True, env=ENV,
                   capture_output=True)

    process = subprocess.Popen(TRAIN + every + ["--train", "steps=120", "--out", str(killed)], env=ENV,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline:  # kill once a checkpoint exists and the run has gone past it
        log = killed / "metrics.jsonl"
        if (killed / "checkpoint.safetensors").exists() and log.exists() and log.read_text().count("\n") > 12:
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (killed / "summary.json").exists(), "the run finished before it could be killed"

    resumed = subprocess.run(TRAIN + every + ["--train", "steps=120", "--out", str(killed), "--resume"], env=ENV,
                             capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert steps(killed) == steps(whole)
    final = [{k: v for k, v in json.loads((run / "summary.json").read_text())["final"].items() if k != "seconds"}
             for run in (killed, whole)]
    assert final[0] == final[1]


@pytest.mark.slow
def test_train_translate_evaluate(tmp_path):
    run_dir = tmp_path / "run"
    trained = subprocess.run(TRAIN + ["--train", "steps=30", "--out", str(run_dir)],
                             env=ENV, capture_output=True, text=True)
    assert trained.returncode == 0, trained.stderr
    assert "complete after" in " ".join(trained.stdout.split())  # the run folder before it may wrap the line
    for name in ("spec.json", "train.json", "metrics.jsonl", "checkpoint.safetensors", "summary.json",
                 "task/task.json"):
        assert (run_dir / name).exists(), name

    translated = subprocess.run([sys.executable, "-m", "zoo", "translate", str(run_dir), "--beam", "2"],
                                input="5 6 7\n8 9 10 11\n", env=ENV, capture_output=True, text=True)
    assert translated.returncode == 0, translated.stderr
    assert len(translated.stdout.splitlines()) == 2

    evaluated = subprocess.run([sys.executable, "-m", "zoo", "evaluate", str(run_dir),
                                "--split", "test", "--beam", "2"],
                               env=ENV, capture_output=True, text=True)
    assert evaluated.returncode == 0, evaluated.stderr
    result = json.loads((run_dir / "eval-test-beam2.json").read_text())
    assert result["sentences"] == 30 and 0 <= result["exact_match"] <= 100 and result["ppl"] > 1


@pytest.mark.slow
def test_bad_training_input_is_one_line_exit_2(tmp_path):
    bad = subprocess.run(TRAIN[:-2] + ["--train", "stesp=3", "--out", str(tmp_path / "x")], env=ENV,
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "did you mean 'steps'" in bad.stderr and "Traceback" not in bad.stderr
    missing = subprocess.run([sys.executable, "-m", "zoo", "train", "paper-base", "--task", "multi30k:de-fr",
                              "--data-dir", str(tmp_path), "--train", "steps=1", "--out", str(tmp_path / "y")],
                             env=ENV, capture_output=True, text=True)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr


@pytest.mark.slow
def test_tied_embeddings_need_a_joint_tokenizer_before_any_data_is_read(tmp_path):
    result = subprocess.run([sys.executable, "-m", "zoo", "train", "paper-base", "--task", "multi30k:de-en",
                             "--task-set", "joint=false", "--train", "steps=1", "--out", str(tmp_path / "r")],
                            env=ENV, capture_output=True, text=True)
    assert result.returncode == 2 and "joint" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "r").exists()
