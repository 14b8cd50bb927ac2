"""One page through the extract stages: the per-page core every caller shares.

    segment_page   html -> blocks, block_paths, map_html, encoding, seg_error
    classify_pages pages' blocks -> P(main) per block, or an error per page
    render_page    map_html + labels -> main_html, markdown, text, n_main, render_error
    fallback_reason / fallback_page   trafilatura or resiliparse for pages the model could not serve
    extract_pages  the four composed, for a list of pages (Extractor, evaluation harness)

The Python API (:class:`pulpie_spark.Extractor`), the Spark stages (``segment``,
``classify``, ``render`` adapters, which call these per row or per Arrow batch) and the
evaluation harness all run a page through these functions, so one page gets the same
guards, deadlines, fallback rule and error strings (:mod:`pulpie_spark.reasons`)
whichever way it comes in. Nothing here knows Spark; none of these functions raises on
a bad page.
"""

from __future__ import annotations

import logging
import re
from typing import Sequence

import numpy as np

from pulpie_spark import reasons

log = logging.getLogger(__name__)

SEGMENT_FIELDS = ("blocks", "block_paths", "map_html", "encoding", "title", "seg_error")
RENDER_FIELDS = ("main_html", "markdown", "text", "n_main", "render_error")
FALLBACK_FIELDS = ("markdown", "text", "fallback", "fallback_error")
EXTRACT_FIELDS = ("title", "markdown", "text", "main_html", "labels", "n_blocks", "n_main", "error",
                  "fallback_reason", "fallback_used")
# A page whose extracted text has fewer non-space characters than this goes to the fallback
# (reason short_output): such a text is mostly a leftover (a cookie notice, a promo line, a
# bot-check) of a page whose content the model dropped, typically a listing or forum page.
# Leave-one-source-out, shipped path: +0.0018 / +0.0006 mean shingle F1 (seeds 13 / 14) for
# about 1 % more fallback pages (docs/BENCHMARKS.md, "A fallback for short output, built").
SHORT_OUTPUT_CHARS = 160
# Unicode White_Space, the characters that Java's (?U)\s matches, written out so that Python
# and Spark SQL count a text's non-space characters alike (Python's \s also matches
# U+001C..U+001F).
WHITE_SPACE_RE = r"[\t\n\x0b\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
# A page's classify error is cut to this many characters (it lands in a table column).
ERROR_CHARS = 500
# Pages go to the classifier in calls of at most this many padded blocks (pages x the
# longest page of the call; a longer page goes alone). Classifiers pad every page of a
# call to its longest: one 50,000-block page among small ones cost 16 x 50,000 padded
# blocks, a 3.6 GiB peak for the adversarial corpus in one call against +293 MiB for
# that page alone (docs/reliability.md). Pages are ordered by length first, so typical
# pages (tens to hundreds of blocks) still share calls.
MAX_PADDED_BLOCKS = 65_536


def is_missing(value) -> bool:
    """None or a float NaN (what pandas gives for a null cell)."""
    return value is None or (isinstance(value, float) and value != value)


# ----------------------------------------------------------------------------- segment

def segment_page(html, declared_charset: str | None = None) -> dict:
    """One page -> SEGMENT_FIELDS, under the page guards (size, nesting, deadline). ``title``
    (segment/title.py) is read also from a page without blocks."""
    from pulpie_spark.guards import guard_page
    from pulpie_spark.segment.simplify import simplify
    from pulpie_spark.segment.title import page_title

    empty = {"blocks": [], "block_paths": [], "map_html": None, "encoding": None, "title": None, "seg_error": None}
    if is_missing(html):
        return {**empty, "seg_error": reasons.HTML_NULL}
    if isinstance(html, (bytearray, memoryview)):
        html = bytes(html)
    if len(html) == 0:
        return {**empty, "seg_error": reasons.HTML_EMPTY}
    charset = None if is_missing(declared_charset) else declared_charset
    page, reason = guard_page(simplify, html, declared_charset=charset)
    if reason is not None:
        return {**empty, "seg_error": reason}
    title = page_title(page.map_html, page.blocks, page.paths)
    if page.error or not page.blocks:
        return {**empty, "encoding": page.encoding, "title": title, "seg_error": page.error or reasons.NO_BLOCKS}
    return {"blocks": list(page.blocks), "block_paths": list(page.paths), "map_html": page.map_html,
            "encoding": page.encoding, "title": title, "seg_error": None}


# ----------------------------------------------------------------------------- classify

def classify_error(exc: BaseException, what: str = "") -> str:
    """``classify:<what>error:<Type>: <message>`` for a failed model call or load."""
    # The whole message where it fits: a load error's hint (HF_HUB_OFFLINE, the path) is at its end.
    return (reasons.CLASSIFY_PREFIX + what + reasons.exception_reason(exc, ERROR_CHARS))[:ERROR_CHARS]


def classify_pages(classifier, pages: Sequence[Sequence[str]], paths: Sequence[Sequence[str]] | None = None,
                   *, max_padded_blocks: int = MAX_PADDED_BLOCKS,
                   unsure_threshold: float | None = None) -> tuple[list, list, list]:
    """(P(main) per block as float32 arrays, error or None, unsure or None) per page.

    Pages without blocks get an empty array and no error. Pages are classified in groups
    of at most ``max_padded_blocks`` padded blocks; a group that fails is retried page by
    page (one bad page must not lose the batch), and a page that still fails gets
    ``classify:error:...``. ``unsure``: with a classifier that has a page gate
    (``classifier.page_gate``, blockmodel/gate.py), whether the page's gate score is at
    least ``unsure_threshold`` (None: the gate's own threshold); else None."""
    n = len(pages)
    probs: list = [np.zeros(0, dtype=np.float32) for _ in range(n)]
    errors: list = [None] * n
    unsure: list = [None] * n
    todo = [i for i in range(n) if len(pages[i])]
    gate = getattr(classifier, "page_gate", None)
    if gate is not None and unsure_threshold is None:
        unsure_threshold = gate.threshold

    def run(indices: Sequence[int]) -> None:
        batch_paths = [paths[i] for i in indices] if paths is not None else None
        batch_pages = [pages[i] for i in indices]
        if gate is not None:
            out, gate_features = classifier.predict_with_gate_features(batch_pages, batch_paths)
        else:
            out, gate_features = classifier.predict_proba(batch_pages, batch_paths), None
        for k, (i, p) in enumerate(zip(indices, out)):
            p = np.asarray(p, dtype=np.float32)
            if len(p) != len(pages[i]):
                raise ValueError(f"model returned {len(p)} probabilities for {len(pages[i])} blocks")
            probs[i] = p
            if gate_features is not None:
                unsure[i] = bool(gate.score(gate_features[k]) >= unsure_threshold)

    from pulpie_spark.classify.inference import plan_batches

    for batch in plan_batches([len(pages[i]) for i in todo], max_padded_blocks):
        group = [todo[j] for j in batch]
        try:
            run(group)
        except Exception as exc:
            log.warning("classify batch of %d pages failed (%s); retrying page by page", len(group), exc)
            _free_accelerator_memory()
            for i in group:
                try:
                    run([i])
                except Exception as page_exc:
                    probs[i] = np.zeros(0, dtype=np.float32)
                    errors[i] = classify_error(page_exc)
                    unsure[i] = None
                    _free_accelerator_memory()
    return probs, errors, unsure


def labels_from_probs(probs, threshold: float | None = None, paths: Sequence[str | None] | None = None) -> np.ndarray:
    """1 (main) where P(main) >= ``threshold`` (default MAIN_THRESHOLD), else 0; with the
    blocks' ``paths``, the output convention (classify/conventions.py) too: 0 for the blocks it
    leaves out (captions, text hidden by a class) whatever their P(main), and for the blocks
    classify/conventions.py calls boxes (share, newsletter, consent, related boxes; bylines,
    captions, the <h1> headline, asides) under BOX_MIN_PROB; the page's cookie and consent dialogs
    are read from all of its paths (``consent_blocks``)."""
    from pulpie_spark.classify.base import MAIN_THRESHOLD
    from pulpie_spark.classify.conventions import BOX_MIN_PROB, box_blocks, consent_blocks, never_main_blocks

    probs = np.asarray(probs, dtype=np.float32)
    threshold = np.float32(threshold or MAIN_THRESHOLD)
    labels = (probs >= threshold).astype(np.int32)
    main = np.flatnonzero(labels)
    if paths is not None and len(main):   # only the main blocks' paths need the tests
        main_paths = [paths[i] if i < len(paths) else None for i in main]
        out = never_main_blocks(main_paths, len(main)) | consent_blocks(paths, len(probs), among=main)
        if threshold < np.float32(BOX_MIN_PROB):   # only the main blocks under it can be boxes to drop
            doubtful = np.flatnonzero(probs[main] < np.float32(BOX_MIN_PROB))
            out[doubtful[box_blocks([main_paths[k] for k in doubtful], len(doubtful))]] = True
        labels[main[out]] = 0
    return labels


def _free_accelerator_memory() -> None:
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except Exception:
        pass


# ----------------------------------------------------------------------------- render

def render_page(map_html, labels, *, links: bool = False, images: bool = False) -> dict:
    """One page's main HTML, Markdown and text from its map HTML and block labels (RENDER_FIELDS).

    The three renderings share one page deadline, like one page in segmentation."""
    from pulpie_spark.guards import call_with_deadline, page_seconds, reason_for_exception
    from pulpie_spark.render.reconstruct import render_main

    out = {"main_html": None, "markdown": None, "text": None, "n_main": None, "render_error": None}
    if is_missing(map_html) or labels is None:
        return out
    labels = [int(v) for v in labels]
    out["n_main"] = int(sum(1 for v in labels if v == 1))
    try:
        out["main_html"], out["markdown"], out["text"] = call_with_deadline(
            lambda: render_main(map_html, labels, links=links, images=images), seconds=page_seconds())
    except Exception as exc:
        out["render_error"] = reasons.RENDER_PREFIX + reason_for_exception(exc)
    return out


# ----------------------------------------------------------------------------- fallback

# Reasons for which the model had an output of its own: where the fallback finds nothing, that
# output stays, without an error.
KEEPS_MODEL_OUTPUT = (reasons.FALLBACK_SHORT_OUTPUT, reasons.FALLBACK_UNSURE)
_WHITE_SPACE = re.compile(WHITE_SPACE_RE)


def non_space_chars(text: str | None) -> int:
    """Characters of ``text`` that are not Unicode White_Space (WHITE_SPACE_RE)."""
    return len(_WHITE_SPACE.sub("", text or ""))


def fallback_reason(seg_error: str | None, model_error: str | None, markdown: str | None,
                    unsure: bool | None = None, text: str | None = None) -> str | None:
    """Why a page needs the fallback, or None when the model's result is usable.

    ``model_error`` is the first error of the model path (segment, classify, render);
    ``text``: the model's plain text (checked for SHORT_OUTPUT_CHARS when given);
    ``unsure``: the model's page gate sends the page to the fallback (``classify_pages``).
    The Spark pipeline writes the same rule in SQL (spark_pipeline.fallback_reason_column);
    tests/test_page.py checks that the two agree."""
    if seg_error == reasons.NO_BLOCKS:
        return reasons.FALLBACK_NO_BLOCKS
    if model_error:
        return reasons.FALLBACK_ERROR
    if not (markdown or "").strip():
        return reasons.FALLBACK_EMPTY_OUTPUT
    if text is not None and non_space_chars(text) < SHORT_OUTPUT_CHARS:
        return reasons.FALLBACK_SHORT_OUTPUT
    if unsure:
        return reasons.FALLBACK_UNSURE
    return None


def fallback_page(html, declared_charset=None, *, links: bool = False, images: bool = False,
                  fallback: str = "trafilatura") -> dict:
    """The ``fallback`` extractor's Markdown and text for one page under the page guards
    (FALLBACK_FIELDS; ``fallback`` names the extractor when it served the page)."""
    from pulpie_spark.guards import guard_page
    from pulpie_spark.render.fallback import fallback_extractor
    from pulpie_spark.segment.decode import decode_html

    out = {"markdown": None, "text": None, "fallback": None, "fallback_error": None}
    if is_missing(html):
        return out
    if isinstance(html, (bytes, bytearray, memoryview)):
        charset = declared_charset if isinstance(declared_charset, str) else None
        html, _ = decode_html(bytes(html), charset)
    # Same size and time guards as segmentation: a page rejected as too large or too
    # slow is not handed to the fallback either.
    result, guard_reason = guard_page(fallback_extractor(fallback), html, links=links, images=images)
    if guard_reason is not None:
        out["fallback_error"] = reasons.prefixed(reasons.FALLBACK_FAILED_PREFIX, guard_reason)
    elif result.error:
        out["fallback_error"] = result.error
    else:
        out.update(markdown=result.markdown, text=result.text, fallback=fallback)
    return out


def join_errors(*errors: str | None) -> str | None:
    """The non-empty errors joined by "; " (Spark: ``concat_ws("; ", ...)``), or None."""
    present = [e for e in errors if e]
    return "; ".join(present) if present else None


# ----------------------------------------------------------------------------- composed

def extract_pages(htmls: Sequence, classifier, *, charsets: Sequence | None = None, fallback: str = "none",
                  links: bool = False, images: bool = False, main_threshold: float | None = None,
                  unsure_threshold: float | None = None) -> list[dict]:
    """Every page through segment -> classify (one batched model call) -> render -> fallback.

    One dict of EXTRACT_FIELDS per page, in order. ``error`` is the model path's first
    error (and the fallback's, joined, when that failed too). A block is main where
    P(main) >= ``main_threshold`` (default MAIN_THRESHOLD). With a fallback, a page the
    model's page gate scores at ``unsure_threshold`` or more (None: the gate's own
    threshold) is the fallback's too (``fallback_reason`` "model_unsure")."""
    from pulpie_spark.classify.base import MAIN_THRESHOLD, validate_main_threshold, validate_unsure_threshold
    from pulpie_spark.render.fallback import validate_fallback

    fallback = validate_fallback(fallback)
    main_threshold = validate_main_threshold(MAIN_THRESHOLD if main_threshold is None else main_threshold)
    unsure_threshold = validate_unsure_threshold(unsure_threshold)
    charsets = list(charsets) if charsets is not None else [None] * len(htmls)
    segments = [segment_page(h, c) for h, c in zip(htmls, charsets)]
    probs, errors, unsure = classify_pages(classifier, [s["blocks"] for s in segments],
                                           [s["block_paths"] for s in segments], unsure_threshold=unsure_threshold)
    results = []
    for html, charset, seg, p, cls_error, page_unsure in zip(htmls, charsets, segments, probs, errors, unsure):
        out = {"title": seg["title"], "markdown": None, "text": None, "main_html": None, "labels": [],
               "n_blocks": len(seg["blocks"]),
               "n_main": 0, "error": None, "fallback_reason": None, "fallback_used": False}
        rendered = {"render_error": None}
        if seg["seg_error"] is None and cls_error is None:
            out["labels"] = labels_from_probs(p, main_threshold, seg["block_paths"]).tolist()
            rendered = render_page(seg["map_html"], out["labels"], links=links, images=images)
            out.update(main_html=rendered["main_html"], markdown=rendered["markdown"], text=rendered["text"],
                       n_main=rendered["n_main"] or 0)
        out["error"] = seg["seg_error"] or cls_error or rendered["render_error"]
        if fallback != "none":
            why = fallback_reason(seg["seg_error"], out["error"], out["markdown"], page_unsure, text=out["text"])
            if why is not None:
                out["fallback_reason"] = why
                fb = fallback_page(html, charset, links=links, images=images, fallback=fallback)
                if fb["fallback"] is not None:
                    out.update(markdown=fb["markdown"], text=fb["text"], fallback_used=True)
                elif why not in KEEPS_MODEL_OUTPUT:
                    out["error"] = join_errors(out["error"], fb["fallback_error"])
                # else: the model's own output stands, without an error (curation may drop it)
        results.append(out)
    return results
