"""Which runs logged bit-identical numbers: a hash of a record without its timings. The report collapses a variant
whose every seed's hash equals another's into that variant's row (zoo/report/analysis.py, `Analyst.collapse`):
one set of numbers, not a second sample."""

from __future__ import annotations

import hashlib
import json
from array import array

from pydantic import BaseModel

from zoo.experiment.record import Record

TIMINGS = {"tok_per_s", "seconds", "train_seconds", "finished"}
FINGERPRINTED = ("curves", "test", "hypotheses", "final", "status")


def fingerprint(record: Record) -> str:
    """Hash of everything a run logged except timings: equal hashes = bit-identical numbers. Fed value by value
    (a packed curve column as its bytes), not through one JSON text of the record: that took 0.9 s of the
    ablations report."""
    digest = hashlib.sha256()
    _feed(digest, {name: getattr(record, name) for name in FINGERPRINTED})
    return digest.hexdigest()


def _feed(digest, value) -> None:
    if isinstance(value, BaseModel):
        value = {name: getattr(value, name) for name in value.model_fields_set}  # as the record file has them
    if isinstance(value, dict):
        digest.update(b"{")
        for key in sorted(value):
            if key not in TIMINGS:
                digest.update(json.dumps(key).encode() + b":")
                _feed(digest, value[key])
        digest.update(b"}")
    elif isinstance(value, array):
        digest.update(f"<{value.typecode}{len(value)}>".encode() + value.tobytes())
    else:
        digest.update(json.dumps(value, default=str).encode() + b",")
