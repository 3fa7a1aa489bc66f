"""The README's "adding a component" example registers and builds without touching the core."""

import torch

import zoo
from zoo.registry import registry


def test_glu_example_registers_and_trains():
    import examples.glu_ffn  # noqa: F401  (registers ffn.glu)

    try:
        assert "ffn.glu" in registry.list("ffn.*")
        spec = zoo.load_spec("paper-base", {"ffn.kind": "glu", "ffn.activation": "gelu", "d_model": 16, "n_heads": 2,
                                            "d_ff": 24, "encoder_layers": 1, "decoder_layers": 1,
                                            "src_vocab": 11, "tgt_vocab": 11})
        model = zoo.build(spec)
        scores = model(torch.randint(1, 11, (2, 5)), torch.randint(1, 11, (2, 4)))
        scores.sum().backward()
        assert scores.shape == (2, 4, 11)
        assert model.num_parameters() == zoo.build(spec.with_overrides({"ffn.kind": "linear"})).num_parameters() \
            + spec.encoder_layers * (16 * 24 + 24) + spec.decoder_layers * (16 * 24 + 24)
    finally:
        registry.unregister("ffn", "glu")
