"""Main HTML -> Markdown and plain text.

``html_to_markdown`` and ``html_to_text`` render the main-content HTML that
``reconstruct.main_html`` rebuilds (or any HTML) into text for pretraining.
Both share one renderer: selectolax (Lexbor) parses, and one iterative walk with
an explicit stack of frames turns the DOM into blocks (paragraphs, headings,
lists, tables, code, math, quotes). No recursion over the DOM, so 100,000-deep
nesting costs the walk what a flat page of the same size costs. (Lexbor's own parse
of deeply nested *block* tags such as ``<div>`` is quadratic - about 1 s for 20,000
levels - which the per-page deadline of ``guards`` bounds.)

Why the walk looks the way it does:

* Transparent elements (``span``, ``div``, unknown tags such as the
  ``cc-alg-uc-text`` wrappers of map HTML) never build strings of their own: they
  share their parent's part list (block elements add a paragraph break marker).
  Only structures that must rewrite their content (lists, quotes, tables,
  headings, emphasis, links, code) own a buffer, and beyond ``MAX_NESTING`` such
  levels they degrade to transparent, so no input makes the work quadratic.
* Markdown escaping is minimal (the text is for language-model pretraining):
  text is escaped only where it would otherwise turn into formatting - ``*`` and
  ``_`` that could open or close emphasis, backticks, and block markers (``#``,
  ``>``, ``-``/``+``/``*``, ``1.``, thematic breaks, setext underlines, ``~~~``)
  at the start of a line.
* Whitespace is collapsed the way a browser collapses it, except inside ``<pre>``.
* Math becomes TeX: the TeX annotation of MathML (also inside KaTeX, MathJax 3 and
  MediaWiki markup), else ``alttext``, else presentation MathML converted to TeX
  (scripts, fractions, roots, accents, matrices); MathJax 2 ``script[type^=math/tex]``
  and pandoc's ``span.math`` give their source; ``$...$`` inline, ``$$...$$`` display.
* What a reader does not see is not rendered: ``script style noscript template
  head nav svg select`` and elements hidden by inline style or ``hidden`` (the
  inline-style rules of docs/block-format.md), except math sources
  (``script[type^=math/tex]``, the hidden MathML of MediaWiki/KaTeX), which are
  what the page shows as formulas. (The main HTML of ``reconstruct.render_main`` no
  longer carries these markers on a block labelled main or its containers: the
  classifier's decision holds at block level; inside a block they apply.)
"""

from __future__ import annotations

import re

from selectolax.lexbor import LexborHTMLParser

__all__ = ["html_to_markdown", "html_to_text", "node_to_markdown", "node_to_text", "MAX_NESTING"]

# Lists, quotes, tables, headings and inline markup nested deeper than this render as
# plain transparent containers (their text stays, their extra indentation does not).
MAX_NESTING = 24
# Beyond this many list/quote levels, content is no longer indented further.
MAX_INDENT_LEVELS = 10
# Column / row spans above this are treated as this (a colspan="1000" spacer cell
# must not make a 1000-column table).
MAX_SPAN = 64

# --- element classes ---------------------------------------------------------------

_SKIP_TAGS = frozenset(
    """script style noscript template head title meta link base iframe frame frameset
    noframes nav svg select datalist option optgroup textarea input
    audio video canvas map area embed param source track rp""".split()
)
_BLOCK_TAGS = frozenset(
    """address article aside body center details dialog dir div fieldset figure
    figcaption footer form header hgroup html legend main menu search section summary
    p""".split()
)
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_BOLD_TAGS = frozenset({"b", "strong"})
_ITALIC_TAGS = frozenset({"i", "em", "cite", "dfn", "var"})
_CODE_TAGS = frozenset({"code", "kbd", "samp", "tt"})
_MATH_WRAPPER_TAGS = frozenset({"span", "div", "mjx-container", "p"})
_GUTTER_CLASSES = frozenset(
    {"gutter", "linenos", "lineno", "line-numbers", "hljs-ln-numbers", "line-number"}
)
_TEX_ENCODINGS = frozenset(
    {"application/x-tex", "tex", "application/x-latex", "text/x-tex", "text/latex", "latex"}
)

# Frame kinds.
(
    _ROOT,
    _SHARED_INLINE,
    _SHARED_BLOCK,
    _HEADING,
    _LIST,
    _LI,
    _QUOTE,
    _PRE,
    _PRE_BLOCK,
    _CODE,
    _BOLD,
    _ITALIC,
    _LINK,
    _TABLE,
    _TR,
    _CELL,
    _CAPTION,
    _DL,
    _DT,
    _DD,
    _TSECTION,
) = range(21)

# Paragraph break marker in a part list (shared block elements add it around themselves).
_BREAK = ("break",)

# --- regular expressions -------------------------------------------------------------

_WS = re.compile(r"[ \t\n\r\f]+")
# Spaces that must not end up inside emphasis markers or at a paragraph's edges
# (no-break and zero-width spaces are invisible there).
_EDGE_SPACE = " \n\xa0\u200b"
_SPACES = re.compile(r" {2,}")
_SPACES_AROUND_NL = re.compile(r" *\n *")
_MANY_NL = re.compile(r"\n{3,}")
_BACKTICK_RUN = re.compile(r"`+")
# `*` can open or close emphasis unless it stands between two spaces.
_STAR = re.compile(r"(?<! )\*|\*(?! )")
# `_` can only open or close emphasis at a word boundary (intraword `_` is literal).
_UNDERSCORE = re.compile(r"(?<![^\W_])_(?! )|(?<! )_(?![^\W_])")
_LINE_MARKER = re.compile(r"(#{1,6}|[+*-]|\d{1,9}[.)])(?=[ \t]|$)")
_THEMATIC_OR_SETEXT = re.compile(r"(?:(?:[*_-][ \t]*){3,}|=+[ \t]*|-+[ \t]*)$")
_HIDDEN_STYLE = re.compile(
    r"(?:^|;)\s*(?:display\s*:\s*none|visibility\s*:\s*hidden|color\s*:\s*transparent"
    r"|font-size\s*:\s*0(?:\.0*)?(?:px|pt|em|rem|%)?\s*(?:!important\s*)?(?:;|$)"
    r"|opacity\s*:\s*0(?:\.0*)?\s*(?:!important\s*)?(?:;|$))",
    re.I,
)
_LANG_PREFIXES = ("language-", "lang-", "highlight-source-", "highlight-", "brush:")
_LANG_NAME = re.compile(r"[a-z0-9_+#.-]{1,32}")
_LANG_IGNORE = frozenset(
    {"", "default", "none", "nohighlight", "plain", "plaintext", "text", "notranslate",
     "hljs", "highlight", "sourcecode", "code", "pre", "prettyprint", "linenums"}
)
_TEX_DELIMS = ((r"\(", r"\)"), (r"\[", r"\]"), ("$$", "$$"), ("$", "$"))


class _Ctx:
    """Inherited rendering context; shared by reference until an element changes it."""

    __slots__ = ("pre", "code", "bold", "italic", "link", "flat", "cell", "thead",
                 "lists", "quotes", "depth", "pre_frame")

    def __init__(self):
        self.pre = False  # inside <pre>: whitespace kept, no markup
        self.code = False  # inside inline code: no escaping, no markup
        self.bold = False
        self.italic = False
        self.link = False  # inside link text (Markdown with links on)
        self.flat = False  # heading or caption: one line, no emphasis
        self.cell = False  # table cell: no line-start escaping
        self.thead = False
        self.lists = 0  # list nesting level
        self.quotes = 0  # blockquote nesting level
        self.depth = 0  # structures owning a buffer (see MAX_NESTING)
        self.pre_frame = None  # the <pre> frame (its code language is found late)

    def but(self, **changes) -> "_Ctx":
        new = _Ctx.__new__(_Ctx)
        new.pre, new.code, new.bold, new.italic = self.pre, self.code, self.bold, self.italic
        new.link, new.flat, new.cell, new.thead = self.link, self.flat, self.cell, self.thead
        new.lists, new.quotes, new.pre_frame = self.lists, self.quotes, self.pre_frame
        new.depth = self.depth + 1  # every changed context belongs to a structure
        for name, value in changes.items():
            setattr(new, name, value)
        return new


class _Frame:
    __slots__ = ("kind", "node", "next", "parts", "ctx", "info")

    def __init__(self, kind, node, parts, ctx, info=None):
        self.kind = kind
        self.node = node
        self.next = node.first_child
        self.parts = parts
        self.ctx = ctx
        self.info = info


# --- public API ----------------------------------------------------------------------


def html_to_markdown(html: str, *, links: bool = False, images: bool = False) -> str:
    """Markdown of ``html``: headings, paragraphs, lists, pipe tables, fenced code,
    ``$``/``$$`` math, quotes, emphasis; ``[text](href)`` links and ``![alt](src)``
    images only when asked (otherwise link text is kept and images are dropped).

    Returns ``""`` for empty, ``None`` or unparsable input; never raises on content.
    """
    return _Renderer(markdown=True, links=links, images=images).render(html)


def html_to_text(html: str) -> str:
    """Plain text of the same content as ``html_to_markdown``, without markup:
    paragraphs separated by blank lines, one line per list item, table rows as
    tab-separated cells, code verbatim, math as its TeX source."""
    return _Renderer(markdown=False, links=False, images=False).render(html)


def node_to_markdown(node, *, links: bool = False, images: bool = False) -> str:
    """``html_to_markdown`` of an already parsed selectolax (Lexbor) node, normally a
    document's ``body``: what ``html_to_markdown`` renders after its own parse."""
    return _Renderer(markdown=True, links=links, images=images).render_node(node)


def node_to_text(node) -> str:
    """``html_to_text`` of an already parsed selectolax (Lexbor) node."""
    return _Renderer(markdown=False, links=False, images=False).render_node(node)


# --- helpers ---------------------------------------------------------------------------


def hides_by_style(style: str | None) -> bool:
    """Whether an inline ``style`` value hides its element (display:none, opacity:0, ...)."""
    return bool(style) and _HIDDEN_STYLE.search(style) is not None


def _is_hidden(attrs: dict) -> bool:
    hidden = attrs.get("hidden", False)
    if hidden is not False and (hidden or "").lower() != "until-found":  # until-found: findable
        return True
    return hides_by_style(attrs.get("style"))


def _escape_inline(text: str) -> str:
    """Escape Markdown inline syntax in collapsed text, only where it would format."""
    if "`" in text:
        text = text.replace("`", "\\`")
    if "*" in text:
        text = _STAR.sub(r"\\*", text)
    if "_" in text:
        text = _UNDERSCORE.sub(r"\\_", text)
    return text


def _escape_line_start(line: str) -> str:
    if not line:
        return line
    first = line[0]
    if first == ">":
        return "\\" + line
    if first == "~" and line.startswith("~~~"):
        return "\\" + line
    if first in "#+-*=_" or first.isdigit():
        if first in "-*_=" and _THEMATIC_OR_SETEXT.match(line):
            return "\\" + line
        m = _LINE_MARKER.match(line)
        if m:
            marker = m.group(1)
            if marker[-1] in ".)":  # "1." -> "1\."
                return marker[:-1] + "\\" + line[len(marker) - 1 :]
            return "\\" + line
    return line


def _escape_line_starts(text: str) -> str:
    if "\n" not in text:
        return _escape_line_start(text)
    return "\n".join(_escape_line_start(line) for line in text.split("\n"))


def _code_span(content: str) -> str:
    longest = max((len(run) for run in _BACKTICK_RUN.findall(content)), default=0)
    fence = "`" * (longest + 1)
    if content.startswith("`") or content.endswith("`") or (
        content.startswith(" ") and content.endswith(" ") and content.strip(" ")
    ):
        content = " " + content + " "
    return fence + content + fence


def _code_block(code: str, lang: str) -> str:
    longest = max((len(run) for run in _BACKTICK_RUN.findall(code)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{code}\n{fence}"


def _language(class_strings: list) -> str:
    """Code language from highlighter class names (first match wins)."""
    for classes in class_strings:
        if not classes:
            continue
        tokens = classes.lower().replace(";", " ").split()
        for i, token in enumerate(tokens):
            for prefix in _LANG_PREFIXES:
                if token.startswith(prefix):
                    name = token[len(prefix):]
                    if not name and prefix == "brush:" and i + 1 < len(tokens):
                        name = tokens[i + 1]
                    name = name.strip(":;,")
                    if name not in _LANG_IGNORE and _LANG_NAME.fullmatch(name):
                        return name
        if "sourcecode" in tokens:  # pandoc: class="sourceCode python"
            for token in tokens:
                if token not in _LANG_IGNORE and _LANG_NAME.fullmatch(token):
                    return token
    return ""


def _strip_tex_delimiters(tex: str) -> tuple:
    """Remove \\( \\) / \\[ \\] / $ $ / $$ $$ around TeX; says whether it was display."""
    tex = tex.strip()
    for open_, close in _TEX_DELIMS:
        if tex.startswith(open_) and tex.endswith(close) and len(tex) >= len(open_) + len(close):
            return tex[len(open_) : len(tex) - len(close)].strip(), open_ in (r"\[", "$$")
    return tex, False


def _mathml_tex(math_node) -> str:
    """TeX of a MathML element: its TeX annotation, else ``alttext``, else its text."""
    for annotation in math_node.css("annotation"):
        encoding = (annotation.attributes.get("encoding") or "").strip().lower()
        if encoding in _TEX_ENCODINGS:
            tex = annotation.text(deep=True)
            if tex.strip():
                return tex.strip()
    alttext = (math_node.attributes.get("alttext") or "").strip()
    if alttext:
        return alttext
    return _mathml_to_tex(math_node)


_MATHML_TOKENS = frozenset({"mi", "mn", "mo", "mtext", "ms"})
_MATHML_SKIP = frozenset({"annotation", "annotation-xml", "mphantom", "none", "mprescripts"})
_TEX_FUNCTIONS = frozenset(
    "sin cos tan cot sec csc arcsin arccos arctan sinh cosh tanh log ln lg exp lim liminf "
    "limsup max min sup inf det dim ker gcd deg arg Pr".split()
)
_TEX_OPERATORS = {
    "\u2211": "\\sum", "\u220f": "\\prod", "\u222b": "\\int", "\u222e": "\\oint",
    "\u2264": "\\le", "\u2265": "\\ge", "\u2260": "\\ne", "\u00d7": "\\times",
    "\u22c5": "\\cdot", "\u00b7": "\\cdot", "\u2192": "\\to", "\u221e": "\\infty",
    "\u00b1": "\\pm", "\u2212": "-", "\u2208": "\\in", "\u2248": "\\approx",
    "\u2202": "\\partial", "\u2207": "\\nabla", "\u2061": "", "\u2062": "", "\u2063": "",
    "\u2064": "",
}
_TEX_ACCENTS = {"^": "\\hat", "\u02c6": "\\hat", "\u00af": "\\overline", "\u203e": "\\overline",
                "\u2192": "\\vec", "\u20d7": "\\vec", "~": "\\tilde", "\u02dc": "\\tilde",
                "\u02d9": "\\dot", ".": "\\dot", "\u00a8": "\\ddot", "\\to": "\\vec"}
# A letter right after a command or a one-character script would change its meaning
# (\alphax) or read badly (a^na_i): a space goes between.
_TEX_NEEDS_SPACE = re.compile(r"\\[A-Za-z]+$|[\^_][A-Za-z0-9]$")


def _tex_group(tex: str) -> str:
    tex = tex.strip()
    if len(tex) == 1 or re.fullmatch(r"\\[A-Za-z]+|[0-9]", tex):
        return tex
    return "{" + tex + "}"


def _tex_join(parts: list) -> str:
    out = ""
    for part in parts:
        if not part:
            continue
        if out and part[0].isalnum() and _TEX_NEEDS_SPACE.search(out):
            out += " "
        out += part
    return out


def _mathml_combine(tag: str, node, parts: list) -> str:
    if tag in _MATHML_TOKENS:
        text = _WS.sub(" ", "".join(parts)).strip()
        if tag == "mo":
            return _TEX_OPERATORS.get(text, text)
        if tag == "mi" and text in _TEX_FUNCTIONS:
            return "\\" + text
        if tag == "mtext":
            return "\\text{" + text + "}" if text else " "
        return text
    parts = [part for part in parts if part is not None]
    if tag == "mspace":
        return " "
    if tag in ("msup", "msub", "mfrac", "mroot", "mover", "munder") and len(parts) == 2:
        base, script = parts
        if tag == "msup":
            return _tex_group(base) + "^" + _tex_group(script)
        if tag == "msub":
            return _tex_group(base) + "_" + _tex_group(script)
        if tag == "mfrac":
            return "\\frac{" + base.strip() + "}{" + script.strip() + "}"
        if tag == "mroot":
            return "\\sqrt[" + script.strip() + "]{" + base.strip() + "}"
        if tag == "mover":
            accent = _TEX_ACCENTS.get(script.strip())
            if accent:
                return accent + "{" + base.strip() + "}"
            return "\\overset{" + script.strip() + "}{" + base.strip() + "}"
        if base.startswith("\\") or base in _TEX_FUNCTIONS:  # \sum, \lim: limits below
            return base + "_" + _tex_group(script)
        return "\\underset{" + script.strip() + "}{" + base.strip() + "}"
    if tag in ("msubsup", "munderover") and len(parts) == 3:
        return _tex_group(parts[0]) + "_" + _tex_group(parts[1]) + "^" + _tex_group(parts[2])
    if tag == "msqrt":
        return "\\sqrt{" + _tex_join(parts).strip() + "}"
    if tag == "mfenced":
        attrs = node.attributes
        opening = attrs.get("open", "(")
        closing = attrs.get("close", ")")
        separator = (attrs.get("separators") or ",").strip()[:1]
        return opening + separator.join(parts) + closing
    if tag == "mtable":
        return "\\begin{matrix}" + " \\\\ ".join(parts) + "\\end{matrix}"
    if tag in ("mtr", "mlabeledtr"):
        return " & ".join(parts[1:] if tag == "mlabeledtr" else parts)
    return _tex_join(parts)


def _mathml_to_tex(math_node) -> str:
    """TeX of presentation MathML (fractions, scripts, roots, accents, matrices, fences),
    built bottom-up with an explicit stack."""
    stack = [[math_node, math_node.first_child, [], True]]
    while stack:
        frame = stack[-1]
        child = frame[1]
        if child is None:
            stack.pop()
            node = frame[0]
            tex = _mathml_combine(node.tag, node, frame[2])
            if not stack:
                return _WS.sub(" ", tex).strip()
            stack[-1][2].append(tex)
            continue
        frame[1] = child.next
        tag = child.tag
        if tag == "-text":
            if frame[3] or (child.text_content or "").strip():
                frame[2].append(child.text_content or "")
        elif tag[0] != "-" and tag not in _MATHML_SKIP:
            stack.append([child, child.first_child, [], tag in _MATHML_TOKENS])
    return ""


def _url(url: str) -> str:
    url = url.strip()
    for char, code in ((" ", "%20"), ("(", "%28"), (")", "%29"), ("<", "%3C"), (">", "%3E"),
                       ("\n", ""), ("\r", ""), ("\t", "")):
        if char in url:
            url = url.replace(char, code)
    return url


def _bracket_text(text: str) -> str:
    return text.replace("[", "\\[").replace("]", "\\]")


def _flatten(text: str) -> str:
    return _WS.sub(" ", text).strip()


# --- renderer --------------------------------------------------------------------------


class _Renderer:
    def __init__(self, *, markdown: bool, links: bool, images: bool):
        self.md = markdown
        self.links = links and markdown
        self.images = images and markdown

    # -- entry ------------------------------------------------------------------------

    def render(self, html) -> str:
        if html is None:
            return ""
        if isinstance(html, (bytes, bytearray, memoryview)):
            html = bytes(html).decode("utf-8", errors="replace")
        if not isinstance(html, str):
            raise TypeError(f"html must be str or bytes, not {type(html).__name__}")
        if not html.strip():
            return ""
        try:
            tree = LexborHTMLParser(html)
        except Exception:  # selectolax refuses input above its size limit
            return ""
        return self.render_node(tree.body or tree.root)

    def render_node(self, root) -> str:
        if root is None:
            return ""
        frame = _Frame(_ROOT, root, [], _Ctx())
        self._walk(frame)
        blocks = self._blocks(frame.parts, line_escape=True)
        text = "\n\n".join(block[1] for block in blocks if block[1])
        return text

    # -- walk ---------------------------------------------------------------------------

    def _walk(self, root_frame: _Frame) -> None:
        stack = [root_frame]
        while stack:
            frame = stack[-1]
            node = frame.next
            if node is None:
                stack.pop()
                if stack:
                    self._finish(frame, stack[-1].parts)
                continue
            frame.next = node.next
            tag = node.tag
            if tag == "-text":
                self._text(frame, node.text_content)
            elif not tag:  # a node lexbor cannot name: keep what it holds
                stack.append(_Frame(_SHARED_INLINE, node, frame.parts, frame.ctx))
            elif tag[0] != "-" and tag not in _SKIP_TAGS or tag == "script":
                child = self._open(frame, node, tag)
                if child is not None:
                    stack.append(child)

    def _text(self, frame: _Frame, text) -> None:
        if not text:
            return
        ctx = frame.ctx
        if ctx.pre:
            frame.parts.append(text)
            return
        # Most text nodes need no collapsing; the substitution is the walk's costliest call.
        if "\n" in text or "  " in text or "\t" in text or "\r" in text or "\f" in text:
            text = _WS.sub(" ", text)
        if self.md and not ctx.code and text != " ":
            text = _escape_inline(text)
            if ctx.link:
                text = _bracket_text(text)
        frame.parts.append(text)

    def _open(self, frame: _Frame, node, tag: str):
        """Handle an element: emit a leaf, or return the frame that walks its children."""
        ctx = frame.ctx
        parts = frame.parts
        attrs = node.attributes
        if tag == "script":
            kind = (attrs.get("type") or "").lower()
            if kind.startswith("math/tex"):
                self._math(parts, ctx, (node.text(deep=True) or "").strip(), "mode=display" in kind)
            return None
        if attrs:
            if _is_hidden(attrs) and tag != "math":
                return None
            classes = attrs.get("class")
            if classes and ("ath" in classes or "tex" in classes or "katex" in classes
                            or tag == "mjx-container"):
                math = self._math_wrapper(node, tag, classes, attrs)
                if math is not None:
                    if math is not False:
                        self._math(parts, ctx, *math)
                    return None
        if tag == "br":
            parts.append("\n" if not ctx.flat else " ")
            return None
        if tag == "math":
            display = (attrs.get("display") or attrs.get("mode") or "").lower() in ("block", "display")
            self._math(parts, ctx, _mathml_tex(node), display)
            return None
        if tag == "img":
            self._image(parts, ctx, attrs)
            return None
        if tag == "wbr":
            return None

        # Inside <pre>: keep text as is; blocks only start new lines.
        if ctx.pre:
            if tag in _CODE_TAGS and ctx.pre_frame.info[1] is None:
                ctx.pre_frame.info[1] = attrs.get("class") or ""
            if tag in _BLOCK_TAGS or tag in ("li", "tr", "dt", "dd", "h1", "h2", "h3", "h4",
                                              "h5", "h6", "table", "ul", "ol", "dl", "pre"):
                if parts and not parts[-1].endswith("\n"):
                    parts.append("\n")
                return _Frame(_PRE_BLOCK, node, parts, ctx)
            return _Frame(_SHARED_INLINE, node, parts, ctx)

        nested_ok = ctx.depth < MAX_NESTING
        if tag in _BLOCK_TAGS:
            parts.append(_BREAK)
            return _Frame(_SHARED_BLOCK, node, parts, ctx)
        level = _HEADINGS.get(tag)
        if level is not None:
            if ctx.flat or not nested_ok:
                parts.append(_BREAK)
                return _Frame(_SHARED_BLOCK, node, parts, ctx)
            return _Frame(_HEADING, node, [], ctx.but(flat=True), level)
        if tag in ("ul", "ol", "menu", "dir"):
            if not nested_ok or ctx.flat:
                parts.append(_BREAK)
                return _Frame(_SHARED_BLOCK, node, parts, ctx.but(lists=ctx.lists + 1))
            return _Frame(_LIST, node, [], ctx.but(lists=ctx.lists + 1))
        if tag == "li":
            if not nested_ok or ctx.flat:
                parts.append(_BREAK)
                return _Frame(_SHARED_BLOCK, node, parts, ctx)
            return _Frame(_LI, node, [], ctx.but(), attrs.get("value"))
        if tag == "blockquote":
            if not nested_ok or ctx.flat:
                parts.append(_BREAK)
                return _Frame(_SHARED_BLOCK, node, parts, ctx)
            return _Frame(_QUOTE, node, [], ctx.but(quotes=ctx.quotes + 1))
        if tag == "pre" or tag in ("listing", "xmp", "plaintext"):
            classes = [attrs.get("class") or ""]
            parent = node.parent
            for _ in range(2):
                if parent is None:
                    break
                classes.append(parent.attributes.get("class") or "")
                parent = parent.parent
            info = [classes, None]
            frame_ctx = ctx.but(pre=True)
            new = _Frame(_PRE, node, [], frame_ctx, info)
            frame_ctx.pre_frame = new
            return new
        if tag == "hr":
            if self.md and not ctx.flat and not ctx.cell:
                parts.append(("hr", "---"))
            else:
                parts.append(_BREAK)
            return None
        if tag in ("table",):
            if not nested_ok or ctx.flat:
                parts.append(_BREAK)
                return _Frame(_SHARED_BLOCK, node, parts, ctx)
            return _Frame(_TABLE, node, [], ctx.but(thead=False))
        if tag in ("thead", "tbody", "tfoot"):
            if frame.kind == _TABLE:
                return _Frame(_TSECTION, node, parts, ctx.but(thead=(tag == "thead")))
            parts.append(_BREAK)
            return _Frame(_SHARED_BLOCK, node, parts, ctx)
        if tag == "tr":
            if frame.kind == _TABLE or frame.kind == _TSECTION:
                return _Frame(_TR, node, [], ctx.but())
            parts.append(_BREAK)
            return _Frame(_SHARED_BLOCK, node, parts, ctx)
        if tag in ("td", "th"):
            if frame.kind == _TR:
                if _has_class_word(attrs.get("class"), _GUTTER_CLASSES):
                    return None
                return _Frame(_CELL, node, [], ctx.but(cell=True),
                              (tag == "th", attrs.get("colspan"), attrs.get("rowspan")))
            parts.append(_BREAK)
            return _Frame(_SHARED_BLOCK, node, parts, ctx)
        if tag == "caption":
            if frame.kind == _TABLE:
                return _Frame(_CAPTION, node, [], ctx.but(flat=True))
            parts.append(_BREAK)
            return _Frame(_SHARED_BLOCK, node, parts, ctx)
        if tag == "dl":
            if not nested_ok or ctx.flat:
                parts.append(_BREAK)
                return _Frame(_SHARED_BLOCK, node, parts, ctx)
            return _Frame(_DL, node, [], ctx.but())
        if tag in ("dt", "dd"):
            if frame.kind == _DL and nested_ok:
                if tag == "dt":
                    return _Frame(_DT, node, [], ctx.but(flat=True))
                return _Frame(_DD, node, [], ctx.but(lists=ctx.lists + 1))
            parts.append(_BREAK)
            return _Frame(_SHARED_BLOCK, node, parts, ctx)

        # Inline elements.
        if not self.md or ctx.code:
            return _Frame(_SHARED_INLINE, node, parts, ctx)
        if tag in _CODE_TAGS:
            return _Frame(_CODE, node, [], ctx.but(code=True))
        if tag in _BOLD_TAGS and not ctx.bold and not ctx.flat:
            return _Frame(_BOLD, node, [], ctx.but(bold=True))
        if tag in _ITALIC_TAGS and not ctx.italic and not ctx.flat:
            return _Frame(_ITALIC, node, [], ctx.but(italic=True))
        if tag == "a" and self.links and not ctx.link:
            href = (attrs.get("href") or "").strip()
            if href and not href.startswith("#") and not href.lower().startswith("javascript:"):
                return _Frame(_LINK, node, [], ctx.but(link=True), href)
        return _Frame(_SHARED_INLINE, node, parts, ctx)

    # -- leaves -------------------------------------------------------------------------

    def _math_wrapper(self, node, tag: str, classes: str, attrs: dict):
        """(tex, display) for a math wrapper element, False to drop it, None if not math."""
        words = classes.split()
        if tag == "img":
            if "tex" in words or "latex" in words or "math" in words:
                alt = (attrs.get("alt") or "").strip()
                if alt:
                    tex, display = _strip_tex_delimiters(alt)
                    return tex, display or "displaymath" in words
            return None
        if tag not in _MATH_WRAPPER_TAGS and not tag.startswith("mjx-"):
            return None
        if "katex-display" in words or "katex" in words or "mwe-math-element" in words:
            math = node.css_first("math")
            display = "katex-display" in words or "mwe-math-element-block" in words
            if math is not None:
                display = display or (math.attributes.get("display") or "") == "block"
                return _mathml_tex(math), display
            return None
        if tag == "mjx-container":
            math = node.css_first("math")
            display = (attrs.get("display") or "").lower() == "true"
            if math is not None:
                return _mathml_tex(math), display or (math.attributes.get("display") == "block")
            return False
        if "katex-html" in words:  # KaTeX's visual copy; the source is in katex-mathml
            return False
        if "MathJax_Preview" in words:
            return False
        if any(word.startswith("MathJax") for word in words):
            # MathJax 2 renders next to <script type="math/tex">, which holds the source.
            sibling = node.next
            while sibling is not None and sibling.tag == "-text":
                sibling = sibling.next
            if (sibling is not None and sibling.tag == "script"
                    and (sibling.attributes.get("type") or "").lower().startswith("math/tex")):
                return False
            math = node.css_first("math")
            if math is not None:
                return _mathml_tex(math), "MathJax_Display" in words
            return None
        if "math" in words and ("inline" in words or "display" in words):
            tex, delimited_display = _strip_tex_delimiters(node.text(deep=True) or "")
            return tex, "display" in words or delimited_display
        return None

    def _math(self, parts: list, ctx: _Ctx, tex: str, display: bool) -> None:
        tex = tex.strip()
        if not tex:
            return
        if not self.md:
            if display and not ctx.flat and not ctx.pre:
                parts.append(("math", tex))
            else:
                parts.append(tex)
            return
        if ctx.pre or ctx.code:
            parts.append(tex)
        elif display and not ctx.flat and not ctx.cell:
            parts.append(("math", f"$$\n{tex}\n$$"))
        else:
            parts.append(f"${_WS.sub(' ', tex)}$")

    def _image(self, parts: list, ctx: _Ctx, attrs: dict) -> None:
        if not self.images or ctx.pre or ctx.code:
            return
        src = ""
        for name in ("src", "data-src", "data-lazy-src", "data-original"):
            value = (attrs.get(name) or "").strip()
            if value and not value.startswith("data:"):
                src = value
                break
        if not src:
            return
        alt = _bracket_text(_flatten(attrs.get("alt") or ""))
        parts.append(f"![{alt}]({_url(src)})")

    # -- finishing frames -----------------------------------------------------------------

    def _finish(self, frame: _Frame, out: list) -> None:
        kind = frame.kind
        if kind == _SHARED_INLINE or kind == _TSECTION:
            return
        if kind == _SHARED_BLOCK:
            out.append(_BREAK)
            return
        if kind == _PRE_BLOCK:
            parts = frame.parts
            if parts and not parts[-1].endswith("\n"):
                parts.append("\n")
            return
        parts = frame.parts
        ctx = frame.ctx
        if kind in (_BOLD, _ITALIC, _LINK, _CODE):
            self._finish_inline(frame, out)
        elif kind == _HEADING:
            text = self._flat_text(parts)
            if text:
                out.append(("h", ("#" * frame.info + " " + text) if self.md else text))
        elif kind == _LIST:
            self._finish_list(frame, out)
        elif kind == _LI:
            out.append(("li", self._blocks(parts, line_escape=True), frame.info))
        elif kind == _QUOTE:
            blocks = self._blocks(parts, line_escape=True)
            if not blocks:
                return
            if not self.md:
                out.extend(blocks)
                return
            inner = "\n\n".join(block[1] for block in blocks)
            if ctx.quotes > MAX_INDENT_LEVELS:
                out.append(("quote", inner))
            else:
                out.append(("quote", "\n".join(("> " + line) if line else ">"
                                               for line in inner.split("\n"))))
        elif kind == _PRE:
            self._finish_pre(frame, out)
        elif kind == _TABLE:
            self._finish_table(frame, out)
        elif kind == _TR:
            cells = [part for part in parts if type(part) is tuple and part[0] == "cell"]
            out.append(("row", cells, ctx.thead))
        elif kind == _CELL:
            is_th, colspan, rowspan = frame.info
            out.append(("cell", self._blocks(parts, line_escape=False), _span(colspan),
                        _span(rowspan), is_th))
        elif kind == _CAPTION:
            text = self._flat_text(parts)
            if text:
                out.append(("caption", text))
        elif kind == _DL:
            self._finish_dl(frame, out)
        elif kind == _DT:
            text = self._flat_text(parts)
            if text:
                out.append(("dt", text))
        elif kind == _DD:
            out.append(("dd", self._blocks(parts, line_escape=True)))

    def _finish_inline(self, frame: _Frame, out: list) -> None:
        parts = frame.parts
        if any(type(part) is not str for part in parts):
            out.extend(parts)  # blocks inside: the markup cannot wrap them
            return
        text = "".join(parts)
        kind = frame.kind
        if kind == _CODE:
            content = _SPACES.sub(" ", text)
            if "\n" in content.strip(" \n"):  # <code> with <br>: a code block
                code = "\n".join(line.strip() for line in content.strip(" \n").split("\n"))
                out.append(("code", _code_block(code, _language([frame.node.attributes.get("class")]))))
                return
            content = content.replace("\n", " ")
            if not content.strip(" "):
                if content:
                    out.append(" ")
                return
            out.append(_code_span(content))
            return
        # Markers must touch the text ("** x **" is not bold): edge spaces go outside.
        core = text.strip(_EDGE_SPACE)
        if not core:
            if text:
                out.append(text if "\n" in text else " ")
            return
        lead = text[: len(text) - len(text.lstrip(_EDGE_SPACE))]
        trail = text[len(text.rstrip(_EDGE_SPACE)) :]
        if kind == _BOLD:
            core = f"**{core}**"
        elif kind == _ITALIC:
            core = f"*{core}*"
        else:
            core = f"[{core}]({_url(frame.info)})"
        out.append(lead + core + trail)

    def _finish_list(self, frame: _Frame, out: list) -> None:
        node = frame.node
        ordered = node.tag == "ol"
        attrs = node.attributes
        start = _int(attrs.get("start"), 1)
        step = -1 if "reversed" in attrs else 1
        items = self._list_items(frame.parts)
        if not items:
            return
        if ordered and step == -1 and attrs.get("start") is None:
            start = len(items)
        out.append(("list", self._render_list(items, ordered, start, step, frame.ctx.lists)))

    def _list_items(self, parts: list) -> list:
        """(blocks, value) per item; stray content joins the previous item or its own."""
        items = []
        stray = []

        def flush_stray():
            if stray:
                blocks = self._blocks(stray, line_escape=True)
                stray.clear()
                if blocks:
                    if items:
                        items[-1][0].extend(blocks)
                    else:
                        items.append((blocks, None))

        for part in parts:
            if type(part) is tuple and part[0] == "li":
                flush_stray()
                items.append((part[1], part[2]))
            else:
                stray.append(part)
        flush_stray()
        return items

    def _render_list(self, items: list, ordered: bool, start: int, step: int, level: int) -> str:
        lines = []
        number = start
        indent_ok = level <= MAX_INDENT_LEVELS
        for blocks, value in items:
            if value is not None:
                number = _int(value, number)
            marker = f"{number}. " if ordered else "- "
            number += step
            if not blocks:
                continue
            if not self.md:
                lines.append("\n".join(block[1] for block in blocks))
                continue
            text = self._join_item(blocks)
            if indent_ok and "\n" in text:
                pad = " " * len(marker)
                text = "\n".join((pad + line) if line else "" for line in text.split("\n"))
                lines.append(marker + text[len(pad):])
            else:
                lines.append(marker + text)
        return "\n".join(lines)

    @staticmethod
    def _join_item(blocks: list) -> str:
        pieces = [blocks[0][1]]
        for previous, block in zip(blocks, blocks[1:]):
            tight = previous[0] == "list" or block[0] == "list"
            pieces.append("\n" if tight else "\n\n")
            pieces.append(block[1])
        return "".join(pieces)

    def _finish_pre(self, frame: _Frame, out: list) -> None:
        code = "".join(part for part in frame.parts if type(part) is str)
        code = code.replace("\r\n", "\n").replace("\r", "\n").strip("\n").rstrip()
        if not code.strip():
            return
        if not self.md:
            out.append(("code", code))
            return
        classes, code_classes = frame.info
        lang = _language([code_classes] + classes)
        out.append(("code", _code_block(code, lang)))

    def _finish_dl(self, frame: _Frame, out: list) -> None:
        lines = []
        stray = []
        for part in frame.parts:
            if type(part) is tuple and part[0] in ("dt", "dd"):
                if stray:
                    # The blocks are made before the generator: Cython 3.3 emits C that does not
                    # compile for a generator expression over a C method's result (markdown.pxd).
                    blocks = self._blocks(stray, line_escape=True)
                    lines.extend(block[1] for block in blocks)
                    stray = []
                if part[0] == "dt":
                    lines.append(part[1])
                else:
                    text = "\n".join(block[1] for block in part[1])
                    if text and self.md:
                        text = ": " + text.replace("\n", "\n  ")
                    if text:
                        lines.append(text)
            else:
                stray.append(part)
        if stray:
            blocks = self._blocks(stray, line_escape=True)
            lines.extend(block[1] for block in blocks)
        if lines:
            out.append(("dl", "\n".join(lines)))

    def _finish_table(self, frame: _Frame, out: list) -> None:
        rows = []
        caption = None
        other = []
        for part in frame.parts:
            if type(part) is tuple:
                if part[0] == "row":
                    rows.append(part)
                elif part[0] == "caption":
                    caption = part[1]
                elif part is not _BREAK:
                    other.append(part)
            # Loose text in a table is whitespace (the parser moves real text out).
        if other:
            out.extend(self._blocks(other, line_escape=True))
        if caption:
            out.append(("p", caption))
        grid = _grid(rows)
        if not grid:
            return
        width = max(len(cells) for cells, _ in grid)
        if width <= 1 or _is_layout(grid):
            # A layout table: its cells are page regions, not data.
            for cells, _ in grid:
                for cell in cells:
                    if cell is not None:
                        out.extend(cell[1])
            return
        rendered = []
        for cells, is_head in grid:
            texts = [_cell_text(cell) for cell in cells]
            if not any(texts):
                continue
            texts += [""] * (width - len(texts))
            rendered.append((texts, is_head))
        if not rendered:
            return
        if not self.md:
            out.append(("table", "\n".join("\t".join(t.replace("\t", " ") for t in texts)
                                           for texts, _ in rendered)))
            return
        # The header is the first thead row, else the first row.
        header_index = next((i for i, (_, is_head) in enumerate(rendered) if is_head), 0)
        header = rendered[header_index][0]
        body = [texts for i, (texts, _) in enumerate(rendered) if i != header_index]
        lines = [_pipe_row(header), "| " + " | ".join(["---"] * width) + " |"]
        lines.extend(_pipe_row(texts) for texts in body)
        out.append(("table", "\n".join(lines)))

    # -- blocks -----------------------------------------------------------------------------

    def _flat_text(self, parts: list) -> str:
        pieces = []
        for part in parts:
            if type(part) is str:
                pieces.append(part)
            elif part is _BREAK:
                pieces.append(" ")
            else:
                pieces.append(" " + _block_text(part) + " ")
        return _WS.sub(" ", "".join(pieces)).strip()

    def _paragraph(self, run: list, line_escape: bool) -> str:
        text = "".join(run)
        if "\n" in text:
            text = _SPACES_AROUND_NL.sub("\n", text)
        if "  " in text:
            text = _SPACES.sub(" ", text)
        text = text.strip(_EDGE_SPACE)
        if "\n\n\n" in text:
            text = _MANY_NL.sub("\n\n", text)
        if self.md and line_escape and text:
            text = _escape_line_starts(text)
        return text

    def _blocks(self, parts: list, line_escape: bool) -> list:
        """Final (kind, text) blocks of a part list: text runs become paragraphs,
        consecutive list items become a list, table pieces out of place their text."""
        blocks = []
        run = []
        items = []
        for part in parts:
            if type(part) is str:
                run.append(part)
                continue
            if run:
                text = self._paragraph(run, line_escape)
                run = []
                if text:
                    if items:
                        blocks.append(("list", self._render_list(items, False, 1, 1, 1)))
                        items = []
                    blocks.append(("p", text))
            if part is _BREAK:
                continue
            kind = part[0]
            if kind == "li":
                items.append((part[1], part[2]))
                continue
            if items:
                blocks.append(("list", self._render_list(items, False, 1, 1, 1)))
                items = []
            if kind == "cell" or kind == "dd":
                blocks.extend(part[1])
            elif kind == "row":
                for cell in part[1]:
                    blocks.extend(cell[1])
            elif kind in ("caption", "dt"):
                blocks.append(("p", part[1]))
            else:
                blocks.append(part)
        if run:
            text = self._paragraph(run, line_escape)
            if text:
                if items:
                    blocks.append(("list", self._render_list(items, False, 1, 1, 1)))
                    items = []
                blocks.append(("p", text))
        if items:
            blocks.append(("list", self._render_list(items, False, 1, 1, 1)))
        return blocks


# --- table helpers -------------------------------------------------------------------------


def _has_class_word(classes, words: frozenset) -> bool:
    return bool(classes) and not words.isdisjoint(classes.split())


def _int(value, default: int) -> int:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return default


def _span(value) -> int:
    return min(max(_int(value, 1), 1), MAX_SPAN) if value is not None else 1


def _grid(rows: list) -> list:
    """Rows of cells with colspan/rowspan expanded (spanned slots hold None)."""
    grid = []
    pending = {}  # column -> rows still covered by a rowspan from above
    for _, cells, is_head in rows:
        expanded = []
        column = 0

        def fill_pending():
            nonlocal column
            while pending.get(column, 0) > 0:
                pending[column] -= 1
                expanded.append(None)
                column += 1

        fill_pending()
        for cell in cells:
            fill_pending()
            colspan, rowspan = cell[2], cell[3]
            expanded.append(cell)
            for offset in range(colspan):
                if rowspan > 1:
                    pending[column + offset] = rowspan - 1
                if offset:
                    expanded.append(None)
            column += colspan
        fill_pending()
        if expanded:
            grid.append((expanded, is_head))
    return grid


def _is_layout(grid: list) -> bool:
    for cells, _ in grid:
        for cell in cells:
            if cell is None:
                continue
            blocks = cell[1]
            if len(blocks) > 3:
                return True
            for block in blocks:
                if block[0] in ("h", "table", "quote", "code"):
                    return True
    return False


def _block_text(block) -> str:
    """Text of a finished block or of a list item / cell / row / definition piece."""
    kind = block[0]
    if kind == "break":
        return ""
    if kind in ("cell", "dd", "li"):
        return " ".join(_block_text(b) for b in block[1])
    if kind == "row":
        return " ".join(_block_text(cell) for cell in block[1])
    return block[1]


def _cell_text(cell) -> str:
    if cell is None:
        return ""
    text = " ".join(block[1] for block in cell[1])
    return _WS.sub(" ", text).strip()


def _pipe_row(texts: list) -> str:
    return "| " + " | ".join(text.replace("|", "\\|") for text in texts) + " |"
