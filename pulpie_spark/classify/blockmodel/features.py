"""Per-block features for the embedded default model.

Each block of a simplified page is reduced to a short, fixed-size summary so that the
model reads ~one position per block instead of ~one per HTML token:

* hashed tokens (xxhash32 into ``n_buckets``): the block's tag, its class/id words,
  the tag/class/id words of its ancestors (``SimplifiedPage.paths``), the tags inside
  it, and its first and last words. Hashing keeps the shipped vocabulary a single
  integer in the config instead of a word list.
* numeric statistics: length, link density, punctuation, digits, capitals, position
  in the page, repetition of the same text elsewhere on the page, ...

Computed per page, not per block: one HTML parse and one tree walk for all blocks,
character and word counts as numpy counts over the page's joined text, the first and
last words of a long text searched at its ends only, and the structural tokens (root
tag, ancestor path, inner tags) hashed once per distinct value and cached, since sibling
blocks and pages of one site repeat them. The hot loops are plain loops over lists and
dicts: ``features.pxd`` types them for the Cython build (setup.py), which runs this same
source about 1.3x faster. The values are bit-identical
to the per-block formulation of each version (tests/test_blockmodel_features.py keeps
it as the reference).

Feature versions (a model's config.json records the one it was trained on; the model
loader runs each model with its own version and refuses any other):

* 1: words are ``\\w+`` runs (a whole Chinese/Japanese run is one "word"), punctuation
  and sentence ends are ASCII ``.,;:!?`` / ``.!?``, capitalised words are Latin only.
* 2 (language-independent): each CJK ideograph, kana or
  half-width kana is a word of its own (``_CJK``) for the word counts, the word length
  and the first/last word tokens; punctuation and sentence ends include the CJK,
  full-width, Arabic, Devanagari, Greek, Armenian, Ethiopic and Myanmar forms
  (``_PUNCT_V2``, ``_SENTENCE_SPACED_V2``, ``_SENTENCE_ANY_V2``); the capital feature is
  the share of capitalised words (Unicode Lu/Lt first letter) among the words whose first
  letter has a case (Ll/Lu/Lt), so caseless scripts give 0 instead of a diluted share;
  a text also ends like a sentence with CJK/Indic/Arabic terminals and closing quotes,
  and "..." or "\\u2026" (an ellipsis) marks a truncated teaser.
* 3 (``FEATURE_VERSION``): version 2 and five landmark numbers per block from the
  class/id names of its ancestors (landmarks.py: inside the page's chosen body
  container, boilerplate or comment-section ancestors), appended after the 24
  statistics (``numeric_names``).

Pure functions (no torch, no Spark): the same code runs in training, in Spark
executors and in tests. Deterministic: xxhash with a fixed seed, no Python ``hash``.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from typing import Sequence

import numpy as np
import xxhash
from selectolax.lexbor import LexborHTMLParser

from pulpie_spark.classify.blockmodel.landmarks import LANDMARK_NAMES, page_landmarks

FEATURE_VERSION = 3
FEATURE_VERSIONS = (1, 2, 3)   # computable here; a model trained on another version is refused
MAX_TOKENS = 48          # hashed tokens per block (padded with 0 = no token)
N_FIRST_WORDS = 8
N_LAST_WORDS = 3
PATH_DEPTH = 4           # nearest ancestors whose tag is kept with its distance
N_ROOT_CLASSES = 6
N_ROOT_IDS = 3
N_PATH_WORDS = 12        # class/id words of the ancestors, nearest first
N_INNER_TAGS = 8
# The token groups above fill at most 1 + 6 + 3 + 4 + 12 + 8 + 8 + 3 = 45 < MAX_TOKENS
# slots, so no block is ever truncated.

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
_SPACE_RE = re.compile(r"\s")
_TERMINAL = (".", "!", "?", "\u3002", '"', "\u201d", ")")
# Version 2. CJK: ideographs (with the iteration/ideographic-number marks), hiragana,
# katakana (with the prolonged sound mark), half-width katakana; every one a word
# character. Hangul is written with spaces and keeps its words.
_CJK = ("\u3005\u3007\u3041-\u3096\u309d-\u309f\u30a1-\u30fa\u30fc-\u30ff\u3400-\u4dbf"
        "\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9d\U00020000-\U0003134f")
_CJK_RE = re.compile(f"(?=\\w)[{_CJK}]")        # assigned (word) characters of the ranges
_WORD_RE_V2 = re.compile(f"(?=\\w)[{_CJK}]|[^\\W{_CJK}]+")
_PUNCT_V2 = frozenset(".,;:!?" "\u3001\u3002\uff0c\uff0e\uff1a\uff1b\uff01\uff1f\uff61\uff64"
                      "\u060c\u061b\u061f\u06d4\u0964\u0965\u037e\u0589\u1362\u1363\u1364\u104a\u104b"
                      "\u00a1\u00bf\u2026")
_SENTENCE_SPACED_V2 = frozenset(".!?\u061f\u06d4\u0964\u0965\u037e\u0589\u1362\u104b\u2026")  # + space or end
_SENTENCE_ANY_V2 = frozenset("\u3002\uff01\uff1f\uff61")   # CJK sentence ends: no space follows them
_TERMINAL_V2 = _TERMINAL + ("\uff01", "\uff1f", "\uff61", "\u300d", "\u300f", "\u00bb", "\u2019",
                            "\u0964", "\u0965", "\u061f", "\u06d4", "\u2026")
_TRUNCATED_V2 = ("...", "\u2026")
_PIPES = ("|", "\u00b7", "\u2022")
_FIRST_WORD_PREFIXES = ("w0:", "w1:") + ("w:",) * (N_FIRST_WORDS - 2)   # token of the k-th word
_WORD_WINDOW = 128       # characters searched at each end of a long text for its edge words

NUMERIC_NAMES = (
    "log_chars", "log_words", "link_char_share", "punct_per_word", "digit_share",
    "upper_share", "rel_position", "log_n_blocks", "ends_terminal", "mean_word_len",
    "path_depth", "has_img", "n_li", "pipe_share", "cap_word_share", "log_repeats",
    "truncated", "log_sentences", "is_heading", "in_table", "in_list", "no_text",
    "log_chars_prev", "log_chars_next",
)


def numeric_names(version: int) -> tuple[str, ...]:
    """Names of the numeric columns of a feature version: the statistics, then (v3) the landmarks."""
    return NUMERIC_NAMES + (LANDMARK_NAMES if version >= 3 else ())


def n_numeric(version: int) -> int:
    return len(numeric_names(version))


N_NUMERIC = n_numeric(FEATURE_VERSION)     # numeric columns of the current version
_HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}
_TABLE_TAGS = ("table", "td", "th", "tr")
_LIST_TAGS = ("ul", "ol", "li", "dl")
_SKIPPED_TAGS = ("body", "x-b", "-text")   # wrappers of the page parse, not block content

# Caches of values that depend only on their key (so they never change a result);
# cleared when they grow past their limit, so a long-running executor stays bounded:
# short keys (tokens, names, code points) up to _CACHE_MAX entries, keys that hold a
# whole path or opening tag (a few hundred bytes) up to _PAGE_CACHE_MAX (~250 pages of
# ~60 distinct paths; pages of one site share most of them).
_CACHE_MAX = 1 << 18
_PAGE_CACHE_MAX = 1 << 14
_TOKEN_CACHE: dict[int, dict[str, int]] = {}     # n_buckets -> token -> bucket
_ROOT_CACHE: dict[tuple, tuple] = {}             # (tag, attributes but _item_id, n_buckets) -> root summary
_SUMMARY_CACHE: dict[tuple, tuple] = {}          # (path, root tag, n_buckets) -> path summary
_ANCESTRY_IDS: dict[tuple, tuple] = {}           # (ancestor elements, n_buckets) -> ids, depth, flags
_INNER_CACHE: dict[tuple, tuple] = {}            # (inner tags, root tag, n_buckets) -> bucket ids
_ELEMENT_CACHE: dict[str, tuple] = {}            # "div.main#content" -> (tag, class/id word pairs)
_NAME_CACHE: dict[tuple, tuple] = {}             # ("pc"|"pi", class or id name) -> word pairs
_CHAR_FLAGS: dict[int, int] = {}                 # code point -> _F_* bits


def _bounded(cache: dict, limit: int | None = None) -> dict:
    if len(cache) > (_CACHE_MAX if limit is None else limit):
        cache.clear()
    return cache


def _token_cache(n_buckets: int) -> dict[str, int]:
    cache = _TOKEN_CACHE.get(n_buckets)
    if cache is None:
        cache = _TOKEN_CACHE[n_buckets] = {}
    return cache


def _bucket(token: str, n_buckets: int) -> int:
    """Bucket of one token; 0 is the padding id, so real tokens map to 1..n_buckets-1."""
    cache = _token_cache(n_buckets)
    value = cache.get(token)
    if value is None:
        value = 1 + xxhash.xxh32_intdigest(token.encode("utf-8"), seed=17) % (n_buckets - 1)
        _bounded(cache)[token] = value
    return value


def _buckets(tokens: list[str], n_buckets: int) -> tuple[int, ...]:
    cache = _token_cache(n_buckets)
    out = []
    for token in tokens:
        value = cache.get(token)
        out.append(value if value is not None else _bucket(token, n_buckets))
    return tuple(out)


def _words_of(value: str) -> list[str]:
    return [w.lower() for w in _SPLIT_RE.split(value) if w and not w.isdigit()]


def _name_pairs(kind: str, value: str) -> tuple[tuple[str, str], ...]:
    """(kind, word) of each word of one class or id name; names recur across elements."""
    key = (kind, value)
    pairs = _NAME_CACHE.get(key)
    if pairs is None:
        pairs = _bounded(_NAME_CACHE)[key] = tuple((kind, w) for w in _words_of(value))
    return pairs


def _attr_words(attrs: str, regex: re.Pattern) -> list[str]:
    m = regex.search(attrs)
    if not m:
        return []
    return _words_of(m.group(1) or m.group(2) or m.group(3) or "")


def _path_element(element: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """(tag, ("pc", class word)... ("pi", id word)...) of one path element such as "div.main#content"."""
    parsed = _ELEMENT_CACHE.get(element)
    if parsed is None:
        tag = _ELEMENT_TAG_RE.split(element, maxsplit=1)[0].lower()
        classes, ids = [], []
        for kind, value in _ELEMENT_ATTR_RE.findall(element):
            if kind == ".":
                classes += _name_pairs("pc", value)
            else:
                ids += _name_pairs("pi", value)
        parsed = (tag, tuple(classes + ids))
        _bounded(_ELEMENT_CACHE)[element] = parsed
    return parsed


_ITEM_ID_SUFFIX = ' _item_id="'


def _root_summary(block_html: str, n_buckets: int) -> tuple[str, tuple[int, ...]]:
    """(root tag, bucket ids of its t:/c:/i: tokens) from the block's opening tag.

    Cached by the opening tag without its trailing ``_item_id="<digits>"`` (unique per
    block). The tokens cannot depend on those digits: a class/id value that runs into
    the suffix ends at its quotes, or splits the digits off as a number word, which is
    dropped.
    """
    m = _ROOT_TAG_RE.match(block_html)
    if m:
        attrs = m.group(2)
        cut = attrs.rfind(_ITEM_ID_SUFFIX)
        if cut >= 0 and attrs.endswith('"') and attrs[cut + len(_ITEM_ID_SUFFIX):-1].isdigit():
            key = (m.group(1), attrs[:cut], n_buckets)
        else:
            key = (m.group(1), attrs, n_buckets)
    else:
        key = (None, None, n_buckets)
    summary = _ROOT_CACHE.get(key)
    if summary is None:
        root_tag = m.group(1).lower() if m else "_text"
        attrs = m.group(2) if m else ""
        tokens = [f"t:{root_tag}"]
        tokens += [f"c:{w}" for w in _attr_words(attrs, _CLASS_RE)[:N_ROOT_CLASSES]]
        tokens += [f"i:{w}" for w in _attr_words(attrs, _ID_RE)[:N_ROOT_IDS]]
        summary = (root_tag, _buckets(tokens, n_buckets))
        _bounded(_ROOT_CACHE, _PAGE_CACHE_MAX)[key] = summary
    return summary


def _ancestry_of(elements: Sequence[str]) -> tuple:
    """(nearest PATH_DEPTH tags nearest first, first N_PATH_WORDS distinct ("pc"|"pi", word)
    pairs walking from the nearest element outwards, depth, any table tag, any list tag)
    of path elements (outermost first, stripped, non-empty)."""
    parsed = [_path_element(e) for e in elements]
    n = len(parsed)
    tags = []
    words: dict = {}            # insertion-ordered set of the pairs
    in_table = in_list = False
    for j in range(n - 1, -1, -1):
        tag, pairs = parsed[j]
        if j >= n - PATH_DEPTH:
            tags.append(tag)
        if len(words) < N_PATH_WORDS:
            for pair in pairs:
                if pair not in words:
                    words[pair] = None
                    if len(words) == N_PATH_WORDS:
                        break
        if tag in _TABLE_TAGS:
            in_table = True
        if tag in _LIST_TAGS:
            in_list = True
    return tuple(tags), tuple(words), n, in_table, in_list


def _path_summary(path: str | None, root_tag: str, n_buckets: int) -> tuple[tuple[int, ...], int, bool, bool]:
    """(bucket ids of the p<d>:/pc:/pi: tokens, depth, in a table, in a list) of a block's ancestors."""
    key = (path, root_tag, n_buckets)
    summary = _SUMMARY_CACHE.get(key)
    if summary is None:
        elements = []
        if path:
            for element in path.split(" > "):
                element = element.strip()
                if element:
                    elements.append(element)
        # The path ends with the block itself when the segmenter includes it; skip a
        # trailing element identical to the root tag so the ancestors are what we encode.
        # Only that element's tag is needed (its class/id words, often unique per block,
        # are never parsed then).
        if elements and _ELEMENT_TAG_RE.split(elements[-1], maxsplit=1)[0].lower() == root_tag:
            elements.pop()
        # Blocks of different tags under the same ancestors share the ancestry and its tokens.
        ids_key = (tuple(elements), n_buckets)
        found = _ANCESTRY_IDS.get(ids_key)
        if found is None:
            tags, words, depth, in_table, in_list = _ancestry_of(elements)
            tokens = [f"p{d}:{tag}" for d, tag in enumerate(tags, start=1)]
            tokens += [kind + ":" + w for kind, w in words]
            found = (_buckets(tokens, n_buckets), depth, in_table, in_list)
            _bounded(_ANCESTRY_IDS, _PAGE_CACHE_MAX)[ids_key] = found
        token_ids, depth, in_table, in_list = found
        summary = (token_ids, depth, in_table or root_tag in ("table", "td", "th"),
                   in_list or root_tag in ("ul", "ol", "li", "dl"))
        _bounded(_SUMMARY_CACHE, _PAGE_CACHE_MAX)[key] = summary
    return summary


def _inner_summary(inner_tags: frozenset, root_tag: str, n_buckets: int) -> tuple[int, ...]:
    """Bucket ids of the h: tokens: the first tags (sorted) inside the block but its root's."""
    key = (inner_tags, root_tag, n_buckets)
    summary = _INNER_CACHE.get(key)
    if summary is None:
        summary = _buckets([f"h:{t}" for t in sorted(inner_tags - {root_tag})[:N_INNER_TAGS]], n_buckets)
        _bounded(_INNER_CACHE, _PAGE_CACHE_MAX)[key] = summary
    return summary


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
        if tag in _SKIPPED_TAGS:
            continue
        inner_tags.add(tag)
        if tag == "a":
            link_chars += len(" ".join(node.text(deep=True, separator=" ").split()))
        elif tag == "li":
            n_li += 1
        elif tag == "img":
            has_img = True
    return text, link_chars, inner_tags, n_li, has_img


def _parse_page(blocks: Sequence[str]) -> tuple[list, bool]:
    """One parse per page: each block inside an ``<x-b>`` wrapper, children of body.

    Parsing 150 fragments one by one costs ~6x more than one document. A custom
    wrapper tag is only closed by its own end tag, so a block cannot leak into the
    next one; if the count still differs (malformed block), parse block by block.
    Returns (one node per block, whether they are the wrappers of one document).
    """
    doc = "<html><body>" + "".join(f"<x-b>{b or ''}</x-b>" for b in blocks) + "</body></html>"
    body = LexborHTMLParser(doc).body
    nodes = [c for c in body.iter(include_text=False)] if body is not None else []
    if len(nodes) == len(blocks) and all(nd.tag == "x-b" for nd in nodes):
        return nodes, True
    return [LexborHTMLParser(b or "").body for b in blocks], False


def _parsed_blocks(blocks: Sequence[str]) -> list:
    return _parse_page(blocks)[0]


def _page_node_stats(nodes: list, one_document: bool):
    """Per block: texts, link chars, inner tags, li counts, has img.

    With one document (every body child a block wrapper, in block order) a single
    preorder walk from body visits block k's subtree right after its wrapper, so one
    walk replaces a walk per block with the same nodes in the same order.
    """
    n = len(nodes)
    if not one_document:
        stats = [_node_stats(node) for node in nodes]
        return ([s[0] for s in stats], [s[1] for s in stats], [s[2] for s in stats],
                [s[3] for s in stats], [s[4] for s in stats])
    texts = [" ".join(node.text(deep=True, separator=" ").split()) for node in nodes]
    link_chars = [0] * n
    inner_tags: list[set[str]] = [set() for _ in range(n)]
    n_li = [0] * n
    has_img = [False] * n
    wrapper_index = {node.mem_id: k for k, node in enumerate(nodes)}
    k = 0
    tags = inner_tags[0]
    for node in nodes[0].parent.traverse(include_text=False):
        tag = node.tag
        if tag in _SKIPPED_TAGS:
            if tag == "x-b":
                index = wrapper_index.get(node.mem_id)
                if index is not None:
                    k = index
                    tags = inner_tags[k]
            continue
        tags.add(tag)
        if tag == "a":
            link_chars[k] += len(" ".join(node.text(deep=True, separator=" ").split()))
        elif tag == "li":
            n_li[k] += 1
        elif tag == "img":
            has_img[k] = True
    return texts, link_chars, inner_tags, n_li, has_img


# Character classes of the numeric statistics, one bit each; a code point's bits come
# from the same str methods, regexes, sets and Unicode categories the statistics are
# defined with (v2: _F_PUNCT2 .. _F_CJK).
(_F_DIGIT, _F_UPPER, _F_ALPHA, _F_PUNCT, _F_PIPE, _F_CAP, _F_SPACE, _F_SENTENCE, _F_WORD,
 _F_LOWER_KEEPS_WORD, _F_PUNCT2, _F_CAP2, _F_CASED, _F_SENTENCE_SPACED2, _F_SENTENCE_ANY2,
 _F_CJK) = (1 << b for b in range(16))


def _char_flags(cp: int) -> int:
    ch = chr(cp)
    lower = ch.lower()
    keeps_word = (len(lower) == 1 and bool(_WORD_RE.match(lower)) == bool(_WORD_RE.match(ch))
                  and bool(_CJK_RE.match(lower)) == bool(_CJK_RE.match(ch)))
    category = unicodedata.category(ch)
    return ((_F_DIGIT if ch.isdigit() else 0) | (_F_UPPER if ch.isupper() else 0)
            | (_F_ALPHA if ch.isalpha() else 0) | (_F_PUNCT if _PUNCT_RE.match(ch) else 0)
            | (_F_PIPE if ch in _PIPES else 0) | (_F_CAP if _CAP_WORD_RE.match(" " + ch) else 0)
            | (_F_SPACE if _SPACE_RE.match(ch) else 0)
            | (_F_SENTENCE if ch in ".!?" else 0) | (_F_WORD if _WORD_RE.match(ch) else 0)
            | (_F_LOWER_KEEPS_WORD if keeps_word else 0)
            | (_F_PUNCT2 if ch in _PUNCT_V2 else 0)
            | (_F_CAP2 if category in ("Lu", "Lt") else 0)
            | (_F_CASED if category in ("Lu", "Lt", "Ll") else 0)
            | (_F_SENTENCE_SPACED2 if ch in _SENTENCE_SPACED_V2 else 0)
            | (_F_SENTENCE_ANY2 if ch in _SENTENCE_ANY_V2 else 0)
            | (_F_CJK if _CJK_RE.match(ch) else 0))


_ASCII_FLAGS = np.array([_char_flags(cp) for cp in range(128)], dtype=np.uint32)


def _flags_of(code_points: np.ndarray) -> np.ndarray:
    flags = _ASCII_FLAGS[np.minimum(code_points, 127)]
    wide = code_points >= 128
    if wide.any():
        unique, inverse = np.unique(code_points[wide], return_inverse=True)
        table = np.empty(len(unique), dtype=np.uint32)
        for j, cp in enumerate(unique.tolist()):
            value = _CHAR_FLAGS.get(cp)
            if value is None:
                value = _bounded(_CHAR_FLAGS)[cp] = _char_flags(cp)
            table[j] = value
        flags[wide] = table[inverse]
    return flags


def _joined_code_points(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(code points of the joined texts, each text's length, start and end in them)."""
    lengths = np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))
    ends = np.cumsum(lengths)
    starts = ends - lengths
    code_points = np.frombuffer("".join(texts).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    return code_points, lengths, starts, ends


def _word_starts(flags: np.ndarray, at_start: np.ndarray, version: int) -> tuple[np.ndarray, np.ndarray]:
    """(word characters, word starts) of joined texts: the matches of ``_WORD_RE`` (v1:
    maximal runs of word characters, one starts at a word character that begins its text
    or follows a non-word character) or of ``_WORD_RE_V2`` (also every CJK character
    starts a word, and so does the character after one)."""
    word = (flags & _F_WORD) != 0
    before = np.zeros(len(word), dtype=bool)
    before[1:] = word[:-1]
    starts = word & (at_start | ~before)
    if version >= 2:
        cjk = (flags & _F_CJK) != 0
        after_cjk = np.zeros(len(word), dtype=bool)
        after_cjk[1:] = cjk[:-1]
        starts |= word & (cjk | after_cjk)
    return word, starts


def _text_sums(masks: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Per row of ``masks`` [rows, total + 1] (0/1 per code point of the joined texts, the
    last column 0) and per text, the row's sum over that text's code points -> int64
    [rows, n]. One ``reduceat`` at the texts' starts (the texts are contiguous) instead
    of a cumulative sum over every code point; an empty text, where ``reduceat`` gives
    the next code point's value, is set to 0."""
    counts = np.add.reduceat(masks, starts, axis=1, dtype=np.int64)
    counts[:, lengths == 0] = 0
    return counts


def _word_counts(lowered: Sequence[str], version: int = FEATURE_VERSION) -> tuple[np.ndarray, np.ndarray]:
    """Per text: number of words and of word characters, where the words are the matches
    of the version's word regex (``_word_starts``) in the lowercased text."""
    code_points, lengths, starts, ends = _joined_code_points(lowered)
    at_start = np.zeros(len(code_points), dtype=bool)
    at_start[starts[lengths > 0]] = True
    word, run_start = _word_starts(_flags_of(code_points), at_start, version)
    masks = np.zeros((2, len(code_points) + 1), dtype=np.uint8)   # the last column stays 0
    masks[0, :-1] = run_start
    masks[1, :-1] = word
    counts = _text_sums(masks, starts, lengths)
    return counts[0], counts[1]


def _edge_words(lowered: str, word_re=None) -> tuple[list[str], list[str]]:
    """The first N_FIRST_WORDS and the last N_LAST_WORDS matches of ``word_re`` (default:
    the current version's word regex) in a text.

    A long text is only searched near its ends: the k-th match before a cut is the k-th
    of the whole text when another match follows it before the cut (it ended there), and
    the last matches after a cut are the text's last ones when another match precedes
    them (only the first match after a cut can start inside a word; a CJK character is a
    whole match).
    """
    if word_re is None:
        word_re = _WORD_RE_V2
    size = len(lowered)
    if size > 2 * _WORD_WINDOW:
        head = word_re.findall(lowered, 0, _WORD_WINDOW)
        if len(head) > N_FIRST_WORDS:
            tail = word_re.findall(lowered, size - _WORD_WINDOW)
            if len(tail) > N_LAST_WORDS:
                return head[:N_FIRST_WORDS], tail[-N_LAST_WORDS:]
    words = word_re.findall(lowered)
    return words[:N_FIRST_WORDS], words[-N_LAST_WORDS:]


def _char_counts(texts: Sequence[str], lowered: Sequence[str],
                 version: int = FEATURE_VERSION) -> dict[str, np.ndarray]:
    """Per text: digits, upper, letters, punctuation, pipes, capitalised words, sentence
    ends, and the words and word characters of its lowercased form (``lowered``); v2
    also "cased_words".

    Counted over the code points of the joined texts; a capitalised word is a cap letter
    at a text's start or after whitespace (v1: ``_CAP_WORD_RE``; v2: a Lu/Lt letter, and
    a cased word one of Lu/Lt/Ll there), a sentence end is one of ``.!?`` at a text's
    end or before whitespace (v1: ``_SENTENCE_END_RE``; v2: ``_SENTENCE_SPACED_V2`` there
    or ``_SENTENCE_ANY_V2`` anywhere). Lowercasing keeps each character's place,
    word-ness and CJK-ness unless the page has a character that it expands or makes a
    non-word one (such as I with a dot: i + a combining dot); only then are the words
    counted in the lowercased texts themselves.
    """
    code_points, lengths, starts, ends = _joined_code_points(texts)
    flags = _flags_of(code_points)
    total = len(code_points)
    nonempty = lengths > 0
    at_start = np.zeros(total, dtype=bool)
    at_start[starts[nonempty]] = True
    at_end = np.zeros(total, dtype=bool)
    at_end[ends[nonempty] - 1] = True
    space = (flags & _F_SPACE) != 0
    after_space = np.zeros(total, dtype=bool)
    after_space[1:] = space[:-1]
    before_space = np.zeros(total, dtype=bool)
    before_space[:-1] = space[1:]

    keeps_words = bool(((flags & _F_LOWER_KEEPS_WORD) != 0).all())
    word_start = at_start | after_space
    v2 = version >= 2
    names = ["digits", "upper", "letters", "punct", "pipes", "cap_words", "sentences"]
    if v2:
        names.append("cased_words")
    n_rows = len(names)
    masks = np.zeros((n_rows + 2 if keeps_words else n_rows, total + 1), dtype=np.uint8)   # the last column stays 0
    masks[0, :total] = (flags & _F_DIGIT) != 0
    masks[1, :total] = (flags & _F_UPPER) != 0
    masks[2, :total] = (flags & _F_ALPHA) != 0
    if v2:
        masks[3, :total] = (flags & _F_PUNCT2) != 0
        masks[5, :total] = ((flags & _F_CAP2) != 0) & word_start
        masks[6, :total] = (((flags & _F_SENTENCE_SPACED2) != 0) & (at_end | before_space)
                        | ((flags & _F_SENTENCE_ANY2) != 0))
        masks[7, :total] = ((flags & _F_CASED) != 0) & word_start
    else:
        masks[3, :total] = (flags & _F_PUNCT) != 0
        masks[5, :total] = ((flags & _F_CAP) != 0) & word_start
        masks[6, :total] = ((flags & _F_SENTENCE) != 0) & (at_end | (before_space & ~at_end))
    masks[4, :total] = (flags & _F_PIPE) != 0
    if keeps_words:
        word, run_start = _word_starts(flags, at_start, version)
        masks[n_rows, :total] = run_start
        masks[n_rows + 1, :total] = word
    counts = _text_sums(masks, starts, lengths)
    out = dict(zip(names, counts))
    out["words"], out["word_chars"] = ((counts[n_rows], counts[n_rows + 1]) if keeps_words
                                       else _word_counts(lowered, version))
    return out


def _share(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator where denominator > 0, else 0.0 (float64, as Python divides)."""
    return np.where(denominator > 0, numerator / np.maximum(denominator, 1), 0.0)


def _page_tokens(blocks: list[str], paths: list[str], texts: list[str], lowered: list[str],
                 inner_tags: list[set[str]], n_buckets: int,
                 version: int) -> tuple[list[int], list[int], list[int], list[tuple]]:
    """(bucket ids of every block's tokens in a row, tokens per block, ancestor depth per
    block, (is heading, in a table, in a list, ends like a sentence) per block)."""
    token_ids: list[int] = []
    n_tokens, depth, structure = [], [], []
    token_cache = _token_cache(n_buckets)
    n_paths = len(paths)
    word_re = _WORD_RE_V2 if version >= 2 else _WORD_RE
    terminal = _TERMINAL_V2 if version >= 2 else _TERMINAL
    for i in range(len(blocks)):
        block = blocks[i]
        root_tag, root_ids = _root_summary(block or "", n_buckets)
        path_ids, path_depth, in_table, in_list = _path_summary(paths[i] if i < n_paths else None,
                                                                root_tag, n_buckets)
        row = root_ids + path_ids + _inner_summary(frozenset(inner_tags[i]), root_tag, n_buckets)
        token_ids += row
        first, last = _edge_words(lowered[i], word_re)
        for k in range(len(first)):
            token = _FIRST_WORD_PREFIXES[k] + first[k]
            value = token_cache.get(token)
            token_ids.append(value if value is not None else _bucket(token, n_buckets))
        for word in last:
            token = "wl:" + word
            value = token_cache.get(token)
            token_ids.append(value if value is not None else _bucket(token, n_buckets))
        n_tokens.append(len(row) + len(first) + len(last))
        depth.append(path_depth)
        structure.append((root_tag in _HEADINGS, in_table, in_list, texts[i].rstrip().endswith(terminal)))
    return token_ids, n_tokens, depth, structure


def page_features(blocks: Sequence[str], paths: Sequence[str] | None = None, *,
                  n_buckets: int = 1 << 15, version: int = FEATURE_VERSION) -> tuple[np.ndarray, np.ndarray]:
    """Features of one page: (token ids int32 [n, MAX_TOKENS], numeric float32 [n, n_numeric(version)]),
    in feature version ``version`` (the one the model was trained on)."""
    if version not in FEATURE_VERSIONS:
        raise ValueError(f"block features v{version} are not computable here (versions {FEATURE_VERSIONS})")
    n = len(blocks)
    ids = np.zeros((n, MAX_TOKENS), dtype=np.int32)
    if n == 0:
        return ids, np.zeros((n, n_numeric(version)), dtype=np.float32)
    nodes, one_document = _parse_page(blocks)
    texts, link_chars, inner_tags, n_li, has_img = _page_node_stats(nodes, one_document)
    lowered = [text.lower() for text in texts]     # words are matched in the lowercased text
    token_ids, n_tokens, depth, structure = _page_tokens(
        list(blocks), list(paths) if paths is not None else [], texts, lowered, inner_tags, n_buckets, version)
    ids[np.arange(MAX_TOKENS)[None, :] < np.asarray(n_tokens)[:, None]] = token_ids
    depth = np.asarray(depth, dtype=np.int64)
    flags = np.asarray(structure, dtype=bool)   # is_heading, in_table, in_list, ends_terminal

    # Numeric statistics in float64 with the operations (and their order) of the
    # per-block definition, then one cast to float32: bit-identical to it. Logarithms
    # go through math (libm), as numpy's vectorized log may differ in the last bit.
    counts = _char_counts(texts, lowered, version)
    n_words, word_chars = counts["words"], counts["word_chars"]
    n_chars = np.fromiter((len(t) for t in texts), dtype=np.int64, count=n)
    char_logs = np.array([math.log1p(c) for c in n_chars.tolist()], dtype=np.float64)
    word_logs = np.array([math.log1p(c) for c in n_words.tolist()], dtype=np.float64)
    sentence_logs = np.array([math.log1p(c) for c in counts["sentences"].tolist()], dtype=np.float64)
    repeats = Counter(t for t in texts if t)
    repeat_logs = np.array([math.log(repeats[t]) / 3.0 if t else 0.0 for t in texts], dtype=np.float64)
    link = np.asarray(link_chars, dtype=np.int64)
    wide_words = np.maximum(n_words, 1)
    mean_word = np.where(n_words > 0, np.minimum(3.0, (word_chars / wide_words) / 10.0), 0.0)
    prev_logs = np.zeros(n)
    prev_logs[1:] = char_logs[:-1] / 8.0
    next_logs = np.zeros(n)
    next_logs[:-1] = char_logs[1:] / 8.0
    columns = (
        char_logs / 8.0,
        word_logs / 6.0,
        np.where(n_chars > 0, np.minimum(1.0, link / np.maximum(n_chars, 1)), 0.0),
        np.where(n_words > 0, np.minimum(2.0, counts["punct"] / wide_words), 0.0),
        _share(counts["digits"], n_chars),
        _share(counts["upper"], counts["letters"]),
        np.arange(n) / max(1, n - 1),
        np.full(n, math.log1p(n) / 8.0),
        flags[:, 3],
        mean_word,
        np.minimum(1.0, depth / 30.0),
        np.asarray(has_img, dtype=bool),
        np.minimum(1.0, np.asarray(n_li, dtype=np.int64) / 10.0),
        np.minimum(1.0, counts["pipes"] / wide_words),
        (_share(counts["cap_words"], counts["cased_words"]) if version >= 2
         else counts["cap_words"] / wide_words),
        repeat_logs,
        np.fromiter((t.endswith(_TRUNCATED_V2 if version >= 2 else "...") for t in texts),
                    dtype=bool, count=n) & (n_chars >= 450),
        sentence_logs / 4.0,
        flags[:, 0],
        flags[:, 1],
        flags[:, 2],
        n_chars == 0,
        prev_logs,
        next_logs,
    )
    if version >= 3:
        landmarks = page_landmarks(paths, n)
        columns += tuple(landmarks[:, j] for j in range(landmarks.shape[1]))
    numeric = np.stack([np.asarray(c, dtype=np.float64) for c in columns], axis=1).astype(np.float32)
    return ids, numeric


def block_texts(blocks: Sequence[str]) -> list[str]:
    """Visible text of each block (whitespace collapsed), for labelling and metrics."""
    return [" ".join(node.text(deep=True, separator=" ").split()) if node is not None else ""
            for node in _parsed_blocks(blocks)]
