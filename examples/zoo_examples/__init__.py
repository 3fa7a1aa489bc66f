"""zoo-examples: a plugin package, as a user would write one outside zoo's repository.

Installed (`pip install ./examples`), it registers its components in every zoo command through the
entry point group `zoo.plugins` (see pyproject.toml); without installing it, `--plugin
examples/zoo_examples`, `ZOO_PLUGINS=examples/zoo_examples` or an experiment file's `plugins` load it.
"""

from . import glu_ffn  # noqa: F401  (registers ffn.glu)
