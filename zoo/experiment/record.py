"""The compact record of one cell: everything the report needs, small enough to commit.

    {
      "format": 2,                                           (1: every record made before 2026-11-29)
      "cell": {"experiment", "variant", "task", "seed"},
      "definition": {...}, "definition_digest": "...",      what decided its numbers (store.definition)
      "status": "complete" | "diverged" | "failed", "reason": "...",
      "summary": {parameters, steps, epochs, tokens, train_seconds, device, precision, spec_digest},
      "spec": {...},                                         the spec as trained (vocabulary fitted to the task)
      "final": {...},                                        the last validation evaluation
      "curves": {"train": {column: [...]}, "eval": {column: [...]}},   by column: every evaluation row, and
                                                             at most TRAIN_ROWS training rows, evenly spaced
                                                             and the last (format 1: every logged row)
      "test": {...},                                         test-set metrics (test.json)
      "hypotheses": [...],                                   the decoded test set
      "sentences": {"bleu": [[...]], "chrf": [[...]]}        per-sentence statistics of each sentence-level
                   {"exact_match": [0, 1, ...]}             metric of the task (zoo/metrics.py): sacreBLEU's
                                                             for text, exact match for synthetic tasks
      "test_sets": [{"name", "sentences", "scores"}],        where the task's test split is several sets (its
                                                             `test_sets`): each set's size, in order, and each
                                                             sentence-level metric on it alone; "test" and
                                                             "sentences" are over their union
      "signatures": {"bleu": "...", "chrf": "..."},          the metrics' signatures (sacreBLEU's)
      "provenance": {zoo version and commit, torch, python, cpu, concurrent runs, finished,
                     imported: {module: hash} a plugin imported as it ran (zoo/experiment/executed.py)},
      "digest": "..."                                        sha256 of the record's canonical JSON without this field
    }

From format 2 a record keeps "sentences" and "hypotheses" in one compressed field, "packed"
(zoo/experiment/packing.py: lossless, 6-7 times smaller); reading it gives them back as format 1 holds them.
Records of format 1 stay as they are, read and written as they were (written again, a record gains its digest).

The report reads records alone: no checkpoint, no run directory, no reference file. Sentence
statistics are what a seed-aware bootstrap over test sentences needs (sacreBLEU's own sufficient
statistics, so every resampled score is sacreBLEU's). A record never exceeds MAX_BYTES.

Reading a record checks it (`read`): its types and ranges here (the models below), and that its numbers tell one
story in zoo/experiment/consistency.py. `write` stores "digest", which `read` recomputes: an accidental edit (a
value changed by hand, a bad merge) is refused. Anyone can recompute a digest, so it is no defence against a
deliberate edit. Records written before digests have none, and are read as they are.
"""

from __future__ import annotations

import hashlib
import json
from array import array
from pathlib import Path
from typing import Annotated, Any, Iterable, Literal

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    field_serializer,
    model_serializer,
    model_validator,
    with_config,
)
from typing_extensions import TypedDict

from zoo import metrics
from zoo.experiment import packing
from zoo.experiment.consistency import inconsistency, set_scores
from zoo.experiment.provenance import provenance
from zoo.rundir import (
    METRICS,
    SPEC,
    SUMMARY,
    TASK,
    TEST,
    RunError,
    atomic_write,
    read_hypotheses,
    read_metrics,
    read_table,
)

FORMAT = 2  # what new records are written as; every format in FORMATS is read
FORMATS = Literal[1, 2]
TRAIN_ROWS = 100  # training-curve rows a record keeps (format 2): 4000 logged rows were 470 KB of a 580 KB record
MAX_BYTES = 2 * 1024 * 1024
TRAIN_COLUMNS = ("step", "epoch", "loss", "nll", "lr", "grad_norm", "tokens", "tok_per_s", "seconds")


def _columns(rows: list[dict[str, Any]], names: list[str]) -> dict[str, list[Any]]:
    return {name: [row.get(name) for row in rows] for name in names}


def curves(rows: list[dict[str, Any]]) -> dict[str, dict[str, list[Any]]]:
    """The logged rows as columns: at most TRAIN_ROWS training rows (evenly spaced, the last always among them),
    and every evaluation row."""
    train = thinned([r for r in rows if "event" not in r], TRAIN_ROWS)
    evals = [r for r in rows if r.get("event") == "eval"]
    eval_names = sorted({k for r in evals for k in r if k != "event"}, key=lambda k: (k != "step", k))
    return {"train": _columns(train, [c for c in TRAIN_COLUMNS if any(c in r for r in train)]),
            "eval": _columns(evals, eval_names)}


def thinned(rows: list, count: int) -> list:
    """At most `count` of `rows`, evenly spaced, ending with the last."""
    if len(rows) <= count:
        return rows
    every = -(-len(rows) // count)  # ceil: the rows kept are at most `count`
    return rows[::-1][::every][::-1]


def sentence_statistics(metric_names: Iterable[str], hypotheses: list[str],
                        references: list[str]) -> tuple[dict, dict]:
    """Per-sentence statistics of every sentence-level metric among `metric_names` (a task's metrics), and
    their signatures, for the seed-aware bootstrap."""
    if len(hypotheses) != len(references):
        raise RunError(f"{len(hypotheses)} test outputs for {len(references)} references")
    stats, signatures = {}, {}
    for name in metric_names:
        metric = metrics.get(name)
        if metric.sentence_level:
            stats[name] = metric.sentence_statistics(hypotheses, references)
            if metric.signature() is not None:
                signatures[name] = metric.signature()
    return stats, signatures


def base(cell: dict[str, Any], definition: dict[str, Any], digest: str, concurrent: int,
         commit: str = "") -> Head:
    """What every record of `cell` starts with, whatever its outcome."""
    return Head(format=FORMAT, cell=Cell(**cell), definition=definition, definition_digest=digest,
                provenance=provenance(concurrent, commit, definition.get("plugins")))


def from_run(run_dir: Path, head: Head) -> Record:
    """The record of a finished (complete and evaluated, or diverged) run directory, built as the Record model
    that `read` checks: a run whose files do not make a record fails here, not in the report."""
    from zoo.data import load_saved

    summary = read_table(run_dir / SUMMARY)
    rows = read_metrics(run_dir / METRICS)
    outcome: dict[str, Any] = {}
    if summary["status"] == "complete":
        task = load_saved(run_dir / TASK)
        hypotheses = read_hypotheses(run_dir, TEST) or []
        sentences, signatures = sentence_statistics(task.metrics, hypotheses, task.references("test"))
        outcome = {"test": read_table(run_dir / f"{TEST}.json"), "hypotheses": hypotheses, "sentences": sentences,
                   "signatures": signatures}
        sets = task.test_sets()
        if len(sets) > 1:
            outcome["test_sets"] = set_scores(sets, sentences)
    try:
        return Record(**dict(head), status=summary["status"], reason=summary.get("reason", ""),
                      summary={k: summary.get(k) for k in Summary.model_fields},
                      spec=read_table(run_dir / SPEC)["spec"], final=summary.get("final"),
                      curves=curves(rows), **outcome)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "record"
        raise RunError(f"{run_dir}: its files do not make a record: {where}: {first['msg']}") from None


def failed(head: Head, reason: str, trace: str) -> Record:
    return Record(**dict(head), status="failed", reason=reason, traceback=trace[-4000:])


def canonical(fields: dict[str, Any]) -> str:
    """A record's fields as written: sorted keys, compact, NaN and infinities as JSON's extension writes them."""
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), allow_nan=True)


def content_digest(body: str | bytes) -> str:
    """The digest of a record's canonical JSON without its digest field (`canonical`)."""
    return hashlib.sha256(body.encode() if isinstance(body, str) else body).hexdigest()


def write(path: Path, record: Record) -> None:
    """Write a record (as it was read or built: the fields it was given, extras included, and no others), sorted
    and compact, with the digest of that content: a record read and written again is the same bytes, apart from
    the digest a record written before digests gains."""
    fields = record.model_dump(exclude_unset=True)
    fields.pop("digest", None)
    fields["digest"] = content_digest(canonical(fields))
    text = canonical(fields) + "\n"
    if len(text.encode()) > MAX_BYTES:
        raise RunError(f"{path}: the record would be {len(text.encode()):,} bytes, over {MAX_BYTES:,}; "
                       "decode a smaller test set or log less often")
    atomic_write(path, text)


def read(path: Path) -> Record:
    """A record, checked against the format above: types and ranges (the models below), that its numbers tell one
    story (zoo/experiment/consistency.py), and that its content is what was written (its digest, where it has
    one); RunError naming the file and the first problem, in one line, otherwise.

    pydantic parses the JSON itself: the same values (NaN and infinities included) as json.loads and then
    validating the dict, in about half the time (every record committed under reports/ reads back the same;
    a report reads hundreds of records of 0.5 MB each)."""
    try:
        text = path.read_bytes()
    except OSError as err:
        raise RunError(f"{path}: cannot read ({err.strerror or err})") from None
    try:
        record = Record.model_validate_json(text)
    except ValidationError as err:
        first = err.errors()[0]
        if first["type"] == "json_invalid":
            raise RunError(f"{path}: cannot read ({first['msg']})") from None
        where = ".".join(str(part) for part in first["loc"]) or "record"
        raise RunError(f"{path}: not a zoo record of format 1 or {FORMAT}: {where}: "
                       f"{first['msg'].removeprefix('Value error, ')}{_given(first)}") from None
    problem = inconsistency(record)  # before the digest: what disagrees says more than that something changed
    if problem:
        raise RunError(f"{path}: a damaged record: {problem}")
    if record.digest is not None:
        found = _digest_of(text, record.digest)
        if found != record.digest:
            raise RunError(f"{path}: edited after it was written: digest {record.digest[:12]}... does not match its "
                           f"content ({found[:12]}...)")
    return record


def _given(error: dict[str, Any]) -> str:
    """', not <value>' for a pydantic error about a plain value (a number, text, null); '' for the rest."""
    value = error.get("input")
    if error["type"] in ("missing", "value_error") or isinstance(value, (dict, list)):
        return ""
    shown = repr(value)
    return f", not {shown if len(shown) <= 40 else shown[:37] + '...'}"


def _digest_of(text: bytes, stored: str) -> str:
    """The digest of a record file's content without its digest field. A file as `write` wrote it is that content
    with ',"digest":"<stored>"' added and a newline: hashing it without them is one pass over the bytes. Any other
    file (the same content formatted otherwise, or edited) is parsed and written canonically first."""
    field = f',"digest":"{stored}"'.encode()
    if text.count(field) == 1 and text.endswith(b"}\n"):
        found = content_digest(text.replace(field, b"")[:-1])
        if found == stored:
            return found
    try:
        fields = json.loads(text)
    except (ValueError, RecursionError):
        return "unreadable"
    fields.pop("digest", None)
    return content_digest(canonical(fields))


Value = StrictFloat | StrictInt | StrictStr | None  # JSON numbers (NaN/inf from a diverged loss), text, null
Count = Annotated[StrictInt, Field(ge=0, lt=2**63)]  # steps, tokens, parameters, sentences
Amount = Annotated[StrictFloat, Field(ge=0, allow_inf_nan=False)] | Count  # seconds, epochs: finite, not negative
DIGEST = r"^[0-9a-f]{64}$"
Module = Annotated[StrictStr, Field(pattern=r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")]  # a dotted module name


@with_config(ConfigDict(extra="allow"))
class Provenance(TypedDict, total=False):
    """Where a record was made (`provenance`): a dict, so a reader's .get works, with each field of its type or
    null (not recorded, as when it is absent)."""

    zoo: StrictStr | None
    commit: StrictStr | None
    torch: StrictStr | None
    python: StrictStr | None
    cpu: StrictStr | None
    cpu_capability: StrictStr | None
    concurrent_runs: Annotated[StrictInt, Field(ge=1)] | None
    finished: StrictStr | None
    plugins: list[dict[str, Any]] | None
    copied_from: StrictStr | None
    imported: dict[Module, Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{16}$")]] | None


class Cell(BaseModel):
    """Which grid cell a record is of (a copied record names the cell it was copied to)."""

    model_config = ConfigDict(extra="allow")
    experiment: StrictStr
    variant: StrictStr
    task: StrictStr
    seed: StrictInt


class Summary(BaseModel):
    model_config = ConfigDict(extra="allow")
    parameters: Count | None = None
    steps: Count | None = None
    epochs: Amount | None = None
    tokens: Count | None = None
    train_seconds: Amount | None = None
    device: StrictStr | None = None
    precision: StrictStr | None = None
    spec_digest: StrictStr | None = None


class Curves(BaseModel):
    model_config = ConfigDict(extra="forbid")
    train: dict[str, list[Value]] = {}
    eval: dict[str, list[Value]] = {}

    @model_validator(mode="after")
    def _aligned(self) -> "Curves":
        for part, columns in (("train", self.train), ("eval", self.eval)):
            if columns and not all(isinstance(step, int) and not isinstance(step, bool)
                                   for step in columns.get("step", [None])):
                raise ValueError(f"{part}.step: steps must be integers")
            if len({len(values) for values in columns.values()}) > 1:
                raise ValueError(f"{part}: columns of different lengths")
        for name, values in self.train.items():
            self.train[name] = packed(values)
        for part, columns in (("train", self.train), ("eval", self.eval)):
            for name, values in columns.items():
                wide = next((v for v in values if type(v) is int and not -2**63 <= v < 2**63), None) \
                    if isinstance(values, list) else None  # a packed column holds int64s
                if wide is not None:
                    raise ValueError(f"{part}.{name}: {wide} does not fit a 64-bit integer")
        return self

    @field_serializer("train")
    def _lists(self, train: dict[str, list[Value] | array]) -> dict[str, list[Value]]:
        """Written (and hashed) as the lists they were read from: a packed column is only how memory holds it."""
        return {name: values.tolist() if isinstance(values, array) else values for name, values in train.items()}


def packed(values: list[Value]) -> list[Value] | array:
    """A training-curve column as a typed array where every value is a float (or every one an int): 4000 rows
    of 9 columns as Python floats take 32 bytes a value, 1.2 MB a record, 322 MB of the ablations report's
    280 records; packed, 8 bytes a value, read back as the same Python numbers. A column holding None or
    text (a diverged run's 'nan') stays a list."""
    kinds = {type(value) for value in values}
    if kinds == {float}:
        return array("d", values)
    if kinds == {int}:
        try:
            return array("q", values)
        except OverflowError:  # an integer beyond 64 bits: `Curves` names it
            return values
    return values


class TestSet(BaseModel):
    """One of the sets a test split is made of: its name, its sentences, and its own scores."""

    model_config = ConfigDict(extra="forbid")
    name: StrictStr
    sentences: Count
    scores: dict[str, StrictFloat | StrictInt]


class Head(BaseModel):
    """The fields every record starts with: which cell, under which definition, made where."""

    model_config = ConfigDict(extra="forbid")
    format: FORMATS
    cell: Cell
    definition: dict[str, Any]
    definition_digest: StrictStr
    provenance: Provenance = {}


class Record(BaseModel):
    """The record format of the module docstring: what `read` checks and returns, so a reader names the
    fields it uses (extra fields are kept, and written back: a record written by a later zoo may carry more)."""

    model_config = ConfigDict(extra="allow")
    format: FORMATS
    cell: Cell
    definition: dict[str, Any]
    definition_digest: StrictStr
    status: Literal["complete", "diverged", "failed"]
    reason: StrictStr = ""
    summary: Summary | None = None
    spec: dict[str, Any] | None = None
    final: dict[str, Value] | None = None
    curves: Curves | None = None
    test: dict[str, Value] | None = None
    hypotheses: list[StrictStr] | None = None
    sentences: dict[str, list[list[StrictInt]] | list[StrictInt]] | None = None
    signatures: dict[str, StrictStr] | None = None
    test_sets: list[TestSet] | None = None
    provenance: Provenance = {}
    traceback: StrictStr | None = None  # a failed record's: where the cell's code raised
    digest: Annotated[StrictStr, Field(pattern=DIGEST)] | None = None  # set by `write`, checked by `read`

    @model_validator(mode="before")
    @classmethod
    def _unpack(cls, data: Any) -> Any:
        """A record of format 2 holds its sentences and hypotheses packed (zoo/experiment/packing.py)."""
        if isinstance(data, dict) and "packed" in data:
            if data.get("format") == 1 or "sentences" in data or "hypotheses" in data:
                raise ValueError("packed: only a record of format 2 holds it, in place of sentences and hypotheses")
            data = dict(data)
            data["sentences"], data["hypotheses"] = packing.unpack(data.pop("packed"))
        return data

    @model_serializer(mode="wrap")
    def _pack(self, handler) -> dict[str, Any]:
        out = handler(self)
        if self.format >= 2 and out.get("sentences") is not None:
            out.pop("sentences")
            out["packed"] = packing.pack(self.sentences, out.pop("hypotheses", None))
        return out

    @model_validator(mode="after")
    def _complete(self) -> "Record":
        if self.status == "complete" and (self.test is None or self.sentences is None or self.summary is None):
            raise ValueError("a complete record needs its summary, test metrics and per-sentence statistics")
        if self.sentences:
            self.sentences = {name: packed_rows(rows) for name, rows in self.sentences.items()}
        return self

    @field_serializer("sentences")
    def _rows(self, sentences: dict[str, Any] | None) -> dict[str, list] | None:
        """Written as the lists they were read from: a packed table is only how memory holds it."""
        if sentences is None:
            return None
        return {name: rows.tolist() if isinstance(rows, np.ndarray) else rows for name, rows in sentences.items()}


def packed_rows(rows: list) -> list | np.ndarray:
    """A metric's per-sentence statistics as one int64 array ((N, k), or (N,)): 1000 test sentences of BLEU's
    and chrF's 28 counts are about 400 KB as Python lists and 224 KB packed; read back as the same integers.
    Ragged rows (a plugin metric's) stay lists."""
    try:
        table = np.asarray(rows, dtype=np.int64)
    except (ValueError, OverflowError):
        return rows
    return table if table.ndim in (1, 2) and table.size else rows
