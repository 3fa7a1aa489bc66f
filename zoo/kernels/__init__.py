"""Kernels: the numerics under a training step, apart from the components that call them.

    loss.py                 the training loss each output head declares (cross-entropy, smoothed KL divergence)
    loss_fused.py           that loss and its gradient fused with the vocabulary projection (`kernels = "fast"`)
    attention_recompute.py  attention's bf16 backward recomputed in float32 (`kernels = "fast-attention"`)

Plain torch in, plain torch out: nothing here imports from zoo outside zoo.kernels, so the components, the model
and the training step depend on it, never the reverse (tests/test_layout.py).
"""
