"""Main HTML from the map HTML and labels."""

from __future__ import annotations

import numpy as np

from pulpie_spark.reconstruct import main_html
from pulpie_spark.simplify import block_text, simplify

# The example of block-format.md; its blocks are checked in tests/test_simplify.py.
from test_simplify import EXAMPLE  # noqa: E402


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
