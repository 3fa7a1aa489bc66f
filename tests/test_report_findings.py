"""How a report words what it found: published effects against budgets, margins and floors, p values,
intervals and detectable differences, and strings from records kept inert."""

from __future__ import annotations

import shutil

from fake_study import EXPERIMENT

from zoo.experiment import load_experiment
from zoo.experiment import record as records
from zoo.report import analyse, build_report
from zoo.report.findings import CONFIRMED, UNTESTABLE


def test_differences_are_formatted_signed_and_float_residue_is_zero():
    from zoo.report.tables import fmt_difference, fmt_effect

    assert fmt_difference(1.234, "exact_match") == "+1.23"
    assert fmt_difference(-0.004, "exact_match") == "-0.004"  # would round to zero: two significant digits
    assert fmt_difference(-1.4e-14, "exact_match") == "0.00"  # two equal means summed in another order
    assert fmt_effect(-1.4e-14, -0.29, 0.29, "exact_match") == "0.00 [-0.29, +0.29]"


def test_findings_print_tiny_p_values_as_a_bound():
    from zoo.report.findings import fmt_small_p

    assert fmt_small_p(0.0195) == "0.0195" and fmt_small_p(0.000234) == "0.000234"
    assert fmt_small_p(3.2e-78) == "< 0.0001" and fmt_small_p(0.0) == "< 0.0001"  # 0: both arms constant


def test_a_run_is_judged_stalled_on_the_tasks_declared_primary_metric():
    """A translation task scored on chrF: its floor is chrF's (10), and the final validation value held
    against it must be chrF too. Reading BLEU there (1.41 on the WMT sample pilot, 18.94 chrF) set every
    run of such a task apart as stalled."""
    from zoo.experiment.schema import TaskEntry
    from zoo.report.collect import read_row
    from zoo.stats.outcomes import StallRule, classify_run

    task = TaskEntry(name="wmt-ende-10k:en-de", primary="chrf")
    record = records.Record.model_construct(status="complete", summary=records.Summary(),
                                            final={"bleu": 1.41, "chrf": 18.94})
    row = read_row(record, task, None, ["bleu", "chrf"])
    assert row["valid_metric"] == 18.94 and task.stall_floor == 10.0
    assert classify_run(row["status"], row["valid_metric"], (), StallRule(floor=task.stall_floor)) == "complete"


def test_an_inconclusive_finding_says_when_the_published_effect_lies_outside_the_interval():
    """Nguyen & Salazar's +1.1 BLEU against a design that saw -0.77 [-1.41, -0.14] at adjusted p 0.08:
    not significant after the correction, so inconclusive, but the reader must see that the interval
    leaves out the published effect. Inside the interval, nothing is added."""
    from types import SimpleNamespace

    from zoo.experiment.schema import Finding
    from zoo.report.findings import INCONCLUSIVE, Check, settle

    finding = Finding(kind="direction", variant="stack", expect="better", claim="the stack is better",
                      source="Nguyen & Salazar 2019", effect=1.1)

    def settled(low: float, high: float, alpha: float = 0.05) -> Check:
        result = SimpleNamespace(difference=(low + high) / 2, ci_low=low, ci_high=high, p_value=0.02, p_adjusted=0.08,
                                 n_variant=5, n_baseline=5, verdict="no detectable difference")
        comparison = SimpleNamespace(result=result, equivalence=None, mde=0.9, unreachable=None, undetectable=None,
                                     per_seed=((0.0,) * 5, (0.0,) * 5), power_for=lambda effect: 0.4)
        return settle(Check(finding, "mt", "bleu", INCONCLUSIVE, "", comparison=comparison), alpha=alpha)

    outside = settled(-1.41, -0.14)
    assert outside.outcome == INCONCLUSIVE
    assert "the published effect (+1.1) lies outside this 95% CI" in outside.evidence
    assert "outside" not in settled(-0.5, 1.5).evidence
    assert "lies outside this 90% CI" in settled(-1.41, -0.14, alpha=0.1).evidence  # the interval is 1 - alpha


def test_a_budget_known_to_end_before_the_plateau_leaves_convergence_findings_untestable(fake, tmp_path):
    """The last-quarter rule passed Multi30k's 4000 steps (+0.56 BLEU) and 8000 steps (+0.66) alike, while
    doubling the budget added +2.54 BLEU: a task declares such evidence, and every finding that needs
    convergence is then untestable there. The same finding without the declaration is tested (control)."""
    experiment, root = fake
    finding = ('\n[[findings]]\nkind = "direction"\nvariant = "prenorm"\nexpect = "better"\n'
               'claim = "at convergence pre-norm is better"\nsource = "Patient 2026"\n'
               'regime = {converged = true, tolerance = 50}\n')
    declared = 'margin = 5.0\nbelow_plateau = "doubling the steps added 9 points (pilot.toml)"\n'

    def check(text: str):
        path = tmp_path / "fake.toml"
        path.write_text(text)
        checks = analyse(load_experiment(path), root).checks
        return next(c for c in checks if c.finding.claim == "at convergence pre-norm is better")

    assert check(EXPERIMENT + finding).outcome == CONFIRMED
    below = check(EXPERIMENT.replace("margin = 5.0\n", declared, 1) + finding)
    assert below.outcome == UNTESTABLE
    assert "budget ends before the plateau: doubling the steps added 9 points" in below.evidence


def test_a_task_whose_baseline_does_not_clear_its_trivial_floor_gets_no_verdicts(fake, tmp_path):
    """Copying the WMT sample's source scores 21.44 chrF, above its 6000-step baseline (19.59): below a floor no
    comparison says anything about the variants. Here a floor of 70 exact-match points (linear's mean: 61)."""
    import json

    from zoo.experiment import floors

    experiment, root = fake
    records_root = shutil.copytree(root, tmp_path / "records")
    task = experiment.config.tasks[0]

    def write_floor(score: float):
        floor = {"format": 1, "task": "copy", "definition": floors.definition(experiment, task),
                 "systems": {"majority": {"test": {"exact_match": score, "token_accuracy": score}}}}
        path = floors.floor_path(records_root, "copy")
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(floor))

    write_floor(70.0)
    below = analyse(experiment, records_root)
    found = below.tasks[0]
    assert found.floors == {"majority": 70.0}
    assert "does not clear the trivial floor majority (70.00)" in found.below_floor
    assert not found.comparisons and not found.failure_tests
    assert all(c.outcome == UNTESTABLE for c in below.checks if c.task == "copy")
    path, _ = build_report(experiment, records_root, tmp_path / "out", "zoo report fake")
    assert "**No verdicts on this task**" in path.read_text()
    write_floor(10.0)  # control: a floor the baseline clears changes nothing
    above = analyse(experiment, records_root).tasks[0]
    assert not above.below_floor and set(above.comparisons) == {"conv1d", "prenorm", "warm"}


def test_every_parameter_confound_is_labelled_under_the_verdicts(report, tmp_path):
    from zoo.report.sections.task import confound_lines

    (line, _) = confound_lines(report, report.tasks[0])
    assert "against linear's 1,000" in line and "prenorm +1 (+0.1%)" in line
    assert "conv1d" not in line  # the same count: no confound


def test_every_verdict_says_the_budget_it_holds_at(fake, tmp_path):
    experiment, root = fake
    text = build_report(experiment, root, tmp_path / "out", "zoo report fake")[0].read_text()
    assert "Trained at 400 steps, each budget with its own schedule" in text
    assert "### Against linear on exact match % at 400 steps (the verdicts)" in text
    path = tmp_path / "fake.toml"  # a variant with its own budget is named, and the heading drops the budget
    path.write_text(EXPERIMENT.replace('train = {warmup = 0}', 'train = {warmup = 0, steps = 800}'))
    text = build_report(load_experiment(path), root, tmp_path / "out2", "zoo report fake")[0].read_text()
    assert "Trained at 400 steps (linear's budget; warm at 800 steps)" in text
    assert "### Against linear on exact match % (the verdicts)" in text


def test_a_published_effect_inside_the_margin_is_not_testable_at_this_margin(fake, tmp_path):
    """'Equivalent within ±5' must not read as 'no effect' for a claim of +2: the finding says it cannot be tested
    at this margin, and how many seeds would test it."""
    experiment, root = fake
    finding = ('\n[[findings]]\nkind = "direction"\nvariant = "conv1d"\nexpect = "better"\n'
               'claim = "conv1d is a little better"\nsource = "Small 2026"\neffect = 2.0\n')
    path = tmp_path / "fake.toml"
    path.write_text(EXPERIMENT + finding)
    checks = analyse(load_experiment(path), root).checks
    check = next(c for c in checks if c.finding.claim == "conv1d is a little better")
    assert check.outcome == UNTESTABLE
    assert "not testable at this margin: the published effect (+2) is within the task's ±5" in check.evidence
    assert "seeds per arm would" in check.evidence


def test_a_published_effect_inside_the_margin_is_named_when_the_budget_already_rules_the_finding_out(fake, tmp_path):
    """On Multi30k every convergence finding is untestable for its budget first; one whose published effect is
    inside the ±margin would stay untestable at the plateau too, and the evidence says so with the seeds needed.
    An effect outside the margin gets no such clause (control)."""
    experiment, root = fake
    declared = 'margin = 5.0\nbelow_plateau = "doubling the steps added 9 points (pilot.toml)"\n'

    def evidence(effect: float) -> str:
        finding = ('\n[[findings]]\nkind = "direction"\nvariant = "conv1d"\nexpect = "better"\n'
                   f'claim = "conv1d is better"\nsource = "Small 2026"\neffect = {effect}\n'
                   'regime = {converged = true, tolerance = 50}\n')
        path = tmp_path / "fake.toml"
        path.write_text(EXPERIMENT.replace("margin = 5.0\n", declared, 1) + finding)
        check = next(c for c in analyse(load_experiment(path), root).checks if c.finding.claim == "conv1d is better")
        assert check.outcome == UNTESTABLE and "budget ends before the plateau" in check.evidence
        return check.evidence

    inside = evidence(2.0)
    assert "nor is it testable at this margin: the published effect (+2) is within the task's ±5" in inside
    assert "seeds per arm would" in inside  # "... would detect it" or "... would be needed to detect it"
    assert "testable at this margin" not in evidence(8.0)


def test_strings_from_records_cannot_reshape_the_report(fake, tmp_path):
    """A CPU name with a newline and raw HTML, a failure reason with a table pipe: one inert line each."""
    import json

    experiment, root = fake
    records_root = shutil.copytree(root, tmp_path / "records")
    path = records_root / "prenorm" / "copy" / "seed-0.json"
    record = json.loads(path.read_text())
    record["provenance"]["cpu"] = "Evil CPU\n## Injected heading <script>alert(1)</script>"
    record["summary"]["device"] = "cpu | x\n- injected item"
    records.write(path, records.Record.model_validate(record))  # as written: its digest agrees
    text = build_report(experiment, records_root, tmp_path / "out", "zoo report fake")[0].read_text()
    assert "\n## Injected heading" not in text and "<script>" not in text and "\n- injected item" not in text
    assert "Evil CPU ## Injected heading &lt;script&gt;alert(1)&lt;/script&gt;" in text


def test_the_outcomes_table_gives_the_interval_its_test_inverts():
    from zoo.report.tables import fmt_odds
    from zoo.stats.outcomes import compare_failures

    test = compare_failures(0, 6, 4, 6)  # the audit's table, where Newcombe's interval and the test disagreed
    assert 0.05 < test.p_value < 0.07 and test.odds_low < 1  # neither rejects now
    assert fmt_odds(test) == f"∞ [{test.odds_low:.3g}, ∞]"
    assert fmt_odds(compare_failures(0, 6, 0, 6)) == "none [0, ∞]"  # no unstable run anywhere: no estimate


def test_power_numbers_are_at_the_level_the_corrected_test_uses():
    """14 Holm-corrected 5 v 5 Fisher tests: the smallest p a table can give (0.0079) is above 0.05 / 14, so no
    test can reject, and the row says so instead of printing a detectable rise."""
    from zoo.report.tables import fmt_rise
    from zoo.stats.outcomes import at_level, compare_failures

    test = at_level(compare_failures(0, 5, 3, 5), 0.05 / 14)
    assert test.cannot_reject and "cannot reach the corrected level" in fmt_rise(test)
    assert not at_level(compare_failures(0, 8, 3, 8), 0.05 / 2).cannot_reject


def test_under_a_schedule_that_decays_to_zero_convergence_needs_declared_evidence(fake, tmp_path, monkeypatch):
    """A rate that decays to 0 flattens the last quarter's curve whatever the budget, so the flatness check cannot
    show a plateau there: a finding that needs convergence is untestable unless the task declares `at_plateau`.
    (The fake study trains at the default schedule; here it is counted as one that decays, so its records stay
    current.)"""
    from zoo.report import findings

    experiment, root = fake
    finding = ('\n[[findings]]\nkind = "direction"\nvariant = "prenorm"\nexpect = "better"\n'
               'claim = "at convergence pre-norm is better"\nsource = "Patient 2026"\n'
               'regime = {converged = true, tolerance = 50}\n')

    def check(text: str):
        path = tmp_path / "fake.toml"
        path.write_text(text)
        checks = analyse(load_experiment(path), root).checks
        return next(c for c in checks if c.finding.claim == "at convergence pre-norm is better")

    schedule = load_experiment(experiment.path).train_config(experiment.config.tasks[0], 0, "linear").schedule
    assert check(EXPERIMENT + finding).outcome == CONFIRMED  # the flatness check passes it (tolerance 50)
    monkeypatch.setattr(findings, "DECAYING", {schedule})
    flat = check(EXPERIMENT + finding)
    assert flat.outcome == UNTESTABLE and f"decays to 0 at the end of the budget (schedule {schedule})" in flat.evidence
    declared = 'margin = 5.0\nat_plateau = "twice the steps added 0.1 points (pilot.toml)"\n'
    assert check(EXPERIMENT.replace("margin = 5.0\n", declared, 1) + finding).outcome == CONFIRMED
