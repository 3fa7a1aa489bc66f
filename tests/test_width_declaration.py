"""The width study as declared (experiments/width.toml, width-64.toml, width-lr.toml): the two widths differ in d_model
and d_ff alone, the arms are the resolved study's definitions of the five factors, the test set is the 3,071 flickr
sentences, and seeds are added until each comparison is decided within +-0.5 BLEU."""

from __future__ import annotations

from pathlib import Path

import pytest

from zoo.data.multi30k import Multi30k
from zoo.experiment import load_experiment, store
from zoo.model.spec import ModelSpec

ROOT = Path(__file__).resolve().parent.parent
ARMS = ["baseline", "rotary", "sharing-none", "no-label-smoothing", "pre-norm", "swiglu"]
RATES = (1e-3, 2e-3, 4e-3)  # width-lr's three; the amendment may set a width's lr to any of them
FLICKR = ("test", "test_2017_flickr", "test_2018_flickr")


def load(name: str):
    return load_experiment(ROOT / "experiments" / f"{name}.toml")


def flat(value, prefix: str = "") -> dict:
    if isinstance(value, dict):
        out = {}
        for key, sub in value.items():
            out.update(flat(sub, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): value}


def differing(a: ModelSpec, b: ModelSpec) -> dict[str, tuple]:
    """The fields two assembled specs differ in, compared one by one (name, description and notes aside)."""
    left, right = (flat(s.model_dump(mode="json", exclude={"name", "description", "notes"})) for s in (a, b))
    assert left.keys() == right.keys()
    return {field: (left[field], right[field]) for field in left if left[field] != right[field]}


@pytest.fixture(scope="module")
def widths():
    return load("width-64"), load("width")


def test_the_two_widths_differ_only_in_d_model_and_d_ff(widths):
    narrow, wide = widths
    assert [v.label for v in narrow.config.variants] == [v.label for v in wide.config.variants] == ARMS
    for arm in ARMS:
        changed = differing(narrow.specs[arm], wide.specs[arm])
        assert changed.keys() == {"d_model", "d_ff"}, arm
        assert changed["d_model"] == (64, 256)
        assert narrow.specs[arm].n_heads == wide.specs[arm].n_heads == 4  # the head count kept: head dim 16 -> 64
        if arm == "swiglu":  # 2/3 of the baseline's d_ff at each width: equal parameters
            assert changed["d_ff"] == (171, 683) == (round(2 / 3 * 256), round(2 / 3 * 1024))
        else:  # d_ff scales with d_model, 4x
            assert changed["d_ff"] == (256, 1024) == (4 * 64, 4 * 256)


def test_everything_else_of_a_cell_is_the_same_at_both_widths(widths):
    """Task, data, training (the peak rate aside, which the amendment may set per width) and decoding, cell by cell."""
    narrow, wide = widths
    [a], [b] = narrow.config.tasks, wide.config.tasks
    for arm in ARMS:
        for seed in (0, 29):  # the first seed and the cap's last
            one, other = (store.definition(e, arm, t, seed) for e, t in ((narrow, a), (wide, b)))
            assert one["task"] == other["task"] and one["decode"] == other["decode"]
            train_a, train_b = ({k: v for k, v in d["train"].items() if k != "lr"} for d in (one, other))
            assert train_a == train_b, arm
            assert one["train"]["lr"] in RATES and other["train"]["lr"] in RATES
            assert set(differing(ModelSpec.model_validate(one["spec"]),
                                 ModelSpec.model_validate(other["spec"]))) == {"d_model", "d_ff"}
    assert (a.margin, a.threshold, a.key) == (b.margin, b.threshold, b.key) == (0.5, 25.0, "multi30k-de-en")
    assert narrow.config.analysis == wide.config.analysis
    assert narrow.config.decode.beam == 1  # greedy
    train = narrow.train_config(a, 0, "baseline")
    assert (train.steps, train.warmup, train.batch_tokens, train.schedule, train.kernels, train.precision) == \
        (4000, 400, 2048, "linear-decay", "fast", "fp32")
    assert (narrow.specs["baseline"].encoder_layers, narrow.specs["baseline"].decoder_layers) == (2, 2)


def test_the_arms_are_the_resolved_studys_definitions_of_the_five_factors(widths):
    """At d_model 64 each arm is the resolved study's (and the ablations') arm of the same label: the same spec, task
    and training, but for the peak rate the amendment may set."""
    narrow, _ = widths
    resolved = load("resolved")
    [mine], [theirs] = narrow.config.tasks, resolved.config.tasks
    for arm in ARMS:
        own, other = store.definition(narrow, arm, mine, 0), store.definition(resolved, arm, theirs, 0)
        assert own["spec"] == other["spec"] and own["task"] == other["task"] and own["decode"] == other["decode"]
        assert {k: v for k, v in own["train"].items() if k != "lr"} == \
            {k: v for k, v in other["train"].items() if k != "lr"}
    assert narrow.specs["rotary"].impl("positional").__name__ == "Rotary"
    assert narrow.specs["sharing-none"].embedding.sharing == "none"
    assert narrow.specs["pre-norm"].residual.kind == "pre-norm"
    assert narrow.specs["swiglu"].ffn.kind == "swiglu"
    assert narrow.train_config(mine, 0, "no-label-smoothing").label_smoothing == 0.0
    assert narrow.train_config(mine, 0, "baseline").label_smoothing == 0.1


def test_the_test_set_is_the_3071_flickr_sentences(widths):
    for experiment in (*widths, load("width-lr")):
        [task] = experiment.config.tasks
        assert tuple(experiment.task_config(task).test_sets) == FLICKR
    assert sum(Multi30k.sizes[name] for name in FLICKR) == 3071


def test_seeds_until_decided_within_half_a_bleu_point(widths):
    for experiment in widths:
        config = experiment.config
        assert config.seeds == [0, 1, 2, 3, 4] and config.baseline == "baseline"
        assert (config.sequential.round_seeds, config.sequential.max_seeds, config.sequential.spending) == \
            (5, 30, "obrien-fleming")
        assert (config.analysis.correction, config.analysis.pool, config.analysis.alpha) == ("holm", "none", 0.05)
        assert config.tasks[0].margin == 0.5
    narrow, wide = widths
    [transfer] = wide.config.transfers  # the interaction Delta(256) - Delta(64), read from width-64's records
    assert transfer.experiment == "width-64.toml" and transfer.tasks == ("multi30k-de-en", "multi30k-de-en")
    assert wide.others[transfer.experiment].name == narrow.name == "width-64" and not narrow.config.transfers


def test_the_learning_rate_check_is_each_widths_baseline_at_three_rates(widths):
    """width-lr's six cells are the two baselines, exactly as the study defines them, at 1e-3, 2e-3 and 4e-3, seed 0."""
    check = load("width-lr")
    assert check.config.seeds == [0] and check.config.sequential is None
    [task] = check.config.tasks
    for experiment, width in zip(widths, (64, 256)):
        [own] = experiment.config.tasks
        baseline = store.definition(experiment, "baseline", own, 0)
        for rate in RATES:
            label = f"d{width}-lr-{rate:.0e}".replace("e-03", "e-3")
            cell = store.definition(check, label, task, 0)
            assert cell["spec"] == baseline["spec"] and cell["task"] == baseline["task"]
            assert cell["decode"] == baseline["decode"] and cell["train"]["lr"] == rate
            assert {k: v for k, v in cell["train"].items() if k != "lr"} == \
                {k: v for k, v in baseline["train"].items() if k != "lr"}
    assert len(check.config.variants) == 6


def header(name: str) -> str:
    """An experiment file's header comment as one line of text."""
    lines = (ROOT / "experiments" / f"{name}.toml").read_text().splitlines()
    return " ".join(" ".join(line.lstrip("#") for line in lines if line.startswith("#")).split())


def test_the_headers_declare_before_any_run():
    """Each file says it was declared before any run; width.toml's header fixes the heads, d_ff, the rate, the
    devices, the family and the cost."""
    for name in ("width", "width-64", "width-lr"):
        assert "Declared 2026-11-29" in header(name) and "before any run" in header(name), name
    said = header("width")
    for words in ("The head count is kept, 4 heads at both widths", "d_ff, which scales with it (4x",
                  "The one amendment allowed", "at each width by the same rule", "no seed spans two devices",
                  "Over the three families the chance of any false verdict is at most 0.15",
                  "zoo run experiments/width.toml --dry-run --device cuda --workers 10` prices round 1 here (30 runs) "
                  "at 0.010 s a step, 0.33 GPU run-hours"):
        assert words in said, words
