"""HTML -> Pulpie blocks (the format the Pulpie encoders were trained on).

The published Pulpie checkpoints read exactly the segmentation of MinerU-HTML's
``simplify_html`` as ported by pulpie 0.0.2 (lxml + deep copies + a uuid per node, about
40-55 pages/s per core). This module reproduces that output (``docs/block-format.md`` in
the team's shared material lists the rules) with one lexbor parse and flat, iterative
passes:

1. decode bytes (``pulpie_spark.segment.decode``), parse with lexbor, serialize the fixed-up DOM
   once (``doc.html``) and scan that well-formed string (``str.find`` from tag to tag)
   into a light element tree in lxml's text/tail model, which is the model the reference
   rules are written in (where a removed element's tail goes, what counts as "direct
   text" of an element);
2. classify tables and lists (walks that stop at the first decisive node), then compute
   "is a block" / "has block descendants" bottom-up in one pass over the elements;
3. walk the tree with an explicit stack to cut it into paragraphs (block elements and
   inline runs), in document order;
4. per paragraph, in one walk of the original elements (no copy): keep class/id (img
   src/alt), shorten lists, measure the text, drop empty blocks, serialize like lxml's HTML
   serializer (libxml2's escaping, URI escaping of ``src``, no end tag for void elements or
   an empty ``<li>``) and collapse whitespace; only a block over 500 characters of text
   is copied, cut (plus "...") and serialized from the copy;
5. the map HTML is the lexbor serialization with ``_item_id`` attributes and
   ``<cc-alg-uc-text>`` wrappers spliced in at recorded string offsets.

Where the reference has quirks (a hidden element's tail text moves *into* the previous
sibling when that sibling has no tail; an ``<img>`` without ``src`` hides its own tail
from the emptiness test; an inline run directly under ``<body>`` survives only as a single
element; identical blocks are only de-duplicated for text-only runs of one parent; elements that
HTML5 treats as void but libxml2 does not, such as ``<wbr>``, swallow their following
siblings), the quirk is reproduced, because the models learned from that output.

setup.py compiles this module with Cython where it can; ``simplify.pxd`` adds the C types.
This file stays plain Python, the reference, and gives the same output run as is. Hot
loops are written so that both run fast: builtin string methods instead of per-character
Python loops, no bound-method aliases (Cython turns ``list.append`` into a C call).
"""

from __future__ import annotations

import gc
import re
from dataclasses import dataclass, field
from operator import index, itemgetter

from selectolax.lexbor import LexborHTMLParser

from pulpie_spark.segment.decode import decode_html
from pulpie_spark import reasons
from pulpie_spark.guards import max_html_depth

try:
    import cython
except ImportError:  # plain Python without Cython installed: the pure branches run

    class _PurePython:
        compiled = False

    cython = _PurePython()

__all__ = ["SimplifiedPage", "simplify", "block_text", "CUTOFF_LENGTH", "MAX_PATH_DEPTH"]

CUTOFF_LENGTH = 500
MAX_PATH_DEPTH = 12  # ancestors kept in a block path (the innermost ones)
_MAX_CLASS_WORDS = 3
_MAX_NAME_CHARS = 40

INLINE_TAGS = frozenset({
    "map", "optgroup", "span", "input", "time", "u", "strong", "small", "sub", "samp",
    "blink", "b", "code", "nobr", "strike", "bdo", "basefont", "abbr", "var", "i",
    "cccode-inline", "s", "pic", "label", "mark", "object", "ccmath-inline", "svg", "button",
    "a", "font", "dfn", "sup", "kbd", "q", "script", "acronym", "option", "img", "big",
    "cite", "em", "marked-tail", "marked-text",
})
TABLE_TAGS = frozenset({"caption", "colgroup", "col", "thead", "tbody", "tfoot", "tr", "td", "th", "br"})
_TABLE_OR_INLINE = TABLE_TAGS | INLINE_TAGS
# Removed with their whole subtree *and* the text that follows them (lxml's remove()).
REMOVED_TAGS = frozenset({"title", "head", "style", "script", "link", "meta", "iframe", "frame", "nav"})
_INVISIBLE_STYLE = {
    "display": "none", "font-size": "0px", "color": "transparent", "visibility": "hidden",
    "opacity": "0",
}
_NO_CALC_TEXT_TAGS = frozenset({"math", "table"})
_LIST_TAGS = frozenset({"ul", "ol", "dl"})
_WRAPPER_TAG = "cc-alg-uc-text"
_WRAPPER_START = '<' + _WRAPPER_TAG + ' _item_id="'  # + item id + '">'
_WRAPPER_END = "</" + _WRAPPER_TAG + ">"
# The reference re-parses each paragraph as an HTML fragment; a copy of <html> never
# survives that (and a copy of <body> only in the case _page_blocks handles).
_UNWRAPPABLE = frozenset({"html", "#root"})

# libxml2 (the reference's parser) knows these as empty; lexbor's HTML5 list is longer.
_LIBXML_VOID = frozenset({
    "area", "base", "basefont", "br", "col", "frame", "hr", "img", "input", "isindex",
    "link", "meta", "param",
})
_HTML5_VOID = frozenset({
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
    "track", "wbr", "keygen", "param", "basefont", "bgsound", "frame", "image", "isindex",
})
# HTML5-void elements libxml2 treats as containers: they stay open until the parent closes.
_SWALLOWING = _HTML5_VOID - _LIBXML_VOID
_END_TAGLESS = _LIBXML_VOID | {"li"}  # no end tag when empty (libxml2's serializer)

# The element names pages use most, each as one string object, and their start and end
# tags made once: the tree builder swaps a name it cuts from the page for the shared one
# (_TAG_INFO; set and dict lookups then find it by identity), and block rendering does not
# format two new strings per element.
_COMMON_TAGS = INLINE_TAGS | TABLE_TAGS | REMOVED_TAGS | _HTML5_VOID | {
    "html", "body", "div", "p", "ul", "ol", "li", "dl", "dt", "dd", "table", "h1", "h2",
    "h3", "h4", "h5", "h6", "article", "section", "header", "footer", "main", "aside",
    "form", "blockquote", "pre", "figure", "figcaption", "center", "address", "fieldset",
    "legend", "select", "textarea", "details", "summary", "noscript", "picture", "path",
    "g", "hgroup", "menu", "dialog", "video", "audio", "canvas", "tt",
}
_START_TAG = {tag: "<%s>" % tag for tag in _COMMON_TAGS}
_END_TAG = {tag: "</%s>" % tag for tag in _COMMON_TAGS}

# _build_tree scans lexbor's serialization token by token with str.find (no regex match
# objects or per-token tuples): a token is a start or end tag, a whole raw-text element
# (tag, body and end tag: its body may hold "<"), a comment, doctype or processing
# instruction, and the text after it runs to the next "<". A "<" that starts none of
# these is text. lexbor escapes ">" in attribute values, so a tag ends at the first ">",
# and "<" in text, so every other "<" starts markup.
_RAW_TEXT_TAGS = ("script", "style", "xmp", "iframe", "noembed", "noframes", "plaintext")
# Token kinds (C integers in the compiled module, see simplify.pxd).
_TOKEN_END = 0
_TOKEN_START = 1
_TOKEN_RAW = 2
_TOKEN_OTHER = 3
_TOKEN_TEXT = 4

_WS = re.compile(r"\s+")
_REPLACEMENT_UTF8 = "\ufffd".encode()
_UTF8_BOM = b"\xef\xbb\xbf"
_PRIVATE_MARKS_UTF8 = tuple(chr(c).encode() for c in range(0xE000, 0xE003))


@dataclass
class SimplifiedPage:
    blocks: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    simplified_html: str = '<html><head><meta charset="utf-8"></head><body></body></html>'
    map_html: str = ""
    encoding: str | None = None
    error: str | None = None

    @property
    def n_blocks(self) -> int:
        return len(self.blocks)


class _El:
    """One element in lxml's model: ``text`` before the first child, ``tail`` after it.
    Made by ``_new_el``."""

    __slots__ = (
        "tag", "attrs", "parent", "children", "name_end", "open_end", "text", "tail",
        "close_start", "close_end", "text_end", "tail_end", "hbd", "block", "data_table",
        "list_content", "context", "_path_text", "_path_depth", "name_flags", "opens",
    )


# The children of every element without any, one shared list: about half the elements of a
# page are leaves, and _build_tree (the only place that adds children) gives an element its
# own list with its first child. Nothing else changes a children list.
_NO_CHILDREN = []


def _new_el(tag, attrs, parent):
    """A new ``_El``. Not ``_El.__init__``: a compiled class's ``__init__`` is called with an
    argument tuple and parses it, while ``__new__`` here is a direct call in the compiled
    build, and field writes are C stores."""
    el = _El.__new__(_El)
    el.tag = tag
    el.attrs = attrs
    el.parent = parent
    el.children = _NO_CHILDREN
    el.name_end = 0       # where the tag name ends in the page
    el.open_end = 0       # where the start tag ends
    el.text = None
    el.tail = None
    el.close_start = 0
    el.close_end = 0
    el.text_end = 0       # where the last piece of direct text ends in the page
    el.tail_end = 0       # where the last piece of tail text ends in the page
    el.hbd = False        # has block descendants
    el.block = False
    el.data_table = False
    el.list_content = False
    el.context = None     # nearest table (td/th), ul/ol (li) or dl (dt/dd) ancestor
    el._path_text = None  # see _path_of
    el._path_depth = 0
    el.name_flags = 0     # _TAG_INFO flags of its name
    el.opens = -1         # the context it opens (_IN_TABLE, ...), -1: none
    return el


def _unescape(text: str) -> str:
    # lexbor's serializer escapes exactly these in text and attribute values.
    if "&" not in text:
        return text
    return (text.replace("&lt;", "<").replace("&gt;", ">").replace("&nbsp;", "\xa0")
            .replace("&quot;", '"').replace("&amp;", "&"))


# An element's attributes are kept as the text of its serialized start tag after the name
# (``_El.attrs``) and read on demand: lexbor writes every attribute as `` name="value"``
# with ``"`` escaped, so a plain substring search finds a name without parsing the rest.
# These are the searched keys, `` name="``.
_CLASS = ' class="'
_ID = ' id="'
_SRC = ' src="'
_ALT = ' alt="'
_STYLE = ' style="'


# The tokenizer's string searches. Compiled, Cython turns each int argument of str.find and
# str.startswith into a Python int and back; these call the C functions (cimported in
# simplify.pxd, names the plain-Python branch never reaches) with C integers.
def _find_char(s: str, ch: str, start: int, end: int) -> int:
    """``s.find(ch, start, end)`` for one character."""
    if cython.compiled:
        return PyUnicode_FindChar(s, ch, start, end, 1)
    return s.find(ch, start, end)


def _find(s: str, sub: str, start: int) -> int:
    """``s.find(sub, start)``."""
    if cython.compiled:
        return PyUnicode_Find(s, sub, start, len(s), 1)
    return s.find(sub, start)


def _starts_with(s: str, prefix: str, start: int) -> bool:
    """``s.startswith(prefix, start)``."""
    if cython.compiled:
        return PyUnicode_Tailmatch(s, prefix, start, len(s), -1) == 1
    return s.startswith(prefix, start)


def _is_space(s: str) -> bool:
    """``s.isspace()``."""
    if cython.compiled:  # (a method call from compiled code costs more than the usual short scan)
        if not s:
            return False
        for ch in s:
            if not ch.isspace():
                return False
        return True
    return s.isspace()


def _attr_value(attrs: str, key: str, default=None):
    """Value of the attribute whose `` name="`` is ``key`` in ``attrs``, unescaped."""
    i = _find(attrs, key, 0)
    if i < 0:
        return default
    i += len(key)
    j = _find_char(attrs, '"', i, len(attrs))
    value = attrs[i:j] if j >= 0 else attrs[i:]
    return _unescape(value) if "&" in value else value


def _is_hidden(el: _El, parent: _El) -> bool:
    """Rule 2's second sentence: removed, but the text after it stays."""
    attrs = el.attrs
    if attrs:
        if parent.tag == "body" and (_attr_value(attrs, _CLASS) == "nav"
                                     or _attr_value(attrs, _ID) == "nav"):
            return True
        style = _attr_value(attrs, _STYLE)
        if style:
            for decl in style.split(";"):
                key, sep, value = decl.partition(":")
                if sep and _INVISIBLE_STYLE.get(key.strip()) == value.strip():
                    return True
    if parent.tag == "details" and el.tag != "summary":
        return parent.attrs is None or ' open="' not in parent.attrs
    return False


# Contexts: the nearest open table, ul/ol or dl (indexes into _build_tree's stacks).
_IN_TABLE, _IN_LIST, _IN_DL = 0, 1, 2
_CONTEXT_OF = {"td": _IN_TABLE, "th": _IN_TABLE, "li": _IN_LIST, "dt": _IN_DL, "dd": _IN_DL}
_CONTEXT_KIND = {"table": _IN_TABLE, "ul": _IN_LIST, "ol": _IN_LIST, "dl": _IN_DL}

# What the tree builder needs to know of a start tag's name, in one dict lookup: the
# shared name string, flags, the context it looks up (-1: none) and the one it opens.
# Names not in it have none of the flags.
_REMOVED = 1      # REMOVED_TAGS: dropped with their subtree and tail
_VOID = 2         # HTML5-void: a removed one has no subtree to skip
_LEAF = 4         # libxml2-void, "image", "bgsound": never a parent in the tree
_TABLE_PART = 8   # caption, col, colgroup: their table is a data table (rule 4)
_BODY = 16
_DETAILS = 32
_IMG = 64
_LIST = 128       # ul, ol, dl: shortened (rule 7)
_NO_END_TAG = 256  # libxml2-void and li: no end tag when empty
_NO_CALC = 512    # math, table: their text is not counted (rule 7)
_TAG_INFO = {
    tag: (
        tag,
        (_REMOVED if tag in REMOVED_TAGS else 0) | (_VOID if tag in _HTML5_VOID else 0)
        | (_LEAF if tag in _LIBXML_VOID or tag in ("image", "bgsound") else 0)
        | (_TABLE_PART if tag in ("caption", "col", "colgroup") else 0)
        | (_BODY if tag == "body" else 0) | (_DETAILS if tag == "details" else 0)
        | (_IMG if tag == "img" else 0) | (_LIST if tag in _LIST_TAGS else 0)
        | (_NO_END_TAG if tag in _END_TAGLESS else 0) | (_NO_CALC if tag in _NO_CALC_TEXT_TAGS else 0),
        _CONTEXT_OF.get(tag, -1),
        _CONTEXT_KIND.get(tag, -1),
    )
    for tag in (_COMMON_TAGS | REMOVED_TAGS | _HTML5_VOID | _LIBXML_VOID | _LIST_TAGS | _END_TAGLESS
                | _NO_CALC_TEXT_TAGS | set(_CONTEXT_OF) | set(_CONTEXT_KIND)
                | {"image", "bgsound", "caption", "col", "colgroup", "body", "details", "img"})
}
_NO_INFO = (None, 0, -1, -1)


def _build_tree(s: str):
    """Tokenize lexbor's serialization into ``_El`` nodes.

    Returns (root, elements in post-order, tables, lists).

    Removed elements never enter the tree; tokens inside them are skipped.
    """
    root = _new_el("#root", None, None)
    stack = [root]
    contexts = [[None], [None], [None]]  # open tables, ul/ol and dl (_IN_TABLE, ...)
    tables: list[_El] = []
    lists: list[_El] = []
    post_order: list[_El] = []
    # After a removed element: where its tail goes ("drop", "hidden" or None).
    tail_mode = None
    skip_tag = None  # inside a removed element: its tag and nesting depth
    skip_depth = 0
    n = len(s)
    next_start = 0
    while next_start < n:
        # The token at [start, pos) and its text at [pos, text_end). Tokens start at "<";
        # only the page's first text has no token before it (kind _TOKEN_TEXT, as for a
        # lone "<").
        start = pos = next_start
        kind = _TOKEN_TEXT
        if s[start] == "<" and start + 1 < n:
            second = s[start + 1]
            if second == "/":
                third = s[start + 2] if start + 2 < n else " "
                if ("a" <= third <= "z") or ("A" <= third <= "Z"):
                    end = _find_char(s, ">", start + 3, n)
                    if end >= 0:
                        kind = _TOKEN_END
                        pos = end + 1
            elif second == "!":
                end = _find(s, "-->", start + 4) if _starts_with(s, "--", start + 2) else -1
                if end >= 0:
                    pos = end + 3
                    kind = _TOKEN_OTHER
                else:
                    end = _find_char(s, ">", start + 2, n)
                    if end >= 0:
                        pos = end + 1
                        kind = _TOKEN_OTHER
            elif second == "?":
                end = _find_char(s, ">", start + 2, n)
                if end >= 0:
                    pos = end + 1
                    kind = _TOKEN_OTHER
            elif ("a" <= second <= "z") or ("A" <= second <= "Z"):
                if second in "sxinp":
                    for raw_tag in _RAW_TEXT_TAGS:
                        # (the first letter first: "<span", "<p" and "<img" need no
                        # prefix comparisons)
                        if raw_tag[0] == second and _starts_with(s, raw_tag, start + 1):
                            open_end = _find_char(s, ">", start + 1 + len(raw_tag), n)
                            if open_end >= 0:
                                end = _find(s, "</" + raw_tag + ">", open_end + 1)
                                if end >= 0:
                                    kind = _TOKEN_RAW
                                    pos = end + 3 + len(raw_tag)
                            break
                if kind == _TOKEN_TEXT:
                    end = _find_char(s, ">", start + 2, n)
                    if end >= 0:
                        kind = _TOKEN_START
                        pos = end + 1
        text_end = _find_char(s, "<", pos + 1 if pos == start else pos, n)
        if text_end < 0:
            text_end = n
        next_start = text_end
        if kind == _TOKEN_END:
            el = stack[-1]
            if (skip_tag is None and pos - start - 3 == len(el.tag)
                    and _starts_with(s, el.tag, start + 2)):
                # The usual case, lexbor's output being balanced: the end tag of the
                # innermost open element (compared in place, no name cut out).
                tail_mode = None
                stack.pop()
                el.close_start = start
                el.close_end = pos
                if el.opens >= 0:
                    contexts[el.opens].pop()
                post_order.append(el)
            elif skip_tag is not None and ("a" <= s[start + 2] <= "z") and s[start + 2] != skip_tag[0]:
                pass  # inside a removed element, an end tag that cannot be its own
            else:
                # end tag: close up to the matching open element
                tag = s[start + 2:pos - 1]
                space = _find_char(tag, " ", 0, len(tag))
                if space >= 0:
                    tag = tag[:space]
                if not tag.islower():  # (lexbor writes HTML names in lower case already)
                    tag = tag.lower()
                if skip_tag is not None:
                    if tag == skip_tag:
                        skip_depth -= 1
                        if skip_depth == 0:
                            skip_tag = None
                else:
                    tail_mode = None
                    el = stack[-1]
                    if el.tag == tag:  # (written in another case: SVG's camelCase names)
                        stack.pop()
                        el.close_start = start
                        el.close_end = pos
                        if el.opens >= 0:
                            contexts[el.opens].pop()
                        post_order.append(el)
                    else:
                        depth = len(stack) - 1
                        while depth > 0 and stack[depth].tag != tag:
                            depth -= 1
                        if depth > 0:
                            while len(stack) > depth:
                                el = stack.pop()
                                el.close_start = start
                                el.close_end = start
                                if el.opens >= 0:
                                    contexts[el.opens].pop()
                                post_order.append(el)
                            el.close_end = pos
        elif kind == _TOKEN_START or kind == _TOKEN_RAW:
            if kind == _TOKEN_RAW:
                tag = raw_tag
                attrs_s = s[start + 1 + len(tag):open_end]
                info = _TAG_INFO.get(tag, _NO_INFO)
            else:
                space = _find_char(s, " ", start + 1, pos)
                if space < 0:
                    tag = s[start + 1:pos - 1]
                    attrs_s = ""
                else:
                    tag = s[start + 1:space]
                    attrs_s = s[space:pos - 1]
                info = _TAG_INFO.get(tag)
                if info is None:
                    if not tag.islower():
                        tag = tag.lower()
                    info = _TAG_INFO.get(tag, _NO_INFO)
                if info[0] is not None:
                    tag = info[0]
            flags = info[1]
            if skip_tag is not None:
                if tag == skip_tag and kind == _TOKEN_START:
                    skip_depth += 1
                continue  # text inside a removed element is skipped too
            tail_mode = None
            parent = stack[-1]
            attrs = attrs_s if len(attrs_s) > 2 else None
            el = _new_el(tag, attrs, parent)
            el.name_flags = flags
            el.name_end = start + 1 + len(tag)
            el.open_end = el.name_end + 1 + len(attrs_s)
            if flags & _REMOVED:
                tail_mode = "drop"
            elif (
                (attrs is not None and (" style=" in attrs_s or parent.name_flags & _BODY))
                or parent.name_flags & _DETAILS
            ) and _is_hidden(el, parent):
                tail_mode = "hidden"
            if tail_mode is not None:
                if kind == _TOKEN_START and not flags & _VOID:
                    skip_tag = tag
                    skip_depth = 1
                    continue
            else:
                if parent.children:
                    parent.children.append(el)
                else:  # the first child: the parent's own list instead of _NO_CHILDREN
                    parent.children = [el]
                context_of = info[2]
                if context_of >= 0:
                    el.context = contexts[context_of][-1]
                    if (context_of == _IN_TABLE and el.context is not None and attrs is not None
                            and ' headers="' in attrs):
                        el.context.data_table = True  # rule 4 marker of its nearest table
                elif flags & _TABLE_PART and contexts[_IN_TABLE][-1] is not None:
                    contexts[_IN_TABLE][-1].data_table = True
                if kind == _TOKEN_RAW:
                    if pos - len(tag) - 3 > open_end + 1:
                        el.text = s[open_end + 1:pos - len(tag) - 3]
                    el.close_start = pos - len(tag) - 3
                    el.close_end = pos
                    post_order.append(el)
                elif flags & _LEAF:
                    el.close_start = el.close_end = pos
                    post_order.append(el)
                else:
                    stack.append(el)
                    context_kind = info[3]
                    if context_kind >= 0:
                        el.opens = context_kind
                        contexts[context_kind].append(el)
                        (tables if context_kind == _IN_TABLE else lists).append(el)
        # (_TOKEN_OTHER: a comment, the doctype, or a processing instruction: lexbor writes
        # the bogus comment "<?php ... ?>" back as "<?php ... ?>"; the reference drops it
        # like a comment, its blocks never hold that text. _TOKEN_TEXT: the text starts at
        # the "<".)
        if text_end > pos:
            if skip_tag is not None:
                continue
            if tail_mode is not None:
                if tail_mode == "drop":
                    continue
                # The reference appends a hidden element's tail to the previous sibling's
                # tail, or (if it has none) to that sibling's *text*, or to the parent's text.
                text = _unescape(s[pos:text_end])
                cur = stack[-1]
                if cur.children:
                    prev = cur.children[-1]
                    if prev.tail is not None:
                        prev.tail += text
                    else:
                        prev.text = (prev.text or "") + text
                else:
                    cur.text = (cur.text or "") + text
                continue
            text = s[pos:text_end]
            if "&" in text:
                text = _unescape(text)
            cur = stack[-1]
            if cur.children:
                last = cur.children[-1]
                last.tail = text if last.tail is None else last.tail + text
                last.tail_end = text_end
            else:
                cur.text = text if cur.text is None else cur.text + text
                cur.text_end = text_end
    end = len(s)
    while len(stack) > 1:
        el = stack.pop()
        el.close_start = el.close_end = end
        post_order.append(el)
    return root, post_order, tables, lists


_LIST_PARENTS = {"li": ("ul", "ol"), "dt": ("dl",), "dd": ("dl",)}


def _is_data_table(table: _El) -> bool:
    """Rule 4: caption/col/colgroup/td[headers]/th[headers] of this table (not of a nested
    one; the tree builder flags those on the nearest table), role="table", data-table, or
    nothing but table tags and inline tags inside."""
    if table.data_table:
        return True
    attrs = table.attrs
    if attrs is not None and (_attr_value(attrs, ' role="') == "table"
                              or _attr_value(attrs, ' data-table="')):
        return True
    stack = list(table.children)
    while stack:
        node = stack.pop()
        if node.tag not in _TABLE_OR_INLINE:
            return False
        if node.children:
            stack.extend(node.children)
    return True


def _is_content_list(lst: _El) -> bool:
    """Rule 5. The reference classifies lists outermost first, so while an item is examined
    any li/dt/dd below it (in a list not classified yet) counts as a block."""
    # Plain loops, no generator expressions (those cannot be typed, and cost a generator
    # object each when compiled).
    children = lst.children
    if not children:
        return False
    # Every child an item of this kind of list (li, or dt/dd in a dl), no text around them.
    allowed = ("dt", "dd") if lst.tag == "dl" else ("li",)
    for c in children:
        if c.tag not in allowed:
            return False
    if lst.text and lst.text.strip():
        return False
    for c in children:
        if c.tail and c.tail.strip():
            return False
    stack = []
    for c in children:
        stack.extend(c.children)
    while stack:
        node = stack.pop()
        tag = node.tag
        if tag in ("td", "th"):
            if node.context is not None and not node.context.data_table:
                return False
        elif tag in _LIST_PARENTS:
            if node.context is not None:
                return False
        elif tag == "math":
            continue  # nothing inside math counts
        elif tag not in INLINE_TAGS:
            return False
        if node.children:
            stack.extend(node.children)
    return True


def _classify(post_order: list[_El], tables: list[_El], lists: list[_El]) -> None:
    """Table types, list types, then block flags bottom-up (rules 3-5)."""
    for table in tables:
        table.data_table = _is_data_table(table)
    for lst in lists:
        lst.list_content = _is_content_list(lst)
    inline = INLINE_TAGS
    for el in post_order:
        tag = el.tag
        if tag in inline:
            if el.hbd:
                el.parent.hbd = True
            continue
        if tag in ("td", "th"):
            table = el.context
            blk = table is not None and not table.data_table
        elif tag in _LIST_PARENTS:
            lst = el.context
            blk = lst is not None and not lst.list_content
        elif tag == "math":
            el.hbd = False
            continue
        else:
            blk = True
        el.block = blk
        if blk or el.hbd:
            el.parent.hbd = True


# ---------------------------------------------------------------------------------------
# Paragraphs (rule 6)


def _paragraphs(root: _El):
    """Blocks and inline runs in document order.

    Returns ``(kind, element, items, run_start, run_end)`` tuples: kind "block"
    (``element`` is the block) or "run" (``element`` is the parent, ``items`` a list of
    stripped strings and inline elements; run_start/run_end delimit the run's content in
    the serialized page, for the map).
    """
    out = []
    stack = [_frame(root)]
    while stack:
        frame = stack[-1]
        node, idx, items = frame.node, frame.next_child, frame.items
        children = node.children
        if idx >= len(children):
            if items:
                out.append(("run", node, items, frame.run_start, frame.run_end))
            stack.pop()
            continue
        child = children[idx]
        frame.next_child = idx + 1
        tail = child.tail
        stripped = tail.strip() if tail else None
        if child.block or child.hbd:
            is_br = child.tag == "br"
            if is_br:
                items.append(child)
                frame.run_end = child.close_end
            if items:
                out.append(("run", node, items, frame.run_start, frame.run_end))
                items = frame.items = []
            frame.run_start = child.close_end
            if stripped:
                items.append(stripped)
                frame.run_end = child.tail_end
            if not is_br:
                if child.data_table or not child.hbd:
                    out.append(("block", child, None, 0, 0))
                else:
                    stack.append(_frame(child))
        else:
            items.append(child)
            if stripped:
                items.append(stripped)
                frame.run_end = child.tail_end
            else:
                frame.run_end = child.close_end
    return out


class _Frame:
    """_paragraphs' place in one element: the next child, the run being collected and the
    run's start and end offsets in the serialized page (C integers in the compiled build:
    no int object per child)."""

    __slots__ = ("items", "next_child", "node", "run_end", "run_start")


def _frame(node: _El) -> _Frame:
    frame = _Frame.__new__(_Frame)
    frame.node = node
    frame.next_child = 0
    text = node.text
    stripped = text.strip() if text else None
    if stripped:
        frame.items = [stripped]
        frame.run_start = node.open_end
        frame.run_end = node.text_end
    else:
        frame.items = []
        frame.run_start = frame.run_end = node.open_end
    return frame


# ---------------------------------------------------------------------------------------
# Per-block cleaning (rule 7) on light copies: [tag, start tag (_open_tag), text, tail,
# children]

_TAG, _OPEN, _TEXT, _TAIL, _KIDS = range(5)


def _copy(el: _El):
    """Cleaned copy of a subtree (attributes filtered, lists shortened), iterative."""
    top = [el.tag, _open_tag(el), el.text, None, []]
    stack = [(el, top)]
    while stack:
        src, dst = stack.pop()
        kids = src.children
        if not kids:
            continue
        tag = src.tag
        if tag in ("ul", "ol") and len(kids) > 2:
            kids = [kids[0], None, kids[-1]]
        elif tag == "dl" and len(kids) > 2:
            dts = [i for i, c in enumerate(kids) if c.tag == "dt"]
            if len(dts) > 1:
                kids = kids[dts[0]:dts[1]] + [None] + kids[dts[-1]:]
        out = dst[_KIDS]
        for c in kids:
            if c is None:
                out.append(["span", "<span", "...", None, []])
                continue
            copy = [c.tag, _open_tag(c), c.text, c.tail, []]
            out.append(copy)
            if c.children:
                stack.append((c, copy))
    return top


def _run_copy(parent: _El, items: list):
    """The run wrapped in a copy of its parent (texts merged like the reference does)."""
    top = [parent.tag, _open_tag(parent), None, None, []]
    kids = top[_KIDS]
    last_br = len(items) - 1
    for i, item in enumerate(items):
        if isinstance(item, str):
            if not kids:
                top[_TEXT] = item if not top[_TEXT] else top[_TEXT] + " " + item
            # Otherwise the reference writes it to the *original* element's tail, so the
            # copy keeps the original (unstripped) tail it was copied with.
            continue
        copy = _copy(item)
        copy[_TAIL] = None if (i == last_br and item.tag == "br") else item.tail
        kids.append(copy)
    # Lists directly inside the run are shortened by _copy; the wrapper itself too.
    if top[_TAG] in ("ul", "ol", "dl"):
        _shorten_list(top)
    return top


def _shorten_list(node) -> None:
    kids = node[_KIDS]
    if node[_TAG] in ("ul", "ol") and len(kids) > 2:
        node[_KIDS] = [kids[0], ["span", "<span", "...", None, []], kids[-1]]
    elif node[_TAG] == "dl" and len(kids) > 2:
        dts = [i for i, c in enumerate(kids) if c[_TAG] == "dt"]
        if len(dts) > 1:
            node[_KIDS] = kids[dts[0]:dts[1]] + [["span", "<span", "...", None, []]] + kids[dts[-1]:]


def _truncate(top, max_length: int) -> None:
    """Cut text at ``max_length`` characters plus '...' (text in table/math not counted).

    Mirrors the reference: tails always count, text inside table/math does not; once cut,
    the following siblings of the cut node and of each of its ancestors are dropped.
    """
    slots = []  # (node, slot, can_modify) in document order
    parents = {}
    total = 0
    _tail_marker = _TAIL
    # (node, node or an ancestor excluded, an ancestor excluded)
    stack = [(top, top[_TAG] in _NO_CALC_TEXT_TAGS, False)]
    while stack:
        node, excluded, parent_excluded = stack.pop()
        if excluded is _tail_marker:  # the tail of ``node`` comes now
            slots.append((node, _TAIL, not parent_excluded))
            total += len(node[_TAIL])
            continue
        text = node[_TEXT]
        if text and not excluded:
            slots.append((node, _TEXT, True))
            total += len(text)
        if node is not top and node[_TAIL]:
            stack.append((node, _tail_marker, parent_excluded))
        kids = node[_KIDS]
        for kid in reversed(kids):
            parents[id(kid)] = node
            stack.append((kid, excluded or kid[_TAG] in _NO_CALC_TEXT_TAGS, excluded))
    if total <= max_length:
        return
    current = 0
    done = False
    for node, slot, can_modify in slots:
        if done:
            node[slot] = None
            continue
        value = node[slot]
        n = len(value)
        if current + n <= max_length:
            current += n
            continue
        if not can_modify:
            current += n
            continue
        # A negative remainder (after an uncuttable overflow) slices from the end, as in
        # the reference.
        node[slot] = value[: max_length - current] + "..."
        current = max_length
        done = True
        # Drop the following siblings of the node and of every ancestor below the top.
        child = node
        parent = parents.get(id(child))
        while parent is not None:
            kids = parent[_KIDS]
            for j, k in enumerate(kids):
                if k is child:
                    del kids[j + 1:]
                    break
            child = parent
            parent = parents.get(id(child))


# ---------------------------------------------------------------------------------------
# Serialization like lxml.html.tostring (libxml2's HTML serializer)


def _esc_text(text: str) -> str:
    """Escape text like libxml2's HTML serializer and collapse whitespace (the reference
    collapses whitespace outside tags of the joined output; text pieces are exactly what
    lies between tags, so doing it per piece gives the same string)."""
    if cython.compiled and _plain_ascii(text):
        return text  # (the usual piece, told in one pass in C: isprintable calls a function per character)
    # Every whitespace character but " " is unprintable: most pieces need no collapsing.
    # str.split() splits at exactly the characters \s matches; ends keep one space.
    if not text.isprintable() or "  " in text:
        words = text.split()
        if not words:
            return " "
        collapsed = " ".join(words)
        if text[0].isspace():
            collapsed = " " + collapsed
        if text[-1].isspace():
            collapsed += " "
        text = collapsed
    return _esc_markup(text)


def _plain_ascii(text: str) -> bool:
    """Whether ``text`` is printable ASCII that needs neither whitespace collapsing nor
    escaping: no two spaces in a row, no ``&``, ``<`` or ``>``."""
    after_space = False
    for ch in text:
        if ch == " ":
            if after_space:
                return False
            after_space = True
        elif ch < " " or ch > "~" or ch == "&" or ch == "<" or ch == ">":
            return False
        else:
            after_space = False
    return True


_URI_UNSAFE = re.compile(r"[\x00-\x20\x7f-\U0010ffff]")


def _percent_encoded(match) -> str:
    return "".join(["%%%02X" % b for b in match.group(0).encode("utf-8", "surrogatepass")])


def _esc_uri(value: str) -> str:
    if value.isascii() and value.isprintable() and " " not in value:
        return value  # (the usual URL: printable ASCII but the space is all safe)
    return _URI_UNSAFE.sub(_percent_encoded, value)


def _esc_markup(value: str) -> str:
    """``&``, ``<`` and ``>`` as libxml2 escapes them, in text and in attribute values
    alike (quotes in attribute values: ``_attr``)."""
    if "&" in value:
        value = value.replace("&", "&amp;")
    if "<" in value:
        value = value.replace("<", "&lt;")
    if ">" in value:
        value = value.replace(">", "&gt;")
    return value


def _attr(name: str, value: str) -> str:
    if name == "src":
        value = _esc_uri(value)
    value = _esc_markup(value)
    if '"' in value:
        if "'" in value:
            return ' %s="%s"' % (name, value.replace('"', "&quot;"))
        return " %s='%s'" % (name, value)
    return ' %s="%s"' % (name, value)


def _serialize(top, item_id: str) -> str:
    parts = []
    stack = [(top, True)]
    while stack:
        node, opening = stack.pop()
        if isinstance(node, str):
            parts.append(node)
            continue
        tag = node[_TAG]
        parts.append(node[_OPEN])
        if node is top:
            parts.append(' _item_id="%s"' % item_id)
        parts.append(">")
        kids = node[_KIDS]
        tail = node[_TAIL] if node is not top else None
        # libxml2 writes no end tag for void elements, nor for an empty <li>.
        if tag in _END_TAGLESS and not kids and not node[_TEXT]:
            if tail:
                parts.append(_esc_text(tail))
            continue
        if node[_TEXT]:
            parts.append(_esc_text(node[_TEXT]))
        stack.append(("</%s>%s" % (tag, _esc_text(tail) if tail else ""), None))
        for kid in reversed(kids):
            stack.append((kid, True))
    return "".join(parts)


# ---------------------------------------------------------------------------------------
# The usual block in one walk of the original elements: what _copy and _serialize give on
# a copy (and rule 7's length and content tests), without making the copy. Only a block
# over the cut length takes the copy path (_copy/_run_copy, _truncate, _serialize): about
# 3% of blocks.



def _shortened(tag: str, kids: list) -> list:
    """Rule 7's list shortening on a child list; ``None`` stands for <span>...</span>."""
    if len(kids) > 2:
        if tag == "dl":
            dts = [i for i, c in enumerate(kids) if c.tag == "dt"]
            if len(dts) > 1:
                return kids[dts[0]:dts[1]] + [None] + kids[dts[-1]:]
        else:
            return [kids[0], None, kids[-1]]
    return kids


def _kept_src(attrs: str) -> str:
    """An <img>'s src as rule 7 keeps it: stripped, "" when empty or a data:image URI."""
    src = _attr_value(attrs, _SRC, "").strip()
    return "" if src.startswith("data:image/") else src


def _open_tag(el: _El) -> str:
    """Rule 7 on a start tag: ``<tag`` with class and id (img: src unless a data:image URI,
    and alt), values stripped, serialized (no closing ``>``)."""
    tag = el.tag
    attrs = el.attrs
    out = "<" + tag
    if attrs is None:
        return out
    if tag == "img":
        src = _kept_src(attrs)
        if src:
            out += _attr("src", src)
        alt = _attr_value(attrs, _ALT, "").strip()
        if alt:
            out += _attr("alt", alt)
    elif _CLASS not in attrs and _ID not in attrs:
        return out
    cls = _attr_value(attrs, _CLASS, "").strip()
    if cls:
        out += _attr("class", cls)
    ident = _attr_value(attrs, _ID, "").strip()
    if ident:
        out += _attr("id", ident)
    return out


def _start_tag(el: _El, start_tags: dict) -> str:
    """``<tag ...>`` with the attributes rule 7 keeps; ``start_tags`` caches them by tag, then
    attributes, for one page: menus, lists and grids repeat the same few (two dict lookups
    by strings whose hashes are cached, no key tuple per element)."""
    attrs = el.attrs
    if attrs is None or (_CLASS not in attrs and _ID not in attrs and el.tag != "img"):
        # Nothing rule 7 keeps (links' unique hrefs would only fill the cache).
        start_tag = _START_TAG.get(el.tag)
        return start_tag if start_tag is not None else "<%s>" % el.tag
    by_attrs = start_tags.get(el.tag)
    if by_attrs is None:
        by_attrs = start_tags[el.tag] = {}
    start_tag = by_attrs.get(el.attrs)
    if start_tag is None:
        start_tag = by_attrs[el.attrs] = _open_tag(el) + ">"
    return start_tag


def _img_has_src(el: _El) -> bool:
    return el.attrs is not None and _kept_src(el.attrs) != ""


def _render(top: _El, text, kids: list, no_tail, item_id: str, cutoff_length: int,
            start_tags: dict):
    """Serialize a block whose top is ``top`` with ``text`` and ``kids`` in place of its
    own (a run), the tail of ``no_tail`` (a run's closing <br>) left out. ``start_tags``
    caches cleaned start tags by (tag, attributes) for one page: menus, lists and grids
    repeat the same few.

    Returns the HTML, None when the block has no content (rule 7), or False when its text
    is longer than ``cutoff_length`` (the caller cuts a copy instead).
    """
    tag = top.tag
    name_flags = top.name_flags
    if name_flags & _LIST:
        kids = _shortened(tag, kids)
    total = 0
    meaningful = False
    excluded = (name_flags & _NO_CALC) != 0
    if name_flags & _IMG:
        meaningful = _img_has_src(top)
        if text and not excluded:
            total = len(text)
    elif text:
        if not excluded:
            total = len(text)
        meaningful = not _is_space(text)
    if not kids and not meaningful:  # an empty element, or whitespace only
        return None
    open_tag = _start_tag(top, start_tags)[:-1]
    if not kids and not text and name_flags & _NO_END_TAG:
        return open_tag + ' _item_id="' + item_id + '">'
    parts = [open_tag, ' _item_id="', item_id, '">']
    if text:
        parts.append(_esc_text(text))
    end_tag = _END_TAG.get(tag)
    # The stack holds end tags (with the tail after them) and elements; ``flags`` holds,
    # for each element on the stack in the same order, whether its text is excluded from
    # the length (no (element, flag) tuple per element).
    stack = [end_tag if end_tag is not None else "</%s>" % tag]
    flags = []
    for kid in reversed(kids):
        stack.append(kid)
        flags.append(excluded or (kid is not None and (kid.name_flags & _NO_CALC) != 0))
    while stack:
        entry = stack.pop()
        if isinstance(entry, str):
            parts.append(entry)
            continue
        excluded = flags.pop()
        if entry is None:  # a shortened list's <span>...</span>
            parts.append("<span>...</span>")
            if not excluded:
                total += 3
            meaningful = True
            continue
        node = entry
        tag = node.tag
        name_flags = node.name_flags
        text = node.text
        tail = None if node is no_tail else node.tail
        if name_flags & _IMG:
            if not meaningful and _img_has_src(node):
                meaningful = True
            if text and not excluded:
                total += len(text)
        elif text:
            if not excluded:
                total += len(text)
            if not meaningful and not _is_space(text):
                meaningful = True
        if tail:
            total += len(tail)
            if not meaningful and not name_flags & _IMG and not _is_space(tail):
                meaningful = True
        if meaningful and total > cutoff_length:
            return False  # (the length only grows: the caller cuts a copy, the rest is not rendered)
        parts.append(_start_tag(node, start_tags))
        kids = node.children
        if not kids:
            if not text and name_flags & _NO_END_TAG:
                if tail:
                    parts.append(" " if _is_space(tail) else _esc_text(tail))
                continue
        elif name_flags & _LIST:
            kids = _shortened(tag, kids)
        if text:
            parts.append(" " if _is_space(text) else _esc_text(text))
        end_tag = _END_TAG.get(tag)
        if end_tag is None:
            end_tag = "</%s>" % tag
        if tail:
            # Indentation between tags is the most common tail: no regex for it. The tail
            # goes on the stack under the end tag (popped after it), not concatenated to it.
            stack.append(" " if _is_space(tail) else _esc_text(tail))
        stack.append(end_tag)
        for kid in reversed(kids):
            stack.append(kid)
            flags.append(excluded or (kid is not None and (kid.name_flags & _NO_CALC) != 0))
    if not meaningful:
        return None
    if total > cutoff_length:
        return False
    return "".join(parts)


# ---------------------------------------------------------------------------------------
# Paths for feature-based models


def _segment(el: _El) -> str:
    name = el.tag
    attrs = el.attrs
    if attrs:
        cls = _attr_value(attrs, _CLASS)
        if cls:
            words = cls.split()[:_MAX_CLASS_WORDS]
            if words:
                name += "." + ".".join([w[:_MAX_NAME_CHARS] for w in words])
        ident = _attr_value(attrs, _ID)
        if ident and ident.strip():
            name += "#" + ident.split()[0][:_MAX_NAME_CHARS]
    return name


def _path_of(el: _El) -> str:
    """``html > body > div.main#content > p``: the innermost MAX_PATH_DEPTH elements."""
    if el._path_text is not None:  # several runs of one parent share its path
        return el._path_text
    pending = []
    node = el
    while node is not None and node._path_text is None and node.tag != "#root":
        pending.append(node)
        node = node.parent
    # Each element keeps its path (and how many segments it has): a child's is its
    # parent's plus one segment, less the outermost one past MAX_PATH_DEPTH (segments hold
    # no spaces, so " > " only ever separates them).
    text = None
    depth = 0
    if node is not None and node._path_text is not None:
        text = node._path_text
        depth = node._path_depth
    for node in reversed(pending):
        if text is None:
            text = _segment(node)
            depth = 1
        else:
            text = text + " > " + _segment(node)
            if depth == MAX_PATH_DEPTH:
                text = text[_find(text, " > ", 0) + 3:]
            else:
                depth += 1
        node._path_text = text
        node._path_depth = depth
    return text


# ---------------------------------------------------------------------------------------


def _empty(encoding, error, map_html="") -> SimplifiedPage:
    return SimplifiedPage(map_html=map_html, encoding=encoding, error=error)


def simplify(html: str | bytes | None, *, declared_charset: str | None = None,
             cutoff_length: int = CUTOFF_LENGTH) -> SimplifiedPage:
    """Segment a page into Pulpie blocks. Never raises on a page; failures give ``error``."""
    # An int in both builds (the compiled one types it): a float is a caller's bug, not a page's.
    cutoff_length = index(cutoff_length)
    # The tree is many small objects with parent links; letting the cyclic GC scan them
    # while they are built cost ~30% of the time. The cycles are broken before returning,
    # so reference counting frees the tree and nothing is left for the GC.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _simplify(html, declared_charset, cutoff_length)
    except Exception as exc:  # noqa: BLE001 - a page must never take the job down
        return _empty(None, "simplify_failed: %s: %s" % (type(exc).__name__, str(exc)[:200]))
    finally:
        if gc_was_enabled:
            gc.enable()


def _page_blocks(root: _El, post_order: list, tables: list, lists: list, cutoff_length: int):
    """Rules 3-7 on the tree: (blocks, their paths, inserts for the map HTML)."""
    _classify(post_order, tables, lists)
    paragraphs = _paragraphs(root)

    blocks: list[str] = []
    paths: list[str] = []
    inserts: list[tuple[int, str]] = []  # (offset * 4 + order, text) spliced into the map
    seen_runs: set = set()
    start_tags: dict = {}
    for kind, el, items, run_start, run_end in paragraphs:
        if el.tag in _UNWRAPPABLE:
            continue
        if kind == "block":
            text, kids, no_tail = el.text, el.children, None
        else:
            kids = [i for i in items if not isinstance(i, str)]
            if kids:
                # Text before the first element is the copy's text; later strings are the
                # elements' own (unstripped) tails, which the copy keeps.
                leading = items[:items.index(kids[0])]
                text = " ".join(leading) if leading else None
            else:
                text = " ".join(items)
                # The reference de-duplicates paragraphs by their HTML, which carries a
                # per-node uuid: only text-only runs of the same parent ever coincide.
                key = (id(el), text)
                if key in seen_runs:
                    continue
                seen_runs.add(key)
            last = items[-1]
            no_tail = last if not isinstance(last, str) and last.tag == "br" else None
        if el.tag == "body":
            # What the reference's fragment parse makes of a copy of <body>: its one
            # child element when there is exactly one and no text around it, else nothing.
            if (text and text.strip()) or len(kids) != 1:
                continue
            kid = kids[0]
            tail = None if kid is no_tail else kid.tail
            if tail and tail.strip():
                continue
            kind, el = "block", kid
            text, kids, no_tail = kid.text, kid.children, None
        item_id = str(len(blocks) + 1)
        html = _render(el, text, kids, None if kind == "block" else no_tail, item_id, cutoff_length,
                       start_tags)
        if html is None:
            continue
        if html is False:
            if kind == "block":
                copy = _copy(el)
                copy[_TAIL] = None
            else:
                copy = _run_copy(el, items)
            _truncate(copy, cutoff_length)
            html = _serialize(copy, item_id)
        blocks.append(html)
        paths.append(_path_of(el))
        # Insert keys are offset * 4 + order: at one offset a wrapper's end tag (0) comes
        # before an _item_id attribute (1), which comes before a wrapper's start tag (2).
        if kind == "block" and el.tag in _SWALLOWING:
            # In the page these are void and what the block holds are their siblings.
            inserts.append(((el.name_end - len(el.tag) - 1) * 4 + 2, _WRAPPER_START + item_id + '">'))
            inserts.append((el.close_start * 4, _WRAPPER_END))
        elif kind == "block":
            inserts.append((el.name_end * 4 + 1, ' _item_id="' + item_id + '"'))
        else:
            inserts.append((run_start * 4 + 2, _WRAPPER_START + item_id + '">'))
            inserts.append((run_end * 4, _WRAPPER_END))

    return blocks, paths, inserts


def _simplify(html, declared_charset, cutoff_length) -> SimplifiedPage:
    if html is None:
        return _empty(None, reasons.HTML_EMPTY)
    if isinstance(html, (bytes, bytearray, memoryview)):
        html = bytes(html)
        text, encoding = decode_html(html, declared_charset)
    elif isinstance(html, str):
        text, encoding = html, None
    else:
        return _empty(None, "not_html: %s" % type(html).__name__)
    if not text or text.isspace():  # (isspace stops at the first visible character)
        return _empty(encoding, reasons.HTML_EMPTY)
    # lexbor reads UTF-8. Encoding the page here, as selectolax does with text (lone
    # surrogates dropped), lets the checks below scan bytes: one pass each, where a
    # one-byte search is a memchr (a str of 2- or 4-byte characters has no such path).
    # A page that decoded as UTF-8 without a BOM or a replaced byte (either would put a
    # U+FFFD in the text: a page's own U+FFFD only costs the encoding) already is the
    # encoded text: those bytes are used as they are.
    if encoding == "utf-8" and "\ufffd" not in text and not html.startswith(_UTF8_BOM):
        data = html
    else:
        data = text.encode("utf-8", "ignore")
    if b"\x00" in data:
        data = data.replace(b"\x00", _REPLACEMENT_UTF8)
    # A page's own private-use characters U+E000-U+E002 (UTF-8 EE 80 80-82) become U+FFFD,
    # as when the map marked runs with them: the output stays what it was. (The lead byte
    # EE is rare: U+E000-U+EFFF only.)
    if b"\xee" in data:
        for mark in _PRIVATE_MARKS_UTF8:
            data = data.replace(mark, _REPLACEMENT_UTF8)
    # Each start tag that needs an end tag takes a "<" that starts no "</": the difference
    # of the two counts bounds the depth, and spares most big pages the regex passes.
    # The one nesting bound of the package (guards.max_html_depth, PULPIE_MAX_HTML_DEPTH):
    # guard_page checks it too, and a direct call of simplify() must not parse past it.
    max_depth = max_html_depth()
    lt = _count_lt(data)
    if lt > max_depth and lt - _count_end_tag_starts(data) > max_depth and _nesting_depth(text) > max_depth:
        # HTML5 tree building is quadratic in nesting depth (scope checks walk the stack
        # of open elements): 20,000 levels take lexbor seconds, 100,000 minutes.
        return _empty(encoding, reasons.HTML_TOO_DEEP)
    # The parser's document (gone with the parser object) and the decoded text are freed
    # before the tree is built, the tree before the map is made: the next allocations
    # reuse that memory instead of growing the heap into new pages, which the kernel
    # zeroes on first touch (a third of this function's system time).
    serialized = LexborHTMLParser(data).html
    text = data = None
    if not serialized:
        return _empty(encoding, "unparseable_html")

    root, post_order, tables, lists = _build_tree(serialized)
    try:
        blocks, paths, inserts = _page_blocks(root, post_order, tables, lists, cutoff_length)
    finally:
        _release(root, post_order)  # also when a page fails
        root = post_order = tables = lists = None
    map_html = _splice(serialized, inserts)
    simplified = '<html><head><meta charset="utf-8"></head><body>' + "".join(blocks) + "</body></html>"
    return SimplifiedPage(
        blocks=blocks,
        paths=paths,
        simplified_html=simplified,
        map_html=map_html,
        encoding=encoding,
        error=None if blocks else reasons.NO_BLOCKS,
    )


_OPEN_NEEDING_END = re.compile(
    r"<(?!/|(?:area|base|br|col|embed|hr|img|input|link|meta|param|source|track|wbr|keygen|"
    r"basefont|bgsound|frame|image|isindex|p|li|dt|dd|td|th|tr|option|optgroup|thead|tbody|"
    r"tfoot|colgroup|caption|rb|rt|rp|rtc|html|head|body)[\s/>])[A-Za-z][^>]*(?<!/)>"
)  # "<path ... />" (SVG, MathML) closes itself; HTML ignores "/>" but rarely sees it
_CLOSE = re.compile(r"</[A-Za-z][^>]*>")
_NOT_MARK = re.compile(r"[^\x01\x02]+")


def _nesting_depth(text: str) -> int:
    """Upper estimate of element nesting (start tags that need an end tag, minus end tags),
    computed with regex substitutions and numpy so a normal page pays about a millisecond."""
    import numpy as np

    marks = _NOT_MARK.sub("", _CLOSE.sub("\x02", _OPEN_NEEDING_END.sub("\x01", text.replace("\x01", "").replace("\x02", ""))))
    if not marks:
        return 0
    steps = np.frombuffer(marks.encode("ascii"), dtype=np.uint8).astype(np.int32)
    steps = 3 - 2 * steps  # \x01 -> +1, \x02 -> -1
    return int(np.cumsum(steps).max())


def _count_lt(data: bytes) -> int:
    """``data.count(b"<")``, vectorized: bytes.count checks for its limit at every match
    and runs a byte at a time (1-2% of the time here on the dev pages)."""
    import numpy as np

    return int(np.count_nonzero(np.frombuffer(data, dtype=np.uint8) == 60))


def _count_end_tag_starts(data: bytes) -> int:
    """``data.count(b"</")``, vectorized (bytes.count runs a byte at a time for a two-byte
    pattern; "<" is not "/", so the matches cannot overlap)."""
    import numpy as np

    codes = np.frombuffer(data, dtype=np.uint8)
    return int(np.count_nonzero((codes[:-1] == 60) & (codes[1:] == 47)))


# A stable sort on int keys (list.sort compares those without the generic protocol):
# inserts with the same offset and order keep the order they were made in.
_INSERT_KEY = itemgetter(0)


def _release(root: _El, post_order: list) -> None:
    """Break the tree's parent/context cycles (see simplify): reference counting frees it."""
    for el in post_order:
        el.parent = None
        if el.context is not None:
            el.context = None
    root.children = _NO_CHILDREN


def _splice(serialized: str, inserts) -> str:
    if not inserts:
        return serialized
    inserts.sort(key=_INSERT_KEY)
    if cython.compiled:
        # One copy into a string of the final size: no slice objects, no second copy by
        # join (the page is the largest string made here). The inserts are ASCII, so the
        # page's widest character decides the width.
        size = len(serialized)
        for key, text in inserts:
            size += len(text)
        out = PyUnicode_New(size, PyUnicode_MAX_CHAR_VALUE(serialized))
        last = 0
        pos = 0
        for key, text in inserts:
            offset = key >> 2
            pos += PyUnicode_CopyCharacters(out, pos, serialized, last, offset - last)
            pos += PyUnicode_CopyCharacters(out, pos, text, 0, len(text))
            last = offset
        PyUnicode_CopyCharacters(out, pos, serialized, last, len(serialized) - last)
        return out
    parts = []
    last = 0
    for key, text in inserts:
        offset = key >> 2
        parts.append(serialized[last:offset])
        parts.append(text)
        last = offset
    parts.append(serialized[last:])
    return "".join(parts)


_TAGS = re.compile(r"<[^>]*>")


def block_text(block_html: str) -> str:
    """Visible text of one block: tags removed, entities decoded, whitespace collapsed."""
    import html as _html

    if not block_html:
        return ""
    return _WS.sub(" ", _html.unescape(_TAGS.sub("", block_html))).strip()
