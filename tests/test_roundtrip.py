"""Round trip on real pages: simplify -> every block main -> main_html -> html_to_text
keeps every word a reader sees on the page.

The visible words are computed independently of the pipeline: selectolax text of the
original page after removing what docs/block-format.md removes (``title head style
script link meta iframe frame nav`` together with the text right after them, as the
reference segmentation does, inline-style-hidden elements, ``[hidden]``, the closed part
of ``<details>``), what a browser does not show as text (``noscript template svg select
option textarea``), and the inline content directly under ``<body>`` (the reference
segmentation never makes a block of it).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from selectolax.lexbor import LexborHTMLParser

from pulpie_spark.render.markdown import html_to_markdown, html_to_text
from pulpie_spark.render.reconstruct import main_html
from pulpie_spark.segment.simplify import simplify

DATA = Path(__file__).resolve().parent / "data"
PAGES = sorted(DATA.glob("md_*.html"))

_REMOVED_WITH_TAIL = "title head style script link meta iframe frame nav".split()
_NOT_SHOWN = "noscript template svg select option textarea".split()
_INLINE = frozenset(
    """a abbr acronym b basefont bdo big blink br button cite code dfn em font i img input kbd
    label map mark nobr object optgroup option pic q s samp script small span strike strong
    sub sup svg time u var""".split()
)
_HIDDEN_STYLE = re.compile(
    r"display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:\s*0(?:px)?\s*(?:;|$)"
    r"|color\s*:\s*transparent|opacity\s*:\s*0\s*(?:;|$)",
    re.I,
)
_WORD = re.compile(r"\w+")


def visible_words(html: str) -> list[str]:
    tree = LexborHTMLParser(html)
    for node in tree.css(",".join(_REMOVED_WITH_TAIL)):
        tail = node.next
        if tail is not None and tail.is_text_node:
            tail.decompose()
        node.decompose()
    for node in tree.css(",".join(_NOT_SHOWN)):
        node.decompose()
    for node in tree.css("[style],[hidden]"):
        if "hidden" in node.attributes or _HIDDEN_STYLE.search(node.attributes.get("style") or ""):
            node.decompose()
    for details in tree.css("details:not([open])"):
        for child in list(details.iter(include_text=True)):
            if child.tag != "summary":
                child.decompose()
    body = tree.body
    if body is None:
        return []
    for child in list(body.iter(include_text=True)):
        if child.is_text_node or child.tag in _INLINE:
            child.decompose()
    return _WORD.findall(body.text(separator=" "))


def missing_words(reference: list[str], text: str) -> dict[str, int]:
    """Reference words not in ``text``. The reference separates every text node, so a
    word split by inline markup (``<span>A</span>pple``) counts as held when it is part
    of a longer word of the output."""
    output = _WORD.findall(text)
    missing = Counter(reference) - Counter(output)
    longer = {token for token in output if len(token) > 1}
    return {
        word: count for word, count in missing.items()
        if not any(word in token and word != token for token in longer)
    }


@pytest.fixture(scope="module", params=PAGES, ids=[p.stem for p in PAGES])
def page(request):
    html = request.param.read_bytes().decode("utf-8", errors="replace")
    simplified = simplify(html)
    assert simplified.error is None, simplified.error
    main = main_html(simplified.map_html, [1] * simplified.n_blocks)
    return html, main


def test_fixture_pages_exist():
    assert len(PAGES) >= 5


def test_text_holds_every_visible_word(page):
    html, main = page
    reference = visible_words(html)
    assert len(reference) > 200
    text = html_to_text(main)
    assert missing_words(reference, text) == {}


def test_markdown_holds_every_visible_word(page):
    html, main = page
    markdown = html_to_markdown(main, links=True, images=True)
    # Markdown escapes are backslashes before punctuation; links/images add URLs only.
    unescaped = re.sub(r"\\([\\`*_#>+\-.)|\[\]=~!])", r"\1", markdown)
    assert missing_words(visible_words(html), unescaped) == {}


def test_text_has_no_markdown_markup(page):
    _, main = page
    text = html_to_text(main)
    assert "```" not in text
    assert not re.search(r"^(#{1,6} |> |- |\| )", text, re.M)
