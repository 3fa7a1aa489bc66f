"""Many GPUs, many machines, tested on a CPU: the local executor spreads its workers over the visible GPUs (each
worker sees one, as cuda:0), and the Ray executor asks each run for `gpus_per_run` GPUs (fractional: 0.25 packs
four runs on a GPU) or for a custom resource standing in for them, refusing in one line what no node can take."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from grid_files import ffn_plugin, tiny_experiment
from smoke_runs import TRAINED

from zoo.experiment import load_experiment
from zoo.experiment.executors import CUDA_VISIBLE, ExecutorError, _Worker, create, gpu_of_worker, visible_gpus
from zoo.experiment.runner import run_grid


@pytest.mark.parametrize(("listed", "expected"), [("3,5", ["3", "5"]), (" 2 , 7,", ["2", "7"]), ("", []),
                                                  ("GPU-5f2a,GPU-77c1", ["GPU-5f2a", "GPU-77c1"])])
def test_visible_gpus_are_the_ones_cuda_visible_devices_lists(monkeypatch, listed, expected):
    monkeypatch.setenv(CUDA_VISIBLE, listed)
    assert visible_gpus() == expected


def test_without_the_variable_or_cuda_no_gpu_is_visible(monkeypatch):
    monkeypatch.delenv(CUDA_VISIBLE, raising=False)
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    assert visible_gpus() == []


def test_workers_take_the_gpus_in_turn():
    assert [gpu_of_worker(i, ["3", "5"]) for i in range(5)] == ["3", "5", "3", "5", "3"]
    assert gpu_of_worker(0, []) is None


def test_a_worker_sees_only_its_gpu():
    import multiprocessing

    worker = _Worker(multiprocessing.get_context("spawn"), os.getpid(), "5")
    try:
        worker.send(os.getenv, CUDA_VISIBLE)
        assert worker.result() == "5"
    finally:
        worker.stop()


# A plugin FFN that notes, per training process, which GPUs it was given: the workers' assignment, seen from
# inside the cells they train.
NOTING_FFN = ffn_plugin("noting", init="""
folder = os.environ.get("ZOO_TEST_NOTES")
if folder:
    with open(os.path.join(folder, str(os.getpid())), "w") as note:
        note.write(os.environ.get("CUDA_VISIBLE_DEVICES", "unset"))
""")


@pytest.mark.timeout(300)
def test_three_workers_spread_over_two_listed_gpus(tmp_path):
    (tmp_path / "noting_ffn.py").write_text(textwrap.dedent(NOTING_FFN))
    (tmp_path / "exp.toml").write_text(tiny_experiment("noting", seeds=(0, 1, 2, 3, 4, 5), plugin="noting_ffn.py",
                                                       ffn="noting"))
    notes = tmp_path / "notes"
    notes.mkdir()
    env = {**os.environ, CUDA_VISIBLE: "3,5", "ZOO_TEST_NOTES": str(notes)}
    done = subprocess.run([sys.executable, "-m", "zoo", "run", str(tmp_path / "exp.toml"), "--workers", "3",
                           "--out", str(tmp_path / "out"), "--runs", str(tmp_path / "runs"), "--no-live"],
                          capture_output=True, text=True, timeout=240, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    seen = {path.name: path.read_text() for path in notes.iterdir()}
    workers = {pid: gpu for pid, gpu in seen.items() if gpu != "3,5"}  # not `zoo run` itself (its plugin check)
    assert sorted(workers.values()) == ["3", "3", "5"], seen
    records = sorted((tmp_path / "out" / "records").rglob("seed-*.json"))
    assert [json.loads(p.read_text())["status"] for p in records] == ["complete"] * 6


def test_ray_options_ask_for_gpus_or_the_resource_standing_in_for_them():
    assert create("ray").options.requests() == {"num_cpus": 1}
    assert create("ray", gpus_per_run=0.25).options.requests() == {"num_cpus": 1, "num_gpus": 0.25}
    assert create("ray", gpus_per_run=0.5, gpu_resource="fake_gpu", threads=2).options.requests() == {
        "num_cpus": 2, "resources": {"fake_gpu": 0.5}}
    with pytest.raises(ExecutorError, match="gpus_per_run: 1.5 is not allowed"):
        create("ray", gpus_per_run=1.5)


@pytest.fixture
def ray_with_a_fake_gpu():
    ray = pytest.importorskip("ray", reason="the Ray executor needs the ray extra (./setup.sh dev installs it)")
    ray.init(num_cpus=2, resources={"fake_gpu": 1}, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.mark.slow
def test_a_grid_schedules_on_a_custom_resource_and_an_impossible_request_is_one_line(tmp_path, ray_with_a_fake_gpu):
    (tmp_path / "exp.toml").write_text(tiny_experiment("ray-gpus", seeds=(0, 1, 2)))
    experiment = load_experiment(tmp_path / "exp.toml")
    packed = create("ray", gpus_per_run=0.5, gpu_resource="fake_gpu")  # two runs share the one fake GPU
    results = run_grid(experiment, tmp_path / "runs", tmp_path / "records", executor=packed, live=False)
    assert {status for status, _ in results.values()} == {TRAINED}
    # a grid with something left to train (a recorded one starts no executor at all, so asks nothing of it)
    with pytest.raises(ExecutorError, match=r"each run asks for 2 fake_gpu, but the cluster has 1"):
        run_grid(experiment, tmp_path / "runs-2", tmp_path / "records-2", live=False,
                 executor=create("ray", gpus_per_run=2, gpu_resource="fake_gpu"))
    with pytest.raises(ExecutorError, match=r"each run asks for 0.25 GPU, but the cluster has 0"):
        run_grid(experiment, tmp_path / "runs-2", tmp_path / "records-2", live=False,
                 executor=create("ray", gpus_per_run=0.25))
