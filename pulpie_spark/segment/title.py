"""The page's title, for the ``title`` output column: the headline the output convention keeps
out of the main text (classify/conventions.py: an ``<h1>`` needs P(main) >= 0.9, as most
labelled sets and trafilatura leave it out of the body), so a user who wants it still has it.

Read from the segmenter's map HTML (lexbor's serialization of the page, so tags are lower
case and attribute values double-quoted and escaped) and its blocks, in this order, the first
that is not empty:

1. ``<meta property="og:title">``, then ``<meta name="twitter:title">`` in the ``<head>``: the
   headline the publisher gives to link previews, usually without the site's name;
2. the page's ``<h1>`` when the page has exactly one ``<h1>`` block;
3. the ``<title>``, whole (often "Headline | Site": it is not cut at a separator, which would
   cut headlines that have one): the ``<head>``'s, else the body's first outside ``<svg>``,
   ``<script>`` and the like (HTML parsing puts a ``<title>`` that follows body content, a stray
   element or text, into the body: on the labelled sets this takes the pages with a title from
   0.32 to 0.88 of cleaneval's and from 0.42 to 0.94 of chinese_wce's);
4. the first ``<h1>`` block of a page with several.

trafilatura's metadata title takes the same sources in about the same order (meta tags,
JSON-LD, a lone ``<h1>``, ``<title>``, the first ``<h1>``). Entities are decoded, white space
is collapsed to single spaces, and a title is cut to ``TITLE_MAX_CHARS`` characters (a page's
``<title>`` can hold anything). Pure and deterministic; never raises on a page.
"""

from __future__ import annotations

import re
from typing import Sequence

from pulpie_spark.segment.simplify import block_text

TITLE_MAX_CHARS = 1000
# The Open Graph and Twitter card names are lower case (their specifications): a plain
# substring search finds them, several times faster than a case-blind regex over the head.
_META_TITLE_KEYS = (("property", "og:title"), ("name", "twitter:title"))
# Occurrences of "og:title" or "<title" tried per page: each costs a scan back (to its "<meta",
# or for any open <script>), so a page stuffed with the word must not make the search quadratic.
_MAX_TRIES = 32
# A <title> in the body inside these is not the page's: an SVG's, or text of a script or style.
_NOT_THE_PAGES_TITLE = ("svg", "math", "script", "style", "template", "noscript")
_ATTR_RE = re.compile(r'([a-zA-Z_:][-a-zA-Z0-9_:.]*)\s*=\s*(?:"([^"]*)"|\'([^\']*)\')')
# The C0/C1 controls that block_text leaves (it collapses white space): a title is one line.
_CONTROLS_RE = re.compile(r"[\x00-\x1f\x7f-\x9f]+")


def clean_title(raw: str | None) -> str | None:
    """``raw`` (markup: entities, maybe tags) as one line of text, or None when empty."""
    if not raw:
        return None
    text = " ".join(_CONTROLS_RE.sub(" ", block_text(raw)).split())
    return text[:TITLE_MAX_CHARS].rstrip() or None


def _head_end(map_html: str) -> int:
    end = map_html.find("<body")
    return len(map_html) if end < 0 else end


def _meta_content(head: str, key: tuple[str, str]) -> str | None:
    """The content of the first ``<meta>`` of ``head`` whose ``key[0]`` attribute is ``key[1]``.
    Only the tags around the value's occurrences are parsed: a page's head can
    hold hundreds of ``<meta>`` and kilobytes of JSON-LD, and most have one og:title. (lexbor
    writes tag and attribute names in lower case and escapes ">" in values: a tag ends at
    its first ">".)"""
    name, value = key
    at = head.find(value)
    tries = 0
    while at >= 0 and tries < _MAX_TRIES:
        tries += 1
        start = head.rfind("<meta", 0, at)
        end = head.find(">", at)
        if start >= 0 and end >= 0 and head.find(">", start, at) < 0:
            attrs = {m.group(1).lower(): m.group(2) if m.group(2) is not None else m.group(3)
                     for m in _ATTR_RE.finditer(head, start, end)}
            content = attrs.get("content")
            if content is not None and (attrs.get(name) or "").strip() == value:
                return content
        at = head.find(value, at + len(value))
    return None


def _meta_title(head: str) -> str | None:
    for key in _META_TITLE_KEYS:
        title = clean_title(_meta_content(head, key))
        if title:
            return title
    return None


def _inside(doc: str, at: int, tags: tuple[str, ...]) -> bool:
    """Whether position ``at`` of ``doc`` lies inside an open element of one of ``tags`` (its
    last start tag before ``at`` not closed before it)."""
    return any(doc.rfind("<" + tag, 0, at) > doc.rfind("</" + tag, 0, at) for tag in tags)


def _title_element_text(doc: str, begin: int, end: int, skip_inside: tuple[str, ...] = ()) -> str | None:
    """The markup inside the first ``<title>`` of ``doc[begin:end]`` that is not inside an element
    of ``skip_inside``: found with str.find, in one pass (a regex's lazy match would rescan the
    rest at each unclosed ``<title``), at most ``_MAX_TRIES`` candidates."""
    start = doc.find("<title", begin, end)
    tries = 0
    while start >= 0 and tries < _MAX_TRIES:
        tries += 1
        open_end = doc.find(">", start, end)
        if open_end < 0:
            return None
        if doc[start + 6] in "> \t\n\r\f/" and not (skip_inside and _inside(doc, start, skip_inside)):
            close = doc.find("</title", open_end, end)
            return doc[open_end + 1:close] if close >= 0 else None
        start = doc.find("<title", start + 6, end)
    return None


def _is_h1(path: str | None) -> bool:
    """Whether the innermost element of a block path (``... > h1.title#top``) is an ``<h1>``
    (lexbor writes tag names in lower case)."""
    if not path:
        return False
    last = path[path.rfind(">") + 1:].lstrip()
    return last.startswith("h1") and (len(last) == 2 or last[2] in ".#")


def page_title(map_html: str | None, blocks: Sequence[str] = (), paths: Sequence[str | None] = ()) -> str | None:
    """The page's title (module doc) from its map HTML and blocks, or None when it has none."""
    if not map_html and not blocks:
        return None
    map_html = map_html or ""
    head_end = _head_end(map_html)
    head = map_html[:head_end]
    title = _meta_title(head)
    if title:
        return title
    h1s = [clean_title(block) for block, path in zip(blocks, paths) if _is_h1(path)]
    h1s = [t for t in h1s if t]
    if len(h1s) == 1:
        return h1s[0]
    title = (clean_title(_title_element_text(map_html, 0, head_end))
             # a <title> after body content (a stray element or text before it) is in the body
             or clean_title(_title_element_text(map_html, head_end, len(map_html), _NOT_THE_PAGES_TITLE)))
    return title or (h1s[0] if h1s else None)
