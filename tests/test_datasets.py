"""`zoo data get` and `zoo data list`, offline: a local HTTP server on 127.0.0.1 serves small fixture files, and
$ZOO_DATA_MIRROR sends every download there, through the real download, checksum, resume and layout code.

The fixtures are datasets registered as a plugin would (subclasses of zoo's own entries with fixture files and
their checksums): the real entries' checksums belong to files too large to build here.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import socket
import tarfile
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import sacrebleu.dataset
import sacrebleu.dataset.base
from rich.console import Console
from sacrebleu.dataset.fake_sgml import FakeSGMLDataset

from zoo import plugins
from zoo.cli import data as cli_data
from zoo.cli import main
from zoo.data import DATASETS, DataError, Multi30k, Source, Wmt14Sample, register_dataset
from zoo.data.wmt14 import Corpus, sample_pairs

HOST = "https://files.example/"  # what the fixture entries name; the mirror serves it from 127.0.0.1


class Server:
    """Files under `root` over HTTP, with Range requests; `requests` records (path, Range header) of each GET, and
    the next `cut[path]` requests for a path get half the body asked for, the connection then closed."""

    def __init__(self, root: Path):
        self.root, self.requests, self.cut = root, [], Counter()
        state = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                state.requests.append((self.path, self.headers.get("Range")))
                path = state.root / self.path.lstrip("/")
                if not path.is_file():
                    self.send_error(404)
                    return
                data = path.read_bytes()
                start = int(self.headers["Range"].removeprefix("bytes=").rstrip("-")) if self.headers["Range"] else 0
                self.send_response(206 if start else 200)
                self.send_header("Content-Length", str(len(data) - start))
                self.end_headers()
                if state.cut[self.path] > 0:
                    state.cut[self.path] -= 1
                    self.wfile.write(data[start:][: (len(data) - start) // 2])
                    self.close_connection = True
                    return
                self.wfile.write(data[start:])

            def log_message(self, *args):
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def put(self, url: str, data: bytes) -> Source:
        """Serve `data` as the mirror's copy of `url`; its Source, with the checksum."""
        path = self.root / url.split("://", 1)[1]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return Source(url, hashlib.sha256(data).hexdigest())

    def asked(self, url: str) -> list[str | None]:
        """The Range headers of the requests for `url` (None: the whole file)."""
        return [ranged for path, ranged in self.requests if path == "/" + url.split("://", 1)[1]]


@pytest.fixture
def server(tmp_path, monkeypatch):
    served = Server(tmp_path / "served")
    monkeypatch.setenv("ZOO_DATA_MIRROR", served.url)
    monkeypatch.setenv("ZOO_CACHE", str(tmp_path / "cache"))
    yield served
    served.http.shutdown()
    served.http.server_close()


@pytest.fixture
def registered():
    """register(name, cls): a dataset registered for this test only."""
    names = []

    def register(name, cls):
        names.append(name)
        return register_dataset(name)(cls)

    yield register
    for name in names:
        DATASETS.unregister(name)


TEXT = {("train", "en"): [f"A dog runs {i}." for i in range(6)],
        ("train", "de"): [f"Ein Hund läuft {i}." for i in range(6)],
        ("valid", "en"): ["A cat.", "Two cats."], ("valid", "de"): ["Eine Katze.", "Zwei Katzen."],
        ("test", "en"): ["A bird.", "Birds."], ("test", "de"): ["Ein Vogel.", "Vögel."]}


def captions(server: Server, register, name: str = "m30k", wrong: tuple[str, str] | None = None) -> type:
    """A Multi30k-shaped dataset of TEXT, served as one .gz per split and language (`wrong`: that file's checksum
    is not the file's)."""
    files = {}
    for (split, lang), lines in TEXT.items():
        source = server.put(f"{HOST}{name}/{split}.{lang}.gz", gzip.compress("".join(f"{s}\n" for s in lines).encode()))
        files[split, lang] = Source(source.url, "0" * 64) if (split, lang) == wrong else source

    class Captions(Multi30k):
        sizes = {"train": 6, "valid": 2, "test": 2}

    Captions.files = files
    return register(name, Captions)


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(["data", *map(str, argv)])
    out = capsys.readouterr()
    return code, out.out, out.err


def one_error(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("zoo: error:")]
    assert len(lines) == 1, err
    return lines[0]


def test_a_dataset_is_fetched_through_the_mirror_into_the_layout(server, registered, tmp_path, capsys, monkeypatch):
    captions(server, registered)
    code, out, err = run(capsys, "get", "m30k", "--to", tmp_path / "data" / "m30k")
    assert code == 0, err
    for (split, lang), lines in TEXT.items():
        assert (tmp_path / "data" / "m30k" / f"{split}.{lang}").read_text(encoding="utf-8") == "".join(
            f"{line}\n" for line in lines)
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["m30k"]  # no partial folder is left
    assert len(server.requests) == 6 and all(path.startswith("/files.example/m30k/") for path, _ in server.requests)
    assert "m30k:en-de" in out and str((tmp_path / "data").resolve()) in " ".join(out.split())
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    code, _, err = run(capsys, "get", "m30k")  # into data/NAME
    assert code == 0, err
    again = (tmp_path / "elsewhere" / "data" / "m30k" / "test.de").read_text(encoding="utf-8")
    assert again.splitlines() == TEXT["test", "de"]
    assert len(server.requests) == 6  # the cached downloads, checked again, are used


def test_a_wrong_checksum_is_one_line_and_leaves_nothing(server, registered, tmp_path, capsys):
    captions(server, registered, wrong=("valid", "de"))
    code, _, err = run(capsys, "get", "m30k", "--to", tmp_path / "data" / "m30k")
    assert code == 2
    assert "valid.de.gz: sha256 checksum mismatch" in one_error(err)
    assert not (tmp_path / "data").exists()  # neither the corpus, nor a partial one, nor the data/ it made
    assert not list((tmp_path / "cache").rglob("valid.de.gz*"))  # the wrong download is deleted, .part included
    (tmp_path / "mine").mkdir()  # a folder that was there before stays
    code, _, err = run(capsys, "get", "m30k", "--to", tmp_path / "mine" / "m30k")
    assert code == 2 and list((tmp_path / "mine").iterdir()) == []


def test_a_download_cut_off_resumes_where_it_stopped(server, registered, tmp_path, capsys):
    captions(server, registered)
    url = f"{HOST}m30k/train.en.gz"
    server.cut["/" + url.split("://", 1)[1]] = 1
    code, _, err = run(capsys, "get", "m30k", "--to", tmp_path / "m30k")
    assert code == 0, err
    size = len((server.root / "files.example/m30k/train.en.gz").read_bytes())
    assert server.asked(url) == [None, f"bytes={size // 2}-"]
    assert (tmp_path / "m30k" / "train.en").read_text(encoding="utf-8").splitlines() == TEXT["train", "en"]


def test_a_download_that_keeps_breaking_off_is_one_line_and_resumed_by_the_next_run(server, registered, tmp_path,
                                                                                    capsys):
    captions(server, registered)
    url = f"{HOST}m30k/test.de.gz"
    server.cut["/" + url.split("://", 1)[1]] = 4  # the first try and its three retries
    code, _, err = run(capsys, "get", "m30k", "--to", tmp_path / "m30k")
    assert code == 2
    assert "test.de.gz: the download broke off after" in one_error(err) and "run the same command again" in err
    assert not (tmp_path / "m30k").exists()
    part = tmp_path / "cache" / "downloads" / "files.example" / "m30k" / "test.de.gz.part"
    have = part.stat().st_size
    assert len(server.asked(url)) == 4 and have > 0
    code, _, err = run(capsys, "get", "m30k", "--to", tmp_path / "m30k")
    assert code == 0, err
    assert server.asked(url)[4:] == [f"bytes={have}-"]
    assert (tmp_path / "m30k" / "test.de").read_text(encoding="utf-8").splitlines() == TEXT["test", "de"]


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("case, expected", [
    ("unknown", "unknown dataset 'm3k'; did you mean 'm30k'?"),
    ("not-empty", "exists and is not empty"),
    ("unreachable", "cannot reach it (URLError: [Errno 111] Connection refused); is the mirror in "
                    "$ZOO_DATA_MIRROR up?"),
    ("missing", "train.en.gz: HTTP 404"),
    ("fixed", "m30k: --pairs and --seed are for a sampled dataset"),
    ("bad-mirror", "$ZOO_DATA_MIRROR: 'notaurl' is not a URL zoo can fetch from"),
])
def test_each_failure_is_one_line_and_exit_2(case, expected, server, registered, tmp_path, capsys, monkeypatch):
    captions(server, registered)
    target, args = tmp_path / "m30k", []
    if case == "not-empty":
        target.mkdir()
        (target / "notes.txt").write_text("mine")
    if case == "unreachable":
        monkeypatch.setenv("ZOO_DATA_MIRROR", f"http://127.0.0.1:{closed_port()}")
    if case == "bad-mirror":  # was urllib's ValueError, a traceback
        monkeypatch.setenv("ZOO_DATA_MIRROR", "notaurl")
    if case == "missing":
        (server.root / "files.example/m30k/train.en.gz").unlink()
    if case == "fixed":
        args = ["--pairs", "3"]
    code, _, err = run(capsys, "get", "m3k" if case == "unknown" else "m30k", "--to", target, *args)
    assert code == 2
    assert expected in one_error(err)


def tarball(members: dict[str, list[str | bytes]]) -> bytes:
    """A .tgz holding each member's lines, one per line (bytes as they are: invalid UTF-8, say)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, lines in members.items():
            data = b"".join((line if isinstance(line, bytes) else line.encode()) + b"\n" for line in lines)
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def parallel(stem: str, first: int, count: int, broken: bool = False) -> dict[str, list]:
    """Members stem.de and stem.en of `count` pairs numbered from `first`, aligned; `broken` adds pairs no
    sample may hold (blank on one side, a NUL, invalid UTF-8) among them."""
    numbers = range(first, first + count)
    de, en = [f"Satz {i} de" for i in numbers], [f"sentence {i} en" for i in numbers]
    if broken:
        de[1:1], en[1:1] = ["Satz ohne", "Nul\0l", b"\xff\xfe", "   "], ["", "nul", "bad", "blank"]
    return {f"{stem}.de": de, f"{stem}.en": en}


@pytest.fixture
def corpora(tmp_path) -> list[tuple[Path, str]]:
    first = tmp_path / "first.tgz"
    first.write_bytes(tarball({"readme.txt": ["not a corpus"], **parallel("training/one.de-en", 0, 30, broken=True)}))
    second = tmp_path / "second.tgz"
    second.write_bytes(tarball(parallel("two.de-en", 30, 20)))
    return [(first, "training/one.de-en"), (second, "two.de-en")]


def numbers(pairs: list[tuple[str, str]]) -> list[int]:
    """The pair numbers of a sample, checking each pair is aligned (both sides carry one number)."""
    found = [(int(en.split()[1]), int(de.split()[1])) for en, de in pairs]
    assert all(a == b for a, b in found), pairs
    return [a for a, _ in found]


def test_the_sample_is_seeded_aligned_in_corpus_order_and_skips_broken_pairs(corpora):
    sample = sample_pairs(corpora, "en", "de", 10, seed=1)
    assert sample == sample_pairs(corpora, "en", "de", 10, seed=1)
    other = sample_pairs(corpora, "en", "de", 10, seed=2)
    assert len(sample) == len(other) == 10 and sample != other
    picked = numbers(sample)
    assert picked == sorted(picked) and len(set(picked)) == 10  # corpus order, no pair twice
    assert numbers(sample_pairs(corpora, "en", "de", 50, seed=3)) == list(range(50))  # every usable pair, in order
    drawn = Counter(number for seed in range(200) for number in numbers(sample_pairs(corpora, "en", "de", 5, seed)))
    assert sorted(drawn) == list(range(50)) and 5 <= min(drawn.values()) and max(drawn.values()) <= 40  # ~ 20 each
    with pytest.raises(DataError, match="--pairs: 51 asked for, but the corpora hold 50 usable pairs"):
        sample_pairs(corpora, "en", "de", 51, seed=0)


def sgm(lines: list[str], lang: str) -> bytes:
    segs = "".join(f'<seg id="{i}">{line}</seg>\n' for i, line in enumerate(lines, 1))
    return (f'<srcset setid="fixture" srclang="any"><doc sysid="ref" docid="d1" genre="news" origlang="{lang}">\n'
            f"{segs}</doc>\n</srcset>\n").encode()


def test_the_wmt14_sample_with_sacrebleu_test_sets_end_to_end(server, registered, corpora, tmp_path, capsys,
                                                               monkeypatch):
    """sacreBLEU's cache is a temporary folder and its table names fixture tarballs served here: the entries are
    made after pointing SACREBLEU_DIR there (sacreBLEU reads $SACREBLEU once, at import)."""
    monkeypatch.setattr(sacrebleu.dataset.base, "SACREBLEU_DIR", str(tmp_path / "sacrebleu"))
    tests = {"wmt13": ("test", "newstest2013-src", ["News of 2013 .", "More ."], ["Nachrichten 2013 .", "Mehr ."]),
             "wmt14/full": ("test-full", "newstest2014-deen", ["News of 2014 ."], ["Nachrichten 2014 ."])}
    for name, (folder, stem, en, de) in tests.items():
        members = [f"{folder}/{stem}.en.sgm", f"{folder}/{stem}.de.sgm"]
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
            for member, text in zip(members, (sgm(en, "en"), sgm(de, "en"))):
                info = tarfile.TarInfo(member)
                info.size = len(text)
                archive.addfile(info, io.BytesIO(text))
        url = f"https://www.statmt.org/fixture/{folder}.tgz"
        server.put(url, buffer.getvalue())
        monkeypatch.setitem(sacrebleu.dataset.DATASETS, name, FakeSGMLDataset(
            name, data=[url], md5=[hashlib.md5(buffer.getvalue()).hexdigest()], langpairs={"en-de": members}))

    class Sample(Wmt14Sample):
        sizes = {"train": 7, "valid": 2, "test": 1}

    Sample.corpora = tuple(Corpus(server.put(f"{HOST}wmt/{path.name}", path.read_bytes()), stem)
                           for path, stem in corpora)
    registered("wmt-fixture", Sample)
    code, out, err = run(capsys, "get", "wmt-fixture", "--pairs", 4, "--seed", 5, "--to", tmp_path / "wmt")
    assert code == 0, err
    folder = tmp_path / "wmt"
    train = list(zip(*((folder / f"train.{lang}").read_text(encoding="utf-8").splitlines() for lang in ("en", "de"))))
    assert train == sample_pairs(corpora, "en", "de", 4, seed=5)
    for split, name in (("valid", "wmt13"), ("test", "wmt14/full")):
        _, _, en, de = tests[name]
        assert (folder / f"{split}.en").read_text(encoding="utf-8").splitlines() == en
        assert (folder / f"{split}.de").read_text(encoding="utf-8").splitlines() == de
    assert server.asked("https://www.statmt.org/fixture/test.tgz") == [None]  # fetched by zoo, through the mirror
    assert (tmp_path / "sacrebleu" / "wmt13" / "wmt13.en-de.src").is_file()  # and processed by sacreBLEU
    assert "4 / 2 / 1 pairs" in out


def listing(capsys, monkeypatch, *argv) -> str:
    screen = io.StringIO()
    monkeypatch.setattr(cli_data, "console", Console(file=screen, width=80))
    code = main(list(map(str, argv or ["data", "list"])))
    assert code == 0, capsys.readouterr().err
    return screen.getvalue()


def test_data_list_names_every_dataset_in_80_columns(capsys, monkeypatch):
    shown = listing(capsys, monkeypatch)
    assert max(map(len, shown.splitlines())) <= 80
    for name in DATASETS.names():
        assert f"│ {name} " in shown
    assert "1.66 GB" in shown and "1.4 MB" in shown and "(100,000)" in shown


@pytest.mark.parametrize("before", [True, False], ids=["zoo data --plugin P list", "zoo data list --plugin P"])
def test_a_dataset_from_a_plugin_is_listed(before, tmp_path, capsys, monkeypatch):
    plugin = tmp_path / "corpus_plugin.py"
    plugin.write_text("""
from zoo.data import Dataset, register_dataset

@register_dataset("plugged-corpus")
class Plugged(Dataset):
    what = "plugged"
    licence = "CC0"
    sizes = {"train": 10, "valid": 2, "test": 2}
    download_mb = 0.1
""")
    monkeypatch.setattr(plugins, "_loaded", dict(plugins._loaded))
    try:
        argv = ["data", "--plugin", plugin, "list"] if before else ["data", "list", "--plugin", plugin]
        shown = listing(capsys, monkeypatch, *argv)
    finally:
        if "plugged-corpus" in DATASETS:
            DATASETS.unregister("plugged-corpus")
    assert "│ plugged-corpus " in shown and "plugged " in shown and "CC0" in shown


def test_an_interrupted_get_says_that_running_it_again_resumes():
    import argparse

    from zoo.cli.process import stopped

    line, code = stopped(KeyboardInterrupt(), argparse.Namespace(command="data", data_command="get"))
    assert code == 130 and line == ("zoo: interrupted; partial downloads are kept: running the same command again "
                                    "resumes them")
    line, _ = stopped(KeyboardInterrupt(), argparse.Namespace(command="data", data_command="list"))
    assert line == "zoo: interrupted"
