"""What `zoo run` and `zoo train` say about this machine before they train (zoo/experiment/preflight.py), and the
dry-run's forecast by hardware: bf16 on a CPU without fast bf16 matmuls, seeds split across hardware, and step
rates measured on other hardware named as such."""

from __future__ import annotations

import json
import platform
import shutil
from pathlib import Path

import pytest
import torch
from smoke_runs import SMOKE, TRAIN, experiment_file

from zoo import machine
from zoo.cli import main
from zoo.experiment import load_experiment
from zoo.experiment import record as records
from zoo.experiment.forecast import forecast
from zoo.experiment.grid import cells
from zoo.experiment.preflight import warnings
from zoo.experiment.runner import run_grid

BF16 = {"device = \"cpu\"": "device = \"cpu\"\nprecision = \"bf16\""}


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """The smoke grid (2 variants x 2 seeds of copy), trained once for the module: runs/ and records/."""
    root = tmp_path_factory.mktemp("smoke")
    run_grid(load_experiment(experiment_file(root)), root / "runs", root / "records", live=False)
    return root


@pytest.fixture
def grid(trained, tmp_path, monkeypatch):
    """A copy of the trained grid, on a machine whose CPU PyTorch drives with 'AVX2'."""
    shutil.copytree(trained, tmp_path, dirs_exist_ok=True)
    monkeypatch.setattr(machine, "cpu_capability", lambda: "AVX2")
    return tmp_path


def records_of(root: Path) -> dict[str, Path]:
    folder = root / "records"
    return {p.relative_to(folder).with_suffix("").as_posix(): p for p in folder.rglob("seed-*.json")}


def made_on(path: Path, capability: str | None, slower: float = 1.0) -> None:
    """Rewrite a record as if it had trained on a CPU with `capability` (None: not recorded), `slower` times as long."""
    record = json.loads(path.read_text())
    record["provenance"]["cpu_capability"] = capability
    record["summary"]["train_seconds"] *= slower
    records.write(path, records.Record.model_validate(record))  # as written: its digest agrees


def preflight(root: Path, text: str = SMOKE, **replace: str) -> list[str]:
    experiment = load_experiment(experiment_file(root, text, **replace))
    return warnings(experiment, cells(experiment, root / "runs", root / "records"))


# -- bf16 on the CPU --------------------------------------------------------------------------------
@pytest.mark.skipif(platform.system() != "Linux" or platform.machine() != "x86_64", reason="reads /proc/cpuinfo")
def test_fast_bf16_matmuls_are_what_the_cpu_flags_say():
    """PyTorch's oneDNN bf16 path needs AVX-512 BW, VL and DQ, or AVX-NE-CONVERT: the kernel's flags decide it."""
    flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
    flags = set(flags.split(":", 1)[1].split())
    expected = {"avx512bw", "avx512vl", "avx512dq"} <= flags or "avx_ne_convert" in flags
    assert machine.cpu_has_bf16_matmul() is expected


@pytest.mark.parametrize("fast", [False, True])
def test_bf16_runs_on_a_cpu_without_fast_bf16_are_warned_about_once(tmp_path, monkeypatch, fast):
    monkeypatch.setattr(machine, "cpu_has_bf16_matmul", lambda: fast)
    found = preflight(tmp_path, **BF16)
    if fast:
        assert found == []
    else:
        (line,) = found
        assert line.startswith("4 runs of smoke train in bf16 on this CPU") and "slow fallback" in line
    monkeypatch.setattr(machine, "cpu_has_bf16_matmul", lambda: False)
    assert preflight(tmp_path) == []  # fp32 runs: nothing to say


# -- seeds split across hardware ------------------------------------------------------------------------
def test_a_seed_whose_arms_trained_on_other_hardware_is_named(grid):
    found = records_of(grid)
    for name in ("post-norm/copy/seed-0", "pre-norm/copy/seed-0", "pre-norm/copy/seed-1"):
        found[name].unlink()  # seed 0: nothing recorded; seed 1: post-norm recorded, pre-norm to train
    made_on(found["post-norm/copy/seed-1"], "AVX512")
    (line,) = preflight(grid)
    assert line.startswith("copy: arms recorded on other hardware than this machine's cpu (AVX2) "
                           "(seed 1 has 1 on cpu (AVX512) and 1 to train).")
    made_on(found["post-norm/copy/seed-1"], "AVX2")
    assert preflight(grid) == []  # the same hardware
    made_on(found["post-norm/copy/seed-1"], None)
    assert preflight(grid) == []  # a record that does not say where it trained proves no split


# -- the forecast by hardware -------------------------------------------------------------------------
def test_the_forecast_takes_its_rate_from_this_hardware_and_names_other_hardware(grid):
    """Two records from this machine's hardware and two from a CPU 10 times slower: the rate is this hardware's
    alone; with none from here, it is all of them, and the forecast says where they came from."""
    found = records_of(grid)
    rate = {name: (r := json.loads(path.read_text()))["summary"]["train_seconds"] / r["summary"]["steps"]
            for name, path in found.items()}
    slow = ("post-norm/copy/seed-1", "pre-norm/copy/seed-1")
    for name in slow:
        made_on(found[name], "AVX512", slower=10)
    for name in set(found) - set(slow):
        made_on(found[name], "AVX2")
    changed = load_experiment(experiment_file(grid, **{"steps = 40": "steps = 60"}))  # every cell stale
    [row] = forecast(changed, cells(changed, grid / "runs", grid / "records"))
    here = sorted(rate[name] for name in set(found) - set(slow))
    assert row.seconds_per_step == pytest.approx(sum(here) / 2) and row.measured_on == ()
    for name in set(found) - set(slow):
        made_on(found[name], "AVX512")
    [row] = forecast(changed, cells(changed, grid / "runs", grid / "records"))
    every = sorted([rate[n] for n in set(found) - set(slow)] + [10 * rate[n] for n in slow])
    assert row.seconds_per_step == pytest.approx((every[1] + every[2]) / 2)
    assert (row.measured_on, row.here) == (("cpu (AVX512)",), "cpu (AVX2)")


# -- what the commands print ------------------------------------------------------------------------
def test_the_dry_run_prints_the_warnings_and_where_its_rate_was_measured(grid, monkeypatch, capsys):
    monkeypatch.setattr(machine, "cpu_has_bf16_matmul", lambda: False)
    for path in records_of(grid).values():
        made_on(path, "AVX512")
    path = experiment_file(grid, **{**BF16, "steps = 40": "steps = 60"})
    assert main(["run", str(path), "--dry-run", "--runs", str(grid / "runs"), "--out", str(grid)]) == 0
    out, err = capsys.readouterr()
    assert "zoo: warning: 4 runs of smoke train in bf16 on this CPU" in " ".join(err.split())
    assert ("copy: its s/step comes from records made on cpu (AVX512), not on this machine's cpu (AVX2): its hours "
            "are what the runs took there, not a forecast for this machine.") in " ".join(out.split())


def test_zoo_train_warns_before_a_bf16_run_on_a_cpu_without_fast_bf16(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(machine, "cpu_has_bf16_matmul", lambda: False)
    argv = [*TRAIN[3:], "--train", "steps=2", "--train", "precision='bf16'", "--out", str(tmp_path / "run")]
    assert main(argv) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "zoo: warning: this run trains in bf16 on this CPU" in err
    assert err.index("zoo: warning:") < err.index("training paper-base")  # said before it trains


def test_zoo_bench_warns_that_its_bf16_measurements_take_the_slow_path(monkeypatch, capsys):
    import zoo.proofs.bench

    monkeypatch.setattr(machine, "cpu_has_bf16_matmul", lambda: False)
    monkeypatch.setattr(zoo.proofs.bench, "run", lambda config, report: {"measured": True})  # the warning, not bench
    assert main(["bench", "--device", "cpu", "--json"]) == 0
    out, err = capsys.readouterr()
    assert "zoo: warning: the bench's bf16 measurements train in bf16 on this CPU" in " ".join(err.split())
    assert '"measured"' in out
    monkeypatch.setattr(machine, "cpu_has_bf16_matmul", lambda: True)
    assert main(["bench", "--device", "cpu", "--json"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_zoo_run_warns_before_it_trains(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(machine, "cpu_has_bf16_matmul", lambda: False)
    path = experiment_file(tmp_path, **{**BF16, "seeds = [0, 1]": "seeds = [0]", "steps = 40": "steps = 2"})
    assert main(["run", str(path), "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--no-live"]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "zoo: warning: 2 runs of smoke train in bf16 on this CPU" in err
    assert err.index("zoo: warning:") < err.index("stalled")  # said before the grid's results
    assert len(list((tmp_path / "out" / "records").rglob("seed-*.json"))) == 2  # a warning, not a refusal


@pytest.mark.skipif(torch.cuda.is_available(), reason="asks about a GPU this machine lacks")
def test_a_gpu_this_machine_lacks_is_forecast_from_the_gpu_records_without_naming_them_or_a_split(grid):
    """A dry-run may forecast GPU runs on a machine without a GPU: the GPU records give the rate, and with no GPU
    here to set them against there is neither a 'made on other hardware' line nor a split seed."""
    found = records_of(grid)
    for name in ("post-norm/copy/seed-0", "pre-norm/copy/seed-1"):
        found.pop(name).unlink()  # one arm of each seed left to run
    for path in found.values():
        record = json.loads(path.read_text())
        record["summary"]["device"] = "cuda (NVIDIA H200)"
        records.write(path, records.Record.model_validate(record))  # as written: its digest agrees
    experiment = load_experiment(experiment_file(grid, **{'device = "cpu"': 'device = "cuda"'}))
    [row] = forecast(experiment, cells(experiment, grid / "runs", grid / "records"))
    assert row.device == "cuda" and row.seconds_per_step is not None
    assert (row.here, row.measured_on) == (None, ())
    assert warnings(experiment, cells(experiment, grid / "runs", grid / "records")) == []
