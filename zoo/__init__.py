"""zoo: a configurable Transformer component zoo for variant comparison.

Shape legend used in comments and docstrings throughout the package:
B batch, S source length, T target length, L either, D d_model, H heads, Dh head dim (D / H),
F feed-forward width (d_ff), V vocabulary.

Public API:
    load_spec(name_or_path, overrides) -> ModelSpec     build(spec_or_name, seed) -> Seq2Seq
    transplant(model, spec) -> Seq2Seq                  equivalence(spec_a, spec_b, seed) -> Verdict
    registry (slot -> name -> implementation)           masks.build(convention, src, tgt_in, pad_id)
    study(experiment_file) -> Study: .records() -> DataFrame, .run(), .analyse(), .report()  (zoo/api.py)
"""

from zoo import masks
from zoo.errors import IncompatibleComponents, NotExpressible, NotTransplantable, RegistryError, SpecError, ZooError
from zoo.model.build import build
from zoo.model.presets import preset_names
from zoo.model.spec import ModelSpec, load_spec
from zoo.proofs.equivalence import Verdict, equivalence, transplant
from zoo.registry import register, registry
from zoo.version import __version__

__all__ = [
    "IncompatibleComponents", "ModelSpec", "NotExpressible", "NotTransplantable", "RegistryError", "SpecError",
    "Study", "Verdict", "ZooError", "build", "equivalence", "load_spec", "masks", "preset_names", "register",
    "__version__", "registry", "study", "transplant",
]


def __getattr__(name: str):
    """`zoo.study` and `zoo.Study` load the experiment machinery on first use: `import zoo` stays as quick as
    building a model needs."""
    if name in ("study", "Study"):
        from zoo import api

        return getattr(api, name)
    raise AttributeError(f"module 'zoo' has no attribute {name!r}")
