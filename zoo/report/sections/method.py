"""Method: how every number in the report was made, with the experiment's own settings."""

from __future__ import annotations

import math

from zoo.report.study import Report
from zoo.stats.aso import ASO_SEED
from zoo.stats.power import POWER_SEED
from zoo.stats.resample import BOOTSTRAP_SEED, RESAMPLES
from zoo.stats.transfer import BOOTSTRAP_RESAMPLES as TRANSFER_RESAMPLES
from zoo.stats.transfer import BOOTSTRAP_SEED as TRANSFER_SEED
from zoo.stats.welch import PERMUTATION_EXACT_LIMIT, PERMUTATIONS, SEED


def method_section(report: Report) -> list[str]:
    settings = report.experiment.config.analysis
    return [
        "- The seed is the unit of evidence: each run gives one number per metric; variants are compared over seeds.",
        OUTCOMES,
        _per_seed_metrics(report),
        _families(report),
        *_sequential(report),
        f"- No verdict below {settings.min_seeds} trained seeds per arm (per-seed values instead).",
        EFFECT_SIZES,
        _power(report),
        "- Equivalence only by TOST (two one-sided tests) against a margin declared per task in the experiment file.",
        "- Placebos: variant pairs proven to compute one function and trained alike measure the noise floor.",
        STEPS_AND_CURVES,
        FIXED_RANDOM_NUMBERS,
        "",
    ]


OUTCOMES = (
    "- Outcomes: complete, stalled (complete but the primary validation metric ended below the task's floor), "
    "diverged (a non-finite loss), failed (raised). Quality uses complete runs only; instability (stalled + "
    "diverged) has a Clopper–Pearson interval and is compared with the baseline by Fisher's exact test (central: "
    "twice the smaller one-sided p), beside the exact conditional interval of the odds ratio, which is that "
    "test inverted (the test rejects exactly when the interval leaves out 1); "
    "'detectable rise' is the smallest increase of the unstable share over the baseline's that the test "
    "finds with 80% power at the level one rejection needs after the correction (alpha / the instability family; "
    "exact binomial power); 'cannot reach the corrected level' where no outcome of the runs could reach it."
)


def _per_seed_metrics(report: Report) -> str:
    """How a comparison on per-seed metrics and on corpus metrics is tested, pooled or not."""
    settings = report.experiment.config.analysis
    return (
        "- Per-seed metrics: Welch's t-test and interval (Welch–Satterthwaite df); with unequal seed counts the "
        "p-value is the larger of Welch's and an exact permutation p, which cannot fall below 1 / (the number "
        "of splits): where that floor is at or above the corrected level the row says 'cannot reach the corrected "
        "level' instead of a detectable Δ (with other rejections in its family, a later step of Holm or "
        "Benjamini–Hochberg can still reject such a test). Corpus metrics (BLEU, chrF, exact match) add "
        "test-sentence variation: variance = Welch seed variance of the per-seed scores + the paired "
        f"sentence-bootstrap variance of the difference ({RESAMPLES} resamples) beyond the sentence noise the "
        "per-seed scores already carry (each seed's bootstrap variance about its arm's mean), with Welch's df of "
        "the seed part (zoo/stats/corpus.py). The sentence-only bootstrap p is shown for reference: it "
        "holds the trained models fixed and sees no seed variation."
        + (" This experiment pools the seed variance over each task's arms (`pool = \"many-to-one\"`): a "
           "comparison's variance is the pooled within-arm variance of every trained arm × (1/n_baseline + "
           "1/n_variant), plus its own test-set term, with the pool's df (Σ (n − 1) over the arms), unless the "
           f"Brown–Forsythe test rejects equal spreads at the declared {settings.pool_alpha:g}; then Welch's, as "
           "each task's verdict table says (zoo/report/pooling.py). Power, detectable Δ and seeds-for use the same "
           "pooled model (noncentral t with the pool's df)." if settings.pool != "none" else ""))


def _families(report: Report) -> str:
    """The families of tests adjusted together, with this report's sizes and correction."""
    settings = report.experiment.config.analysis
    correction = "Holm" if settings.correction == "holm" else "Benjamini–Hochberg"
    return (
        f"- One verdict per task, on its primary metric. Its test, the findings' own tests and any transfer "
        f"interactions form the differences family ({report.family} tests); the TOSTs at the task's margin (and "
        f"of the interactions) form the equivalences family ({report.equivalence_family} tests). Each family's "
        f"p-values are adjusted by {correction} at alpha {settings.alpha:g} on their own: a difference test and its "
        "own TOST are negatively dependent, which voids Benjamini–Hochberg's guarantee in one family holding both, "
        "while within each family the tests share the baseline's seeds (a positive dependence, under which it "
        "holds; both families' false-discovery rates are simulated in tests/test_inference.py, and test for test "
        "at the families of zoo's studies that declare Benjamini–Hochberg, comparisons between variants and "
        "transfer interactions with their test-set terms included, in tests/test_family_designs.py). "
        "'equivalent' needs the adjusted TOST p below alpha. Instability tests form a third family "
        f"({report.failure_family} tests). Every other number is descriptive."
    )


def _sequential(report: Report) -> list[str]:
    """How a sequential experiment's looks decide, where it has them."""
    if report.sequential is None:
        return []
    return [(
        "- Seeds until decided (`[sequential]`): the primary verdicts are not that family's. Each task's "
        "comparisons with the baseline are decided look by look, after each round of seeds: a difference by "
        "the sequential Holm procedure over the task's comparisons at alpha (Maurer & Bretz 2013) with Lan–DeMets "
        "O'Brien–Fleming levels, an equivalence by TOST at the look's spent one-sided level split over the "
        "comparisons not yet shown equivalent (zoo/stats/stopping.py), as each task's section sets out; they "
        "stay in the differences family above only where its size sets the other tests' level (a conservative "
        "count), and their fixed-sample p-values and intervals over all the seeds called only describe.")]


EFFECT_SIZES = (
    "- Effect sizes: P(better) = chance that a random seed of the variant beats a random seed of the baseline "
    "(Bouthillier et al. 2021); ASO ε_min = Almost Stochastic Order (Dror et al. 2019) over every run that trained "
    "to the end, stalled ones included: an upper bound on the share of the distance between the two score "
    "distributions where the variant is worse, so smaller values favour it. No verdict word goes with it: "
    "with no difference at all, 5 v 5 seeds give ε_min below the suggested 0.2 in about 8% of experiments. "
    "Descriptive, at 5 or more seeds."
)


def _power(report: Report) -> str:
    """What the report's power, detectable Δ and seeds-for mean."""
    settings = report.experiment.config.analysis
    return (
        f"- Power: 'detectable Δ' is the smallest true difference the design detects with {settings.power:.0%} power "
        "at the level one rejection needs after the correction (alpha divided by the differences family's size: "
        "the first step of Holm and of Benjamini–Hochberg), simulated through the test the verdict uses (Welch "
        "over the observed seed spreads, a corpus metric's test-set variance added, permutation-checked with "
        "unequal arms); 'no difference larger than X could be detected' is not evidence of no difference. Where X "
        "exceeds the metric's whole range, the design detects no difference the metric can show, and the report "
        "says so. 'seeds for ±X' (the task's target effect) and a finding's power for its published effect come "
        "from the same model at the same level (a corpus metric's test-set variance does not shrink with seeds). "
        + _later_steps(report)
    )


def _later_steps(report: Report) -> str:
    """Why the first step's level makes the powers lower bounds, and where this family's rejections fell."""
    settings = report.experiment.config.analysis
    steps = ("Holm rejects the k-th smallest of the m p-values at alpha / (m − k + 1) once the k − 1 before it "
             "are rejected" if settings.correction == "holm" else
             "Benjamini–Hochberg rejects every p up to the largest k-th smallest that is at most k · alpha / m")
    level = settings.alpha / max(report.family, 1)
    found = ("no test it decides was rejected" if math.isnan(report.rejected_at) else
             f"its rejections came at raw p up to {report.rejected_at:.2g}, against the first step's {level:.2g}")
    return (f"A raw p at or below that level is rejected whatever the other tests give, so these powers are lower "
            f"bounds, as later steps reject at larger raw p ({steps}); in this report's differences family {found}.")


STEPS_AND_CURVES = (
    "- Steps to threshold: Kaplan–Meier median over finished runs (a run that never reaches it is censored at "
    "its last evaluation), its interval where the exponential Greenwood band crosses one half (lifelines). "
    "Curve area: the area under the validation primary metric from the first evaluation to the last "
    "(trapezoids), over that span of steps. "
    "Δ over the last quarter: the last validation value minus the value at 75% of the steps, per seed; "
    "a clearly positive interval says training was still improving when it stopped; one around 0 does "
    "not show the plateau under a schedule that decays to zero (the decay flattens the end of any budget), "
    "which only a longer budget can show (a task may declare `below_plateau`)."
)

FIXED_RANDOM_NUMBERS = (
    "- Every resampled or simulated number uses fixed random numbers, so the report regenerates digit for "
    f"digit: the sentence bootstrap draws one set of sentence indices for every system from seed {BOOTSTRAP_SEED}; "
    f"Monte-Carlo permutations ({PERMUTATIONS}, where the splits exceed {PERMUTATION_EXACT_LIMIT}) use seed "
    f"{SEED}; ASO uses seed {ASO_SEED}; the power simulations, seed {POWER_SEED}; a rank correlation's seed "
    f"bootstrap ({TRANSFER_RESAMPLES} resamples), seed {TRANSFER_SEED}."
)
