"""The component registry: slots, lookups, wildcard listing, and refusing bad registrations."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from pydantic import Field, ValidationError
from torch import nn

import zoo
from zoo.components.ffn import FeedForward, FFNParams
from zoo.model.spec import SLOTS
from zoo.registry import SlotParams, registry

SLOT_NAMES = registry.slots()


def test_slots_are_the_spec_slots():
    assert sorted(SLOT_NAMES) == sorted(SLOTS)


@pytest.mark.parametrize("slot", SLOT_NAMES)
def test_every_slot_has_entries_and_a_registered_default(slot):
    names = registry.names(slot)
    assert len(names) >= 1
    assert registry.slot(slot).default in names
    for name in names:
        entry = registry.get(slot, name)
        assert entry.slot == slot and entry.name == name
        assert entry.qualified == f"{slot}.{name}"
        assert issubclass(entry.impl, registry.slot(slot).base)
        assert entry.impl.registry_name == name
        # the derived config fixes the discriminator to the registered name
        assert getattr(entry.config(), registry.slot(slot).key) == name


@pytest.mark.parametrize("slot", SLOT_NAMES)
def test_wildcard_slot_listing_is_exactly_that_slot(slot):
    listed = registry.list(f"{slot}.*")
    assert listed == sorted(f"{slot}.{name}" for name in registry.names(slot))
    assert [e.qualified for e in registry.entries(f"{slot}.*")] == listed


def test_attention_wildcard():
    listed = registry.list("attention.*")
    assert listed, "no attention entries"
    assert all(q.startswith("attention.") for q in listed)
    everything = registry.list()
    assert listed == [q for q in everything if q.split(".")[0] == "attention"]
    assert {"attention.sdpa", "attention.matmul", "attention.torch-mha"} <= set(listed)


def test_substring_wildcard():
    listed = registry.list("*norm*")
    assert listed == [q for q in registry.list() if "norm" in q]
    # matches names in other slots too (residual.post-norm), not only the norm slot
    assert {"norm.layernorm", "residual.post-norm", "residual.pre-norm"} <= set(listed)
    assert not any(q.startswith("ffn.") for q in listed)


def test_list_everything_is_sorted_and_complete():
    listed = registry.list()
    assert listed == sorted(listed)
    assert len(listed) == sum(len(registry.names(s)) for s in SLOT_NAMES)
    assert registry.list("no-such-thing.*") == []


def test_unknown_slot_and_name_raise_registry_error():
    with pytest.raises(zoo.RegistryError, match="unknown slot 'nope'") as info:
        registry.names("nope")
    assert isinstance(info.value, zoo.ZooError)
    with pytest.raises(zoo.RegistryError) as info:
        registry.get("ffn", "nope")
    message = str(info.value)
    assert "ffn.kind" in message and "'nope'" in message
    assert ", ".join(registry.names("ffn")) in message


def test_duplicate_registration_raises():
    existing = registry.names("ffn")[0]
    before = registry.get("ffn", existing)

    with pytest.raises(zoo.RegistryError, match="already registered"):
        @zoo.register("ffn", existing, params=FFNParams)
        class Duplicate(FeedForward):
            pass

    assert registry.get("ffn", existing) is before  # the original is untouched


def test_wrong_base_class_raises():
    with pytest.raises(zoo.RegistryError, match="must derive from FeedForward"):
        @zoo.register("ffn", "wrong-base-test")
        class NotAFeedForward(nn.Module):
            pass

    with pytest.raises(zoo.RegistryError):
        zoo.register("ffn", "not-a-class-test")(lambda x: x)
    assert "wrong-base-test" not in registry.names("ffn")
    assert "not-a-class-test" not in registry.names("ffn")


def test_params_must_be_slot_params():
    from pydantic import BaseModel

    class Loose(BaseModel):
        beta: float = 1.0

    with pytest.raises(zoo.RegistryError, match="SlotParams"):
        @zoo.register("ffn", "loose-params-test", params=Loose)
        class LooseFFN(FeedForward):
            pass

    assert "loose-params-test" not in registry.names("ffn")


def test_registering_into_unknown_slot_raises():
    with pytest.raises(zoo.RegistryError, match="unknown slot"):
        zoo.register("nope", "x")


def test_slot_params_forbid_unknown_keys():
    entry = registry.get("ffn", "linear")
    with pytest.raises(ValidationError):
        entry.config(activaton="relu")


# -- a user-defined component, registered from outside the package ----------------------------------
class SwishParams(FFNParams):
    beta: float = Field(1.0, gt=0, description="swish(x) = x * sigmoid(beta * x)")


def test_user_component_is_usable_without_touching_core(tiny, batch):
    name = "swish-test"
    assert name not in registry.names("ffn")
    try:
        @zoo.register("ffn", name, params=SwishParams)
        class SwishFFN(FeedForward):
            """Two Linears with a swish activation (test-only)."""

            def __init__(self, d_model, d_ff, params, dropout):
                super().__init__(d_model, d_ff, params, dropout)
                self.beta = params.beta
                self.w1 = nn.Linear(d_model, d_ff)
                self.w2 = nn.Linear(d_ff, d_model)

            def forward(self, x):
                h = self.w1(x)
                return self.w2(self.dropout(h * torch.sigmoid(self.beta * h)))

        assert f"ffn.{name}" in registry.list("ffn.*")

        spec = tiny(**{"ffn.kind": name, "ffn.beta": 2.0})
        assert spec.ffn.kind == name and spec.ffn.beta == 2.0
        assert spec.impl("ffn") is SwishFFN

        # its own options are validated, with the field named
        with pytest.raises(zoo.SpecError, match="ffn.beta"):
            tiny(**{"ffn.kind": name, "ffn.beta": -1.0})
        with pytest.raises(zoo.SpecError, match="did you mean 'ffn.beta'"):
            tiny(**{"ffn.kind": name, "ffn.betta": 1.0})
        # the schema picks it up
        schema = zoo.ModelSpec.model_json_schema()
        kinds = [v["properties"]["kind"]["const"] for v in schema["properties"]["ffn"]["oneOf"]]
        assert name in kinds

        model = zoo.build(spec, seed=0).eval()
        layer_ffn = model.encoder.layers[0].ffn
        assert isinstance(layer_ffn, SwishFFN) and layer_ffn.beta == 2.0
        src, tgt_in = batch(spec)
        with torch.no_grad():
            out = model(src, tgt_in)
        assert out.shape == (*tgt_in.shape, spec.tgt_vocab)
        assert torch.isfinite(out).all()
        # it really computes a swish FFN
        x = torch.randn(2, 3, spec.d_model)
        h = layer_ffn.w1(x)
        expected = layer_ffn.w2(h * torch.sigmoid(2.0 * h))
        torch.testing.assert_close(layer_ffn(x), expected)
        assert not torch.allclose(layer_ffn(x), layer_ffn.w2(F.relu(h)))
    finally:
        registry._entries["ffn"].pop(name, None)
    assert name not in registry.names("ffn")
    with pytest.raises(zoo.SpecError, match="ffn.kind"):
        tiny(**{"ffn.kind": name})


def test_slot_params_base_is_frozen_and_strict():
    assert SlotParams.model_config["extra"] == "forbid"
    assert SlotParams.model_config["frozen"] is True


def test_an_unknown_name_suggests_the_closest_and_says_where_names_come_from():
    """A name not found is most often a plugin not loaded (issue 35, item 2): every lookup error says so, with
    the closest name where there is one."""
    from zoo.data.tasks import task_class
    from zoo.errors import RegistryError

    with pytest.raises(RegistryError) as slot:
        registry.slot("fnn")
    with pytest.raises(RegistryError) as entry:
        registry.get("ffn", "swiglux")
    with pytest.raises(ValueError) as task:
        task_class("sort-desc")
    for err, close in ((slot, "'ffn'"), (entry, "'swiglu'"), (task, "'sort'")):
        assert f"did you mean {close}?" in str(err.value)
        assert "needs the plugin loaded: --plugin, $ZOO_PLUGINS or an installed package's entry point" in str(err.value)

