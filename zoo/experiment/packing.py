"""How a record of format 2 keeps its per-sentence statistics and hypotheses: one compressed field, lossless.

A record of 3,071 test sentences holds about 330 KB of per-sentence statistics as JSON lists and 190 KB of
hypotheses; a study of 14 arms x 30 seeds would commit 220 MB of them. Most of those numbers repeat each other:
sacreBLEU's n-gram totals follow from the hypothesis length (t_n = len - n + 1), chrF's counts of each order from
those of the order before. So each metric's table is stored column by column as the residual from the earlier
column that predicts it best (chosen per table, and named in the record, so decoding needs no knowledge of the
metric), then the residuals and the hypotheses go through LZMA and base85 (JSON-safe) into one string:

    "packed": {"codec": "xz-base85", "tables": [{"name": "bleu", "shape": [3071, 10], "predictors": [-1, 0, ...]},
                                                ...], "data": "..."}

(`tables` is a list, in the order of the data: a record is written with sorted keys, which would reorder a dict.)

A table a plugin metric gives as ragged lists (no fixed width) is kept as JSON inside the compressed data.
Decoding gives back the same integers and strings, so a record read and written again is the same bytes, and
the report sees what a record of format 1 holds (`Record.sentences`, `Record.hypotheses`).
"""

from __future__ import annotations

import base64
import json
import lzma
from typing import Any

import numpy as np

CODEC = "xz-base85"
_DTYPE = np.dtype("<i8")
_FILTERS = [{"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME}]


def _predictors(table: np.ndarray) -> list[int]:
    """For each column, the earlier column whose values it differs from least (in total absolute difference),
    or -1 where none does better than the column itself."""
    chosen = []
    for j in range(table.shape[1]):
        costs = [np.abs(table[:, j]).sum()] + [np.abs(table[:, j] - table[:, p]).sum() for p in range(j)]
        chosen.append(int(np.argmin(costs)) - 1)
    return chosen


def _residuals(table: np.ndarray, predictors: list[int]) -> np.ndarray:
    out = table.copy()
    for j, p in enumerate(predictors):
        if p >= 0:
            out[:, j] = table[:, j] - table[:, p]
    return out


def _restore(residuals: np.ndarray, predictors: list[int]) -> np.ndarray:
    table = residuals.copy()
    for j, p in enumerate(predictors):  # in column order: a predictor is always an earlier, restored column
        if p >= 0:
            table[:, j] = residuals[:, j] + table[:, p]
    return table


def pack(sentences: dict[str, Any], hypotheses: list[str] | None) -> dict[str, Any]:
    """The `packed` field of a record holding `sentences` (metric -> (N, K) or (N,) int array, or ragged lists)
    and `hypotheses`."""
    tables, parts, ragged = [], [], {}
    for name, rows in sentences.items():
        if not isinstance(rows, np.ndarray):
            ragged[name] = rows
            continue
        table = rows.reshape(len(rows), -1).astype(_DTYPE)
        predictors = _predictors(table)
        tables.append({"name": name, "shape": list(rows.shape), "predictors": predictors})
        parts.append(np.ascontiguousarray(_residuals(table, predictors).T).tobytes())
    text = json.dumps({"hypotheses": hypotheses, "ragged": ragged}, ensure_ascii=False, separators=(",", ":"))
    data = lzma.compress(b"".join(parts) + text.encode(), format=lzma.FORMAT_XZ, filters=_FILTERS)
    return {"codec": CODEC, "tables": tables, "data": base64.b85encode(data).decode("ascii")}


def unpack(packed: dict[str, Any]) -> tuple[dict[str, Any], list[str] | None]:
    """(sentences, hypotheses) from a record's `packed` field; ValueError naming what is wrong."""
    if not isinstance(packed, dict) or packed.get("codec") != CODEC:
        raise ValueError(f"packed: not {CODEC!r} data")
    try:
        data = lzma.decompress(base64.b85decode(packed["data"]), format=lzma.FORMAT_XZ)
        sentences, offset = {}, 0
        for layout in packed["tables"]:
            name = layout["name"]
            shape, predictors = [int(n) for n in layout["shape"]], [int(p) for p in layout["predictors"]]
            rows, width = shape[0], (shape[1] if len(shape) == 2 else 1)
            size = rows * width * _DTYPE.itemsize
            if len(predictors) != width or any(not -1 <= p < j for j, p in enumerate(predictors)):
                raise ValueError(f"tables.{name}: predictors {predictors} do not fit {width} columns")
            residuals = np.frombuffer(data[offset:offset + size], dtype=_DTYPE).reshape(width, rows).T
            sentences[name] = _restore(residuals, predictors).reshape(shape).tolist()  # as format 1 holds them
            offset += size
        rest = json.loads(data[offset:].decode())
        return {**sentences, **rest["ragged"]}, rest["hypotheses"]
    except (KeyError, TypeError, ValueError, IndexError, OverflowError, lzma.LZMAError, UnicodeDecodeError) as err:
        raise ValueError(f"packed: cannot be decoded ({type(err).__name__}: {err})") from None
