"""Extraction metrics on hand-computed examples."""

import pytest

from pulpie_spark.evaluate.metrics import rouge_n_f1, shingle_scores, shingle_tp_fp_fn


def test_rouge5_identical_and_empty():
    text = "a b c d e f g"
    assert rouge_n_f1(text, text) == 1.0
    assert rouge_n_f1("", text) == 0.0
    assert rouge_n_f1(None, text) == 0.0
    assert rouge_n_f1(text, "") == 0.0
    # fewer than 5 tokens: no 5-grams, score 0 (as rouge_score does)
    assert rouge_n_f1("a b c", "a b c") == 0.0


def test_rouge5_clips_repeated_ngrams():
    ref = "a b c d e x"                    # 5-grams: (a..e), (b..x)
    pred = "a b c d e a b c d e"           # 5-grams: (abcde) x2, (bcdea), (cdeab), (deabc), (eabcd)
    # clipped overlap = min(2, 1) = 1; P = 1/6, R = 1/2, F1 = 2*(1/6)(1/2)/(2/3) = 0.25
    assert rouge_n_f1(pred, ref) == pytest.approx(0.25)


def test_rouge5_whitespace_tokens_are_case_and_punctuation_sensitive():
    assert rouge_n_f1("A b c d e", "a b c d e") == 0.0
    assert rouge_n_f1("a b c d e.", "a b c d e") == 0.0


def test_shingles_per_page_normalised():
    # true shingles of "a b c d e": (abcd), (bcde); pred "a b c d": (abcd)
    tp, fp, fn = shingle_tp_fp_fn("a b c d", "a b c d e")
    assert (tp, fp, fn) == pytest.approx((0.5, 0.0, 0.5))
    # short text: one shingle of all its tokens
    assert shingle_tp_fp_fn("x y", "x y") == (1.0, 0.0, 0.0)
    assert shingle_tp_fp_fn("", "") == (0.0, 0.0, 0.0)


def test_shingle_corpus_scores_mean_precision_and_recall():
    pages = [shingle_tp_fp_fn("a b c d", "a b c d e"),   # P 1.0, R 0.5
             shingle_tp_fp_fn("", "p q r s t"),          # P excluded (tp+fp=0), R 0
             shingle_tp_fp_fn("", "")]                   # both empty: excluded from both
    scores = shingle_scores(pages)
    assert scores["precision"] == pytest.approx(1.0)
    assert scores["recall"] == pytest.approx(0.25)
    assert scores["f1"] == pytest.approx(2 * 1.0 * 0.25 / 1.25)
    assert shingle_scores([])["f1"] == 0.0
