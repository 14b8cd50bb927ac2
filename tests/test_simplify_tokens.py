"""Segmentation of markup that the tokenizer of lexbor's serialization has to get right:
raw-text elements holding "<", comments holding ">", processing instructions, upper-case
markup, removed elements inside hidden ones. Expected blocks are pulpie 0.0.2's output on
the same input (run in benchmarks/.venv-pulpie, see benchmarks/segment_vs_reference.py)."""

from __future__ import annotations

import re

import pytest
from selectolax.lexbor import LexborHTMLParser

from pulpie_spark.segment.simplify import block_text, simplify

CASES = {
    "processing_instruction_is_not_text": (
        "<html><body><div><p>before</p><p><?php current_book(); ?> after</p></div></body></html>",
        ['<p _item_id="1">before</p>', '<p _item_id="2"> after</p>'],
    ),
    "script_with_lt_and_an_unclosed_comment": (
        ("<body><div><p>one</p><script>if (a<b) { x = '<!--'; }</script>tail gone"
         "<p>two &amp; <b>three</b></p></div></body>"),
        ['<p _item_id="1">one</p>', '<p _item_id="2">two &amp; <b>three</b></p>'],
    ),
    "comments_with_gt_and_markup_between_text": (
        "<body><div>alpha <!-- a > b --> beta<p>gamma</p> delta <!-- <p>not</p> --> epsilon</div></body>",
        ['<div _item_id="1">alpha beta</div>', '<p _item_id="2">gamma</p>',
         '<div _item_id="3">delta epsilon</div>'],
    ),
    "upper_case_markup_and_attributes": (
        ('<BODY><DIV CLASS="Main Part" ID="c1"><P STYLE="color: red">Hi <A HREF="/x">there</A></P>'
         '<IMG SRC="/a b.png" ALT="pic"></DIV></BODY>'),
        ['<p _item_id="1">Hi <a>there</a></p>',
         '<div class="Main Part" id="c1" _item_id="2"><img src="/a%20b.png" alt="pic"></div>'],
    ),
    "removed_element_inside_a_hidden_one": (
        ('<body><div><p>k</p><div style="display:none"><script>var s="</div>";</script>hid</div>'
         "tail stays<nav><p>n</p></nav>nav tail<span>end</span></div></body>"),
        ['<p _item_id="1">ktail stays</p>', '<div _item_id="2"><span>end</span></div>'],
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_blocks_match_the_reference(name):
    html, expected = CASES[name]
    assert simplify(html).blocks == expected


_MARK = re.compile(r'<([A-Za-z][^\s/>]*) _item_id="(\d+)"')


@pytest.mark.parametrize("name", sorted(CASES))
def test_map_ids_sit_on_the_blocks_they_name(name):
    """Every id in the map is spliced into the start tag of the element its block copies,
    or into a wrapper around the run (which in the map also holds what the run's copy
    left out, such as removed elements); without the ids and wrappers the map is lexbor's
    serialization of the page, byte for byte."""
    html, _ = CASES[name]
    page = simplify(html)
    marks = {int(n): tag for tag, n in _MARK.findall(page.map_html)}
    assert sorted(marks) == list(range(1, len(page.blocks) + 1))
    for n, block in enumerate(page.blocks, 1):
        block_tag = re.match(r"<([a-z0-9-]+)", block).group(1)
        if marks[n] == "cc-alg-uc-text":
            start = page.map_html.index(f'<cc-alg-uc-text _item_id="{n}">')
            end = page.map_html.index("</cc-alg-uc-text>", start)
            wrapped = block_text(page.map_html[start:end])
            assert all(word in wrapped for word in block_text(block).split())
        else:
            assert marks[n].lower() == block_tag
    plain = re.sub(r' _item_id="\d+"|<cc-alg-uc-text>|</cc-alg-uc-text>', "",
                   re.sub(r'<cc-alg-uc-text _item_id="\d+">', "", page.map_html))
    assert plain == LexborHTMLParser(html).html
