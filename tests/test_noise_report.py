"""The noise split and the pooled analysis in a report, on a fabricated grid whose components are known.

Copy task, exact match per sentence: sentence i of a seed of arm a is right with probability p_i + m_s (+ g_i in
the arm `interacts`), p_i ~ U(0.3, 0.7) shared by every seed, m_s ~ N(0, sigma_m) the seed's model. So over an
arm's seeds the test score (100 x the share right) has a model part of variance (100 sigma_m)^2 and a seed x
sentence part of 100^2 mean(p(1 - p)) / N, and the arm `interacts` differs from the baseline by a test-set term
of variance 100^2 var(g) / N that no number of seeds removes.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from zoo.experiment import load_experiment
from zoo.experiment import record as records
from zoo.report import analyse
from zoo.report.collect import record_path
from zoo.report.growth import fabricated
from zoo.report.noise import term_of
from zoo.report.report import build_report

SEEDS, SENTENCES, SIGMA_M, SIGMA_G = 24, 2000, 0.01, 0.15
EXPERIMENT = """
name = "noisy"
seeds = {seeds}
baseline = "base"
shared = {{d_model = 32, n_heads = 4, d_ff = 64, encoder_layers = 1, decoder_layers = 1}}
[analysis]
pool = "{pool}"
[[variants]]
label = "base"
base = "paper-base"
[[variants]]
label = "same"
base = "paper-base"
set = {{"ffn.kind" = "conv1d"}}
[[variants]]
label = "interacts"
base = "paper-base"
set = {{dropout = 0.2}}
[[variants]]
label = "better"
base = "paper-base"
set = {{"residual.kind" = "pre-norm"}}
[[tasks]]
name = "copy"
options = {{symbols = 8, min_len = 2, max_len = 4}}
margin = 2.0
stall = {{floor = 0}}
[train]
steps = 400
"""
SHIFT = {"base": 0.0, "same": 0.0, "interacts": 0.0, "better": 0.03}


def write_grid(folder, pool: str = "none"):
    path = folder / "noisy.toml"
    path.write_text(EXPERIMENT.format(seeds=list(range(SEEDS)), pool=pool))
    experiment = load_experiment(path)
    rng = np.random.default_rng(7)
    p = rng.uniform(0.3, 0.7, SENTENCES)
    g = rng.normal(0, SIGMA_G, SENTENCES)
    g -= g.mean()  # the interaction averages to nothing over these sentences: the arms differ only by chance
    root = folder / "out" / "records"
    for variant in SHIFT:
        for seed in range(SEEDS):
            chance = np.clip(p + rng.normal(0, SIGMA_M) + SHIFT[variant] + (g if variant == "interacts" else 0), 0, 1)
            right = (rng.random(SENTENCES) < chance).astype(int)
            value = 100 * right.mean()
            record = fabricated(experiment, variant, seed, value, sentences=SENTENCES)
            record = record.model_copy(update={"sentences": {"exact_match": records.packed_rows(right.tolist())},
                                               "test": {**record.test, "exact_match": float(value)}})
            records.write(record_path(root, variant, "copy", seed), record)
    return experiment, root, p, g


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    folder = tmp_path_factory.mktemp("noisy")
    experiment, root, p, g = write_grid(folder)
    return experiment, root, analyse(experiment, root).tasks[0], (p, g)


def test_each_arms_seed_variance_splits_into_its_known_parts(grid):
    _, _, analysis, (p, g) = grid
    model = (100 * SIGMA_M) ** 2
    assert set(analysis.noise) == set(SHIFT)
    for arm, split in analysis.noise.items():
        chance = np.clip(p + SHIFT[arm] + (g if arm == "interacts" else 0), 0, 1)  # the seed's m_s aside
        seed_sentence = 100 ** 2 * float(np.mean(chance * (1 - chance))) / SENTENCES
        assert split.seeds == SEEDS and split.sentences == SENTENCES
        assert split.seed_sentence == pytest.approx(seed_sentence, rel=0.06), arm
        assert split.model_low <= model <= split.model_high, arm  # the interval over 24 seeds covers the truth
    pooled_model = np.mean([split.model for split in analysis.noise.values()])
    assert pooled_model == pytest.approx(model, rel=0.35)


def test_a_comparisons_test_set_term_is_the_interaction_and_bounds_what_seeds_can_detect(grid):
    _, _, analysis, _ = grid
    interacts, same = analysis.comparisons["interacts"], analysis.comparisons["same"]
    truth = 100 ** 2 * SIGMA_G ** 2 / SENTENCES
    assert term_of(interacts) == pytest.approx(truth, rel=0.3)
    assert term_of(same) < truth / 5  # no interaction: next to nothing


def test_the_report_shows_the_split_and_the_floor(grid, tmp_path):
    experiment, root, analysis, _ = grid
    text = build_report(experiment, root, tmp_path / "report", "zoo report")[0].read_text()
    assert "### Noise: seeds and test sentences" in text and "test-set share [CI]" in text
    table = text[text.index("Each comparison's test-set term"):]
    row = [cell.strip() for cell in next(line for line in table.splitlines() if line.startswith("| interacts |"))
           .split("|")[1:-1]]
    c = analysis.comparisons["interacts"]
    term, base, mine = term_of(c), analysis.noise["base"], analysis.noise["interacts"]
    assert float(row[1]) == pytest.approx(math.sqrt(term), abs=0.005)
    assert float(row[2]) == pytest.approx((norm.ppf(1 - c.level / 2) + norm.ppf(c.power)) * math.sqrt(term), abs=0.005)
    # more seeds buy more exactly when the two arms' model parts over n exceed the test-set term
    assert row[5] == ("seeds" if (base.model + mine.model) / SEEDS > term else "sentences")


def test_a_pooled_report_has_the_grids_degrees_of_freedom_and_keeps_each_term(tmp_path):
    experiment, root, *_ = write_grid(tmp_path, pool="many-to-one")
    analysis = analyse(experiment, root).tasks[0]
    assert analysis.pooling.startswith("pooled over 4 arms (92 df")
    scores = {arm: np.asarray(c.per_seed[1]) for arm, c in analysis.comparisons.items()}
    base = np.asarray(analysis.comparisons["better"].per_seed[0])
    pooled = (sum(((s - s.mean()) ** 2).sum() for s in scores.values()) + ((base - base.mean()) ** 2).sum()) / 92
    for c in analysis.comparisons.values():
        assert c.result.df == 92 and c.pooled_arms == 4
        assert c.result.se == pytest.approx(math.sqrt(pooled * 2 / SEEDS + c.result.term), rel=1e-9)
    assert analysis.comparisons["better"].verdict == "better"
    assert analysis.comparisons["interacts"].result.term > 0


def test_spreads_that_differ_are_not_pooled(tmp_path):
    """The declared rule: a Brown-Forsythe p below pool_alpha keeps every comparison Welch's, and says so."""
    experiment, root, *_ = write_grid(tmp_path, pool="many-to-one")
    for seed in range(SEEDS):  # the baseline's seeds spread far wider than the other arms'
        path = record_path(root, "base", "copy", seed)
        record = records.read(path)
        right = np.asarray(record.sentences["exact_match"]).copy()
        right[: 200 * (seed % 3)] = 1
        records.write(path, record.model_copy(update={"sentences": {"exact_match": right.tolist()},
                                                      "test": {**record.test, "exact_match": 100 * right.mean()}}))
    analysis = analyse(experiment, root).tasks[0]
    assert analysis.pooling.startswith("not pooled: the arms' seed spreads differ (Brown–Forsythe p = ")
    assert all(c.pooled_arms == 0 for c in analysis.comparisons.values())
