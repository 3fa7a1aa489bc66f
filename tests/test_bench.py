"""`zoo bench` at tiny sizes: a spec torch.nn.Transformer cannot express is measured without a reference."""

from zoo.bench import BenchConfig, run

TINY = {"d_model": 16, "n_heads": 2, "d_ff": 32, "layers": 1, "vocab": 50, "rounds": 1, "steps_per_round": 1,
        "decode_batch": 2, "decode_tokens": 4}


def test_inexpressible_spec_gets_zoos_rates_and_the_reason(tmp_path, monkeypatch):
    (tmp_path / "rms.toml").write_text('extends = "paper-base"\nname = "rms"\n[norm]\nkind = "rmsnorm"\n')
    monkeypatch.setenv("ZOO_PRESETS", str(tmp_path))
    results = run(BenchConfig(spec="rms", **TINY), report=lambda _: None)
    assert "norm.kind = 'rmsnorm'" in results["no_reference"] and "train_fp32_ratio" not in results
    assert results["train_fp32_zoo_tok_s"] > 0 and results["decode_cache_ratio"] > 0


def test_expressible_spec_gets_ratios():
    results = run(BenchConfig(**TINY), report=lambda _: None)
    assert "no_reference" not in results and results["train_fp32_ratio"] > 0 and results["train_bf16_ratio"] > 0
