"""The dataset registry: corpora `zoo data get NAME` fetches into the layout zoo reads, zoo's own registered next
to their code (zoo/data/multi30k.py, zoo/data/wmt14.py) and a plugin's the same way:

    from zoo.data import Dataset, Source, register_dataset

    @register_dataset("my-corpus")
    class MyCorpus(Dataset):
        what = "English-French subtitles, ..."
        licence = "CC BY 4.0"
        languages = ("en", "fr")
        sizes = {"train": 50_000, "valid": 1_000, "test": 1_000}
        download_mb = 12

        def build(self, folder, downloads):
            archive = downloads.get(Source("https://example.org/corpus.tgz", "<sha256>"))
            ...  # write folder/{train,valid,test}.{en,fr}

`Dataset.get(to)` (`DATASETS.get(name)(pairs=..., seed=...).get(to)`) builds the corpus in a hidden folder
beside the target, reads it back as training will (zoo/data/corpus.py: aligned, UTF-8, no stray control
characters) and checks that each split holds the pairs `sizes` promises; only then is it renamed into place.
So a failed, interrupted or wrong build leaves no half corpus where a task would find one. Downloads are kept
in $ZOO_CACHE/downloads (else ~/.cache/zoo/downloads), so a second build (another --seed, say) downloads
nothing; zoo/data/download.py fetches them.
"""

from __future__ import annotations

import contextlib
import re
import shutil
from pathlib import Path
from typing import ClassVar

from rich.progress import Progress

from zoo.catalogue import Catalogue
from zoo.data.corpus import CORPUS_NAME, read_corpus
from zoo.data.download import Source, cached_name, fetch
from zoo.data.task import SPLITS
from zoo.data.tokenizer import cache_root
from zoo.errors import DataError


class Downloads:
    """How a dataset reaches its files: each fetched once into the download cache (or to a path the dataset
    names), checked against its checksum, and shown on `progress` (None: no bar)."""

    def __init__(self, cache: Path, progress: Progress | None = None):
        self.cache = cache
        self.progress = progress

    def get(self, source: Source, path: Path | None = None) -> Path:
        return fetch(source, path or self.cache / cached_name(source.url), self.progress)


class Dataset:
    """A corpus zoo can fetch and lay out. An entry states what `zoo data list` shows and `build` writes it."""

    registry_name: ClassVar[str]  # set by register_dataset
    what: ClassVar[str]  # what it is, in a line
    licence: ClassVar[str]
    languages: ClassVar[tuple[str, ...]] = ("en", "de")
    # pairs per split, then per further test set (file stem) it brings; a sampled dataset's "train" is --pairs' default
    sizes: ClassVar[dict[str, int]]
    download_mb: ClassVar[float]
    sampled: ClassVar[bool] = False  # its training split is a seeded random sample: it takes pairs and seed

    def __init__(self, pairs: int | None = None, seed: int | None = None):
        if not self.sampled and (pairs is not None or seed is not None):
            raise DataError(f"{self.registry_name}: --pairs and --seed are for a sampled dataset; this one is fixed "
                            f"({self.sizes['train']:,} training pairs)")
        if pairs is not None and pairs < 1:
            raise DataError(f"--pairs: expected at least 1 pair, got {pairs}")
        self.pairs = self.sizes["train"] if pairs is None else pairs
        self.seed = 0 if seed is None else seed

    def more_test_sets(self) -> tuple[str, ...]:
        """Test sets beyond `test` that the dataset brings (file stems of `sizes`), for a task's `test_sets`."""
        return tuple(stem for stem in self.sizes if stem not in SPLITS)

    def expected(self) -> dict[str, int]:
        """Pairs per split of the corpus this instance builds."""
        return {**self.sizes, "train": self.pairs}

    def build(self, folder: Path, downloads: Downloads) -> None:
        """Write `folder`/{train,valid,test}.LANG for each of `languages`, one sentence per line, aligned."""
        raise NotImplementedError

    def get(self, to: Path | None = None, *, cache: Path | None = None, progress: Progress | None = None) -> Path:
        """Build the corpus into the folder `to` (default data/NAME) and return it; see the module docstring. `to`
        must not exist or be empty; its name is the CORPUS of the tasks that read it. `cache`: where downloads are
        kept (default $ZOO_CACHE/downloads, else ~/.cache/zoo/downloads); `progress`: a bar per file."""
        target = Path(to) if to is not None else Path("data") / self.registry_name
        if not re.fullmatch(CORPUS_NAME, target.name):
            raise DataError(f"--to: {target}: a corpus folder's name is the CORPUS of task names CORPUS:SRC-TGT, so "
                            "it cannot hold ':', '/', '\\' or spaces")
        if target.exists() and (not target.is_dir() or any(target.iterdir())):
            raise DataError(f"--to: {target} exists and is not empty; remove it or give another folder")
        made = [folder for folder in (target.parent, *target.parent.parents) if not folder.exists()]  # deepest first
        target.parent.mkdir(parents=True, exist_ok=True)
        work = target.with_name(f".{target.name}.partial")  # a killed build's leftover is cleared here
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        try:
            self.build(work, Downloads(cache if cache is not None else cache_root() / "downloads", progress))
            self._check(work)
            work.replace(target)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            for folder in made:  # a failed get leaves no empty data/ behind it
                with contextlib.suppress(OSError):
                    folder.rmdir()
            raise
        return target

    def _check(self, folder: Path) -> None:
        """`folder` reads as a corpus of the dataset's languages, each split with the pairs it should hold."""
        first, *others = self.languages
        for other in others:
            corpus = read_corpus(folder.parent, folder.name, first, other, ("test", *self.more_test_sets()))
            counts = {split: len(pair.src.lines) for split, pair in corpus.items()}
            if counts != self.expected():
                raise DataError(f"{self.registry_name}: the built corpus holds {_pairs(counts)} pairs where "
                                f"{_pairs(self.expected())} were expected; nothing was written")


DATASETS: Catalogue[type[Dataset]] = Catalogue("dataset", Dataset)
register_dataset = DATASETS.register


def _pairs(counts: dict[str, int]) -> str:
    return ", ".join(f"{split} {count:,}" for split, count in counts.items())
