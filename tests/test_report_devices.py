"""A study whose seeds trained on two devices (tests/fake_study.py, seeds 0-2 on a CPU and 3-5 on a GPU): speed
belongs to the machine, so the report summarises, compares and plots training throughput per device, and a
single-device study reads as it always did."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from fake_study import EXPERIMENT
from scipy import stats as scipy_stats

from zoo.experiment import load_experiment
from zoo.experiment import record as records
from zoo.report import analyse, plots
from zoo.report.collect import record_path
from zoo.report.findings import UNTESTABLE
from zoo.report.sections.task import device_note
from zoo.report.tables import descriptive_metrics, descriptive_rows, quality_rows

GPU = "cuda (NVIDIA H200)"
TOKENS = 8000  # every fabricated record's training tokens
# (variant, seed) -> training seconds; the CPU seeds 0-2 at about a thousand tokens/s, the GPU seeds 3-5 at 80-100k
SECONDS = {"linear": [10, 8, 5, 0.1, 0.08, 0.1], "conv1d": [4, 5, 8, 0.1, 0.1, 0.08]}


@pytest.fixture(scope="module")
def two_devices(fake, tmp_path_factory):
    experiment, root = fake
    copy = tmp_path_factory.mktemp("devices") / "records"
    shutil.copytree(root, copy)
    task = experiment.config.tasks[0].key
    for variant in ("linear", "conv1d", "prenorm", "masked", "warm"):
        for seed in range(6):
            path = record_path(copy, variant, task, seed)
            record = records.read(path)
            if record.summary is None or record.summary.device is None:
                continue  # diverged: no summary of a finished run
            record.summary.device = "cpu" if seed < 3 else GPU
            record.summary.train_seconds = SECONDS.get(variant, [10.0] * 6)[seed]
            records.write(path, record)
    return experiment, analyse(experiment, copy)


def speeds(variant: str, seeds) -> list[float]:
    return [TOKENS / SECONDS[variant][s] for s in seeds]


def student(values) -> str:
    """'mean [low, high]' as the report rounds tokens/s, from scipy's t interval (the independent reference)."""
    mean = float(np.mean(values))
    low, high = scipy_stats.t.interval(0.95, len(values) - 1, loc=mean, scale=scipy_stats.sem(values))
    return f"{mean:,.0f} [{low:,.0f}, {high:,.0f}]"


def test_throughput_is_summarised_per_device_never_pooled(two_devices):
    experiment, report = two_devices
    analysis = report.tasks[0]
    assert analysis.devices == ["cpu", GPU]
    header, rows = quality_rows(experiment, analysis, report.frame, ["exact_match", "tok_per_s"], report.analyst)
    speed = {row[0].split(" ")[0]: row[header.index("train tok/s")] for row in rows}
    # linear's seed 5 stalled: its GPU seeds are 3 and 4 only, fewer than 3, so they are listed one by one
    assert speed["linear"] == f"cpu: {student(speeds('linear', [0, 1, 2]))}; {GPU}: seeds: 80,000; 100,000"
    assert speed["conv1d"] == (f"cpu: {student(speeds('conv1d', [0, 1, 2]))}; "
                               f"{GPU}: {student(speeds('conv1d', [3, 4, 5]))}")
    assert f"trained on 2 devices (cpu, {GPU})" in device_note(analysis)


def test_the_difference_in_throughput_is_taken_within_each_device(two_devices):
    experiment, report = two_devices
    analysis = report.tasks[0]
    header, rows = descriptive_rows(analysis, descriptive_metrics(experiment.config.tasks[0]), 0.05)
    cell = {row[0]: row[header.index("Δ train tok/s [95% CI]")] for row in rows}["conv1d"]
    base, other = speeds("linear", [0, 1, 2]), speeds("conv1d", [0, 1, 2])
    low, high = scipy_stats.ttest_ind(other, base, equal_var=False).confidence_interval(0.95)
    # on the GPU the baseline has 2 trained seeds: no difference is given
    assert cell == f"cpu: +{np.mean(other) - np.mean(base):,.0f} [{low:+,.0f}, {high:+,.0f}]; {GPU}: —"


def test_the_throughput_plot_has_a_panel_per_device_each_on_its_own_scale(two_devices, tmp_path, monkeypatch):
    experiment, report = two_devices
    drawn = []
    monkeypatch.setattr(plots, "save", lambda fig, path: drawn.append(fig) or path)
    plots.throughput(experiment, report.frame, tmp_path / "throughput.png")
    panels = [ax for ax in drawn[0].axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == ["copy on cpu", f"copy on {GPU}"]
    fastest = {"cpu": TOKENS / 4, GPU: TOKENS / 0.08}  # conv1d's seed 0 on the CPU; seeds on the GPU
    assert [ax.get_xlim()[1] for ax in panels] == pytest.approx([1.05 * fastest[d] / 1000 for d in ("cpu", GPU)])


def test_on_one_device_throughput_reads_as_before(fake, report):
    experiment, _ = fake
    analysis = report.tasks[0]
    assert analysis.devices == ["cpu"] and device_note(analysis) == ""
    header, rows = quality_rows(experiment, analysis, report.frame, ["tok_per_s"], report.analyst)
    assert {row[0]: row[header.index("train tok/s")] for row in rows}["conv1d"] == "800"  # every seed alike


def test_a_finding_about_speed_is_not_tested_across_devices(two_devices, tmp_path):
    experiment, report = two_devices
    speedy = tmp_path / "fake.toml"
    speedy.write_text(EXPERIMENT + '[[findings]]\nkind = "direction"\nvariant = "conv1d"\nmetric = "tok_per_s"\n'
                      'expect = "better"\nclaim = "Conv1d trains faster"\nsource = "nobody"\n')
    checks = analyse(load_experiment(speedy), report.analyst.records.root).checks
    [speed] = [c for c in checks if c.finding.metric == "tok_per_s"]
    assert speed.outcome == UNTESTABLE and "tok_per_s is the machine's" in speed.evidence
    assert "trained on 2 devices" in speed.evidence


def test_a_device_name_is_drawn_as_text_not_tex(two_devices, tmp_path):
    """A device name is a record's text: one that reads as TeX ('$\\frac{$') must not stop the report."""
    experiment, report = two_devices
    frame = report.frame.copy()
    frame.loc[frame.device == GPU, "device"] = "gpu $\\frac{$"
    plots.throughput(experiment, frame, tmp_path / "throughput.png")
    assert (tmp_path / "throughput.png").stat().st_size > 0

