"""Trivial floors: what systems that learn nothing score on each task, scored exactly like the models.

A model compared below what doing nothing scores says nothing about the variants: on the WMT sample,
copying the English source unchanged scores 21.44 chrF on the test set, more than the 6000-step
baseline (19.59). Each task names its trivial systems (`Task.trivial_outputs`: copy-source for
translation; identity and per-position majority for synthetic tasks), and their test outputs are
scored with the models' own scorer (zoo.train.evaluate.score) and per-sentence statistics.

`zoo run` writes one floor file per task before anything trains, and `zoo floors EXPERIMENT` writes
them for records made earlier, into <report>/records/.floors/<task>.json beside the records and
committed with them, so that a report reads floors as it reads records, never the corpus:

    {"format": 1, "task": "multi30k-de-en", "definition": {"task": {...}, "data": {...}},
     "systems": {"copy-source": {"test": {"bleu": ..., "chrf": ...}, "sentences": {...}, "signatures": {...}}}}

A floor is current while its task settings (and, where the corpus is here, its files) are the ones
the experiment declares; otherwise `zoo run` / `zoo floors` replace it.

Floors are written into a records folder, so under the rule records are written under (owner.py): a records
folder of another experiment is refused before anything is scored, and the first floor written claims the folder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from zoo.experiment import owner
from zoo.experiment.store import data_fingerprint, task_classes, task_definition
from zoo.rundir import RunError, atomic_write, read_table

FOLDER = ".floors"
FORMAT = 1


def floor_path(records_root: Path, task_key: str) -> Path:
    return Path(records_root) / FOLDER / f"{task_key}.json"


def definition(experiment, task) -> dict[str, Any]:
    """What decides a task's floors: its settings and its data (no model, no training, no seed), and the sources
    of a plugin's task or metrics where it uses them."""
    from zoo.plugins import sources_of

    task_config = experiment.task_config(task)
    defined = {"task": task_definition(task_config), "data": data_fingerprint(task_config)}
    plugins = sources_of(task_classes(task_config))
    return {**defined, "plugins": plugins} if plugins else defined


def is_current(floor: dict[str, Any], current: dict[str, Any]) -> bool:
    """The recorded definition is today's; the data part counts only where the corpus is here to compare."""
    recorded = floor.get("definition")
    if not isinstance(recorded, dict) or recorded.get("task") != current["task"] \
            or recorded.get("plugins") != current.get("plugins"):
        return False
    return current["data"] is None or recorded.get("data") == current["data"]


def compute(experiment, task) -> dict[str, Any]:
    """Score every trivial system of `task` on its test split."""
    from zoo.data import load_task
    from zoo.experiment.record import sentence_statistics
    from zoo.train.evaluate import score

    task_config = experiment.task_config(task)
    loaded = load_task(task_config, pad_id=experiment.specs[experiment.config.baseline_label].pad_id)
    references = loaded.references("test")
    systems = {}
    for name, outputs in loaded.trivial_outputs("test").items():
        sentences, signatures = sentence_statistics(loaded.metrics, outputs, references)
        systems[name] = {"test": score(loaded, outputs, references), "sentences": sentences,
                         "signatures": signatures}
    return {"format": FORMAT, "task": task.key, "definition": definition(experiment, task), "systems": systems}


def read_floor(records_root: Path, task_key: str) -> dict[str, Any] | None:
    """The task's floor file, or None when there is none; RunError naming the file when it is damaged."""
    path = floor_path(records_root, task_key)
    if not path.exists():
        return None
    floor = read_table(path)
    systems = floor.get("systems")
    if floor.get("format") != FORMAT or not isinstance(systems, dict) or not all(
            isinstance(s, dict) and isinstance(s.get("test"), dict) for s in systems.values()):
        raise RunError(f"{path}: not a zoo floor file of format {FORMAT} (format or systems missing)")
    return floor


def current_floor(experiment, records_root: Path, task) -> dict[str, Any] | None:
    """The task's floor file when it is current (None when missing or made under other task settings)."""
    floor = read_floor(records_root, task.key)
    return floor if floor is not None and is_current(floor, definition(experiment, task)) else None


def write_floors(experiment, records_root: Path, tasks: list | None = None) -> list[str]:
    """Compute and write every task's (or `tasks`') floors that are missing or no longer current; the task keys
    written. StoreError, before anything is scored or written, when `records_root` is another experiment's."""
    owner.check(records_root, experiment.name, experiment.path, "--out")
    written = []
    for task in experiment.config.tasks if tasks is None else tasks:
        try:
            floor = read_floor(records_root, task.key)
        except RunError:
            floor = None  # a damaged floor file is simply made again: it holds nothing that training made
        if floor is not None and is_current(floor, definition(experiment, task)):
            continue
        text = json.dumps(compute(experiment, task), sort_keys=True, separators=(",", ":")) + "\n"
        path = floor_path(records_root, task.key)
        owner.claim(records_root, experiment.name, experiment.path, "--out")
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, text)
        written.append(task.key)
    return written
