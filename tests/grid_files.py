"""The texts of small experiment and plugin files, for the tests of the grid, the executors and plugins:
what a user would write, sized to train in seconds."""

from __future__ import annotations


def tiny_experiment(name: str, seeds: tuple[int, ...] = (0,), plugin: str = "", ffn: str = "", steps: int = 4,
                    train_size: int = 100, label: str = "") -> str:
    """An experiment file's text: one variant (paper-base at d_model 16, 1 + 1 layers; its FFN `ffn` when given,
    from `plugin`; labelled `label`, else by its FFN) on a small copy task, a few steps of training: seconds per
    cell, for tests of the grid."""
    plugins = f'plugins = ["{plugin}"]\n' if plugin else ""
    override = f'set = {{"ffn.kind" = "{ffn}"}}\n' if ffn else ""
    small = max(8, train_size // 10)
    sizes = f"train_size = {train_size}, valid_size = {small}, test_size = {small}"
    return f"""
name = "{name}"
seeds = {list(seeds)}
{plugins}shared = {{d_model = 16, n_heads = 2, d_ff = 32, encoder_layers = 1, decoder_layers = 1}}

[[variants]]
label = "{label or ffn or 'post-norm'}"
base = "paper-base"
{override}
[[tasks]]
name = "copy"
options = {{symbols = 6, min_len = 2, max_len = 4, {sizes}}}

[train]
steps = {steps}
batch_tokens = {64 if train_size < 100 else 128}
warmup = 1
eval_interval = 2
eval_sentences = {small}
checkpoint_interval = 2
device = "cpu"
threads = 1
"""


TRAINING = '''
def _training():
    frame = sys._getframe()
    while frame is not None:
        if frame.f_code.co_filename.endswith(os.path.join("zoo", "train", "loop.py")):
            return True
        frame = frame.f_back
    return False
'''  # a plugin's prelude: whether the training loop is on the stack (not a probe)


def ffn_plugin(name: str, forward: str = "return self.w(x)", prelude: str = "", init: str = "") -> str:
    """The source of a plugin file registering ffn.`name`: a FeedForward with one Linear `w`, whose forward runs
    `forward` (its body, unindented) after `init` ran in __init__; `prelude` goes at module level (imports, helpers).
    What a user would write from examples/, for tests of what zoo does with a plugin's code."""
    def body(code: str) -> str:
        return "".join(f"        {line}\n" if line else "\n" for line in code.strip("\n").splitlines())

    return f'''
import os
import signal
import sys

from torch import nn

from zoo import register
from zoo.components.ffn import FeedForward, FFNParams
{prelude}

@register("ffn", "{name}", params=FFNParams)
class Plugged(FeedForward):
    def __init__(self, d_model, d_ff, params, dropout):
        super().__init__(d_model, d_ff, params, dropout)
        self.w = nn.Linear(d_model, d_model)
{body(init)}
    def forward(self, x):
{body(forward)}'''


def forgetting(folder):
    """A function that forgets what loading and running plugins from `folder` left in this process since this call
    (the plugins loaded, their modules and those imported from `folder`, the ffn entries they registered, the
    folders they put on sys.path, the modules noted as plugins ran), as a new process would not have it."""
    import sys

    from zoo import plugins
    from zoo.experiment import executed
    from zoo.registry import registry

    loaded, noted, ffns, path = dict(plugins._loaded), dict(executed._noted), set(registry.names("ffn")), list(sys.path)

    def forget() -> None:
        plugins._loaded.clear()
        plugins._loaded.update(loaded)
        executed._noted.clear()
        executed._noted.update(noted)
        for name, module in list(sys.modules.items()):
            if name.startswith("zoo_plugin_") or (getattr(module, "__file__", None) or "").startswith(str(folder)):
                del sys.modules[name]
        for name in set(registry.names("ffn")) - ffns:
            registry.unregister("ffn", name)
        sys.path[:] = path

    return forget
