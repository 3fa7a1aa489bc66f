"""`zoo data list` and `zoo data get`: the datasets zoo can fetch (zoo/data/datasets.py), and fetching one into
the corpus layout tasks read."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

from zoo.cli.process import add_plugin_option
from zoo.data import DATASETS
from zoo.data.task import SPLITS
from zoo.terminal import Table

console = Console(emoji=False)
errors = Console(stderr=True, emoji=False)


def cmd_data_list(args: argparse.Namespace) -> int:
    table = Table(title="Datasets (zoo data get NAME)", title_justify="left")
    table.add_column("dataset", no_wrap=True)
    for column in ("what it is", "pairs: train / valid / test", "download", "licence"):
        table.add_column(column, overflow="fold")
    for name in DATASETS.names():
        dataset = DATASETS.get(name)
        pairs = [f"{dataset.sizes[split]:,}" for split in SPLITS]
        if dataset.sampled:
            pairs[0] = f"--pairs ({pairs[0]})"
        table.add_row(*map(escape, (name, dataset.what, " / ".join(pairs), _megabytes(dataset.download_mb),
                                    dataset.licence)))
    console.print(table)
    return 0


def _megabytes(size: float) -> str:
    return f"{size / 1000:.2f} GB" if size >= 1000 else f"{size:g} MB"


def cmd_data_get(args: argparse.Namespace) -> int:
    dataset = DATASETS.get(args.name)(pairs=args.pairs, seed=args.seed)
    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
               TimeRemainingColumn())
    with Progress(*columns, console=errors) as progress:
        folder = dataset.get(args.to, progress=progress)
    src, tgt = dataset.languages[:2]
    counts = dataset.expected()
    home = folder.resolve().parent
    more = dataset.more_test_sets()
    also = f"; more test sets: {', '.join(f'{stem} ({counts[stem]:,})' for stem in more)}" if more else ""
    console.print(f"{folder}: {' / '.join(f'{counts[split]:,}' for split in SPLITS)} pairs (train / valid / test) "
                  f"in {', '.join(dataset.languages)}{also}", markup=False, highlight=False, soft_wrap=True)
    console.print(f"its tasks are {folder.name}:{src}-{tgt} and {folder.name}:{tgt}-{src}; point zoo at {home} "
                  f"with --data-dir (zoo train), data_dir in an experiment file, or ZOO_DATA_DIR",
                  markup=False, highlight=False, soft_wrap=True)
    return 0


def add_commands(sub) -> None:
    data = sub.add_parser("data", help="list the datasets zoo can fetch, or fetch one into the corpus layout",
                          description="Datasets zoo can download and lay out as CORPUS/{train,valid,test}.LANG.")
    commands = data.add_subparsers(dest="data_command", required=True, metavar="DATA_COMMAND")

    p = commands.add_parser("list", help="the datasets: what each is, its pairs, download size and licence",
                            description="List the registered datasets (zoo's own and any a plugin registers).")
    p.set_defaults(run=cmd_data_list)

    p = commands.add_parser("get", help="download a dataset into the corpus layout zoo reads",
                            description="Download dataset NAME (checksummed, resumable: run again after an "
                            "interruption), and write DIR/{train,valid,test}.LANG. Downloads are kept in "
                            "$ZOO_CACHE/downloads (else ~/.cache/zoo/downloads); $ZOO_DATA_MIRROR=URL fetches every "
                            "file from URL/HOST/PATH instead.")
    p.add_argument("name", metavar="NAME", help="a dataset, as `zoo data list` names it")
    p.add_argument("--to", type=Path, metavar="DIR", help="the corpus folder to write; it must not exist or be "
                   "empty, and its name is the CORPUS of the tasks that read it (default data/NAME)")
    p.add_argument("--pairs", type=int, metavar="N", help="a sampled dataset's training pairs (default: as `zoo data "
                   "list` shows)")
    p.add_argument("--seed", type=int, metavar="S", help="a sampled dataset's sampling seed (default 0)")
    p.set_defaults(run=cmd_data_get)

    for command in commands.choices.values():  # `zoo data get --plugin P NAME` as well as `zoo data --plugin P get`
        add_plugin_option(command, default=argparse.SUPPRESS)
