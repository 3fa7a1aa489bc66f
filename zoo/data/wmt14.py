"""A WMT14 English-German sample: N training pairs drawn at random, under a seed, from the WMT14 training
corpora; newstest2013 as valid and newstest2014 as test.

The training corpora are Europarl v7, Common Crawl and News Commentary v9 (de-en), the WMT14 en-de training data
of fairseq's prepare-wmt14en2de.sh and Hugging Face's wmt14, whose listing gives the sha256 and sizes used here.
Each tarball is read as a stream, opened twice so that its German and its English file are read in step, and
never extracted: 1.66 GB of downloads and no disk beyond them. Reservoir sampling (Algorithm R) keeps N pairs in
memory however many the corpora hold, and they are written in corpus order; the same N and seed give the same
pairs. Pairs that zoo's corpus reader would refuse, or that teach nothing, are skipped before sampling: blank on
either side, not UTF-8, a NUL, byte order mark or carriage return inside, or longer than MAX_LINE_BYTES.

valid and test are sacreBLEU's own test sets (DATASETS["wmt13"] and DATASETS["wmt14/full"], en-de: the
3,003-sentence newstest2014 that papers score, not sacreBLEU's 2,737-sentence default "wmt14"), so references are
the text sacreBLEU scores against. zoo downloads sacreBLEU's tarball itself, its URL and md5 taken from
sacreBLEU's table, to where sacreBLEU's cache keeps it ($SACREBLEU, else ~/.sacrebleu), extracts it there as
sacreBLEU would, and lets sacreBLEU turn the SGML into text; sacreBLEU, finding its tarball in place, downloads
nothing. Fetched through zoo, the test sets get the mirror, the resume and the progress bar of every other
download, and a one-line error where sacreBLEU's own download would log and sys.exit(1).
"""

from __future__ import annotations

import random
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path
from typing import BinaryIO, ClassVar

from rich.progress import Progress, TaskID
from sacrebleu.dataset import DATASETS as SACREBLEU_SETS
from sacrebleu.utils import extract_tarball

from zoo.data.corpus import FORBIDDEN, MAX_LINE_BYTES
from zoo.data.datasets import Dataset, Downloads, register_dataset
from zoo.data.download import Source
from zoo.errors import DataError

STATMT = "https://www.statmt.org/"


@dataclass(frozen=True)
class Corpus:
    """A tarball and the member pair in it: `stem`.SRC and `stem`.TGT, line N of one translating line N of the
    other."""

    source: Source
    stem: str


@register_dataset("wmt14-ende")
class Wmt14Sample(Dataset):
    """N pairs sampled from the WMT14 training corpora, with sacreBLEU's newstest2013 and newstest2014."""

    what = "WMT14 English-German: a seeded sample of its ~4.5M training pairs; newstest2013, newstest2014"
    licence = "research use, citing WMT14"
    sampled = True
    sizes = {"train": 100_000, "valid": 3_000, "test": 3_003}
    download_mb = 1_656  # the three training tarballs; the two test-set tarballs add a few MB
    corpora: ClassVar[tuple[Corpus, ...]] = (
        Corpus(Source(STATMT + "wmt13/training-parallel-europarl-v7.tgz",
                      "0224c7c710c8a063dfd893b0cc0830202d61f4c75c17eb8e31836103d27d96e7"),
               "training/europarl-v7.de-en"),
        Corpus(Source(STATMT + "wmt13/training-parallel-commoncrawl.tgz",
                      "c7a74e2ea01ac6c920123108627e35278d4ccb5701e15428ffa34de86fa3a9e5"), "commoncrawl.de-en"),
        Corpus(Source(STATMT + "wmt14/training-parallel-nc-v9.tgz",
                      "cb8953f292298e6877ae433c98912b927cb0766b303f4540512ddd286c748485"),
               "training/news-commentary-v9.de-en"),
    )
    test_sets: ClassVar[dict[str, str]] = {"valid": "wmt13", "test": "wmt14/full"}  # split -> sacreBLEU's name

    def build(self, folder: Path, downloads: Downloads) -> None:
        src, tgt = self.languages
        splits = {split: sacrebleu_pairs(name, f"{src}-{tgt}", downloads) for split, name in self.test_sets.items()}
        archives = [(downloads.get(corpus.source), corpus.stem) for corpus in self.corpora]
        splits["train"] = sample_pairs(archives, src, tgt, self.pairs, self.seed, downloads.progress)
        for split, pairs in splits.items():
            for side, lang in enumerate((src, tgt)):
                (folder / f"{split}.{lang}").write_text("".join(pair[side] + "\n" for pair in pairs), encoding="utf-8")


def sample_pairs(archives: list[tuple[Path, str]], src: str, tgt: str, pairs: int, seed: int,
                 progress: Progress | None = None) -> list[tuple[str, str]]:
    """`pairs` (src, tgt) sentence pairs drawn uniformly under `seed` from the usable pairs of every (tarball,
    member stem) in turn, in their order there; see the module docstring."""
    rng = random.Random(seed)
    kept: list[tuple[int, tuple[str, str]]] = []
    seen = 0
    for path, stem in archives:
        task = progress.add_task(f"sampling {path.name}", total=path.stat().st_size) if progress is not None else None
        for pair in _usable(_aligned(path, stem, src, tgt, progress, task)):
            if seen < pairs:
                kept.append((seen, pair))
            elif (slot := rng.randrange(seen + 1)) < pairs:
                kept[slot] = (seen, pair)
            seen += 1
    if seen < pairs:
        raise DataError(f"--pairs: {pairs:,} asked for, but the corpora hold {seen:,} usable pairs")
    return [pair for _, pair in sorted(kept)]


def _aligned(path: Path, stem: str, src: str, tgt: str, progress: Progress | None,
             task: TaskID | None) -> Iterator[tuple[bytes, bytes]]:
    """The lines of `stem`.src and `stem`.tgt in the tarball `path`, in step; a DataError if one has more."""
    with path.open("rb") as first, path.open("rb") as second:
        lines = zip_longest(_member_lines(first, path, f"{stem}.{src}"), _member_lines(second, path, f"{stem}.{tgt}"))
        for number, (line, other) in enumerate(lines, 1):
            if line is None or other is None:
                raise DataError(f"{path}: {stem}.{src} and {stem}.{tgt} differ in length at line {number}; "
                                "they cannot be read as pairs")
            if progress is not None and number % 10_000 == 0:
                progress.update(task, completed=first.tell())
            yield line, other
    if progress is not None:
        progress.update(task, completed=path.stat().st_size)


def _member_lines(stream: BinaryIO, path: Path, member: str) -> Iterator[bytes]:
    """The lines (split at b"\\n" only) of `member` of the gzipped tarball `path`, open as `stream`, read as a
    stream: decompressed once, up to that member and through it."""
    with tarfile.open(fileobj=stream, mode="r|gz") as archive:
        for info in archive:
            if info.name.removeprefix("./") == member:
                yield from archive.extractfile(info)
                return
    raise DataError(f"{path}: no file {member} in it")


def _usable(pairs: Iterator[tuple[bytes, bytes]]) -> Iterator[tuple[str, str]]:
    """The pairs zoo's corpus reader accepts and a model can learn from, stripped (see the module docstring)."""
    for line, other in pairs:
        if len(line) > MAX_LINE_BYTES or len(other) > MAX_LINE_BYTES:
            continue
        try:
            pair = line.decode("utf-8").strip(), other.decode("utf-8").strip()
        except UnicodeDecodeError:
            continue
        if all(pair) and not any(char in text for text in pair for char in FORBIDDEN):
            yield pair


def sacrebleu_pairs(name: str, langpair: str, downloads: Downloads) -> list[tuple[str, str]]:
    """(source, reference) of sacreBLEU's test set `name` in `langpair`, fetched into sacreBLEU's cache as the
    module docstring says."""
    dataset = SACREBLEU_SETS[name]
    raw = Path(dataset._rawdir)  # where sacreBLEU's own download would put it (Dataset.maybe_download)
    for url, md5 in zip(dataset.data, dataset.md5):
        tarball = downloads.get(Source(url, md5, "md5"), raw / dataset._get_tarball_filename(url))
        if not all((raw / member).is_file() for member in dataset.langpairs[langpair]):
            extract_tarball(str(tarball), str(raw))
    sources = Path(dataset.get_source_file(langpair)).read_text(encoding="utf-8").split("\n")[:-1]
    references = Path(dataset.get_reference_files(langpair)[0]).read_text(encoding="utf-8").split("\n")[:-1]
    return list(zip(sources, references, strict=True))
