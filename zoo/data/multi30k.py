"""Multi30k: task 1 of the WMT16 multimodal translation task, English-German image captions, as the
multi30k/dataset repository publishes them (data/task1/raw: raw text, untokenized and cased, one gzip file per
split and language). train.* is train, val.* valid and test_2016_flickr.* test; test_2017_flickr.* and
test_2018_flickr.* (the WMT17 and WMT18 task 1 test sets, same distribution) are kept under their own names: a
task reads them with `test_sets = ["test", "test_2017_flickr", "test_2018_flickr"]` (3,071 test sentences).

The checksums are the sha256 of the .gz files themselves. raw.githubusercontent.com serves the repository's git
blobs byte for byte, so these files, unlike a gzip made anew (it stores a time and a name, and compressors
differ), never change; they were computed from the blobs at the repository's commit a3d2e0d. torchtext's
Multi30k lists the same file's MD5 for train.de.gz (81ff90b9...), and decompressed, all ten are
../shared/data/multi30k byte for byte (29,000 / 1,014 / 1,000 / 1,000 / 1,071 lines).
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path
from typing import ClassVar

from zoo.data.datasets import Dataset, Downloads, register_dataset
from zoo.data.download import Source

RAW = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/"


@register_dataset("multi30k")
class Multi30k(Dataset):
    """One gzip file per split and language, each fetched and decompressed into its split's file."""

    what = "WMT16 multimodal task 1: English-German image captions"
    licence = "non-commercial research (Flickr30K terms)"
    sizes = {"train": 29_000, "valid": 1_014, "test": 1_000, "test_2017_flickr": 1_000, "test_2018_flickr": 1_071}
    download_mb = 1.4
    files: ClassVar[dict[tuple[str, str], Source]] = {  # (split, language) -> its file
        ("train", "en"): Source(RAW + "train.en.gz",
                                "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f"),
        ("train", "de"): Source(RAW + "train.de.gz",
                                "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6"),
        ("valid", "en"): Source(RAW + "val.en.gz",
                                "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28"),
        ("valid", "de"): Source(RAW + "val.de.gz",
                                "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a"),
        ("test", "en"): Source(RAW + "test_2016_flickr.en.gz",
                               "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9"),
        ("test", "de"): Source(RAW + "test_2016_flickr.de.gz",
                               "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8"),
        ("test_2017_flickr", "en"): Source(RAW + "test_2017_flickr.en.gz",
                                           "76a444ee25172e72695cddb13ae4a3bda59430617be88e0bb46b60504f054074"),
        ("test_2017_flickr", "de"): Source(RAW + "test_2017_flickr.de.gz",
                                           "a2c89666db00c495cd8513b9d708d5a3acc205d7de312ef2bf5fb7ebc1540aee"),
        ("test_2018_flickr", "en"): Source(RAW + "test_2018_flickr.en.gz",
                                           "ef4f4844037d4c5dea75c9a8ed5fd78905967a26f67c255e230cc9780032654d"),
        ("test_2018_flickr", "de"): Source(RAW + "test_2018_flickr.de.gz",
                                           "ddd0130c7d97482dc5197a02141dae8dd79f20f03586c480d675c09a32daf608"),
    }

    def build(self, folder: Path, downloads: Downloads) -> None:
        for (split, lang), source in self.files.items():
            with gzip.open(downloads.get(source)) as text, (folder / f"{split}.{lang}").open("wb") as out:
                shutil.copyfileobj(text, out)
