"""Seeds until decided, read from the records alone: which seeds each arm of a sequential experiment has been
called for, and what each look decided (the rule itself: zoo/stats/stopping.py).

Per task, round 1 (the experiment's `seeds`) is called for every arm. Look k is made once every cell called so
far has a current record that is not a failure (a missing, stale or failed cell blocks its look: the look waits
for it; stalled and diverged runs are results, used as the report uses them). It analyses every arm on the seeds
of rounds 1..k it was called for, exactly as the report does (`Analyst.verdicts` on the experiment with those
calls, then the experiment's pooling rule), and `decide_look` decides the comparisons still open. After look k,
round k + 1 is called for the arms still open and for the baseline, until none is open or the cap is reached. A
variant whose numbers are bit-identical to another's (the report collapses it into that row) is one computation
trained twice: it has no comparison of its own and stops at the look that finds it.

So the whole state is a function of the records and the experiment file: `zoo run --until-decided` reads it
before each round (and resumes from committed records), and `zoo report` reads the same state, shows its
decisions as the verdicts (`settle`) and regenerates byte for byte. Records of seeds an arm was never called for
(a `--seeds` run by hand) are never read. The information fractions are the plan's (seeds called / cap), not the
seeds that trained: a stalled seed leaves its arm less information than planned, which makes its test more
conservative, never less.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from zoo.experiment import Experiment
from zoo.experiment.schema import TaskEntry
from zoo.report.analysis import Analyst, Comparison, TaskAnalysis, higher_is_better
from zoo.report.collect import Records, collect, current_floors, load_records
from zoo.report.noise import term_of
from zoo.report.pooling import pool
from zoo.stats import BETTER, FEW, SAME, WORSE
from zoo.stats.sequential import SequentialPlan
from zoo.stats.stopping import EQUIVALENT, OPEN, Decision, Estimate, decide, decide_look, expected_runs


@dataclass
class TaskLooks:
    """One task's design so far: the looks made, what they decided, the rounds each arm was called for, and the
    cells the next look waits for."""

    task: TaskEntry
    baseline: str
    names: list[str] = field(default_factory=list)  # the comparisons (variants against the baseline): one family
    looks: list[dict[str, Estimate]] = field(default_factory=list)  # per look: the comparisons analysed then
    decisions: dict[str, Decision] = field(default_factory=dict)  # per comparison analysed at least once
    same: dict[str, tuple[str, int]] = field(default_factory=dict)  # variant -> (its numbers' variant, look)
    rounds: dict[str, int] = field(default_factory=dict)  # variant -> rounds called
    waiting: list[str] = field(default_factory=list)  # 'variant/seed-n (missing|stale|refused|failed)'
    last: TaskAnalysis | None = None  # the last look's analysis (its per-seed values: the forecast's model)

    def undecided(self) -> list[str]:
        """The variants not decided (nor stopped as another's numbers): after a look before the cap, each is called
        for the next round with the baseline. A variant with no comparison at all (a baseline below the trivial
        floor) is among them: nothing has decided it."""
        return [variant for variant in self.rounds if variant != self.baseline and variant not in self.same
                and not (variant in self.decisions and self.decisions[variant].decided)]


@dataclass
class SequentialState:
    """Every task's TaskLooks and the plan; `calls` are the seeds each (variant, task) arm is called for."""

    plan: SequentialPlan
    first: int
    tasks: dict[str, TaskLooks]
    records: Records  # every record of the plan's seeds, each arm to the cap (only the called ones are read)

    def seeds(self, rounds: int) -> tuple[int, ...]:
        """The seeds of rounds 1..`rounds`."""
        return tuple(range(self.first, self.first + min(rounds * self.plan.round_seeds, self.plan.max_seeds)))

    def calls(self, through: int | None = None) -> dict[tuple[str, str], tuple[int, ...]]:
        """(variant, task key) -> the seeds called, or those of the rounds up to `through` only."""
        return {(variant, key): self.seeds(rounds if through is None else min(rounds, through))
                for key, looks in self.tasks.items() for variant, rounds in looks.rounds.items()}

    def started(self) -> int:
        """The last round of which some called cell has a record (current, stale, refused or failed), at least 1: plain
        `zoo run` trains the rounds started and never starts one (`zoo run --until-decided` does)."""
        have = set(self.records.by_cell) | set(self.records.stale) | set(self.records.refused)
        rounds = [1 + (seed - self.first) // self.plan.round_seeds for (variant, key), seeds in self.calls().items()
                  for seed in seeds if (variant, key, seed) in have]
        return max([1, *rounds])

    @property
    def finished(self) -> bool:
        """Every task's design is over: each comparison decided or at the cap, and no look waiting."""
        return all(not looks.waiting and looks.looks and (len(looks.looks) == self.plan.looks or not looks.undecided())
                   for looks in self.tasks.values())


def plan_of(experiment: Experiment) -> SequentialPlan:
    settings = experiment.config.sequential
    return SequentialPlan(experiment.config.analysis.alpha, settings.round_seeds, settings.max_seeds)


def read(experiment: Experiment, records_root: Path) -> SequentialState:
    """The sequential state of a [sequential] experiment from its records (module docstring)."""
    plan = plan_of(experiment)
    first = experiment.config.seeds[0]
    every = tuple(experiment.plan_seeds())
    cap = experiment.with_calls({(v.label, t.key): every for t in experiment.config.tasks
                                 for v in experiment.config.variants})
    records = load_records(cap, records_root)
    frame, floors = collect(cap, records), current_floors(experiment, Path(records_root))
    state = SequentialState(plan, first, {}, records)
    for task in experiment.config.tasks:
        state.tasks[task.key] = _task(experiment, state, frame, floors, task)
    return state


def _task(experiment: Experiment, state: SequentialState, frame, floors, task: TaskEntry) -> TaskLooks:
    labels = [v.label for v in experiment.config.variants]
    baseline, plan = experiment.config.baseline_label, state.plan
    looks = TaskLooks(task, baseline, rounds=dict.fromkeys(labels, 1))
    for k in range(1, plan.looks + 1):
        calls = {(v, task.key): state.seeds(looks.rounds[v]) for v in labels}
        looks.waiting = _waiting(state.records, task, calls)
        if looks.waiting:
            break
        analysis = Analyst(experiment.with_calls(calls), state.records, frame, floors).verdicts(task)
        pool(analysis, experiment.config.analysis)
        if k == 1:
            looks.names = [v for v in labels if v != baseline and v not in analysis.collapsed]
        for variant, other in analysis.collapsed.items():
            looks.same.setdefault(variant, (other, k))
        looks.looks.append({v: estimate(analysis.comparisons[v]) for v in looks.names
                            if v in analysis.comparisons and v not in looks.decisions})
        looks.decisions.update(decide_look(plan, looks.looks, looks.names, task.margin, looks.decisions))
        looks.last = analysis
        still = looks.undecided()
        if not still or k == plan.looks:
            break
        for variant in (baseline, *still):
            looks.rounds[variant] = k + 1
    looks.decisions = decide(plan, looks.looks, looks.names, task.margin)
    return looks


def _waiting(records: Records, task: TaskEntry, calls: dict[tuple[str, str], tuple[int, ...]]) -> list[str]:
    """The called cells without a current record that is a result: what a look waits for."""
    out = []
    for (variant, key), seeds in calls.items():
        for seed in seeds:
            record = records.get(variant, key, seed)
            why = ("stale" if (variant, key, seed) in records.stale else "refused" if (variant, key, seed) in
                   records.refused else "missing") if record is None else \
                "failed" if record.status == "failed" else ""
            if why:
                out.append(f"{variant}/seed-{seed} ({why})")
    return out


def estimate(comparison: Comparison) -> Estimate:
    """A report comparison as the rule reads it: too few seeds gives no p (NaN), so it cannot decide."""
    r = comparison.result
    if r.verdict == FEW:
        return Estimate(r.difference, math.nan, math.nan, math.nan, higher_is_better(comparison.metric))
    return Estimate(r.difference, r.se, r.df, r.p_value, higher_is_better(comparison.metric))


def called_records(state: SequentialState, experiment: Experiment) -> Records:
    """The records of the cells `experiment` (with its calls) has: the report's and the runner's grid."""
    cells = {(variant, task.key, seed) for variant, task, seed in experiment.grid()}
    records = state.records
    return Records(records.root, {key: r for key, r in records.by_cell.items() if key in cells},
                   {key: why for key, why in records.stale.items() if key in cells}, set(records.unchecked_data),
                   {key: why for key, why in records.refused.items() if key in cells})


# -- the report -----------------------------------------------------------------------------------
def settle(comparison: Comparison, decision: Decision | None) -> Comparison:
    """`comparison` (over every seed called, as the report computes it) with the sequential decision as its
    verdict: its fixed-sample p stays, for description, and no fixed-sample adjusted p is given (the looks made
    it another test). Without a decision (no look made yet) it is open."""
    if decision is None:
        e = estimate(comparison)
        decision = Decision(OPEN, 0, e, e.p, math.nan, 0, math.nan, 0, 0)
    r = comparison.result
    verdict = decision.kind if decision.kind in (BETTER, WORSE) else (FEW if r.verdict == FEW else SAME)
    equivalence = comparison.equivalence
    if equivalence is not None:
        equivalence = replace(equivalence, equivalent=decision.kind == EQUIVALENT or decision.also_equivalent,
                              p_adjusted=math.nan)
    return replace(comparison, result=replace(r, verdict=verdict, p_adjusted=math.nan), equivalence=equivalence,
                   sequential=decision)


def decided_by_looks(state: SequentialState, baseline: str, c: Comparison) -> bool:
    """Whether the looks, not the report's differences family, decide `c`: a primary comparison with the baseline
    of a task the sequential plan covers."""
    return (c.reference == baseline and c.task in state.tasks
            and c.metric == state.tasks[c.task].task.primary_metric)


def settle_report(report, state: SequentialState) -> None:
    """Every primary comparison with the baseline in `report` (the tasks', the findings' and the placebo pairs')
    decided as the looks decided it."""
    baseline = report.experiment.config.baseline_label

    def settled(c: Comparison | None) -> Comparison | None:
        if c is None or not decided_by_looks(state, baseline, c):
            return c
        return settle(c, state.tasks[c.task].decisions.get(c.variant))

    for analysis in report.tasks:
        analysis.comparisons = {variant: settled(c) for variant, c in analysis.comparisons.items()}
    for check in report.checks:
        check.comparison = settled(check.comparison)
    report.placebos = [(task, a, b, settled(c)) for task, a, b, c in report.placebos]


# -- the forecast ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunsForecast:
    task: str
    called: int  # runs the plan has called so far
    most: int  # every arm to the cap
    expected: float | None  # None: it cannot be estimated (`why`)
    why: str = ""


def forecast(experiment: Experiment, state: SequentialState) -> list[RunsForecast]:
    """Per task: the runs called so far, the most the design can take, and the expected total (`expected_runs`:
    the rounds the looks made analysed, plus the simulated rest)."""
    out = []
    arms = len(experiment.config.variants)
    for key, looks in state.tasks.items():
        called = sum(len(state.seeds(rounds)) for rounds in looks.rounds.values())
        most = arms * state.plan.max_seeds
        expected, why = None, "before round 1's records are in"
        if looks.looks and looks.last is not None:
            done = sum(len(state.seeds(min(rounds, len(looks.looks)))) for rounds in looks.rounds.values())
            base = next((c.per_seed[0] for c in looks.last.comparisons.values()), ())
            values = {v: c.per_seed[1] for v, c in looks.last.comparisons.items()}
            terms = {v: t for v, c in looks.last.comparisons.items() if not math.isnan(t := term_of(c))}
            rounds = [len(state.seeds(r)) - len(state.seeds(r - 1)) for r in range(1, state.plan.looks + 1)]
            rest = expected_runs(state.plan, looks.looks, looks.names, looks.task.margin, base, values, terms, rounds)
            expected = None if rest is None else done + rest
            why = "" if rest is not None else "an open arm has fewer than 2 trained seeds to draw from"
        out.append(RunsForecast(key, called, most, expected, why))
    return out
