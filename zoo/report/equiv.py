"""The equivalence matrix: which variants of an experiment compute the same function.

Two variants that compute the same function (say a position-wise FFN written with nn.Linear and
with a kernel-1 Conv1d) differ only in code, so comparing them measures noise, not an ablation.
Cell (row A, column B) is zoo.equivalence(A, B): A built with generic weights, transplanted into
B's layout, log-probabilities compared. The check is directional (B may express A's function but
not the reverse), so a pair is called equivalent only when both cells say ≡.

The specs are the ones the runs trained (the spec in the first record of the variant, else the
experiment's spec), so vocabulary sizes are real ones. The check runs in eval mode on transplanted
weights, so it cannot see what only training sees: the starting weights, dropout and the loss. Two
variants of one function therefore *train alike* only when their seeded builds start with the same
weights (compared, not read from field names: an init option, a zeroed padding row), their dropout
and init fields, their output heads' losses and their training overrides agree; a pair that differs
there (000 with and without its shared prototypes, dropout on more branches) measures that training
change, never the noise floor.

Every pair is checked, also when two specs are identical (the line then shows a measured difference
of 0, not an assumption). When a pair's vocabularies differ (specs from different tasks) both are
given the larger size: the vocabulary does not decide whether two architectures compute the same
function. Models above `MAX_PARAMETERS` are shrunk, and only in the sizes both specs share, so that
a difference between the two is never erased.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field

import torch

from zoo.errors import SpecError
from zoo.experiment import Experiment
from zoo.model.build import build
from zoo.model.spec import ModelSpec, validate_spec
from zoo.proofs.equivalence import Reference, Verdict, canonical_state, equivalence, reference
from zoo.report.collect import Records, record_path

# Above this a pair is shrunk: at a few million parameters a pair takes well under a CPU second, and an
# experiment of 14 variants has up to 182 ordered pairs (at d_model 256 it took about 3 s a pair).
MAX_PARAMETERS = 2_000_000
SHRUNK_VOCAB = 1000
# Columns held built at once: a model of the studies' size takes 1.5-3.5 MiB of memory held (its modules more than
# its weights), so a block of 8 is about 30 MiB; and never more weights than TARGET_BYTES (shrunk models reach 8 MB)
HELD_COLUMNS = 8
TARGET_BYTES = 64 << 20


@dataclass
class Matrix:
    labels: list[str]
    verdicts: dict[tuple[str, str], Verdict]  # (a, b) -> equivalence(a, b), a != b
    sources: dict[str, str]  # label -> where its spec came from
    notes: list[str] = field(default_factory=list)
    # label -> what training sees beyond the function: its TrainConfig overrides, its spec's init and dropout fields
    training: dict[str, dict] = field(default_factory=dict)
    made_from: str = ""  # what the matrix is a function of (`_made_from`): equal ones are the same matrix

    def equivalent(self, a: str, b: str) -> bool:
        return a == b or self.verdicts[(a, b)].equivalent

    def equivalent_pairs(self) -> list[tuple[str, str]]:
        """Pairs equivalent in both directions, in variant order."""
        return [(a, b) for i, a in enumerate(self.labels) for b in self.labels[i + 1:]
                if self.equivalent(a, b) and self.equivalent(b, a)]

    def alike(self, a: str, b: str) -> bool:
        """Same function both ways and the same training: any gap between their results is noise."""
        return (self.equivalent(a, b) and self.equivalent(b, a)
                and self.training.get(a, {}) == self.training.get(b, {}))

    def classes(self) -> list[list[str]]:
        """Groups of two or more variants joined by two-way equivalence, in variant order."""
        group = {label: [label] for label in self.labels}
        for a, b in self.equivalent_pairs():
            if group[a] is not group[b]:
                merged = group[a] + group[b]
                for label in merged:
                    group[label] = merged
        seen, classes = set(), []
        for label in self.labels:
            if id(group[label]) not in seen and len(group[label]) > 1:
                seen.add(id(group[label]))
                classes.append(sorted(group[label], key=self.labels.index))
        return classes


def run_spec(experiment: Experiment, records: Records, label: str) -> tuple[ModelSpec, str, int | None]:
    """The spec a variant's runs trained with (vocabulary fitted to the task), where it was read from, and the
    parameters its trained model counted (None without a record)."""
    for task in experiment.config.tasks:
        for seed in experiment.seeds_of(label, task.key):
            record = records.get(label, task.key, seed)
            if record is not None and record.spec is not None:
                where = record_path(records.root, label, task.key, seed)
                counted = record.summary.parameters if record.summary is not None else None
                return (validate_spec(record.spec, source=str(where)), where.relative_to(records.root).as_posix(),
                        int(counted) if counted else None)
    return experiment.specs[label], "the experiment file (no record yet)", None


def training_fields(spec: ModelSpec) -> dict[str, object]:
    """The spec fields that change training but not the function the equivalence check compares: every
    `init` field and every dropout setting, by dotted path, and the loss the output head trains with (a logits
    head and a log-softmax one are one function, but smooth labels differently). The starting weights
    themselves are compared apart (`_same_start`)."""
    fields: dict[str, object] = {"loss": spec.impl("output").smoothing.__name__}

    def walk(data: dict, prefix: str) -> None:
        for key, value in data.items():
            path = f"{prefix}{key}"
            if isinstance(value, dict):
                walk(value, f"{path}.")
            elif path.startswith("init.") or "dropout" in key:
                fields[f"spec.{path}"] = value

    walk(spec.model_dump(), "")
    return fields


@functools.lru_cache(maxsize=None)
def _counted(spec_json: str) -> int:
    return build(ModelSpec.model_validate_json(spec_json), device="meta").num_parameters()


def _parameters(spec: ModelSpec, recorded: dict[str, int]) -> int:
    """The spec's parameter count: as a record of this very spec counted it when it trained (`recorded`: spec
    JSON -> count), or else built once per spec however many pairs ask, on the meta device (no memory; but a
    first meta build imports torch._dynamo, 2 s and 70 MB, which a report whose specs all come from records
    never needs)."""
    key = spec.model_dump_json()
    return recorded[key] if key in recorded else _counted(key)


def _pair(a: ModelSpec, b: ModelSpec, recorded: dict[str, int]) -> tuple[ModelSpec, ModelSpec, str]:
    """Matching vocabularies, and sizes small enough to check quickly; a note when anything changed."""
    note = []
    vocabs = (a.src_vocab, a.tgt_vocab, b.src_vocab, b.tgt_vocab)
    if (a.src_vocab, a.tgt_vocab) != (b.src_vocab, b.tgt_vocab):
        size = max(vocabs)
        a, b = (s.with_overrides({"src_vocab": size, "tgt_vocab": size}) for s in (a, b))
        note.append(f"vocabularies set to {size}")
    if max(_parameters(a, recorded), _parameters(b, recorded)) <= MAX_PARAMETERS:
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


def equivalence_matrix(experiment: Experiment, records: Records, seed: int = 0, known: Matrix | None = None) -> Matrix:
    """Every ordered pair checked on one CPU thread: the (shrunk) models are too small to gain from more,
    and on a busy machine (runs training beside the report) spinning OpenMP threads made each op 100x slower.
    `known`, a matrix made before, is the answer when it was made from the same specs, sources and training: a
    report recomputed with other records of the same variants (zoo/report/left_out.py) checks no pair again."""
    labels = [v.label for v in experiment.config.variants]
    specs = {label: run_spec(experiment, records, label) for label in labels}
    training = {v.label: {**dict(v.train), **training_fields(specs[v.label][0])} for v in experiment.config.variants}
    made_from = json.dumps([[label, spec.model_dump_json(), source, counted, training[label]]
                            for label, (spec, source, counted) in specs.items()] + [seed], default=str)
    if known is not None and known.made_from == made_from:
        return known
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _matrix(specs, training, made_from, seed)
    finally:
        torch.set_num_threads(threads)


def _matrix(specs: dict[str, tuple[ModelSpec, str, int | None]], training: dict[str, dict], made_from: str,
            seed: int) -> Matrix:
    labels = list(specs)
    matrix = Matrix(labels, {}, {label: source for label, (_, source, _) in specs.items()}, training=training,
                    made_from=made_from)
    recorded = {spec.model_dump_json(): counted for spec, _, counted in specs.values() if counted}
    pairs = {(a, b): _pair(specs[a][0], specs[b][0], recorded) for a in labels for b in labels if a != b}
    checked = [f"{a} vs {b}" for i, a in enumerate(labels) for b in labels[i + 1:]]
    noted = {}  # note -> the unordered pairs it applies to
    for i, a in enumerate(labels):
        for b in labels[i + 1:]:
            if pairs[(a, b)][2]:
                noted.setdefault(pairs[(a, b)][2], []).append(f"{a} vs {b}")
    verdicts = {}
    for start in range(0, len(labels), HELD_COLUMNS):
        # a block of columns, each B built once and put back as built for every row (building B for every pair was
        # half of the matrix's time), and each row's A built once per block; only one row's A is held (each keeps
        # its model and log-probabilities over a 4000-way vocabulary: 14 held at once were 100 MB of the ablations
        # report's peak), and one block's Bs
        columns, targets = labels[start:start + HELD_COLUMNS], _Targets(seed)
        for a in labels:
            sides: dict[str, Reference] = {}  # side A per (paired) spec
            for b in columns:
                if a == b:
                    continue
                spec_a, spec_b, _ = pairs[(a, b)]
                key = spec_a.model_dump_json()
                if key not in sides:
                    sides[key] = reference(spec_a, seed)
                verdicts[(a, b)] = equivalence(spec_a, spec_b, seed=seed, side_a=sides[key],
                                               side_b=targets.fresh(spec_b))
    matrix.verdicts = {pair: verdicts[pair] for pair in pairs}  # row by row, as the table reads
    for members in matrix.classes():  # what training starts from, compared, not read from field names
        starts: list[str] = []
        for label in members:
            same = next((first for first in starts if _same_start(*pairs[(first, label)][:2], seed)), None)
            if same is None:
                starts.append(label)
            matrix.training[label]["starting weights"] = f"{same or label}'s"
    for note, listed in noted.items():
        matrix.notes.append(f"every pair checked: {note}" if listed == checked else f"{', '.join(listed)}: {note}")
    return matrix


def _same_start(spec_a: ModelSpec, spec_b: ModelSpec, seed: int) -> bool:
    """Whether the two specs' seeded builds start with the same weights, name for name (a kernel-1 Conv1d's
    (F, D, 1) against a Linear's (F, D) compared as values): an init option, a zeroed padding row, a gain's start."""
    a, b = (canonical_state(build(spec, seed=seed)) for spec in (spec_a, spec_b))
    return a.keys() == b.keys() and all(torch.equal(a[k].reshape(-1), b[k].reshape(-1)) for k in a)


class _Targets:
    """Side B of a block of the matrix's checks: each column's model as `build(spec, seed)` makes it, built once
    and put back to that state for every row, while the weights held (with their copies) stay under TARGET_BYTES;
    past that, built anew for each pair."""

    def __init__(self, seed: int):
        self.seed, self.held, self.bytes = seed, {}, 0

    def fresh(self, spec: ModelSpec) -> torch.nn.Module:
        key = spec.model_dump_json()
        if key in self.held:
            model, state = self.held[key]
            model.load_state_dict(state)  # every parameter and buffer as built: A's weights of the last row go
            return model
        model = build(spec, seed=self.seed)
        state = {name: tensor.clone() for name, tensor in model.state_dict().items()}
        size = 2 * sum(tensor.numel() * tensor.element_size() for tensor in state.values())  # the model and its copy
        if self.bytes + size <= TARGET_BYTES:
            self.held[key], self.bytes = (model, state), self.bytes + size
        return model


def matrix_markdown(matrix: Matrix) -> str:
    """The matrix as a GitHub table, then the sentence that names the equivalent pairs."""
    lines = ["| A \\ B | " + " | ".join(matrix.labels) + " |", "|---" * (len(matrix.labels) + 1) + "|"]
    for a in matrix.labels:
        cells = ["≡" if matrix.equivalent(a, b) else "≠" for b in matrix.labels]
        lines.append(f"| **{a}** | " + " | ".join(cells) + " |")
    lines.append("")
    classes = matrix.classes()
    for members in classes:
        lines += _class_lines(matrix, members)
    if not classes:
        lines.append("No two variants compute the same function: every difference is a real change of the model.")
    return "\n".join(lines)


def _class_lines(matrix: Matrix, members: list[str]) -> list[str]:
    """Variants of one function: those that also train alike differ only in code; the rest, only in training."""
    by_training: dict[str, list[str]] = {}
    for label in members:
        by_training.setdefault(repr(sorted(matrix.training.get(label, {}).items())), []).append(label)
    worst = max((matrix.verdicts[(a, b)] for a in members for b in members if a != b), key=lambda v: v.max_abs_diff)
    evidence = worst.reason if len(members) == 2 else f"largest difference between them: {worst.reason}"
    names = ", ".join(members[:-1]) + f" and {members[-1]}"
    lines = [f"- **{names} compute the same function** ({evidence})."]
    for alike in by_training.values():
        if len(alike) > 1:
            lines.append(f"  - **{', '.join(alike)}: also trained alike, so their differences are not ablations**: "
                         "they differ only in code, and any gap between their results is noise.")
    if len(by_training) > 1:
        settings = [matrix.training.get(alike[0], {}) for alike in by_training.values()]
        differing = [k for k in dict.fromkeys(k for train in settings for k in train)
                     if len({repr(train.get(k)) for train in settings}) > 1]
        groups = zip(by_training.values(), settings)
        lines.append("  - They differ in training (" + "; ".join(
            f"{', '.join(alike)}: {_overrides(train, differing)}" for alike, train in groups)
            + "), so those comparisons measure the training change, not the model.")
    return lines


def _overrides(train: dict, keys: list[str]) -> str:
    return ", ".join(f"{k} = {train[k]}" for k in keys if k in train) or "the experiment's training"
