"""The report's equivalence matrix and which of its pairs may serve as placebos (the noise floor).

The matrix compares functions in eval mode on transplanted weights, so it cannot see the starting weights
or dropout. A pair that differs there computes one function but does not train alike: it measures a
training change, and must never be taken for noise."""

from __future__ import annotations

import pytest

from zoo.experiment import load_experiment
from zoo.report.collect import load_records
from zoo.report.equiv import equivalence_matrix, matrix_markdown


def experiment_text(name: str, variants: str) -> str:
    """A one-task, one-seed experiment of small models whose only content is its variants."""
    return f"""
name = "{name}"
seeds = [0]

[shared]
d_model = 32
n_heads = 4
d_ff = 64
encoder_layers = 1
decoder_layers = 1
src_vocab = 16
tgt_vocab = 16
{variants}
[[tasks]]
name = "copy"
options = {{symbols = 8, min_len = 2, max_len = 4}}

[train]
steps = 10
"""


EXPERIMENT = experiment_text("matrix", """
[[variants]]
label = "plain"
base = "writeup-000"
[[variants]]
label = "conv1d"
base = "writeup-000"
set = {"ffn.kind" = "conv1d"}
[[variants]]
label = "more-dropout"
base = "writeup-000"
set = {"residual.dropout_on" = ["self_attn", "cross_attn", "ffn"]}
[[variants]]
label = "shared-prototypes"
base = "writeup-000"
set = {"init.shared_prototypes" = true}
[[variants]]
label = "logits"
base = "writeup-000"
set = {"output.kind" = "logits"}
[[variants]]
label = "random-pad-row"
base = "writeup-000"
set = {"embedding.padding_idx" = false}
""")


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    path = tmp_path_factory.mktemp("matrix") / "matrix.toml"
    path.write_text(EXPERIMENT)
    experiment = load_experiment(path)
    return equivalence_matrix(experiment, load_records(experiment, path.parent / "records"))


def test_all_compute_one_function(matrix):
    assert matrix.classes() == [["plain", "conv1d", "more-dropout", "shared-prototypes", "logits", "random-pad-row"]]


def test_only_a_pair_that_also_trains_alike_is_a_placebo(matrix):
    assert matrix.alike("plain", "conv1d")
    assert not matrix.alike("plain", "more-dropout")  # dropout on every branch: only training sees it
    assert not matrix.alike("plain", "shared-prototypes")  # other starting weights: only training sees them
    # found by an audit, where field names had said 'trained alike': another loss (a log-softmax head smooths
    # labels the annotated way, a logits head uniformly), and another start (a padding row drawn, not zeroed)
    assert not matrix.alike("plain", "logits") and not matrix.alike("plain", "random-pad-row")
    assert matrix.training["random-pad-row"]["starting weights"] == "random-pad-row's"
    assert matrix.training["conv1d"]["starting weights"] == "plain's"  # (F, D, 1) and (F, D): the same values


def test_the_report_names_the_training_difference(matrix):
    text = matrix_markdown(matrix)
    assert "plain, conv1d: also trained alike" in text
    assert "spec.residual.dropout_on" in text and "spec.init.shared_prototypes" in text
    assert "spec.init.kind" not in text  # the same in every variant: not a difference worth naming


def test_a_matrix_of_recorded_specs_counts_parameters_as_their_records_did():
    """Specs read from records take their parameter count from the record (no meta-device build, whose first use
    imports torch._dynamo: 2 s and 70 MB of a report), and that count is what building the spec gives."""
    from pathlib import Path

    from zoo.model.build import build
    from zoo.report import equiv

    root = Path(__file__).resolve().parents[1]
    experiment = load_experiment(root / "experiments" / "quickstart.toml")
    records = load_records(experiment, root / "reports" / "quickstart" / "records")
    equiv._counted.cache_clear()
    equivalence_matrix(experiment, records)
    assert equiv._counted.cache_info().misses == 0
    for variant in experiment.config.variants:
        spec, _, counted = equiv.run_spec(experiment, records, variant.label)
        assert counted == equiv._parameters(spec, {spec.model_dump_json(): counted}) == build(spec).num_parameters()


HELD = experiment_text("held", """
[[variants]]
label = "learned-conv1d"
base = "paper-base"
set = {"positional.kind" = "learned", "ffn.kind" = "conv1d"}
[[variants]]
label = "plain"
base = "paper-base"
[[variants]]
label = "learned"
base = "paper-base"
set = {"positional.kind" = "learned"}
[[variants]]
label = "pre-norm"
base = "paper-base"
set = {"residual.kind" = "pre-norm"}
""")


@pytest.mark.parametrize("block", [8, 3, 1])
def test_a_column_built_once_checks_every_row_as_a_fresh_build_would(block, tmp_path, monkeypatch):
    """Each column's model is built once per block of columns and put back as built before every row: a row whose A
    lacks some of B's weights (plain has no learned positions) must find them at their seeded initialisation, not
    at the weights the row before copied in (learned-conv1d's). The same verdicts, to the last digit and in the
    table's row-by-row order, as building B for every pair, whatever the block."""
    from zoo.report import equiv

    path = tmp_path / "held.toml"
    path.write_text(HELD)
    experiment = load_experiment(path)
    records = load_records(experiment, tmp_path / "records")
    monkeypatch.setattr(equiv, "HELD_COLUMNS", block)
    held = equivalence_matrix(experiment, records)
    monkeypatch.setattr(equiv, "TARGET_BYTES", 0)  # nothing held: every pair builds its B
    built = equivalence_matrix(experiment, records)
    assert list(held.verdicts.items()) == list(built.verdicts.items())
    labels = [v.label for v in experiment.config.variants]
    assert list(held.verdicts) == [(a, b) for a in labels for b in labels if a != b]
    assert held.verdicts[("plain", "learned")].missing  # the case under test: B's positions have no source
    assert held.verdicts[("learned-conv1d", "learned")].equivalent
