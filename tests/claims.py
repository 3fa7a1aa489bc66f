"""What the claims tests share (tests/test_claims*.py): the documents, the reports' analyses and the ways the prose
quotes a number.

Each test finds its sentences in the document with `said` (so a rewording has to come to the test too) and
recomputes what they state from the committed records or results.csv, through the analysis the reports make.
The analyses are cached per process: run the claims tests together (`pytest tests/test_claims*.py`).
"""

from __future__ import annotations

import json
import math
import re
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from zoo.experiment import load_experiment
from zoo.report import analyse, build_report, sequential
from zoo.report.tables import verdict_class
from zoo.stats.intervals import mean_half_width

ROOT = Path(__file__).resolve().parents[1]
README, REPORTS = ROOT / "README.md", ROOT / "reports" / "README.md"


@lru_cache(maxsize=None)
def text(path: Path) -> str:
    """A document with its line breaks and runs of spaces as single spaces: sentences wrap anywhere."""
    return " ".join(path.read_text().split())


def said(path: Path, sentence: str) -> None:
    assert " ".join(sentence.split()) in text(path), f"{path.name} no longer says: {sentence}"


# -- the reports' analyses and files ----------------------------------------------------------------------------
@lru_cache(maxsize=None)
def experiment(name: str):
    return load_experiment(ROOT / "experiments" / f"{name}.toml")


@lru_cache(maxsize=None)
def report(name: str):
    return analyse(experiment(name), ROOT / "reports" / name / "records")


def task(name: str, key: str):
    return next(analysis for analysis in report(name).tasks if analysis.task.key == key)


def verdicts(name: str, key: str) -> dict[str, str]:
    return {variant: verdict_class(c) for variant, c in task(name, key).comparisons.items()}


def effect(name: str, key: str, variant: str) -> float:
    return task(name, key).comparisons[variant].result.difference


def clear_of_zero(c) -> bool:
    return c.result.ci_low > 0 or c.result.ci_high < 0


@lru_cache(maxsize=None)
def results(name: str) -> pd.DataFrame:
    """A report's results.csv, one row per cell."""
    return pd.read_csv(ROOT / "reports" / name / "results.csv")


@lru_cache(maxsize=None)
def records(name: str) -> tuple[dict, ...]:
    """Every committed record of a report, as its JSON file has it."""
    return tuple(json.loads(path.read_text())
                 for path in sorted((ROOT / "reports" / name / "records").glob("*/*/seed-*.json")))


def values(name: str, key: str, variant: str, column: str | None = None) -> np.ndarray:
    """`column` (the task's primary metric unless named; 'late_change' and 'curve_area' too) over the variant's
    trained seeds, as the report's quality table takes them."""
    analysis = task(name, key)
    return np.asarray(report(name).analyst.values(analysis.task, variant, column or analysis.primary), dtype=float)


def median_steps(name: str, key: str, variant: str) -> float:
    """Kaplan–Meier median steps to the task's threshold."""
    return task(name, key).survival[variant].median


# -- how the prose writes numbers -------------------------------------------------------------------------------
NUMBER = r"[+−-]?\d+\.\d+"


def prose(value: str) -> str:
    """A formatted number as the prose writes it: minus as U+2212."""
    return value.replace("-", "−")


def signed(x: float, digits: int = 2) -> str:
    return prose(f"{x:+.{digits}f}")


def effect_text(c, digits: int = 2) -> str:
    """'+2.18 [+1.48, +2.88]': a comparison's difference and interval, as the prose quotes them."""
    r = c.result
    return f"{signed(r.difference, digits)} [{signed(r.ci_low, digits)}, {signed(r.ci_high, digits)}]"


def mean_text(numbers, digits: int = 2) -> str:
    """'93.82 [92.68, 94.97]': a mean over seeds with its t interval (the reports' quality tables), or the value
    alone when every seed has it."""
    data = np.asarray(numbers, dtype=float)
    mean = data.mean()
    if np.all(data == data[0]):
        return prose(f"{mean:.{digits}f}")
    half = mean_half_width(data)
    return prose(f"{mean:.{digits}f} [{mean - half:.{digits}f}, {mean + half:.{digits}f}]")


def span(numbers, digits: int = 1, sep: str = "–") -> str:
    """'9.7–32': the range of some numbers, each to `digits` decimals (trailing '.0' kept)."""
    return f"{min(numbers):.{digits}f}{sep}{max(numbers):.{digits}f}"


# -- the tables of reports/README --------------------------------------------------------------------------------
LABELS = {  # the tables' row names -> variant labels
    "rotary positions": "rotary", "no embedding sharing": "sharing-none", "source–target sharing": "sharing-src-tgt",
    "SwiGLU": "swiglu", "Conv1d FFN": "conv1d-ffn", "no label smoothing": "no-label-smoothing",
    "the Annotated Transformer's LayerNorm": "layernorm-annotated", "pre-norm": "pre-norm", "QK-norm": "qk-norm",
    "RMSNorm": "rmsnorm", "learned positions": "learned-positions",
    "PreNorm + ScaleNorm + FixNorm": "prenorm-scalenorm-fixnorm", "no √d_model embedding scale": "no-embedding-scale",
}


def variant_of(row_name: str) -> str:
    return next(v for name, v in LABELS.items() if row_name.startswith(name))


def table_after(path: Path, heading: str) -> list[list[str]]:
    """The rows of the first markdown table after `heading` (a line fragment), cells stripped of bold."""
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if heading in line)
    rows, seen = [], False
    for line in lines[start:]:
        if line.startswith("|"):
            seen = True
            rows.append([cell.strip().replace("**", "") for cell in line.strip("|").split("|")])
        elif seen:
            break
    return rows[2:]  # header and rule


def numbers(cell: str) -> list[float]:
    return [float(x.replace("−", "-")) for x in re.findall(NUMBER, cell)]


def quotes(cell: str, *xs: float) -> bool:
    """Whether the first numbers of `cell` are `xs`, each rounded to as many decimals as the cell writes it."""
    quoted = re.findall(NUMBER, cell)[:len(xs)]
    return len(quoted) == len(xs) and all(
        float(q.replace("−", "-")) == round(x, len(q.split(".")[1])) for q, x in zip(quoted, xs))


PUBLISHED = {  # variant -> the findings (study, variant, effect) a table's "published" cell quotes for it, in order;
    # effect None: the cell names the finding's source without a number
    "rotary": [("scale", "rotary", 0.2)],
    "sharing-none": [("resolved", "sharing-none", None)],
    "sharing-src-tgt": [],
    "swiglu": [("ablations", "swiglu", 0.40)],
    "rmsnorm": [("ablations", "rmsnorm", None), ("ablations", "rmsnorm", 0.52)],
    "no-label-smoothing": [("ablations", "no-label-smoothing", -0.5)],
    "conv1d-ffn": [("resolved", "conv1d-ffn", None)],
    "layernorm-annotated": [],
    "qk-norm": [],
    "pre-norm": [("ablations", "pre-norm", 0.27), ("scale", "pre-norm", -0.75)],
    "learned-positions": [("ablations", "learned-positions", -0.1)],
    "prenorm-scalenorm-fixnorm": [("ablations", "prenorm-scalenorm-fixnorm", 1.1)],
    "no-embedding-scale": [],
}


def check_published(cell: str, variant: str) -> None:
    """A "published" cell quotes the findings of PUBLISHED[variant]: each signed number one finding's effect, in
    order, each finding as an experiment file declares it, with its source (authors, year) named in the cell; "—"
    where there is none."""
    findings = PUBLISHED[variant]
    quoted = [float(n.replace("−", "-")) for n in re.findall(r"[+−]\d+\.\d+", cell)]
    assert quoted == [effect for *_, effect in findings if effect is not None], variant
    assert (cell == "—") == (not findings), variant
    for study, finding_variant, effect in findings:
        declared = [f for f in experiment(study).config.findings if f.variant == finding_variant
                    and (effect is None or (f.effect is not None and math.isclose(f.effect, effect)))]
        assert any(f.source.split(",")[0] in cell for f in declared), variant


def check_row(c, effect_cell: str, verdict_cell: str) -> None:
    """A verdict table's row: the difference and interval, the verdict word, a quoted adjusted p and detectable Δ."""
    r = c.result
    assert numbers(effect_cell)[:3] == [round(r.difference, 2), round(r.ci_low, 2), round(r.ci_high, 2)]
    word = verdict_class(c)
    assert verdict_cell.startswith(word), (verdict_cell, word)
    adjusted = re.search(r"(?:adjusted p |\()(< ?)?(\d+\.\d+)", verdict_cell)
    if adjusted:  # the difference's adjusted p, whatever the verdict: "(adjusted p 0.062)", "(0.016)", "(< 0.001)"
        below, quoted = adjusted.groups()
        assert (quoted == "0.001" and r.p_adjusted < 0.001) if below else float(quoted) == round(r.p_adjusted, 3), \
            verdict_cell
    detectable = re.search(r"> (\d+\.\d+) detectable", verdict_cell)
    if detectable:
        assert float(detectable.group(1)) == round(c.mde, 2)


def without_term(transfer) -> dict:
    """A transfer's interactions as reports computed them until 2026-11-29: Welch over the four arms' per-seed
    scores with no test-set term (unadjusted; what the prose on the change quotes is adjusted from these)."""
    from zoo.stats.transfer import compare_interaction

    out = {}
    for variant, i in transfer.rows.items():
        (base_a, var_a), (base_b, var_b) = (side.comparisons[variant].per_seed for side in (transfer.first,
                                                                                          transfer.second))
        out[variant] = compare_interaction(base_a, var_a, base_b, var_b, margin=i.margin, alpha=i.alpha)
    return out


def family_p(study) -> tuple[list, list]:
    """A report's differences and equivalences families' raw p-values in the order zoo/report/family.py adjusts
    them (each comparison and finding test once, then the interactions), without the interactions' own."""
    tests = list({(c.task, c.variant, c.reference, c.metric): c for c in  # a finding on a task's own test: once
                  [c for t in study.tasks for c in t.comparisons.values()]
                  + [k.comparison for k in study.checks if k.comparison is not None]}.values())
    equivalences = [c.equivalence.p_value for c in tests
                    if c.equivalence is not None and not np.isnan(c.equivalence.p_value)]
    return [c.result.p_value for c in tests], equivalences


def resolved_decision(variant: str) -> tuple:
    """`resolved/`'s decision on `variant` as prose quotes it: (kind, look, Δ signed to 2 places, se to 2 places,
    seeds an arm), at the look that decided it, or the last look made while it is open."""
    d = task("resolved", "multi30k-de-en").comparisons[variant].sequential
    return d.kind, d.look, signed(d.estimate.difference), f"{d.estimate.se:.2f}", d.seeds


@lru_cache(maxsize=None)
def sequential_state(name: str):
    """A sequential study's looks and calls, from its committed records alone (zoo.report.sequential.read)."""
    return sequential.read(experiment(name), ROOT / "reports" / name / "records")


ORDINALS = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth", 6: "sixth"}


def training_round(name: str) -> str:
    """The round a sequential study trains now, as a word: the last one called for any arm."""
    (looks,) = sequential_state(name).tasks.values()
    return ORDINALS[max(looks.rounds.values())]


def regenerated_differs(name: str, folder: Path) -> list[str]:
    """reports/NAME/report.md rebuilt into `folder` from its committed records with the command its header names:
    the lines that differ from the committed report but the first (the date line), as (line number, new, old)."""
    command = f"zoo report experiments/{name}.toml"
    report = ROOT / "reports" / name
    path, _ = build_report(load_experiment(ROOT / "experiments" / f"{name}.toml"), report / "records", folder, command)
    new, old = path.read_text().split("\n"), (report / "report.md").read_text().split("\n")
    return [f"{i}: {a!r} != {b!r}" for i, (a, b) in enumerate(zip(new, old)) if i and a != b] + (
        [f"{len(new)} lines != {len(old)}"] if len(new) != len(old) else [])
