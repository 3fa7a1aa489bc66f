"""An experiment's alpha sets its comparisons' intervals, and the report names their level: an experiment at
alpha 0.01 printed 99% intervals under '[95% CI]' headers."""

from __future__ import annotations

import shutil

import pytest
from fake_study import EXPERIMENT
from scipy import stats as scipy_stats

from zoo.experiment import load_experiment
from zoo.report import build_report
from zoo.report.tables import ci, fmt_p


def test_ci_names_the_level():
    assert (ci(0.05), ci(0.01), ci(0.1), ci(0.001)) == ("95% CI", "99% CI", "90% CI", "99.9% CI")


def test_a_printed_p_stays_on_its_side_of_alpha():
    """Three decimals, unless they would round p onto alpha: "0.050" beside "better" reads as a contradiction."""
    assert [fmt_p(p) for p in (0.04996, 0.0495, 0.0504, 0.05, 0.123456, 0.0004)] == [
        "0.04996", "0.0495", "0.050", "0.050", "0.123", "< 0.001"]
    assert (fmt_p(0.00996, 0.01), fmt_p(0.00996), fmt_p(0.0499999999)) == ("0.00996", "0.010", "< 0.05")
    assert fmt_p(float("nan")) == fmt_p(None) == "—"


def test_a_report_at_alpha_001_labels_its_intervals_99(fake, tmp_path):
    experiment, root = fake
    shutil.copytree(root, tmp_path / "records")
    path = tmp_path / "fake.toml"
    path.write_text(EXPERIMENT.replace("[train]\n", "[analysis]\nalpha = 0.01\n\n[train]\n", 1))
    strict = load_experiment(path)
    report_path, report = build_report(strict, tmp_path / "records", tmp_path, "zoo report fake")
    text = report_path.read_text()
    assert "Δ exact match % [99% CI]" in text and "odds ratio [99% CI]" in text and "difference [99% CI]" in text
    assert "descriptive (difference [99% CI]" in text and "[95% CI]" not in text
    r = report.tasks[0].comparisons["prenorm"].result
    assert r.alpha == 0.01
    assert r.ci_high - r.difference == pytest.approx(scipy_stats.t.ppf(0.995, r.df) * r.se)  # the 99% interval
