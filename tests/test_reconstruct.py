"""Main HTML from the map HTML and labels."""

from __future__ import annotations

import random

import numpy as np
import pytest
from selectolax.lexbor import LexborHTMLParser

from pulpie_spark.render.markdown import html_to_markdown, html_to_text
from pulpie_spark.render.reconstruct import ITEM_ID_ATTR, WRAPPER_TAG, main_html, render_main
from pulpie_spark.segment.simplify import block_text, simplify

# The example of block-format.md; its blocks are checked in tests/test_simplify.py.
from helpers_data import EXAMPLE  # noqa: E402


def test_main_blocks_keep_their_ancestors_and_drop_the_rest():
    page = simplify(EXAMPLE)
    html = main_html(page.map_html, [0, 1, 1, 1, 1, 1, 1, 0])
    assert "<article id=\"post\">" in html  # ancestor kept with its attributes
    assert "<h1>Hello</h1>" in html
    assert 'style="color:red" data-x="1"' in html  # original attributes come back
    assert "loose tail text <span>span</span><br>more" in html
    assert "<table>" in html and '<img src="http://x/y.png?a=1&amp;b=2"' in html
    for gone in ("Home", "sidebar", "(c) 2025", "<nav", "<footer", "hidden"):
        assert gone not in html
    assert "_item_id" not in html and "cc-alg-uc-text" not in html


def test_main_blocks_inside_a_hidden_container_are_rendered():
    # es/ABC pages in fundus: the article body after its first paragraph sits in
    # <div class="paywall" hidden>; the classifier labels those blocks main.
    page = simplify('<body><article><p>First paragraph here.</p>'
                    '<div class="paywall" hidden><p>Second paragraph <span hidden>sr-only</span> here.</p>'
                    '<p style="display: none !important">Third, hidden by its own style.</p></div>'
                    '<aside hidden><p>Not main.</p></aside></article></body>')
    texts = [block_text(b) for b in page.blocks]
    assert texts[:3] == ["First paragraph here.", "Second paragraph sr-only here.", "Third, hidden by its own style."]
    html, markdown, text = render_main(page.map_html, [1, 1, 1, 0])
    assert text.split("\n\n") == ["First paragraph here.", "Second paragraph here.", "Third, hidden by its own style."]
    assert markdown.count("paragraph") == 2
    assert 'class="paywall"' in html and " hidden" not in html.split("<span")[0]
    assert "<span hidden" in html              # hidden inside a main block stays hidden
    assert "Not main" not in html
    # nothing main inside the hidden container: nothing of it
    assert render_main(page.map_html, [1, 0, 0, 0])[2] == "First paragraph here."


def test_one_run_only():
    page = simplify(EXAMPLE)
    html = main_html(page.map_html, [0, 0, 0, 0, 1, 0, 0, 0])
    assert "more" in html
    assert "Hello" not in html and "loose tail" not in html and "<table" not in html


def test_br_next_to_kept_content_is_kept():
    page = simplify("<body><div><p>one</p><br><p>two</p><br><p>three</p></div></body>")
    assert [block_text(b) for b in page.blocks] == ["one", "two", "three"]
    html = main_html(page.map_html, [0, 1, 0])
    assert "<br><p>two</p><br>" in html
    assert "one" not in html and "three" not in html


def test_nothing_main_or_empty_input():
    page = simplify(EXAMPLE)
    assert main_html(page.map_html, [0] * 8) == ""
    assert main_html("", [1]) == ""
    assert main_html(page.map_html, []) == ""
    assert main_html("<html><body><p>no ids</p></body></html>", [1, 1]) == ""


def test_labels_as_numpy_and_extra_labels():
    page = simplify(EXAMPLE)
    labels = np.array([0, 1, 0, 0, 0, 0, 0, 0, 1, 1], dtype=np.int64)  # extras ignored
    html = main_html(page.map_html, labels)
    assert "<h1>Hello</h1>" in html and "Some" not in html


def test_every_block_can_be_rebuilt(data_dir):
    page = simplify((data_dir / "md_wcxb_dev_0541.html").read_bytes())
    everything = main_html(page.map_html, [1] * len(page.blocks))
    rebuilt = simplify(everything)
    assert [block_text(b) for b in rebuilt.blocks] == [block_text(b) for b in page.blocks]
    for i, block in enumerate(page.blocks):
        labels = [0] * len(page.blocks)
        labels[i] = 1
        text = block_text(main_html(page.map_html, labels))
        # Shortened lists and cut text end in "..."; what comes before is in the page.
        assert block_text(block).split("...")[0][:40].strip() in text


def test_deep_map_does_not_recurse():
    depth = 3_000
    page = simplify("<div>" * depth + "<p>deep</p><p>other</p>" + "</div>" * depth)
    html = main_html(page.map_html, [1, 0])
    assert "deep" in html and "other" not in html


def _walk_main_html(map_html, labels):
    """main_html as first written: the <br> rule applied by a walk over every element
    (pairs of neighbours in document order), kept as the reference for the br lookup."""
    main_ids = {str(i + 1) for i, label in enumerate(labels) if int(label) == 1}
    doc = LexborHTMLParser(map_html)
    root = doc.root
    firsts = {}
    for node in doc.css(f"[{ITEM_ID_ATTR}]"):
        iid = node.attributes.get(ITEM_ID_ATTR)
        if iid in main_ids and iid not in firsts:
            firsts[iid] = node
    if not firsts:
        return ""
    whole, ancestors = set(), set()
    for node in firsts.values():
        if node.mem_id in whole:
            continue
        for inner in node.traverse(include_text=False):
            whole.add(inner.mem_id)
        up = node.parent
        while up is not None and up.mem_id not in ancestors:
            ancestors.add(up.mem_id)
            up = up.parent
    previous = None
    for node in root.traverse(include_text=False):
        if previous is not None:
            mid, pid = node.mem_id, previous.mem_id
            if node.tag == "br" and previous.tag != "br" and (pid in whole or pid in ancestors):
                whole.add(mid)
            elif previous.tag == "br" and node.tag != "br" and (mid in whole or mid in ancestors):
                whole.add(pid)
        previous = node
    doomed, stack = [], [root]
    while stack:
        node = stack.pop()
        after_removed = False
        for child in node.iter(include_text=True):
            if child.is_element_node:
                if child.mem_id in whole:
                    after_removed = False
                elif child.mem_id in ancestors:
                    after_removed = False
                    stack.append(child)
                else:
                    doomed.append(child)
                    after_removed = True
            elif child.is_comment_node or (after_removed and child.is_text_node):
                doomed.append(child)
    for node in doomed:
        node.decompose()
    for node in root.css(f"[{ITEM_ID_ATTR}]"):
        del node.attrs[ITEM_ID_ATTR]
    root.unwrap_tags([WRAPPER_TAG])
    return root.html or ""


BR_PAGES = [
    "<body><div><p>one</p><br><p>two</p><br><br><p>three</p></div></body>",
    "<body><div><br><p>a</p><div><p>b</p><br></div><br>t<br><div><br><p>c</p></div></div></body>",
    "<body><p>x<br>y<br></p><!-- c --><br><section><div><p>z</p></div></section><br><br></body>",
    "<body><ul><li>one<br></li><li><br>two</li></ul><br><table><tr><td>c<br>d</td></tr></table><br></body>",
]


def _label_patterns(n):
    rng = random.Random(n)
    return ([1] * n, [i % 2 for i in range(n)], [int(i % 3 == 1) for i in range(n)],
            [rng.randint(0, 1) for _ in range(n)], [rng.randint(0, 1) for _ in range(n)])


def _fixture_maps(data_dir):
    maps = [simplify(html).map_html for html in BR_PAGES + [EXAMPLE]]
    maps += [simplify(path.read_bytes()).map_html for path in sorted(data_dir.glob("*.html"))]
    return maps


def test_br_lookup_keeps_what_a_walk_over_every_element_keeps(data_dir):
    compared = 0
    for map_html in _fixture_maps(data_dir):
        n = map_html.count(ITEM_ID_ATTR + "=")
        for labels in _label_patterns(n):
            assert main_html(map_html, labels) == _walk_main_html(map_html, labels)
            compared += 1
    assert compared >= 60


@pytest.mark.parametrize("links", [False, True])
def test_render_main_renders_what_parsing_the_main_html_renders(data_dir, links):
    for map_html in _fixture_maps(data_dir):
        n = map_html.count(ITEM_ID_ATTR + "=")
        for labels in _label_patterns(n):
            main = main_html(map_html, labels)
            assert render_main(map_html, labels, links=links, images=links) == (
                main, html_to_markdown(main, links=links, images=links), html_to_text(main))
    assert render_main("", [1]) == ("", "", "")
    assert render_main(simplify(EXAMPLE).map_html, [0] * 8) == ("", "", "")
