"""Pure statistics: numbers in, numbers out. Nothing here imports anything else from zoo (numpy, scipy,
lifelines only; tests/test_stats_layer.py checks it), so every test can be checked by simulation on its
own and the report (zoo/report/) only assembles, adjusts over families and writes.

Files, by topic:

    welch.py       Welch's test over seeds, vectorised, and its permutation check (unequal arms)
    seeds.py       one variant against a baseline over seeds: difference, interval, p, P(better), verdict
    family.py      multiple comparisons: Holm, Benjamini–Hochberg, a family's verdicts recomputed
    pooled.py      many variants v one baseline: seed variance pooled over all arms, Dunnett's (step-down) test
    tost.py        equivalence within a declared margin (two one-sided tests)
    sequential.py  seeds in rounds until decided: alpha-spending levels per look, their TOST, sequential Holm
    stopping.py    the decision rule applied look by look (which arm stops, how), and the runs it is expected to take
    sequential_plan.py  which round size and cap to declare for seeds until decided, from a pilot's spreads
    power.py       power, minimum detectable effect, seeds needed
    resample.py    resampling test sentences (the paired bootstrap's draws)
    corpus.py      corpus metrics (BLEU, chrF) over seeds and test sentences; any contrast's test-set term
    noise.py       a corpus metric's seed variance split: model, seed x sentence, test-set term; seeds or sentences?
    aso.py         Almost Stochastic Order (ε_min)
    outcomes.py    what happened to the runs: stall rule, failure rates, steps to threshold, curve summaries
    intervals.py   the t interval of a mean over seeds
    transfer.py    a variant's effect on two tasks: the interaction and its TOST, rank correlation

ALPHA is the one significance level every default uses (an experiment file may set its own, which the
report passes down explicitly); POWER the power that minimum detectable effects and seed counts aim at.
"""

ALPHA = 0.05
POWER = 0.8
BETTER, WORSE, SAME, FEW = "better", "worse", "no detectable difference", "not enough seeds"
