"""Block labels from gold main text.

The labelled corpora give the page's main content as plain text, not block labels.
A block is *main* when its words are found, in order-free n-gram terms, in the gold:

* blocks with at least ``ngram`` words: share of their word ``ngram``-grams found in
  the gold's multiset of n-grams >= ``min_share``. Matches are *consumed* in document
  order, so boilerplate repeated on the page (two "Share this" bars) can claim the
  gold's copy only once.
* shorter blocks (headings, dates, bylines: too few words for n-grams) are main when
  all their words occur in the gold *and* they sit inside the span of long main
  blocks - a lone "Login" in the header is not content even if the word occurs in
  the article.

The confidence filter, in the spirit of Pulpie's ">= 70% agreement" rule: a page is
kept only when the text of its main blocks recovers at least ``min_recall`` of the
gold words (multiset recall). Pages whose gold cannot be found in the blocks (wrong
charset, segmentation lost the text, gold from another version of the page) would
only teach the model noise.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from pulpie_spark import reasons

_WORD_RE = re.compile(r"\w+", re.UNICODE)


def normalize_words(text: str | None) -> list[str]:
    """Lower-cased NFKC word tokens (``\\w+``), the unit of every comparison here."""
    if not text:
        return []
    return _WORD_RE.findall(unicodedata.normalize("NFKC", text).casefold())


def _ngrams(words: Sequence[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]


@dataclass
class PageLabels:
    labels: list[int]            # 1 main, 0 other, per block
    gold_recall: float           # share of gold words recovered by the main blocks
    main_precision: float        # share of main-block words found in the gold
    kept: bool                   # passes the confidence filter
    reason: str | None = None    # why not kept
    n_gold_words: int = 0
    extra: dict = field(default_factory=dict)


def label_blocks(block_texts: Sequence[str], gold_text: str | None, *, ngram: int = 3,
                 min_share: float = 0.5, min_recall: float = 0.7,
                 min_gold_words: int = 5) -> PageLabels:
    """Label blocks main/other from the page's gold text (see module doc)."""
    n = len(block_texts)
    gold_words = normalize_words(gold_text)
    if len(gold_words) < min_gold_words:
        return PageLabels([0] * n, 0.0, 0.0, False, "gold_too_short", len(gold_words))
    if n == 0:
        return PageLabels([], 0.0, 0.0, False, reasons.NO_BLOCKS, len(gold_words))

    gold_grams = Counter(_ngrams(gold_words, ngram))
    gold_vocab = set(gold_words)
    block_words = [normalize_words(t) for t in block_texts]
    labels = [0] * n
    long_block = [len(w) >= ngram for w in block_words]

    # Pass 1: long blocks by n-gram share, consuming matched gold n-grams in page order.
    for i, words in enumerate(block_words):
        if not long_block[i]:
            continue
        grams = _ngrams(words, ngram)
        available = Counter(grams) & gold_grams
        share = sum(available.values()) / len(grams)
        if share >= min_share:
            labels[i] = 1
            gold_grams -= available

    # Pass 2: short blocks inside the span of main long blocks.
    main_idx = [i for i in range(n) if labels[i]]
    if main_idx:
        first, last = main_idx[0], main_idx[-1]
        for i, words in enumerate(block_words):
            if long_block[i] or not words:
                continue
            if not all(w in gold_vocab for w in words):
                continue
            if first < i < last:
                labels[i] = 1

    main_words = Counter(w for i in range(n) if labels[i] for w in block_words[i])
    gold_counter = Counter(gold_words)
    overlap = sum((main_words & gold_counter).values())
    recall = overlap / len(gold_words)
    n_main_words = sum(main_words.values())
    precision = overlap / n_main_words if n_main_words else 0.0
    kept = recall >= min_recall
    return PageLabels(labels, recall, precision, kept, None if kept else "low_gold_recall",
                      len(gold_words))


def coverage_by_source(rows: Iterable[dict]) -> list[dict]:
    """Per-source label coverage: pages, pages kept, share kept, share of main blocks.

    ``rows``: dicts with ``source``, ``kept`` (bool), ``labels`` (list[int]).
    """
    stats: dict[str, dict] = {}
    for row in rows:
        s = stats.setdefault(row["source"], {"pages": 0, "kept": 0, "blocks": 0, "main": 0,
                                             "recall_sum": 0.0})
        s["pages"] += 1
        s["recall_sum"] += float(row.get("gold_recall", 0.0))
        if row["kept"]:
            s["kept"] += 1
            s["blocks"] += len(row["labels"])
            s["main"] += sum(int(x) for x in row["labels"])   # int8 arrays would overflow
    out = []
    for source in sorted(stats):
        s = stats[source]
        out.append({"source": source, "pages": s["pages"], "kept": s["kept"],
                    "kept_share": s["kept"] / s["pages"] if s["pages"] else 0.0,
                    "mean_gold_recall": s["recall_sum"] / s["pages"] if s["pages"] else 0.0,
                    "blocks": s["blocks"],
                    "main_share": s["main"] / s["blocks"] if s["blocks"] else 0.0})
    return out


def format_coverage(table: list[dict]) -> str:
    lines = [f"{'source':<22}{'pages':>7}{'kept':>7}{'kept%':>7}{'recall':>8}{'blocks':>9}{'main%':>7}"]
    for r in table:
        lines.append(f"{r['source']:<22}{r['pages']:>7}{r['kept']:>7}{100 * r['kept_share']:>6.1f}%"
                     f"{r['mean_gold_recall']:>8.3f}{r['blocks']:>9}{100 * r['main_share']:>6.1f}%")
    return "\n".join(lines)
