"""Extraction metrics, as the published benchmarks compute them.

* ``rouge_n_f1``: WebMainBench's ROUGE-5 F1: whitespace tokens, clipped n-gram counts
  (an n-gram repeated k times in the prediction counts at most as often as in the
  reference), F1 per page; a page whose prediction is empty scores 0. Like
  ``rouge_score``, a text with fewer than n tokens has no n-grams and scores 0.
* ``shingle_tp_fp_fn`` / ``shingle_scores``: the ScrapingHub article-extraction-benchmark
  (``evaluate.py``): ``\\w+`` tokens, 4-gram shingles (a text shorter than 4 tokens is
  one shingle of all its tokens), per page TP/FP/FN over shingle counts normalised to
  sum 1, precision = mean over pages with TP+FP > 0, recall = mean over pages with
  TP+FN > 0 (a page where both are empty scores 1 on each), F1 = harmonic mean of
  the two means (corpus level, not a mean of page F1s).
* ``cjk_chars=True`` (``shingle_tp_fp_fn``): the same shingles, but every Chinese/Japanese
  character (Han, Hiragana, Katakana) is a token of its own. ``\\w+`` reads a run of
  CJK text without spaces as one token, so one sentence would be one "word" and a
  4-gram a paragraph; per character the metric means on zh/ja what it means on en.
"""

from __future__ import annotations

import re
from collections import Counter
from statistics import mean
from typing import Iterable, Sequence

_SHINGLE_TOKEN_RE = re.compile(r"\w+", re.UNICODE)
# Han (CJK unified + ext. A + compatibility), Hiragana, Katakana (+ halfwidth): one token per char.
_CJK = "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f"
_CJK_TOKEN_RE = re.compile(f"[{_CJK}]|[^\\W{_CJK}]+", re.UNICODE)


def _ngram_counts(tokens: Sequence[str], n: int) -> Counter:
    return Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def rouge_n_f1(prediction: str | None, reference: str | None, n: int = 5) -> float:
    """ROUGE-n F1 of one page (whitespace tokens, clipped counts); empty prediction -> 0."""
    pred_tokens = (prediction or "").split()
    ref_tokens = (reference or "").split()
    if not pred_tokens or not ref_tokens:
        return 0.0
    pred = _ngram_counts(pred_tokens, n)
    ref = _ngram_counts(ref_tokens, n)
    overlap = sum((pred & ref).values())
    if overlap == 0:
        return 0.0
    precision = overlap / sum(pred.values())
    recall = overlap / sum(ref.values())
    return 2 * precision * recall / (precision + recall)


def shingle_tokens(text: str | None, cjk_chars: bool = False) -> list[str]:
    """``\\w+`` tokens; with ``cjk_chars`` each Chinese/Japanese character is its own token."""
    return (_CJK_TOKEN_RE if cjk_chars else _SHINGLE_TOKEN_RE).findall(text or "")


def _shingles(text: str | None, n: int, cjk_chars: bool = False) -> Counter:
    tokens = shingle_tokens(text, cjk_chars)
    out = Counter()
    for i in range(0, max(1, len(tokens) - n + 1)):
        shingle = tuple(tokens[i:i + n])
        if shingle:
            out[shingle] += 1
    return out


def shingle_tp_fp_fn(prediction: str | None, reference: str | None, n: int = 4,
                     cjk_chars: bool = False) -> tuple[float, float, float]:
    """Normalised (TP, FP, FN) of one page over 4-gram shingle counts (CJK chars as tokens if asked)."""
    true = _shingles(reference, n, cjk_chars)
    pred = _shingles(prediction, n, cjk_chars)
    tp = float(sum((true & pred).values()))
    fp = float(sum((pred - true).values()))
    fn = float(sum((true - pred).values()))
    total = tp + fp + fn
    if total > 0:
        return tp / total, fp / total, fn / total
    return tp, fp, fn


def _precision(tp: float, fp: float, fn: float) -> float:
    if fp == fn == 0:
        return 1.0
    if tp == fp == 0:
        return 0.0
    return tp / (tp + fp)


def _recall(tp: float, fp: float, fn: float) -> float:
    if fp == fn == 0:
        return 1.0
    if tp == fn == 0:
        return 0.0
    return tp / (tp + fn)


def shingle_scores(tp_fp_fns: Iterable[tuple[float, float, float]]) -> dict:
    """Corpus precision, recall and F1 from per-page normalised (TP, FP, FN)."""
    rows = list(tp_fp_fns)
    precisions = [_precision(*r) for r in rows if r[0] + r[1] > 0]
    recalls = [_recall(*r) for r in rows if r[0] + r[2] > 0]
    precision = mean(precisions) if precisions else 0.0
    recall = mean(recalls) if recalls else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}
