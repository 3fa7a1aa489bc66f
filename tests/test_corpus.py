"""zoo.stats.corpus: seed + sentence inference on simulated sentence statistics, and real sacreBLEU; and
zoo.data.corpus: each rule a corpus file must keep is one test on a small corpus folder, refused in one line
naming the file and the line (tests/test_fuzz_corpora.py throws random corpora at the same reader)."""

import json
import resource
import time
from pathlib import Path

import numpy as np
import pytest
from sacrebleu.metrics import BLEU

from zoo import load_spec
from zoo.cli import main
from zoo.data import load_task
from zoo.data.corpus import MAX_LINE_BYTES, read_corpus
from zoo.data.task import SPLITS
from zoo.data.text import TextTask
from zoo.errors import DataError
from zoo.experiment.record import sentence_statistics
from zoo.stats import FEW
from zoo.stats.corpus import TEST_SET_ONLY, compare_corpus, corpus_tost, resampled_scores, sentence_bootstrap
from zoo.stats.resample import resample_counts
from zoo.train import TrainConfig, Trainer

ALPHA = 0.05


def sentence_stats(hypotheses, references):
    return np.asarray(sentence_statistics(TextTask.metrics, hypotheses, references)[0]["bleu"], dtype=float)


def accuracy(stats):
    """A ratio corpus metric from summed statistics (correct, total), vectorised over rows."""
    return 100 * stats[..., 0] / stats[..., 1]


def experiment(rng, n=5, sentences=200, effect=0.0, interaction=0.0, seed_sd=0.1):
    """One test set (lengths, difficulties) and n seeds per arm; per-sentence binomial correct counts.
    `interaction`: the variant is better on some sentences, worse on others (zero mean over the population)."""
    lengths, difficulty = rng.integers(5, 30, sentences), rng.normal(0.5, 1, sentences)
    gamma = rng.normal(0, interaction, sentences)

    def system(arm):
        p = 1 / (1 + np.exp(-(difficulty + rng.normal(0, seed_sd) + arm * (effect + gamma))))
        return np.stack([rng.binomial(lengths, p), lengths], 1).astype(float)

    return [system(0) for _ in range(n)], [system(1) for _ in range(n)]


def rejections(rng, experiments=300, **kw):
    combined, sentence_only = [], []
    for e in range(experiments):
        result = compare_corpus(*experiment(rng, **kw), accuracy, vectorised=True, resamples=200, seed=e)
        combined.append(result.p_value < ALPHA)
        sentence_only.append(result.test_set_only.p_value < ALPHA)
    return np.mean(combined), np.mean(sentence_only)


@pytest.mark.parametrize("kw", [{}, {"seed_sd": 0.03}, {"seed_sd": 0.03, "interaction": 0.5}])
def test_null_false_positive_rate(kw):
    combined, sentence_only = rejections(np.random.default_rng(11), **kw)
    assert combined <= ALPHA + 0.02
    if not kw:
        assert sentence_only > 0.3  # why the sentence bootstrap is only a secondary result


def test_detects_a_real_effect():
    combined, _ = rejections(np.random.default_rng(12), experiments=100, effect=0.3)
    assert combined > 0.9


def test_fields_and_real_bleu():
    hyps = ["the cat sat on the mat", "a dog barked", "hello world", "it is raining today", "good morning"]
    refs = ["the cat sat on the mat", "the dog barked", "hello there world", "it rains today", "good morning all"]
    worse = ["the cat sat", "a cat", "hello", "it is", "good"]
    base = [sentence_stats(worse, refs), sentence_stats(worse[:4] + ["morning"], refs), sentence_stats(worse, refs)]
    var = [sentence_stats(hyps, refs), sentence_stats(hyps[:4] + ["good morning all"], refs),
           sentence_stats(hyps, refs)]
    def bleu(stats):
        return BLEU()._compute_score_from_stats(stats).score
    result = compare_corpus(base, var, bleu, resamples=300)
    expected = np.mean([bleu(s.sum(0)) for s in var]) - np.mean([bleu(s.sum(0)) for s in base])
    assert result.difference == pytest.approx(expected) and result.difference > 0
    sentence_part = max(0.0, result.se_sentences ** 2 - result.se_within ** 2)
    assert result.se == pytest.approx(np.sqrt(result.se_seeds ** 2 + sentence_part))
    assert result.ci_low <= result.difference <= result.ci_high and result.test_set_only.label == TEST_SET_ONLY
    alone = sentence_bootstrap(base, var, bleu, resamples=300)
    assert alone == result.test_set_only
    full, boot = resampled_scores(base, bleu, resample_counts(5, 300))
    assert full == pytest.approx([bleu(s.sum(0)) for s in base]) and boot.shape == (300, 3)
    few = compare_corpus(base[:2], var, bleu, resamples=50)
    assert few.verdict == FEW and np.isnan(few.p_value) and not np.isnan(few.test_set_only.p_value)
    with pytest.raises(ValueError, match="same sentences"):
        compare_corpus(base, [s[:4] for s in var], bleu)


def test_corpus_tost():
    rng = np.random.default_rng(13)
    result = compare_corpus(*experiment(rng, sentences=400, seed_sd=0.01), accuracy, vectorised=True, resamples=200)
    assert corpus_tost(result, margin=10.0).equivalent is True
    assert corpus_tost(result, margin=0.01).equivalent is False


# -- zoo.data.corpus: reading a corpus folder, one test per rule ------------------------------------------
LINES = ["ein Haus", "zwei Hunde", "drei Katzen"]
VALID = "".join(line + "\n" for line in LINES).encode()


def toy_corpus(root: Path, **files: bytes) -> Path:
    """Corpus `toy` (xx, yy) in `root`, every file LINES; `files` replaces some by name: train_xx=b"..."."""
    folder = root / "toy"
    folder.mkdir()
    for split in SPLITS:
        for lang in ("xx", "yy"):
            (folder / f"{split}.{lang}").write_bytes(files.get(f"{split}_{lang}", VALID))
    return folder


def refusal(root: Path) -> str:
    """The one-line message read_corpus refuses toy:xx-yy in `root` with."""
    with pytest.raises(DataError) as err:
        read_corpus(root, "toy", "xx", "yy")
    assert "\n" not in str(err.value)
    return str(err.value)


def test_a_line_over_64_kib_is_refused_naming_file_and_line(tmp_path):
    folder = toy_corpus(tmp_path, train_xx=b"a\nb\n" + b"x" * (MAX_LINE_BYTES + 1) + b"\n")
    assert refusal(tmp_path) == (f"{folder / 'train.xx'}: line 3: longer than 65536 bytes; expected one sentence "
                                 "per line (is the file text with \\n line breaks?)")


def test_a_sparse_1_gib_file_without_line_breaks_is_refused_at_once_at_constant_memory(tmp_path):
    folder = toy_corpus(tmp_path)
    with open(folder / "test.yy", "wb") as file:
        file.truncate(1 << 30)  # sparse: 1 GiB of NULs that cost no disk
    before, start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, time.perf_counter()
    message = refusal(tmp_path)
    seconds, grown_kib = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert message.startswith(f"{folder / 'test.yy'}: line 1: longer than 65536 bytes")
    assert seconds < 1 and grown_kib < 200 * 1024, (seconds, grown_kib)


def test_a_nul_byte_is_refused_naming_file_and_line(tmp_path):
    folder = toy_corpus(tmp_path, valid_yy=b"ein Haus\nzwei\0Hunde\ndrei Katzen\n")
    assert refusal(tmp_path) == (f"{folder / 'valid.yy'}: line 2: holds a NUL byte (binary data, or UTF-16 text?); "
                                 "corpus files must be UTF-8")


@pytest.mark.parametrize("text", ["\ufeffein Haus\n\ufeffzwei Hunde\ndrei\n", "ein Haus\nzwei\ufeffHunde\ndrei\n"])
def test_a_byte_order_mark_is_dropped_at_the_start_of_a_file_and_refused_elsewhere(tmp_path, text):
    folder = toy_corpus(tmp_path, train_yy=text.encode())
    assert refusal(tmp_path) == (f"{folder / 'train.yy'}: line 2: holds a byte order mark (U+FEFF), allowed only "
                                 "at the start of a file")
    (folder / "train.yy").write_bytes(b"\xef\xbb\xbf" + VALID)
    assert read_corpus(tmp_path, "toy", "xx", "yy")["train"].tgt.lines == LINES


def test_cr_line_endings_are_refused_and_crlf_ones_read(tmp_path):
    folder = toy_corpus(tmp_path, test_xx=b"ein Haus\rzwei Hunde\rdrei Katzen\r")
    assert refusal(tmp_path) == (f"{folder / 'test.xx'}: line 1: holds a carriage return (\\r) inside the line: "
                                 "the file seems to use CR line endings; convert them to \\n")
    (folder / "test.xx").write_bytes(VALID.replace(b"\n", b"\r\n"))
    assert read_corpus(tmp_path, "toy", "xx", "yy")["test"].src.lines == LINES


def test_line_counts_that_differ_name_both_files_and_the_first_line_without_a_counterpart(tmp_path):
    folder = toy_corpus(tmp_path, valid_yy=b"ein Haus\nzwei Hunde\n")
    assert refusal(tmp_path) == (f"{folder / 'valid.xx'} has 3 lines but {folder / 'valid.yy'} has 2: line 3 of "
                                 "valid.xx has no counterpart; line N of one must translate line N of the other")


def test_lines_blank_on_one_side_are_kept_and_counted_once_on_stderr(tmp_path, capsys):
    """Kept, not refused (wmt-ende-10k's train.en line 5 is blank against a German sentence, and its records
    were trained so), but not silently: one note per pair of files, with the count and the first line."""
    folder = toy_corpus(tmp_path, train_yy=b"ein Haus\n \n\n")
    capsys.readouterr()
    assert read_corpus(tmp_path, "toy", "xx", "yy")["train"].tgt.lines == ["ein Haus", "", ""]
    read_corpus(tmp_path, "toy", "xx", "yy")
    assert capsys.readouterr().err == (f"zoo: note: {folder / 'train.xx'} / {folder / 'train.yy'}: 2 line(s) blank on "
                                       "one side only (first: line 2); kept as pairs with an empty sentence\n")


TINY_MODEL = ["--set", "d_model=16", "--set", "d_ff=32", "--set", "n_heads=2", "--set", "encoder_layers=1",
              "--set", "decoder_layers=1"]


def test_zoo_train_with_no_pair_under_max_tokens_per_sentence_is_one_line_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ZOO_CACHE", str(tmp_path / "cache"))
    folder = toy_corpus(tmp_path)
    code = main(["train", "paper-base", *TINY_MODEL, "--task", "toy:xx-yy", "--data-dir", str(tmp_path),
                 "--out", str(tmp_path / "run"), "--task-set", "max_tokens_per_sentence=1", "--task-set",
                 "vocab_size=40", "--train", "steps=2", "--train", "device=cpu", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and not (tmp_path / "run").exists()
    assert err.strip() == (f"zoo: error: {folder / 'train.xx'} / {folder / 'train.yy'}: all 3 pairs are longer than "
                           "max_tokens_per_sentence = 1 tokens on one side or both, so no training pair is left")


def test_long_sentences_skip_leaving_no_training_pair_names_the_limit(tmp_path):
    folder = toy_corpus(tmp_path)
    task = load_task("toy:xx-yy", data_dir=tmp_path, cache_dir=tmp_path / "cache", vocab_size=40,
                     long_sentences="skip")
    with pytest.raises(DataError) as err:
        task.limit_lengths(2)  # one token a side
    assert str(err.value) == (f"{folder / 'train.xx'} / {folder / 'train.yy'}: all 3 pairs are longer than "
                              "positional.max_len = 2 allows on one side or both, and long_sentences = \"skip\" drops "
                              "them, so no training pair is left")


def test_a_task_without_training_examples_is_refused_before_training(tmp_path, monkeypatch):
    task = load_task("copy", symbols=8, min_len=3, max_len=6, train_size=20, valid_size=5, test_size=5)
    monkeypatch.setattr(task, "examples", lambda split: [])
    spec = load_spec("paper-base", {"d_model": 16, "n_heads": 2, "d_ff": 32, "encoder_layers": 1, "decoder_layers": 1,
                                    "src_vocab": task.src_vocab, "tgt_vocab": task.tgt_vocab})
    with pytest.raises(DataError, match="^task copy: no training example, so there is nothing to train on$"):
        Trainer(spec, task, TrainConfig(steps=2, device="cpu"), tmp_path / "run", progress=False)


def test_no_data_folder_names_every_way_to_give_one(tmp_path, monkeypatch):
    """The message named the task config's data_dir and $ZOO_DATA_DIR, not the flag of the command being run."""
    from zoo.data.corpus import resolve_data_dir
    from zoo.errors import DataError

    monkeypatch.delenv("ZOO_DATA_DIR", raising=False)
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    said = (r"fetch the corpus \(`zoo data get CORPUS` puts it in data/; `zoo data list`\), then set "
            r"\$ZOO_DATA_DIR=data, or `data_dir` in the experiment file \(or `zoo train --data-dir`\)")
    with pytest.raises(DataError, match=said):
        resolve_data_dir(None)


def test_zoo_train_says_how_many_pairs_max_tokens_per_sentence_left_out(tmp_path, capsys, monkeypatch):
    """The limit drops long training pairs; the count is in zoo train's first line and in task.json."""
    monkeypatch.setenv("ZOO_CACHE", str(tmp_path / "cache"))
    folder = toy_corpus(tmp_path, train_xx=b"a\nb\na b a b a b a b\n", train_yy=b"a\nb\nb\n")
    code = main(["train", "paper-base", *TINY_MODEL, "--task", "toy:xx-yy", "--data-dir", str(tmp_path),
                 "--out", str(tmp_path / "run"), "--task-set", "max_tokens_per_sentence=3", "--task-set",
                 "vocab_size=40", "--train", "steps=2", "--train", "device=cpu", "--no-progress"])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 0 and folder.is_dir()
    assert "2 training pairs (1 longer than max_tokens_per_sentence left out)" in err
    saved = json.loads(next((tmp_path / "run").rglob("task.json")).read_text())
    assert saved["dropped"] == {"train": 1}
    docs = " ".join((Path(__file__).parents[1] / "docs" / "training.md").read_text().split())
    assert ("Training pairs with more tokens than that limit (256 by default) on either side are left out (validation "
            "and test pairs are not held to it); `zoo train` says how many where it names the task, and the run's "
            "`task.json` records the count (`dropped`).") in docs
    from zoo.data.config import TaskConfig

    assert TaskConfig.model_fields["max_tokens_per_sentence"].default == 256
