"""From labelled pages (html + gold text, or html + block labels) to training examples.

Segmentation is ``pulpie_spark.segment.simplify.simplify``, the segmenter users run, so the
model is trained on exactly the blocks it will see. Labels are aligned on the *full*
text of each block (from ``map_html``: the simplified block is cut at 500 characters
and lists keep only their first and last items, which would bias gold recall).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import pandas as pd
from selectolax.lexbor import LexborHTMLParser

from pulpie_spark.classify.blockmodel.features import (FEATURE_VERSION, MAX_TOKENS, block_texts, n_numeric,
                                                      page_features)
from pulpie_spark.classify.blockmodel.containers import container_groups
from pulpie_spark.classify.blockmodel.labels import label_blocks, normalize_words
from pulpie_spark import reasons

log = logging.getLogger("pulpie_spark.classify.blockmodel")
# Container group levels stored in a features cache (a model uses the first
# ``container_levels`` of them; containers.py). Cheap: string splits of the paths.
CACHED_CONTAINER_LEVELS = 3


@dataclass
class PageExample:
    ids: np.ndarray                 # [n, MAX_TOKENS] int32
    numeric: np.ndarray             # [n, n_numeric(feature version)] float32
    labels: np.ndarray              # [n] int64 (1 main, 0 other)
    words: np.ndarray               # [n] int32 words per block (dev weighting)
    teacher: np.ndarray | None = None   # [n] float32 P(main) from a teacher
    groups: np.ndarray | None = None    # [n, levels] int32 container group ids (containers.py)


# ----------------------------------------------------------------------------- tables

def examples_to_frame(examples: Sequence[PageExample], meta: pd.DataFrame | None = None) -> pd.DataFrame:
    """Flatten examples into a Parquet-friendly frame (one row per page)."""
    frame = pd.DataFrame({
        "n_blocks": [len(e.labels) for e in examples],
        "ids": [e.ids.reshape(-1).astype(np.int32) for e in examples],
        "numeric": [e.numeric.reshape(-1).astype(np.float32) for e in examples],
        "labels": [e.labels.astype(np.int8) for e in examples],
        "words": [e.words.astype(np.int32) for e in examples],
        "teacher": [None if e.teacher is None else e.teacher.astype(np.float32) for e in examples],
        "groups": [None if e.groups is None else e.groups.reshape(-1).astype(np.int32) for e in examples],
    })
    if meta is not None:
        frame = pd.concat([meta.reset_index(drop=True), frame], axis=1)
    return frame


def _optional_array(value, dtype) -> np.ndarray | None:
    """An optional cache cell as an array: None for a null cell (None or NaN)."""
    if value is None or (not isinstance(value, np.ndarray) and pd.isna(value)):
        return None
    return np.asarray(value, dtype=dtype)


def frame_to_examples(frame: pd.DataFrame) -> list[PageExample]:
    out = []
    empty_width = n_numeric(cache_feature_version(frame))   # numeric columns of an empty page
    for row in frame.itertuples(index=False):
        n = int(row.n_blocks)
        teacher = _optional_array(getattr(row, "teacher", None), np.float32)
        groups = _optional_array(getattr(row, "groups", None), np.int32)
        out.append(PageExample(
            ids=np.asarray(row.ids, dtype=np.int32).reshape(n, MAX_TOKENS),
            numeric=(np.asarray(row.numeric, dtype=np.float32).reshape(n, -1) if n
                     else np.zeros((0, empty_width), np.float32)),
            labels=np.asarray(row.labels, dtype=np.int64),
            words=np.asarray(row.words, dtype=np.int32),
            teacher=teacher,
            # (n, -1) cannot reshape an empty page: its groups are (0, levels) by definition
            groups=None if groups is None else groups.reshape(n, -1) if n
            else np.zeros((0, CACHED_CONTAINER_LEVELS), np.int32)))
    return out


def cache_feature_version(frame: pd.DataFrame) -> int:
    """The block feature version of a features cache (one per cache). Caches written before
    the column existed hold version 1 features (the only version then)."""
    if "feature_version" not in frame.columns:
        return 1
    versions = sorted(set(int(v) for v in frame["feature_version"].dropna()))
    if len(versions) > 1:
        raise ValueError(f"features cache mixes block feature versions {versions}: rebuild it")
    return versions[0] if versions else FEATURE_VERSION


def check_cache_version(frame: pd.DataFrame, feature_version: int, what: str = "features cache") -> None:
    """Refuse to train a model of one feature version on a cache of another (never mixed silently)."""
    found = cache_feature_version(frame)
    if found != feature_version:
        raise ValueError(f"{what} holds block features v{found}, the model is configured for "
                         f"v{feature_version}: rebuild the cache (drop --reuse-cache) or set the feature version")


# A segmenter maps html -> (blocks, paths, full block texts or None, error or None).
Segmenter = Callable[[object], tuple[list[str], list[str] | None, list[str] | None, str | None]]


def full_texts_from_map(map_html: str | None, n_blocks: int) -> list[str] | None:
    """Text of each block (``_item_id`` 1..n) in the map HTML, or None when it does not line up."""
    if not map_html:
        return None
    texts = [""] * n_blocks
    tree = LexborHTMLParser(map_html)
    seen = 0
    for node in tree.css("[_item_id]"):
        try:
            idx = int(node.attributes.get("_item_id") or 0) - 1
        except ValueError:
            continue
        if 0 <= idx < n_blocks:
            piece = " ".join(node.text(deep=True, separator=" ").split())
            texts[idx] = (texts[idx] + " " + piece).strip() if texts[idx] else piece
            seen += 1
    return texts if seen else None


def simplify_segmenter(html, declared_charset: str | None = None):
    """Segment with the project's simplify (blocks, paths, full texts from map_html, error)."""
    from pulpie_spark.segment.simplify import simplify

    try:
        page = simplify(html, declared_charset=declared_charset)
    except Exception as exc:  # a page that breaks the segmenter is an example lost, not a crash
        return [], None, None, f"simplify_failed: {type(exc).__name__}: {exc}"[:300]
    if page.error or not page.blocks:
        return [], None, None, page.error or reasons.NO_BLOCKS
    return list(page.blocks), list(page.paths), full_texts_from_map(page.map_html, len(page.blocks)), None


def build_examples(pages: pd.DataFrame, segmenter: Segmenter | None = None, *,
                   min_recall: float = 0.7, keep_unconfident: bool = False,
                   teacher=None, n_buckets: int = 1 << 15,
                   feature_version: int = FEATURE_VERSION) -> pd.DataFrame:
    """One row per page: meta (source, page_id, split, kept, gold_recall, error) + features
    (+ ``feature_version``: the block feature version of the row, ``cache_feature_version``).

    ``pages`` has ``html`` and either ``gold_text`` (labels by alignment) or ``labels``
    (block labels given, one per block of ``segmenter``'s output). Optional
    ``teacher`` (a BlockClassifier) adds teacher probabilities for distillation.
    Pages that fail the confidence filter are dropped unless ``keep_unconfident``.
    """
    segmenter = segmenter or simplify_segmenter
    meta_rows, examples = [], []
    has_gold = "gold_text" in pages.columns
    has_labels = "labels" in pages.columns
    if not (has_gold or has_labels):
        raise ValueError("the training table needs a gold_text or a labels column next to html")
    for row in pages.itertuples(index=False):
        source = getattr(row, "source", None) or "unknown"
        page_id = str(getattr(row, "page_id", None) or getattr(row, "doc_id", None) or len(meta_rows))
        split = getattr(row, "split", None) or "train"
        charset = getattr(row, "declared_charset", None)
        blocks, paths, full_texts, error = segmenter(row.html, charset) if charset else segmenter(row.html)
        meta = {"source": source, "page_id": page_id, "split": split, "kept": False,
                "gold_recall": 0.0, "error": error}
        if error or not blocks:
            meta_rows.append(meta)
            examples.append(None)
            continue
        texts = full_texts or block_texts(blocks)
        if has_labels and getattr(row, "labels", None) is not None:
            labels = np.asarray(row.labels, dtype=np.int64)
            if len(labels) != len(blocks):
                meta["error"] = f"labels_mismatch: {len(labels)} labels for {len(blocks)} blocks"
                meta_rows.append(meta)
                examples.append(None)
                continue
            meta["kept"], meta["gold_recall"] = True, 1.0
        else:
            result = label_blocks(texts, row.gold_text, min_recall=min_recall)
            labels = np.asarray(result.labels, dtype=np.int64)
            meta["kept"], meta["gold_recall"] = result.kept, result.gold_recall
            meta["error"] = result.reason
        ids, numeric = page_features(blocks, paths, n_buckets=n_buckets, version=feature_version)
        groups = container_groups(blocks, paths, CACHED_CONTAINER_LEVELS)
        words = np.asarray([len(normalize_words(t)) for t in texts], dtype=np.int32)
        teacher_probs = None
        if teacher is not None:
            teacher_probs = np.asarray(teacher.predict_proba([blocks], [paths] if paths else None)[0],
                                       dtype=np.float32)
        meta_rows.append(meta)
        examples.append(PageExample(ids, numeric, labels, words, teacher_probs, groups))
    if keep_unconfident:
        # Every input page gets a row (errors as empty pages) so coverage can be counted.
        empty = PageExample(np.zeros((0, MAX_TOKENS), np.int32), np.zeros((0, n_numeric(feature_version)), np.float32),
                            np.zeros(0, np.int64), np.zeros(0, np.int32),
                            groups=np.zeros((0, CACHED_CONTAINER_LEVELS), np.int32))
        examples = [e if e is not None else empty for e in examples]
        keep = list(range(len(meta_rows)))
    else:
        keep = [i for i, m in enumerate(meta_rows) if examples[i] is not None and m["kept"]]
    meta_df = pd.DataFrame([meta_rows[i] for i in keep],
                           columns=["source", "page_id", "split", "kept", "gold_recall", "error"])
    frame = examples_to_frame([examples[i] for i in keep], meta_df)
    frame["feature_version"] = np.full(len(frame), feature_version, dtype=np.int32)
    frame.attrs["coverage_rows"] = [
        {"source": m["source"], "kept": bool(m["kept"]) and examples[i] is not None,
         "labels": examples[i].labels.tolist() if examples[i] is not None and m["kept"] else [],
         "gold_recall": m["gold_recall"]}
        for i, m in enumerate(meta_rows)]
    return frame
