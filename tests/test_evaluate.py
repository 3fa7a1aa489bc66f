"""Scoring: sacreBLEU on detokenized text (cased, lowercased, chrF); exact match and token accuracy."""

import pytest
import sacrebleu

from zoo.data import SyntheticTask
from zoo.data.text import TextTask
from zoo.train.evaluate import score


class FakeTask:
    def __init__(self, metrics):
        self.metrics = metrics


def test_bleu_of_a_known_pair():
    hyp = ["The cat sat on the mat ."]
    ref = ["The cat sat on the mat ."]
    assert score(FakeTask(TextTask.metrics), hyp, ref)["bleu"] == pytest.approx(100.0)
    # 13a-tokenized: 6 of 7 unigrams, 4 of 6 bigrams, 2 of 5 trigrams, 1 of 4 4-grams match; equal lengths, BP = 1
    partial = score(FakeTask(TextTask.metrics), ["The cat sat on a mat ."], ref)["bleu"]
    by_hand = 100 * (6 / 7 * 4 / 6 * 2 / 5 * 1 / 4) ** 0.25
    assert partial == pytest.approx(by_hand, rel=1e-6)


def test_lowercase_bleu_ignores_case_and_cased_does_not():
    scores = score(FakeTask(TextTask.metrics), ["A MAN RIDES A HORSE ."], ["a man rides a horse ."])
    assert scores["bleu_lowercase"] == pytest.approx(100.0)
    assert scores["bleu"] < 10
    assert scores["chrf"] == pytest.approx(
        sacrebleu.corpus_chrf(["A MAN RIDES A HORSE ."], [["a man rides a horse ."]]).score)


def test_exact_match_and_token_accuracy():
    scores = score(FakeTask(SyntheticTask.metrics), ["5 6 7", "5 6 8", "9"], ["5 6 7", "5 6 7", "9 9"])
    assert scores["exact_match"] == pytest.approx(100 / 3)
    assert scores["token_accuracy"] == pytest.approx(100 * (3 + 2 + 1) / 8)
