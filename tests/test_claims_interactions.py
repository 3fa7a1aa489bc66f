"""reports/README.md's section "Interactions carry the test-set term" (2026-11-29), recomputed: each interaction
before (Welch over the four arms' per-seed scores, no term) and now (with the term), adjusted in its report's
family as zoo/report/family.py does, with scipy's Benjamini–Hochberg (the rule: tests/test_claims.py)."""

from __future__ import annotations

from claims import REPORTS, ROOT, experiment, family_p, report, said, table_after, without_term
from scipy.stats import false_discovery_control

NAMES = {"scale": "Δ(256) − Δ(64)", "transfer": "Δ(8000) − Δ(4000)"}
LABELS = {"rotary positions": "rotary", "no label smoothing": "no-label-smoothing",
          "learned positions": "learned-positions"}


def _before(name: str) -> tuple[dict, dict]:
    """Each interaction's adjusted p and adjusted TOST p as its report computed them without the term."""
    study = report(name)
    differences, equivalences = family_p(study)
    old = [(variant, i) for t in study.transfers for variant, i in without_term(t).items()]
    n = len(old)
    p = false_discovery_control(differences + [i.p_value for _, i in old])[-n:]
    tost = false_discovery_control(equivalences + [i.tost_p for _, i in old])[-n:]
    return dict(zip([v for v, _ in old], p)), dict(zip([v for v, _ in old], tost))


def test_the_changed_interactions_before_and_now():
    said(REPORTS, "Until today it was Welch over the four arms' per-seed scores alone, which left that variance out "
                  "and made its p-values too small.")
    said(REPORTS, "No comparison's verdict changed; these interactions did (before and now both adjusted in the "
                  "report's family as it is today):")
    rows = table_after(REPORTS, "## Interactions carry the test-set term (2026-11-29)")
    assert len(rows) == 3
    for study, interaction, before, now in rows:
        label, _, quantity = interaction.partition(", ")
        name, variant = study, LABELS[label]
        assert quantity == NAMES[name]
        (transfer,) = report(name).transfers
        i = transfer.rows[variant]
        old_p, old_tost = (values[variant] for values in _before(name))
        old = without_term(transfer)[variant]
        if before.startswith("changes"):  # table_after reads cells without their bold
            assert before == f"changes (adjusted p {old_p:.3f})" and old_p < 0.05
            assert now == f"undetermined (adjusted p {i.p_adjusted:.3f})" and i.verdict == "undetermined"
        else:
            assert before == f"holds within ±1 (TOST adjusted p {old_tost:.3f})" and old_tost < 0.05
            assert now == f"undetermined (TOST adjusted p {i.tost_adjusted:.3f})" and i.verdict == "undetermined"
        assert i.term > 0 and i.se > old.se  # the term widened it


def test_no_other_verdict_changed():
    """Every other interaction of the three reports keeps its verdict, and no comparison's p moved: the term enters
    the interactions only (a comparison's adjusted p can move with its family, its verdict did not)."""
    changed = {("scale", "rotary"), ("scale", "no-label-smoothing"), ("transfer", "learned-positions")}
    for name in ("scale", "transfer", "lr-check"):
        study = report(name)
        p, tost = _before(name)
        for t in study.transfers:
            for variant, i in t.rows.items():
                alpha = i.alpha
                was = "changes" if p[variant] < alpha else "holds" if tost[variant] < alpha else "undetermined"
                assert (was != i.verdict) == ((name, variant) in changed), (name, variant, was, i.verdict)


def test_the_correction_each_report_keeps_and_where_its_family_is_simulated():
    said(REPORTS, "each report keeps the correction its experiment declared: Benjamini–Hochberg for `scale/`, "
                  "`transfer/` and `lr-check/`, whose false-discovery rates at exactly these families (comparisons "
                  "with a shared baseline, comparisons between variants and interactions, with their test-set terms) "
                  "tests/test_family_designs.py simulates at or below alpha")
    for name in ("scale", "transfer", "lr-check"):
        assert experiment(name).config.analysis.correction == "benjamini-hochberg"
        study = report(name)
        assert study.family == {"scale": 16, "transfer": 24, "lr-check": 12}[name]
    assert (ROOT / "tests" / "test_family_designs.py").is_file()


def test_the_transfer_files_amendment():
    header = " ".join(line[2:] for line in (ROOT / "experiments" / "transfer.toml").read_text().splitlines()
                      if line.startswith("# "))
    assert ("with it the placebo and no label smoothing still hold (adjusted TOST p 0.025, 0.032) and learned "
            "positions no longer does (0.050).") in " ".join(header.split())
    (transfer,) = report("transfer").transfers
    assert [f"{transfer.rows[v].tost_adjusted:.3f}" for v in ("conv1d-ffn", "no-label-smoothing",
                                                               "learned-positions")] == ["0.025", "0.032", "0.050"]
    assert [transfer.rows[v].verdict for v in ("conv1d-ffn", "no-label-smoothing", "learned-positions")] == [
        "holds", "holds", "undetermined"]
