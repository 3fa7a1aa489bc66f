"""`zoo bench` at tiny sizes: a spec torch.nn.Transformer cannot express is measured without a reference; the
device option; runs per device (several training processes at once)."""

import math

import pytest
import torch

from zoo import machine
from zoo.cli import main
from zoo.proofs.bench import BenchConfig, make_batch, run, runs_per_device

TINY = {"d_model": 16, "n_heads": 2, "d_ff": 32, "layers": 1, "vocab": 50, "rounds": 1, "steps_per_round": 1,
        "decode_batch": 2, "decode_tokens": 4}
RATIOS = ("train_fp32_ratio", "train_bf16_ratio", "decode_cache_ratio", "train_fp32_peak_fraction")
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_inexpressible_spec_gets_zoos_rates_and_the_reason(tmp_path, monkeypatch):
    (tmp_path / "rms.toml").write_text('extends = "paper-base"\nname = "rms"\n[norm]\nkind = "rmsnorm"\n')
    monkeypatch.setenv("ZOO_PRESETS", str(tmp_path))
    results = run(BenchConfig(spec="rms", **TINY), report=lambda _: None)
    assert "norm.kind = 'rmsnorm'" in results["no_reference"] and "train_fp32_ratio" not in results
    assert results["train_fp32_zoo_tok_s"] > 0 and results["decode_cache_ratio"] > 0


def test_expressible_spec_gets_ratios_measured_on_the_cpu_by_default():
    results = run(BenchConfig(**TINY), report=lambda _: None)
    assert "no_reference" not in results and results["device"] == "cpu"
    assert all(results[key] > 0 for key in RATIOS)


def test_each_paths_flop_utilisation_counts_the_reference_steps_model_flops_at_its_own_rate():
    results = run(BenchConfig(**TINY), report=lambda _: None)
    measured = ["fp32"] + (["bf16"] if "no_bf16_peak" not in results else [])  # none on a CPU without fast bf16
    assert ("no_bf16_peak" in results) == (machine.cpu_has_bf16_matmul() is False)
    for precision in measured:
        peak = results[f"matmul_{precision}_peak_flop_s"]
        for name, suffix in (("zoo", ""), ("fast", "_fast")):
            achieved = results["train_flops_per_token"] * results[f"train_{precision}_{name}_tok_s"]
            assert results[f"train_{precision}{suffix}_achieved_flop_s"] == pytest.approx(achieved)
            assert results[f"train_{precision}{suffix}_peak_fraction"] == pytest.approx(achieved / peak)


def test_a_cpu_without_fast_bf16_gets_no_bf16_peak_and_the_reason(monkeypatch):
    """The bf16 'peak' of PyTorch's slow fallback is no peak (an AVX2 CPU's: 0.78 GFLOP/s, below what a training
    step reaches, so its fractions read above 100%), and it took a minute to measure."""
    monkeypatch.setattr(machine, "cpu_has_bf16_matmul", lambda: False)
    results = run(BenchConfig(**TINY), report=lambda _: None)
    assert "matmul_bf16_peak_flop_s" not in results and "train_bf16_peak_fraction" not in results
    assert "no oneDNN bf16 matmuls" in results["no_bf16_peak"] and results["matmul_fp32_peak_flop_s"] > 0
    assert results["train_bf16_zoo_tok_s"] > 0  # the bf16 training rates are still measured


def test_batch_and_length_set_the_training_batches_target_tokens():
    """The bench draws lengths uniformly within half the mean either way, targets 10% longer than sources
    (int(length * 1.1)), and predicts all but the first target token: the expected count per batch follows."""
    for batch, length in ((8, 24), (40, 10), (40, 4)):
        results = run(BenchConfig(**TINY | {"batch": batch, "length": length}), report=lambda _: None)
        target = int(length * 1.1)
        expected = batch * (target - 1)  # the mean of the uniform lengths target // 2 .. target + target // 2
        assert results["batch"] == batch and results["length"] == length
        assert abs(results["batch_target_tokens"] - expected) < 0.25 * expected


def test_batch_1000_is_the_papers_25000_target_tokens_as_the_help_and_docs_say():
    generator = torch.Generator().manual_seed(0)
    tokens = [make_batch(BenchConfig(batch=1000), generator, 0, torch.device("cpu")).tokens for _ in range(4)]
    assert sum(tokens) / 4 == pytest.approx(25_000, rel=0.02)
    default = [make_batch(BenchConfig(), generator, 0, torch.device("cpu")).tokens for _ in range(4)]
    assert sum(default) / 4 == pytest.approx(1_500, rel=0.1)  # "about 1,500" at the defaults


@pytest.mark.parametrize("option, value", [("--batch", "0"), ("--length", "3"), ("--rounds", "0")])
def test_a_batch_without_sentences_or_targets_is_refused_before_measuring(option, value, capsys):
    code = main(["bench", option, value])
    err = capsys.readouterr().err
    assert code == 2 and option in err and "Traceback" not in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA GPU is there")
def test_cuda_asked_for_without_one_is_a_one_line_user_error(capsys):
    code = main(["bench", "--device", "cuda"])
    err = capsys.readouterr().err
    assert code == 2 and "'cuda'" in err and "Traceback" not in err


@pytest.mark.parametrize("processes", ["0", "1,,2", "two"])
def test_process_counts_that_are_not_counts_are_refused_before_measuring(processes, capsys):
    code = main(["bench", "--processes", processes])
    assert code == 2 and "--processes" in capsys.readouterr().err


@pytest.mark.slow  # three spawned interpreters, each importing torch
def test_runs_per_device_measures_one_process_as_the_baseline():
    rows = runs_per_device(BenchConfig(**TINY), [2], steps=2, report=lambda _: None)
    assert [row["processes"] for row in rows] == [1, 2] and rows[0]["scaling"] == 1.0
    assert all(row["aggregate_tok_s"] > 0 and row["per_process_median_tok_s"] > 0 and row["scaling"] > 0
               for row in rows)


@cuda
def test_the_bench_measures_on_a_gpu():
    results = run(BenchConfig(device="cuda", **TINY), report=lambda _: None)
    assert results["device"].startswith("cuda (")
    assert all(0 < results[key] < math.inf for key in (*RATIOS, "train_fp32_graphed_ratio", "train_bf16_graphed_ratio"))


@cuda
def test_runs_per_device_share_one_gpu():
    rows = runs_per_device(BenchConfig(device="cuda", process_path="graphed", **TINY), [1, 2], steps=5,
                           report=lambda _: None)
    assert [row["processes"] for row in rows] == [1, 2]
    assert all(0 < row[key] < math.inf for row in rows for key in ("aggregate_tok_s", "scaling"))
