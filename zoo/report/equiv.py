"""The equivalence matrix: which variants of an experiment compute the same function.

Two variants that compute the same function (say a position-wise FFN written with nn.Linear and
with a kernel-1 Conv1d) differ only in code, so comparing them measures noise, not an ablation.
Cell (row A, column B) is zoo.equivalence(A, B): A built with generic weights, transplanted into
B's layout, log-probabilities compared. The check is directional (B may express A's function but
not the reverse), so a pair is called equivalent only when both cells say ≡.

The specs are the ones the runs trained (spec.json of the first task's first-seed run, falling back
to any run of the variant, then to the experiment's spec), so vocabulary sizes are real ones. When a
pair's vocabularies differ (specs from different tasks) both are given the larger size: the
vocabulary does not decide whether two architectures compute the same function. Models above
`MAX_PARAMETERS` are shrunk, and only in the sizes both specs share, so that a difference between
the two is never erased.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from zoo.build import build
from zoo.equivalence import Verdict, equivalence
from zoo.errors import SpecError
from zoo.experiment import Experiment
from zoo.report.collect import ReportError, read_json, run_path
from zoo.spec import ModelSpec, validate_spec

MAX_PARAMETERS = 60_000_000  # a pair at paper-base size (~48M) takes a few CPU seconds; paper-big is shrunk
SHRUNK_VOCAB = 1000


@dataclass
class Matrix:
    labels: list[str]
    verdicts: dict[tuple[str, str], Verdict]  # (a, b) -> equivalence(a, b), a != b
    sources: dict[str, str]  # label -> where its spec came from
    notes: list[str] = field(default_factory=list)

    def equivalent(self, a: str, b: str) -> bool:
        return a == b or self.verdicts[(a, b)].equivalent

    def equivalent_pairs(self) -> list[tuple[str, str]]:
        """Pairs equivalent in both directions, in variant order."""
        return [(a, b) for i, a in enumerate(self.labels) for b in self.labels[i + 1:]
                if self.equivalent(a, b) and self.equivalent(b, a)]


def run_spec(experiment: Experiment, runs_root: Path, label: str) -> tuple[ModelSpec, str]:
    """The spec a variant's runs trained with, and where it was read from."""
    tasks, seeds = experiment.config.tasks, experiment.config.seeds
    candidates = [run_path(runs_root, label, tasks[0], seeds[0])]
    candidates += [run_path(runs_root, label, t, s) for t in tasks for s in seeds]
    for path in candidates:
        spec_file = path / "spec.json"
        if spec_file.exists():
            data = read_json(spec_file)
            if not isinstance(data, dict) or "spec" not in data:
                raise ReportError(f"{spec_file}: expected an object with a 'spec' entry (written by `zoo train`)")
            return validate_spec(data["spec"], source=str(spec_file)), str(spec_file)
    return experiment.specs[label], "the experiment file (no run directory has a spec.json)"


def _parameters(spec: ModelSpec) -> int:
    return build(spec, device="meta").num_parameters()


def _pair(a: ModelSpec, b: ModelSpec) -> tuple[ModelSpec, ModelSpec, str]:
    """Matching vocabularies, and sizes small enough to check quickly; a note when anything changed."""
    note = []
    vocabs = (a.src_vocab, a.tgt_vocab, b.src_vocab, b.tgt_vocab)
    if (a.src_vocab, a.tgt_vocab) != (b.src_vocab, b.tgt_vocab):
        size = max(vocabs)
        a, b = (s.with_overrides({"src_vocab": size, "tgt_vocab": size}) for s in (a, b))
        note.append(f"vocabularies set to {size}")
    if max(_parameters(a), _parameters(b)) <= MAX_PARAMETERS:
        return a, b, "; ".join(note)
    shared = {k: getattr(a, k) for k in ("src_vocab", "tgt_vocab", "d_model", "d_ff", "n_heads")
              if getattr(a, k) == getattr(b, k)}
    overrides = {k: min(shared[k], SHRUNK_VOCAB) for k in ("src_vocab", "tgt_vocab") if k in shared}
    if {"d_model", "d_ff", "n_heads"} <= shared.keys():
        factor = 1
        while shared["d_model"] // (2 * factor) >= 8 * shared["n_heads"] and factor < 16:
            factor *= 2
        overrides.update(d_model=shared["d_model"] // factor, d_ff=max(shared["d_ff"] // factor, 1))
    try:
        small = a.with_overrides(overrides), b.with_overrides(overrides)
    except SpecError:  # a component's options tie it to the full size: check the real thing
        return a, b, "; ".join(note)
    note.append("shrunk for the check: " + ", ".join(f"{k}={v}" for k, v in overrides.items()))
    return *small, "; ".join(note)


def equivalence_matrix(experiment: Experiment, runs_root: str | Path, seed: int = 0) -> Matrix:
    labels = [v.label for v in experiment.config.variants]
    found = {label: run_spec(experiment, Path(runs_root), label) for label in labels}
    matrix = Matrix(labels, {}, {label: source for label, (_, source) in found.items()})
    for a in labels:
        for b in labels:
            if a == b:
                continue
            spec_a, spec_b = found[a][0], found[b][0]
            if spec_a.digest() == spec_b.digest():
                matrix.verdicts[(a, b)] = Verdict(True, 0.0, "identical specs (same digest)", 0.0)
                continue
            spec_a, spec_b, note = _pair(spec_a, spec_b)
            if note and labels.index(a) < labels.index(b):
                matrix.notes.append(f"{a} vs {b}: {note}")
            matrix.verdicts[(a, b)] = equivalence(spec_a, spec_b, seed=seed)
    return matrix


def matrix_markdown(matrix: Matrix) -> str:
    """The matrix as a GitHub table, then the sentence that names the equivalent pairs."""
    lines = ["| A \\ B | " + " | ".join(matrix.labels) + " |", "|---" * (len(matrix.labels) + 1) + "|"]
    for a in matrix.labels:
        cells = ["≡" if matrix.equivalent(a, b) else "≠" for b in matrix.labels]
        lines.append(f"| **{a}** | " + " | ".join(cells) + " |")
    pairs = matrix.equivalent_pairs()
    lines.append("")
    if pairs:
        for a, b in pairs:
            lines.append(f"- **{a} and {b} compute the same function: their difference is not an ablation** "
                         f"({matrix.verdicts[(a, b)].reason}).")
    else:
        lines.append("No two variants compute the same function: every difference is a real change of the model.")
    return "\n".join(lines)
