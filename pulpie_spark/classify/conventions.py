"""Blocks that are never main text, whatever the model's P(main): the pipeline's output convention.

Applied to every classifier's labels after the main threshold (``page.labels_from_probs``),
from the blocks' paths (``SimplifiedPage.paths``); the probabilities are left as the model
gave them. Three kinds of block:

* **image captions**: a block inside a ``<figcaption>``. The labelled sets disagree on them
  (fundus and newspaper3k leave captions out, mozilla_readability and postlight keep them:
  docs/model-card.md), so a model trained on their mix scores captions near 0.5 and keeps
  about half. trafilatura leaves them out, and for pretraining text a caption is a fragment
  cut from the picture it describes.
* **text hidden by a class**: an ancestor (or the block's own element) with a class that
  CSS frameworks define as not displayed or as screen-reader only (``hidden``,
  ``visually-hidden``, ``sr-only``, ``d-none``, ``screen-reader-text``, ...), unless the same
  element also has a responsive class that displays it (``d-md-block``, ``md:flex``): the
  "Article content" labels of screen readers, collapsed subscription and paywall boxes. The
  segmenter removes elements hidden by an inline style only (block-format rule 2, the
  format the encoders were trained on); a class's CSS is not in the page, so its names are
  the evidence. Responsive names that hide on one screen size only (``hidden-xs``,
  ``md:hidden``) are not matched: the text shows on others.

Leave-one-source-out, default-v4's recipe with its page gate, seed 13 (docs/BENCHMARKS.md
"Captions and text hidden by a class"): fundus 0.916 -> 0.931 shingle F1 (precision 0.887 ->
0.914), mozilla_readability 0.932 -> 0.929 and postlight 0.900 -> 0.898 (their gold keeps
captions), mean over sources 0.883 -> 0.884, non-English pooled 0.886 -> 0.893.

A third kind, read from the whole path since a dialog nests its text deep: **cookie and consent
dialogs**, a block with an ancestor (or own element) named by a consent-management platform
(OneTrust, Quantcast's ``qc-cmp2``, Didomi, Usercentrics, Cookiebot, Sourcepoint's ``sp_message``,
Ethyca's ``fides-``, ...) or named a cookie banner, notice, bar or consent box
(``_CONSENT_NAME``). Their text is the same on millions of pages and no labelled set keeps it
(in the training labels 41 of the 26,023 words under such names are main, all of them embed
placeholders that postlight's gold keeps), but it is
prose, so a model can take it for the page's text on a page whose content it does not find (a
listing page that leaves only the dialog). ``<html>`` and ``<body>`` are not read (a page-wide
state class such as ``body.consent-given`` names no dialog), and where the matching blocks are
more than half of the page's, the name is a wrapper's and the rule stays out.

A fourth kind needs more than the main threshold instead of being excluded outright: a block
that is main only at P(main) >= ``BOX_MIN_PROB`` (or the main threshold, if higher), because
the labelled sets mostly leave it out and the model, trained on their mix, keeps it at middling
confidence. A block the model is sure of stays: the evidence is a name or a tag, not proof.

* **boxes**: a block whose own element or parent has a class or id name of a share bar, a
  newsletter or subscription box, a consent placeholder of an embed, or a related, recommended,
  teaser or promoted-links box (``_BOX_NAME``). News pages set such boxes inside the article
  body, where the model's context says "article" (fundus: newsletter sign-ups at P 0.6-0.97,
  "I agree to see external content" placeholders at 0.5-0.95). The labelled sets keep 0.1-0.6
  of the words under such names anywhere on their paths, so only the two innermost elements are
  read: a page-wide wrapper (``div.share-page``) names no box. Names are matched as
  substrings, in any case; class names are mostly English on non-English sites too (fundus'
  German publishers: ``NewsletterBox_root``, ``group-[.has-consent]``, ``social-placeholder``).
  Leave-one-source-out, default-v5's recipe, seeds 13 / 14 / 15 (docs/BENCHMARKS.md "Boxes
  named as share, newsletter, consent or related boxes"): mean shingle F1 +0.0005 / +0.0003 /
  +0.0007, fundus +0.003 / +0.005 / +0.005, non-English pooled +0.002 / +0.003 / +0.003.
* **the headline, bylines and datelines, captions named by a class, asides**: a block whose own
  element is an ``<h1>`` (the page's title, which trafilatura and most golds keep out of the
  body); whose own element or parent has a byline, author or date name (``_BYLINE_NAME``) or a
  caption or picture-credit name (``_CAPTION_NAME``: the captions and "(c) photographer" lines
  that are not in a ``<figcaption>``); or that lies inside an ``<aside>`` (HTML's element for
  content "tangentially related" to the page's: fact boxes, link cards, teasers), read up to
  ``_ASIDE_LEVELS`` elements out. The words main under such paths in the training labels
  (docs/BENCHMARKS.md "The sources' golds disagree"): ``<h1>`` 0.02-0.36 in six of ten
  sources (fundus, newspaper3k, htmltotext, postlight, wcxb, mozilla_readability), 0.67-0.96
  in four; bylines and dates 0.00-0.31 in eight. Leave-one-source-out, replayed on the fold
  models of default-v6's two ensemble runs with their page-gate decisions (docs/BENCHMARKS.md
  "The headline, bylines, captions and asides need P(main) >= 0.9"): mean shingle F1 0.8998 ->
  0.9012 and 0.8993 -> 0.9003, fundus 0.926 -> 0.935 and 0.929 -> 0.936, non-English pooled
  (Chinese/Japanese characters as tokens) 0.921 -> 0.927 and 0.923 -> 0.927; cleaneval -0.002
  and -0.001 (its gold keeps bylines).

Pure functions, no Spark or torch; deterministic.
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np

# Class names whose CSS in Bootstrap, Tailwind, Foundation, WordPress and common site
# stylesheets is display:none, visibility:hidden or the screen-reader-only clip.
_HIDING_CLASS = re.compile(
    r"(?:hidden|is-hidden|u-hidden|visually-?hidden|sr-only|screen-?reader-(?:text|only)|screenreader"
    r"|d-none|element-invisible|invisible|hide|a11y-hidden|offscreen|show-for-sr)", re.I)
# Responsive classes that display the element from some screen size up (Bootstrap 4/5
# ``d-md-block``, Tailwind ``md:block``): the page shows that text to most readers.
_SHOWING_CLASS = re.compile(
    r"(?:d-(?:sm|md|lg|xl|xxl)-(?:block|flex|inline|inline-block|inline-flex|grid|table|table-cell)"
    r"|(?:sm|md|lg|xl|2xl):(?:block|flex|inline|inline-block|inline-flex|grid|table|contents))", re.I)
_CLASS_NAMES_RE = re.compile(r"\.([^.#]+)")
# A path that can match has one of these substrings (lower-cased): a few substring tests per
# distinct path instead of a split and a test per element, for the 9 in 10 paths that have none.
_MAYBE = ("figcaption", "hid", "sr-", "for-sr", "invisible", "d-none", "screen", "offscreen")
_TAG_RE = re.compile(r"[.#]")

_ELEMENT_CACHE: dict[str, bool] = {}
_CACHE_MAX = 1 << 16    # entries; cleared past it, so a long-running executor stays bounded


def _tag(element: str) -> str:
    """The tag of a path element such as ``div.teaser#x``, lower-cased."""
    return _TAG_RE.split(element, maxsplit=1)[0].strip().lower()


def _never_main_element(element: str) -> bool:
    """Whether a path element such as ``div.visually-hidden#x`` puts its blocks out of the main text."""
    excluded = _ELEMENT_CACHE.get(element)
    if excluded is None:
        names = _CLASS_NAMES_RE.findall(element)
        excluded = _tag(element) == "figcaption" or (any(_HIDING_CLASS.fullmatch(n) for n in names)
                                           and not any(_SHOWING_CLASS.fullmatch(n) for n in names))
        if len(_ELEMENT_CACHE) > _CACHE_MAX:
            _ELEMENT_CACHE.clear()
        _ELEMENT_CACHE[element] = excluded
    return excluded


# Class/id names of boxes that sell, share or link away from the article (module doc).
_BOX_NAME = re.compile(r"share|sharing|social|newsletter|subscri|sign-?up|consent|cookie|gdpr|related|recommend"
                       r"|teaser|promo|advert|outbrain|taboola", re.I)
# Class/id names of who wrote a page and when (``date`` as a name's start or after a non-letter:
# not ``update``), and of captions and picture credits outside <figcaption> (``legende``: the
# German and French word for a caption).
_BYLINE_NAME = re.compile(r"byline|author|dateline|(?<![a-z])date|timestamp|published|posted-on"
                          r"|entry-meta|post-meta|article-meta|story-meta", re.I)
_CAPTION_NAME = re.compile(r"caption|credit|copyright|photographer|bildnachweis|legende", re.I)
BOX_MIN_PROB = 0.9     # P(main) a box block needs to stay main (module doc)
_BOX_LEVELS = 2        # the block's own element and its parent
_HEADLINE_TAG = "h1"   # the block's own element only
_ASIDE_TAG = "aside"
_ASIDE_LEVELS = 6      # elements read out from the block for an <aside>
_NAMES_RE = re.compile(r"[.#]([^.#]+)")   # class and id names of a path element
_BOX_ELEMENT_CACHE: dict[str, bool] = {}


def _box_element(element: str) -> bool:
    """Whether a path element such as ``div.newsletter-box#signup`` has a box's class/id name."""
    found = _BOX_ELEMENT_CACHE.get(element)
    if found is None:
        found = any(_BOX_NAME.search(name) or _BYLINE_NAME.search(name) or _CAPTION_NAME.search(name)
                    for name in _NAMES_RE.findall(element))
        if len(_BOX_ELEMENT_CACHE) > _CACHE_MAX:
            _BOX_ELEMENT_CACHE.clear()
        _BOX_ELEMENT_CACHE[element] = found
    return found


def _blocks_by_path(paths: Sequence[str | None] | None, n_blocks: int, path_test) -> np.ndarray:
    """bool [n_blocks]: ``path_test(path)`` per block, each distinct path tested once (sibling
    blocks share paths); all False without paths, and for a block past the end of ``paths``."""
    out = np.zeros(n_blocks, dtype=bool)
    if not paths or n_blocks == 0:
        return out
    seen: dict[str, bool] = {}
    for i, path in enumerate(paths[:n_blocks]):
        key = path or ""
        found = seen.get(key)
        if found is None:
            found = seen[key] = path_test(key)
        out[i] = found
    return out


def _names_a_box(path: str) -> bool:
    """Whether ``path`` is a box's (module doc): its own element an <h1>, one of its
    ``_BOX_LEVELS`` innermost elements with a box, byline or caption class/id name, or an
    <aside> among its ``_ASIDE_LEVELS`` innermost elements."""
    elements = [e.strip() for e in path.split(" > ") if e.strip()]
    if not elements:
        return False
    return (_tag(elements[-1]) == _HEADLINE_TAG
            or any(_box_element(e) for e in elements[-_BOX_LEVELS:])
            or any(_tag(e) == _ASIDE_TAG for e in elements[-_ASIDE_LEVELS:]))


# Class/id names of cookie and consent dialogs (module doc): the consent-management platforms'
# own names, and cookie + a dialog word. A bare ``cookies`` (a documentation section about them)
# and ``cookie-policy`` (a page whose content is the policy) are not among them.
_CONSENT_NAME = re.compile(
    r"consent|gdpr|onetrust|ot-sdk|qc-cmp|didomi|usercentrics|cookiebot|truste-|trustarc|sp_message|iubenda"
    r"|cmplz|borlabs|^fides-|cookiehub|cookiefirst|cookieyes|cookie-?script|cookies?-eu|^cc-(?:window|banner)"
    r"|(?:^|[-_])(?:osano|klaro)(?:[-_]|$)"
    r"|cookie[-_]?(?:banner|notice|consent|bar|law|pop|modal|dialog|message|warn|info|wall|box|alert|overlay"
    r"|setting|pref|hint|layer|disclaimer|accept|agree)", re.I)
# A path that can match has one of these substrings (lower-cased).
_CONSENT_MAYBE = ("consent", "gdpr", "onetrust", "ot-sdk", "cmp", "didomi", "usercentrics", "cookie", "truste",
                  "sp_message", "iubenda", "borlabs", "fides-", "cc-", "osano", "klaro")
_PAGE_WRAPPER_TAGS = ("html", "body")
_CONSENT_ELEMENT_CACHE: dict[str, bool] = {}


def _consent_element(element: str) -> bool:
    """Whether a path element such as ``div#onetrust-banner-sdk`` names a cookie or consent dialog."""
    found = _CONSENT_ELEMENT_CACHE.get(element)
    if found is None:
        found = (_tag(element) not in _PAGE_WRAPPER_TAGS
                 and any(_CONSENT_NAME.search(name) for name in _NAMES_RE.findall(element)))
        if len(_CONSENT_ELEMENT_CACHE) > _CACHE_MAX:
            _CONSENT_ELEMENT_CACHE.clear()
        _CONSENT_ELEMENT_CACHE[element] = found
    return found


def _in_consent_dialog(path: str) -> bool:
    lowered = path.lower()
    return (any(m in lowered for m in _CONSENT_MAYBE)
            and any(_consent_element(e.strip()) for e in path.split(" > ") if e.strip()))


def consent_blocks(paths: Sequence[str | None] | None, n_blocks: int,
                   among: Sequence[int] | None = None) -> np.ndarray:
    """bool [n_blocks]: True for the blocks inside a cookie or consent dialog (the module doc),
    read from the whole page's ``paths``; all False when they would be more than half of the
    page's blocks (the name is then a wrapper's, not a dialog's) or without paths. With
    ``among`` (block indices), bool [len(among)] for those blocks only: the whole page is read
    only when one of them is in a dialog (on most pages none is, and the label step asks about
    the main blocks alone)."""
    if among is not None:
        chosen = [paths[i] if paths and i < len(paths) else None for i in among]
        hit = _blocks_by_path(chosen, len(chosen), _in_consent_dialog)
        return consent_blocks(paths, n_blocks)[np.asarray(among, dtype=np.intp)] if hit.any() else hit
    out = _blocks_by_path(paths, n_blocks, _in_consent_dialog)
    if 2 * int(out.sum()) > n_blocks:
        out[:] = False
    return out


def _never_main_path(path: str) -> bool:
    """Whether an element of ``path`` puts its blocks out of the main text (the substring
    prefilter ``_MAYBE`` first: 9 paths in 10 have none of them)."""
    lowered = path.lower()
    return (any(m in lowered for m in _MAYBE)
            and any(_never_main_element(e.strip()) for e in path.split(" > ") if e.strip()))


def box_blocks(paths: Sequence[str | None] | None, n_blocks: int) -> np.ndarray:
    """bool [n_blocks]: True for the blocks whose path is a box's (the headline, a block named as a
    share, newsletter, byline or caption box, a block in an <aside>; the
    module doc: they stay main only at P(main) >= BOX_MIN_PROB). All False without paths."""
    return _blocks_by_path(paths, n_blocks, _names_a_box)


def never_main_blocks(paths: Sequence[str | None] | None, n_blocks: int) -> np.ndarray:
    """bool [n_blocks]: True for the blocks whose path puts them out of the main text (the
    module doc). All False without paths; a block past the end of ``paths`` is never excluded."""
    return _blocks_by_path(paths, n_blocks, _never_main_path)
