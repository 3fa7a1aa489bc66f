"""Benjamini–Hochberg at exactly the designs of the studies that declare it, simulated through zoo's own tests.

BH's guarantee needs positive dependence (PRDS) among the p-values it adjusts. A report's differences family
mixes tests that do not obviously have it: comparisons against one shared baseline, comparisons between two
variants (a finding's `against`), and transfer interactions Δ_B − Δ_A that share arms with the comparisons and
with each other; the equivalences family holds their TOSTs. tests/test_inference.py covers 12 variants against
one baseline; here each committed study that declares benjamini-hochberg gets its own family, test for test:

    scale       9 comparisons at d_model 256 + 7 interactions with the ablations' arms (16; its two findings
                between variants need a converged budget, so they are not testable and in no family)
    ablations   4 tasks x 13 comparisons, each task its own baseline (52)
    transfer    2 tasks x 8 comparisons + 8 interactions between them (24)
    lr-check    2 tasks x 3 comparisons + 6 interactions with the ablations' arms (12)

How a study is drawn. Every arm of every task has 5 seeds, its seed sd spread from 0.3 to 0.6 BLEU (a fourfold
variance ratio; the baseline the noisiest, where pooling failed in benchmarks/calibration.txt) and a test-set draw
u shared by all its seeds (the sentence x arm interaction of the one test set: seeds do not average it away) of
variance T/2, so a comparison's term is T = 0.1² as on 1,000 Multi30k sentences; an arm's draws on two tasks scored
on the same sentences correlate (rho 0.5), so an interaction's term is 2T(1 − rho). Each test is zoo's: Welch + its
term for a comparison (compare_corpus's model, zoo/stats/corpus.py), `interaction_arrays` with its term, the TOST
on the same se and df, `verdict_families` with benjamini-hochberg. Truths: every effect 0; and a mix (effects of
±0.5 on both tasks, a few that change between tasks, a few at the ±1 margin) where false discoveries hide among
true ones. A false difference is a rejected null or a wrong sign; a false equivalence is one at |truth| >= margin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest
from scipy import stats as scipy_stats

from zoo.stats.family import verdict_families
from zoo.stats.transfer import interaction_arrays
from zoo.stats.welch import welch_statistics

ALPHA, SEEDS, MARGIN, TERM, RHO, RUNS = 0.05, 5, 1.0, 0.1 ** 2, 0.5, 1500


@dataclass(frozen=True)
class Study:
    """A family's shape: per task its arms (the first the baseline), comparisons (task, variant, reference) and
    interactions (task A, task B, variant) against each task's baseline."""

    tasks: dict[str, list[str]]
    comparisons: list[tuple[str, str, str]]
    interactions: list[tuple[str, str, str]]


def _arms(n: int) -> list[str]:
    return ["baseline", *(f"v{i}" for i in range(n))]


def _versus_baseline(task: str, n: int) -> list[tuple[str, str, str]]:
    return [(task, f"v{i}", "baseline") for i in range(n)]


STUDIES = {
    "scale": Study({"small": _arms(7), "wide": _arms(9)}, _versus_baseline("wide", 9),
                   [("small", "wide", f"v{i}") for i in range(7)]),
    "ablations": Study({f"t{k}": _arms(13) for k in range(4)},
                       [c for k in range(4) for c in _versus_baseline(f"t{k}", 13)], []),
    "transfer": Study({"4000": _arms(8), "8000": _arms(8)},
                      _versus_baseline("4000", 8) + _versus_baseline("8000", 8),
                      [("4000", "8000", f"v{i}") for i in range(8)]),
    "lr-check": Study({"2e-3": _arms(3), "1e-3": _arms(3), "4e-3": _arms(3)},
                      _versus_baseline("1e-3", 3) + _versus_baseline("4e-3", 3),
                      [("2e-3", rate, f"v{i}") for rate in ("1e-3", "4e-3") for i in range(3)]),
}


def truths(study: Study, mixed: bool) -> dict[tuple[str, str], float]:
    """Each arm's true mean. Mixed: variant i is +0.5/-0.5 on every task when i % 3 == 0, at the ±1 margin
    when i % 3 == 1 (the change every interaction of it sees, on its second task only), else 0."""
    first = next(iter(study.tasks))
    out = {}
    for task, arms in study.tasks.items():
        for arm in arms:
            i = int(arm[1:]) if arm != "baseline" else -1
            effect = 0.0
            if mixed and i >= 0:
                effect = (0.5 if i % 2 else -0.5) if i % 3 == 0 else (1.0 if i % 3 == 1 and task != first else 0.0)
            out[task, arm] = effect
    return out


def draw(study: Study, means: dict, rng: np.random.Generator) -> dict[tuple[str, str], np.ndarray]:
    """(RUNS, SEEDS) scores per arm: module docstring."""
    out, shared = {}, {}
    for task, arms in study.tasks.items():
        sds = np.linspace(0.6, 0.3, len(arms))  # the baseline the noisiest
        for arm, sd in zip(arms, sds):
            u = rng.normal(0, math.sqrt(TERM / 2), (RUNS, 1))
            if arm in shared:  # the same sentences on every task: this arm's draws correlate
                u = RHO * shared[arm] + math.sqrt(1 - RHO ** 2) * u
            shared.setdefault(arm, u)
            out[task, arm] = means[task, arm] + u + rng.normal(0, sd, (RUNS, SEEDS))
    return out


def tost_p(d, se, df):
    return np.maximum(scipy_stats.t.sf((d + MARGIN) / se, df), scipy_stats.t.cdf((d - MARGIN) / se, df))


def p_values(study: Study, scores: dict) -> tuple[np.ndarray, ...]:
    """(RUNS, tests) two-sided p, TOST p and estimate, and the true difference of every test in the family."""
    p, eq, estimate = [], [], []
    for task, variant, reference in study.comparisons:
        d, se, df, _ = welch_statistics(scores[task, reference], scores[task, variant])
        se = np.sqrt(se ** 2 + TERM)
        p.append(2 * scipy_stats.t.sf(np.abs(d) / se, df))
        eq.append(tost_p(d, se, df))
        estimate.append(d)
    for a, b, variant in study.interactions:
        d, se, df, pv = interaction_arrays(scores[a, "baseline"], scores[a, variant], scores[b, "baseline"],
                                           scores[b, variant], term=2 * TERM * (1 - RHO))
        p.append(pv)
        eq.append(tost_p(d, se, df))
        estimate.append(d)
    return tuple(np.stack(x, axis=1) for x in (p, eq, estimate))


def true_differences(study: Study, means: dict) -> np.ndarray:
    return np.array([means[t, v] - means[t, r] for t, v, r in study.comparisons]
                    + [(means[b, v] - means[b, "baseline"]) - (means[a, v] - means[a, "baseline"])
                       for a, b, v in study.interactions])


@pytest.mark.parametrize("mixed", [False, True], ids=["null", "mixed"])
@pytest.mark.parametrize("name", list(STUDIES))
def test_benjamini_hochberg_keeps_both_families_false_discovery_rates_at_the_studys_design(name, mixed):
    study = STUDIES[name]
    rng = np.random.default_rng([2026, len(name), mixed])
    means = truths(study, mixed)
    p, eq, estimate = p_values(study, draw(study, means, rng))
    truth = true_differences(study, means)
    assert len(truth) == {"scale": 16, "ablations": 52, "transfer": 24, "lr-check": 12}[name]  # the reports' sizes
    false_differences, false_equivalences, found = [], [], 0
    for run in range(RUNS):
        different, equivalent = (np.asarray(adjusted) < ALPHA for adjusted in
                                 verdict_families(p[run].tolist(), eq[run].tolist(), "benjamini-hochberg"))
        wrong = (truth == 0) | (np.sign(estimate[run]) != np.sign(truth))
        false_differences.append(np.sum(different & wrong) / max(np.sum(different), 1))
        false_equivalences.append(np.sum(equivalent & (np.abs(truth) >= MARGIN)) / max(np.sum(equivalent), 1))
        found += np.sum(different & ~wrong) + np.sum(equivalent & (np.abs(truth) < MARGIN))
    limit = ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / RUNS)  # a share's mean is no noisier than a Bernoulli's
    assert np.mean(false_differences) <= limit and np.mean(false_equivalences) <= limit
    if mixed:
        assert found / RUNS > 1  # discoveries for the false ones to hide among


def test_every_study_that_declares_benjamini_hochberg_is_simulated_at_its_reports_family_size():
    """docs/reading-reports.md: each committed study that declares Benjamini–Hochberg is simulated here, test for
    test. A new one without a design here fails this, as does a report whose family grew."""
    import re
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    declared = {path.stem for path in (root / "experiments").glob("*.toml")
                if tomllib.loads(path.read_text()).get("analysis", {}).get("correction") == "benjamini-hochberg"}
    assert declared == set(STUDIES)
    for name, study in STUDIES.items():
        text = (root / "reports" / name / "report.md").read_text()
        size = int(re.search(r"the differences family \((\d+) tests\)", text).group(1))
        assert size == len(study.comparisons) + len(study.interactions), name
