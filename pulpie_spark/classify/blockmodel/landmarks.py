"""Landmarks of a page's layout, from the class/id names on the blocks' ancestor paths.

The block model reads each block's own ancestors as hashed words, and it learns which
words mark boilerplate from the sources it was trained on. Two things it cannot learn
from them, and which the heuristic extractors build in:

* a page-level choice: which one container holds the article. trafilatura takes the
  first element of its best-ranked rule (an ``articleBody``/``post-content`` class,
  then ``<article>``, then ``story``/``content`` names, then ``<main>``); a block inside
  that element and a block outside it look the same to a model that sees one block's
  ancestors at a time.
* names a training set never showed: the share/related/newsletter/comment vocabulary of
  the web is long-tailed (``elated`` catches ``related`` and ``Related``; ``^shar``
  catches ``sharing``), and one feature per concept pools what the hashed words spread
  over thousands of buckets.

Five numbers per block (``LANDMARK_NAMES``), feature version 3 (features.py):

* ``in_body``: the block is inside the page's chosen body container; the value is the
  rule's strength (1.0 for the best rule, lower for weaker ones), 0 outside.
* ``page_body``: the page has a body container (the same strength, on every block).
* ``boiler``: an ancestor (or the block's own element) is ``nav``/``footer``/``aside`` or
  has a boilerplate name (share, social, related, newsletter, sidebar, footer, ads,
  byline, tags, cookie, pagination, ...).
* ``comment``: an ancestor has a comment-section name (comment, disqus, reply, ...).
  Kept apart from ``boiler`` since labelled sets disagree on comments (CleanEval counts
  them as content, news sets do not): the model weighs it per source pattern.
* ``boiler_in_body``: a boilerplate ancestor nested inside the chosen body (a related
  list or a share bar inside the article element).

The rule lists were written for this module from the facts of trafilatura's
``xpaths.py`` (which names mark the body and which mark boilerplate), plus Chinese
pinyin body names (``zhengwen``, ``neirong``, ``wenzhang``, ``artibody``). trafilatura
applies them to an lxml tree and prunes it; here they must give per-block numbers on
the segmenter's paths (``SimplifiedPage.paths``: ``html > body > div.main#content > p``,
the innermost 12 elements), with no second parse: string splits and cached regex tests
per distinct element, so a page costs a few microseconds per distinct path. A path cut
at 12 elements can miss an outer container; the features are then 0, as on a page
without landmarks.

Pure functions (no torch, no Spark); deterministic.
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np

LANDMARK_NAMES = ("in_body", "page_body", "boiler", "comment", "boiler_in_body")
N_LANDMARKS = len(LANDMARK_NAMES)

_ELEMENT_TAG_RE = re.compile(r"[.#]")
_ELEMENT_NAMES_RE = re.compile(r"[.#]([^.#]+)")

# Tests of one class or id name, written in lower case: a name matches one when the
# pattern is found in it, case-insensitively.
_BODY_NAMES_STRONG = (
    r"(?:entry|article|art|post|page|text|story|news|main)[-_]?(?:content|body|text)|article__(?:content|body)"
    r"|articlebody|post[-_]?entry|body[-_]text|artibody|zhengwen|neirong|wenzhang|rich[-_]?text|^post$|^entry$")
_BODY_NAMES_WEAK = (
    r"^article$|^story$|fulltext|story[-_]?body|single[-_]?(?:post|content)|(?:theme|blog|section)[-_]content"
    r"|field[-_]body|^text$|^content$|content[-_]?(?:main|body)|main[-_]?content|page[-_]content")
_BODY_NAMES_MAIN = r"^main"
_BOILER_NAMES = (
    r"^shar|share|social|sociable|viral|newsletter|syndication|cookie|consent|sidebar|side[-_]?bar|banner"
    r"|bread[-_]?crumb|footer|^nav|[-_]nav|navbar|navigation|menu|related|elated|recommend|popular|trending"
    r"|more[-_]on|next[-_]|[-_]stories|teaser|(?:^|[-_ ])ads?(?:$|[-_ ])|advert|sponsor|outbrain|taboola|criteo"
    r"|paid[-_]?content|promo|widget|byline|author|tags?(?:$|[-_])|tag[-_]list|meta(?:$|[-_])|rating|timestamp"
    r"|subscribe|signup|login|modal|overlay|popup|print|toolbar|pagination|pager|breadcrumbs?")
_COMMENT_NAMES = r"comment(?!ary)|disqus|reply|respond|discussion|kommentar"
_NAME_PATTERNS = (_BODY_NAMES_STRONG, _BODY_NAMES_WEAK, _BODY_NAMES_MAIN, _BOILER_NAMES, _COMMENT_NAMES)
(_STRONG_BIT, _WEAK_BIT, _MAIN_BIT, _BOILER_BIT, _COMMENT_BIT) = (1 << k for k in range(len(_NAME_PATTERNS)))

# Body-container rules, strongest first: (kind, name bit). "names": an article/div/main/
# section with a name of that test; "tag": an <article>; "main": a <main>, or an
# article/div/section whose name starts with "main".
_BODY_RULES = (("names", _STRONG_BIT), ("tag", 0), ("names", _WEAK_BIT), ("main", _MAIN_BIT))
_BODY_TAGS = frozenset(("article", "div", "main", "section"))
_BOILER_TAGS = frozenset(("nav", "footer", "aside"))
_SKIPPED_TAGS = frozenset(("html", "body"))   # page-wide classes (body.single-post) mark no container


def _compiled(flags: int) -> tuple[re.Pattern, tuple[re.Pattern, ...]]:
    """(any test, each test) compiled with ``flags``: a name no test matches (most utility
    classes: "px-4", "col-md-6") costs one search."""
    return (re.compile("|".join(f"(?:{p})" for p in _NAME_PATTERNS), flags),
            tuple(re.compile(p, flags) for p in _NAME_PATTERNS))


# An ASCII name is lowercased and matched by the plain patterns (4x faster than re.I, and
# the same matches: the patterns are lower-case ASCII, and only non-ASCII letters such as
# the Kelvin sign fold into ASCII ones); any other name is matched with re.I.
_ASCII_TESTS = _compiled(0)
_UNICODE_TESTS = _compiled(re.I)

# Names recur across pages and elements far more than whole elements do (an id or a class
# combination makes most elements unique), so the regexes run once per name.
_NAME_CACHE: dict[str, int] = {}
_ELEMENT_CACHE: dict[str, tuple[int, bool, bool]] = {}   # element -> (level or -1, boilerplate, comment)
_CACHE_MAX = 1 << 16     # entries per cache; cleared past it, so a long-running executor stays bounded


def _name_bits(name: str) -> int:
    """The ``_*_BIT`` of each test one class or id name matches."""
    bits = _NAME_CACHE.get(name)
    if bits is None:
        bits = 0
        text, (any_test, tests) = (name.lower(), _ASCII_TESTS) if name.isascii() else (name, _UNICODE_TESTS)
        if any_test.search(text):
            for k, test in enumerate(tests):
                if test.search(text):
                    bits |= 1 << k
        if len(_NAME_CACHE) > _CACHE_MAX:
            _NAME_CACHE.clear()
        _NAME_CACHE[name] = bits
    return bits


def _element_marks(element: str) -> tuple[int, bool, bool]:
    """(body rule level or -1, boilerplate, comment section) of one path element such as
    "div.article-body#main"."""
    marks = _ELEMENT_CACHE.get(element)
    if marks is None:
        tag = _ELEMENT_TAG_RE.split(element, maxsplit=1)[0].lower()
        if tag in _SKIPPED_TAGS:
            marks = (-1, False, False)
        else:
            bits = 0
            for name in _ELEMENT_NAMES_RE.findall(element):
                bits |= _name_bits(name)
            level = -1
            for k, (kind, bit) in enumerate(_BODY_RULES):
                if kind == "tag":
                    hit = tag == "article"
                elif kind == "names":
                    hit = tag in _BODY_TAGS and bool(bits & bit)
                else:
                    hit = tag == "main" or (tag in _BODY_TAGS and bool(bits & bit))
                if hit:
                    level = k
                    break
            marks = (level, tag in _BOILER_TAGS or bool(bits & _BOILER_BIT), bool(bits & _COMMENT_BIT))
        if len(_ELEMENT_CACHE) > _CACHE_MAX:
            _ELEMENT_CACHE.clear()
        _ELEMENT_CACHE[element] = marks
    return marks


def _elements(path: str | None) -> tuple[str, ...]:
    return tuple(e for e in (part.strip() for part in (path or "").split(" > ")) if e)


def page_landmarks(paths: Sequence[str | None] | None, n_blocks: int) -> np.ndarray:
    """float64 [n_blocks, N_LANDMARKS] (``LANDMARK_NAMES``) of one page's block paths; zeros
    without paths. A block's path is its ancestors, outermost first (it may end with the
    block's own element, which counts as an ancestor here: a ``div.share`` block is
    boilerplate whether or not it has a child element)."""
    out = np.zeros((n_blocks, N_LANDMARKS), dtype=np.float64)
    if not paths or n_blocks == 0:
        return out
    # One walk per distinct path: its elements, the last boilerplate element, any comment
    # element; and the chosen body, the strongest rule any ancestor matches at its first
    # element in block order (trafilatura takes the first match of its best rule), named
    # by the path down to it.
    walked: dict[str, tuple[tuple[str, ...], int, bool]] = {}
    best_level, body = len(_BODY_RULES), None
    for path in paths[:n_blocks]:
        key = path or ""
        if key in walked:
            continue
        elements = _elements(key)
        last_boiler, comment = -1, False
        for j, element in enumerate(elements):
            level, is_boiler, is_comment = _element_marks(element)
            if 0 <= level < best_level:
                best_level, body = level, elements[:j + 1]
            if is_boiler:
                last_boiler = j
            if is_comment:
                comment = True
        walked[key] = (elements, last_boiler, comment)
    strength = 1.0 - best_level / len(_BODY_RULES) if body is not None else 0.0
    depth = len(body) if body is not None else 0
    rows: dict[str, tuple[float, float, float, float, float]] = {}
    for key, (elements, last_boiler, comment) in walked.items():
        inside = body is not None and elements[:depth] == body
        rows[key] = (strength if inside else 0.0, strength, float(last_boiler >= 0), float(comment),
                     float(inside and last_boiler >= depth))
    out[:len(paths[:n_blocks])] = [rows[path or ""] for path in paths[:n_blocks]]
    return out
