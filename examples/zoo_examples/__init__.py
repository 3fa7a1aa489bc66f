"""zoo-examples: a plugin package, as a user would write one outside zoo's repository.

It brings a component (ffn.glu), a synthetic task (rotate) and a metric (edit_accuracy). Installed
(`pip install ./examples`), it registers them in every zoo command through the
entry point group `zoo.plugins` (see pyproject.toml); without installing it, `--plugin
examples/zoo_examples`, `ZOO_PLUGINS=examples/zoo_examples` or an experiment file's `plugins` load it.
"""

from . import edit_metric, glu_ffn, rotate_task  # noqa: F401  (each registers what it brings)
