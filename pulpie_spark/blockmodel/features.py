"""Per-block features for the embedded default model.

Each block of a simplified page is reduced to a short, fixed-size summary so that the
model reads ~one position per block instead of ~one per HTML token:

* hashed tokens (xxhash32 into ``n_buckets``): the block's tag, its class/id words,
  the tag/class/id words of its ancestors (``SimplifiedPage.paths``), the tags inside
  it, and its first and last words. Hashing keeps the shipped vocabulary a single
  integer in the config instead of a word list.
* numeric statistics: length, link density, punctuation, digits, capitals, position
  in the page, repetition of the same text elsewhere on the page, ...

Pure functions (no torch, no Spark): the same code runs in training, in Spark
executors and in tests. Deterministic: xxhash with a fixed seed, no Python ``hash``.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import lru_cache
from typing import Sequence

import numpy as np
import xxhash
from selectolax.lexbor import LexborHTMLParser

FEATURE_VERSION = 1
MAX_TOKENS = 48          # hashed tokens per block (padded with 0 = no token)
N_FIRST_WORDS = 8
N_LAST_WORDS = 3
PATH_DEPTH = 4           # nearest ancestors whose tag is kept with its distance

_ROOT_TAG_RE = re.compile(r"^\s*<([a-zA-Z][\w:-]*)([^>]*)>")
_CLASS_RE = re.compile(r"""\bclass\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""", re.I)
_ID_RE = re.compile(r"""\bid\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""", re.I)
_ELEMENT_TAG_RE = re.compile(r"[.#]")
_ELEMENT_ATTR_RE = re.compile(r"([.#])([^.#]+)")
_SPLIT_RE = re.compile(r"[^0-9a-zA-Z]+|(?<=[a-z])(?=[A-Z])")
_WORD_RE = re.compile(r"\w+", re.UNICODE)
_PUNCT_RE = re.compile(r"[.,;:!?]")
_CAP_WORD_RE = re.compile(r"(?:^|\s)[A-Z\u00c0-\u00de]")
_SENTENCE_END_RE = re.compile(r"[.!?](?:\s|$)")
_TERMINAL = (".", "!", "?", "\u3002", '"', "\u201d", ")")

NUMERIC_NAMES = (
    "log_chars", "log_words", "link_char_share", "punct_per_word", "digit_share",
    "upper_share", "rel_position", "log_n_blocks", "ends_terminal", "mean_word_len",
    "path_depth", "has_img", "n_li", "pipe_share", "cap_word_share", "log_repeats",
    "truncated", "log_sentences", "is_heading", "in_table", "in_list", "no_text",
    "log_chars_prev", "log_chars_next",
)
N_NUMERIC = len(NUMERIC_NAMES)
_HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}


def _attr_words(attrs: str, regex: re.Pattern) -> list[str]:
    m = regex.search(attrs)
    if not m:
        return []
    value = m.group(1) or m.group(2) or m.group(3) or ""
    return [w.lower() for w in _SPLIT_RE.split(value) if w and not w.isdigit()]


@lru_cache(maxsize=1 << 16)
def _path_element(element: str) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """(tag, class words, id words) of one path element such as "div.main#content".

    Cached: sibling blocks share most of their ancestors, and parsing the same
    ancestor strings again was half of the feature time.
    """
    tag = _ELEMENT_TAG_RE.split(element, maxsplit=1)[0].lower()
    classes, ids = [], []
    for kind, value in _ELEMENT_ATTR_RE.findall(element):
        words = [w.lower() for w in _SPLIT_RE.split(value) if w and not w.isdigit()]
        (classes if kind == "." else ids).extend(words)
    return tag, tuple(classes), tuple(ids)


def _path_parts(path: str | None) -> list[tuple[str, tuple[str, ...], tuple[str, ...]]]:
    """Parse "html > body > div.main#content > article" into (tag, classes, ids)."""
    if not path:
        return []
    return [_path_element(element) for element in (e.strip() for e in path.split(" > ")) if element]


@lru_cache(maxsize=1 << 18)
def _bucket(token: str, n_buckets: int) -> int:
    # 0 is the padding id, so real tokens map to 1..n_buckets-1.
    return 1 + xxhash.xxh32_intdigest(token.encode("utf-8"), seed=17) % (n_buckets - 1)


def _node_stats(body) -> tuple[str, int, set[str], int, bool]:
    """(text, link chars, inner tags, number of li, has img) of one parsed block."""
    text = ""
    link_chars = 0
    inner_tags: set[str] = set()
    n_li = 0
    has_img = False
    if body is None:
        return text, link_chars, inner_tags, n_li, has_img
    text = " ".join(body.text(deep=True, separator=" ").split())
    for node in body.traverse(include_text=False):
        tag = node.tag
        if tag in ("body", "x-b", "-text"):
            continue
        inner_tags.add(tag)
        if tag == "a":
            link_chars += len(" ".join(node.text(deep=True, separator=" ").split()))
        elif tag == "li":
            n_li += 1
        elif tag == "img":
            has_img = True
    return text, link_chars, inner_tags, n_li, has_img


def _parsed_blocks(blocks: Sequence[str]) -> list:
    """One parse per page: each block inside an ``<x-b>`` wrapper, children of body.

    Parsing 150 fragments one by one costs ~6x more than one document. A custom
    wrapper tag is only closed by its own end tag, so a block cannot leak into the
    next one; if the count still differs (malformed block), parse block by block.
    """
    doc = "<html><body>" + "".join(f"<x-b>{b or ''}</x-b>" for b in blocks) + "</body></html>"
    body = LexborHTMLParser(doc).body
    nodes = [c for c in body.iter(include_text=False)] if body is not None else []
    if len(nodes) == len(blocks) and all(nd.tag == "x-b" for nd in nodes):
        return nodes
    return [LexborHTMLParser(b or "").body for b in blocks]


def _summarize_block(block_html: str, node, path: str | None) -> tuple[list[str], dict]:
    m = _ROOT_TAG_RE.match(block_html or "")
    root_tag = m.group(1).lower() if m else "_text"
    attrs = m.group(2) if m else ""
    classes = _attr_words(attrs, _CLASS_RE)
    ids = _attr_words(attrs, _ID_RE)
    text, link_chars, inner_tags, n_li, has_img = _node_stats(node)

    tokens = [f"t:{root_tag}"]
    tokens += [f"c:{w}" for w in classes[:6]]
    tokens += [f"i:{w}" for w in ids[:3]]
    parts = _path_parts(path)
    # The path ends with the block itself when the segmenter includes it; skip a
    # trailing element identical to the root tag so the ancestors are what we encode.
    if parts and parts[-1][0] == root_tag:
        parts = parts[:-1]
    for depth, (tag, _, _) in enumerate(reversed(parts[-PATH_DEPTH:]), start=1):
        tokens.append(f"p{depth}:{tag}")
    seen = set()
    for tag, pclasses, pids in reversed(parts):
        for w in pclasses:
            if ("pc", w) not in seen and len(seen) < 12:
                seen.add(("pc", w))
                tokens.append(f"pc:{w}")
        for w in pids:
            if ("pi", w) not in seen and len(seen) < 12:
                seen.add(("pi", w))
                tokens.append(f"pi:{w}")
    tokens += [f"h:{t}" for t in sorted(inner_tags - {root_tag})[:8]]
    words = _WORD_RE.findall(text.lower())
    tokens += [f"w{k}:{w}" if k < 2 else f"w:{w}" for k, w in enumerate(words[:N_FIRST_WORDS])]
    tokens += [f"wl:{w}" for w in words[-N_LAST_WORDS:]]
    stats = {"text": text, "words": words, "link_chars": link_chars, "n_li": n_li,
             "has_img": has_img, "depth": len(parts), "root_tag": root_tag,
             "in_table": any(p[0] in ("table", "td", "th", "tr") for p in parts) or root_tag in ("table", "td", "th"),
             "in_list": any(p[0] in ("ul", "ol", "li", "dl") for p in parts) or root_tag in ("ul", "ol", "li", "dl")}
    return tokens, stats


def page_features(blocks: Sequence[str], paths: Sequence[str] | None = None, *,
                  n_buckets: int = 1 << 15) -> tuple[np.ndarray, np.ndarray]:
    """Features of one page: (token ids int32 [n, MAX_TOKENS], numeric float32 [n, N_NUMERIC])."""
    n = len(blocks)
    ids = np.zeros((n, MAX_TOKENS), dtype=np.int32)
    numeric = np.zeros((n, N_NUMERIC), dtype=np.float32)
    if n == 0:
        return ids, numeric
    nodes = _parsed_blocks(blocks)
    summaries = []
    for i, block in enumerate(blocks):
        path = paths[i] if paths is not None and i < len(paths) else None
        summaries.append(_summarize_block(block, nodes[i], path))
    text_counts = Counter(s["text"] for _, s in summaries if s["text"])
    log_n = math.log1p(n)
    char_logs = [math.log1p(len(s["text"])) for _, s in summaries]
    for i, (tokens, s) in enumerate(summaries):
        hashed = [_bucket(t, n_buckets) for t in tokens[:MAX_TOKENS]]
        ids[i, :len(hashed)] = hashed
        text = s["text"]
        words = s["words"]
        n_chars = len(text)
        n_words = len(words)
        letters = sum(map(str.isalpha, text))
        feats = (
            char_logs[i] / 8.0,
            math.log1p(n_words) / 6.0,
            min(1.0, s["link_chars"] / n_chars) if n_chars else 0.0,
            min(2.0, len(_PUNCT_RE.findall(text)) / n_words) if n_words else 0.0,
            sum(map(str.isdigit, text)) / n_chars if n_chars else 0.0,
            sum(map(str.isupper, text)) / letters if letters else 0.0,
            i / max(1, n - 1),
            log_n / 8.0,
            1.0 if text.rstrip().endswith(_TERMINAL) else 0.0,
            min(3.0, (sum(map(len, words)) / n_words) / 10.0) if n_words else 0.0,
            min(1.0, s["depth"] / 30.0),
            1.0 if s["has_img"] else 0.0,
            min(1.0, s["n_li"] / 10.0),
            min(1.0, (text.count("|") + text.count("\u00b7") + text.count("\u2022")) / max(1, n_words)),
            len(_CAP_WORD_RE.findall(text)) / max(1, n_words),
            math.log(text_counts[text]) / 3.0 if text else 0.0,
            1.0 if text.endswith("...") and n_chars >= 450 else 0.0,
            math.log1p(len(_SENTENCE_END_RE.findall(text))) / 4.0,
            1.0 if s["root_tag"] in _HEADINGS else 0.0,
            1.0 if s["in_table"] else 0.0,
            1.0 if s["in_list"] else 0.0,
            1.0 if n_chars == 0 else 0.0,
            char_logs[i - 1] / 8.0 if i > 0 else 0.0,
            char_logs[i + 1] / 8.0 if i + 1 < n else 0.0,
        )
        numeric[i] = feats
    return ids, numeric


def block_texts(blocks: Sequence[str]) -> list[str]:
    """Visible text of each block (whitespace collapsed), for labelling and metrics."""
    return [_node_stats(node)[0] for node in _parsed_blocks(blocks)]
