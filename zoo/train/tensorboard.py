"""`--log-to tensorboard DIR`: the rows a training run logs, mirrored to TensorBoard as they are written.

For people who watch long runs (`zoo train`, and each cell of `zoo run`). Exporting finished records to
TensorBoard or MLflow, which reads only records, is zoo/export/.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from zoo.errors import ExportError, install_hint


class LiveTensorBoard:
    """`--log-to tensorboard DIR` while training: each row the loop logs to metrics.jsonl, written as scalars
    (train/<column>, eval/<column>) as it happens, for people who watch long runs."""

    def __init__(self, folder: Path):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise ExportError("--log-to tensorboard needs the tensorboard extra: "
                              + install_hint("tensorboard")) from None
        self.writer = SummaryWriter(str(folder))

    def log(self, row: dict[str, Any]) -> None:
        part = "eval" if row.get("event") == "eval" else "train"
        for column, value in row.items():
            if column not in ("step", "epoch", "event") and isinstance(value, (int, float)) \
                    and not isinstance(value, bool) and math.isfinite(value):
                self.writer.add_scalar(f"{part}/{column}", value, row["step"])
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


def log_destination(option: list[str] | None) -> Path | None:
    """`--log-to tensorboard DIR` as a folder (None when not given); one line for anything else."""
    if not option:
        return None
    if len(option) != 2 or option[0] != "tensorboard":
        raise ExportError(f"--log-to: {' '.join(option)!r}: give 'tensorboard DIR'")
    return Path(option[1])
