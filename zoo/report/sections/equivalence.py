"""Equivalence of the variants: the matrix of which variants compute the same function (zoo/report/equiv.py)."""

from __future__ import annotations

from pathlib import Path

from zoo.report.equiv import matrix_markdown
from zoo.report.study import Report


class Equivalence:
    def title(self, report: Report) -> str:
        return "Equivalence of the variants"

    def render(self, report: Report, out_dir: Path) -> list[str]:
        matrix = report.matrix
        return ["Cell (A, B): ≡ if B, given A's (generic) weights, computes A's log-probabilities (zoo.equivalence); "
                "a pair is equivalent when both directions say ≡.", "", matrix_markdown(matrix), "",
                *(f"- spec of {name}: {source}" for name, source in matrix.sources.items()),
                *(f"- {note}" for note in matrix.notes), ""]
