"""The metric registry: every registered metric keeps the metric contracts, and the registry refuses what it must."""

from __future__ import annotations

import pytest

from zoo import metrics
from zoo.errors import RegistryError
from zoo.metrics import Metric, register_metric
from zoo.testing.data import check_metric, metric_contracts


@pytest.mark.parametrize("name", metrics.names())
def test_every_metric_keeps_its_contracts(name):
    assert check_metric(name) == []


def test_sentence_level_metrics_get_the_totals_contract():
    assert "totals" in {c.name for c in metric_contracts("bleu")}
    assert "totals" not in {c.name for c in metric_contracts("bleu_lowercase")}  # results.csv only, no bootstrap


def test_a_metric_whose_totals_disagree_with_its_score_fails_the_contract():
    @register_metric("halved-check")
    class Halved(metrics.ExactMatch):
        def from_totals(self, totals):
            return super().from_totals(totals) / 2

    try:
        failures = dict(check_metric("halved-check"))
        assert set(failures) == {"totals"}  # vectorised still agrees with itself row by row
        assert "from_totals of the summed statistics" in failures["totals"]
    finally:
        metrics.METRICS.unregister("halved-check")
        metrics.get.cache_clear()


def test_the_registry_refuses_a_taken_name_and_a_foreign_class():
    with pytest.raises(RegistryError, match="metric 'bleu' is already registered"):
        register_metric("bleu")(metrics.Bleu)
    with pytest.raises(RegistryError, match="must derive from zoo.metrics.Metric"):
        register_metric("foreign-check")(dict)
    assert "foreign-check" not in metrics.METRICS


def test_an_unknown_metric_is_one_line_naming_the_valid_ones():
    with pytest.raises(RegistryError) as err:
        metrics.get("blue")
    assert "unknown metric 'blue'; did you mean 'bleu'? (valid: bleu, bleu_lowercase, chrf" in str(err.value)
    assert "\n" not in str(err.value)


def test_results_columns_find_their_metric_and_others_find_none():
    assert metrics.find("chrf") is metrics.get("chrf") and metrics.find("perplexity") is None
    assert isinstance(metrics.get("exact_match"), Metric) and metrics.get("exact_match").higher_is_better


def test_zoo_list_shows_metrics_with_direction_and_bounds(capsys):
    from zoo.cli import main

    assert main(["list", "metric.chrf"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "chrf" in out and "higher" in out and "0..100" in out and "bleu_lowercase" not in out


def test_a_plugin_metric_no_task_of_the_experiment_uses_adds_no_results_column():
    """Otherwise an installed plugin would change the committed reports' results.csv when they are regenerated."""
    from pathlib import Path

    from zoo.experiment import load_experiment
    from zoo.report.collect import columns

    experiment = load_experiment(Path(__file__).resolve().parents[1] / "experiments" / "smoke.toml")

    @register_metric("unused-check")
    class Unused(metrics.ExactMatch):
        pass

    try:
        listed = columns(experiment)
        assert "unused-check" not in listed and {"bleu", "chrf", "exact_match", "token_accuracy"} <= set(listed)
    finally:
        metrics.METRICS.unregister("unused-check")
        metrics.get.cache_clear()


@pytest.mark.parametrize(("name", "width"), [("bleu", 10), ("bleu_lowercase", 10), ("chrf", 18)])
def test_vectorised_corpus_scores_are_sacrebleus_to_the_bit(name, width):
    """The bootstrap scores resamples many at a time (metrics.from_totals on (..., k)); each must be exactly what
    sacreBLEU computes from the same totals, edge cases included (no matches, an order with no n-grams, an empty
    system, a short system, chrF orders with no hypothesis or reference n-grams)."""
    import numpy as np

    metric = metrics.get(name)
    rows = np.random.default_rng(1).integers(0, 40, size=(5000, width)).astype(float)
    rows[::7, 2:6], rows[::11, 6:], rows[::13, 0], rows[::17, 7], rows[::5, 2] = 0, 0, 0, 0, 0
    rows[::3, ::3], rows[::4, 1::3] = 0, 0
    expected = np.array([metric._scorer()._compute_score_from_stats(list(row)).score for row in rows])
    np.testing.assert_array_equal(metric.from_totals(rows), expected)
    np.testing.assert_array_equal(metric.from_totals(rows.reshape(50, 100, width)), expected.reshape(50, 100))
    assert metric.vectorised
