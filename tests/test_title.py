"""The ``title`` column: og:title, twitter:title, a lone <h1>, <title>, the first <h1> (segment/title.py)."""

from __future__ import annotations

from pulpie_spark.extractor import Extractor
from pulpie_spark.page import segment_page
from pulpie_spark.segment.title import TITLE_MAX_CHARS, clean_title, page_title

BODY = "<p>Quarks may become deconfined under extreme conditions and exist as free particles.</p>"


def title_of(head: str, body: str = BODY) -> str | None:
    """The title segment_page gives a page (through lexbor's serialization, as in the pipeline)."""
    return segment_page(f"<html><head>{head}</head><body>{body}</body></html>")["title"]


def test_og_title_first_with_entities_decoded():
    head = ('<title>Quark matter | Physics Daily</title>'
            "<meta content='Quark &amp; gluon \"matter\"' property='og:title'>"
            '<meta name="twitter:title" content="Twitter headline">')
    assert title_of(head, "<h1>Visible headline</h1>" + BODY) == 'Quark & gluon "matter"'


def test_twitter_title_when_there_is_no_og_title():
    head = '<title>Quark matter | Physics Daily</title><meta name="twitter:title" content=" Twitter  headline ">'
    assert title_of(head) == "Twitter headline"


def test_an_empty_og_title_falls_through():
    assert title_of('<meta property="og:title" content="  "><title>Page title</title>') == "Page title"


def test_a_lone_h1_before_the_title_element():
    assert title_of("<title>Quark matter | Physics Daily</title>",
                    "<h1>Quark <span>matter</span>  explained</h1>" + BODY) == "Quark matter explained"


def test_several_h1s_give_the_title_element_then_the_first_h1():
    body = "<h1>Physics Daily</h1><h1>Quark matter</h1>" + BODY
    assert title_of("<title>Quark matter | Physics Daily</title>", body) == "Quark matter | Physics Daily"
    assert title_of("", body) == "Physics Daily"


def test_svg_titles_script_text_and_body_meta_do_not_count():
    body = ('<svg><title>an icon</title></svg><meta property="og:title" content="in the body">'
            '<script>document.title = "<title>scripted</title>";</script>' + BODY)
    assert title_of("", body) is None
    assert title_of("<title>Real</title>", body) == "Real"


def test_a_title_after_body_content_is_found_in_the_body():
    # HTML parsing puts a <title> that follows content (here a stray custom element, as on some
    # GBK blog pages of chinese_wce) into the body: it is still the page's title.
    html = ("<text id='x'>\n<title>海姑娘 | blog.wenxuecity.com</title><meta property='og:x' content='y'>"
            "<svg><title>icon</title></svg>" + BODY)
    seg = segment_page(html)
    assert "<title>" in seg["map_html"][seg["map_html"].find("<body"):]   # lexbor did move it
    assert seg["title"] == "海姑娘 | blog.wenxuecity.com"
    body = "<script>var t = '<title>scripted</title>';</script><div>x</div><title>Die Überschrift</title>" + BODY
    assert title_of("", body) == "Die Überschrift"


def test_a_page_without_blocks_still_has_its_title():
    seg = segment_page("<html><head><title>Only a title</title></head><body> </body></html>")
    assert seg["seg_error"] == "no_blocks" and seg["title"] == "Only a title"
    assert segment_page(None)["title"] is None and segment_page(b"")["title"] is None


def test_one_line_cut_to_the_limit():
    assert clean_title("a\x00b\x1fc\n\td &#1; e") == "a b c d e"
    assert clean_title("  ") is None and clean_title(None) is None
    long = "word " * 1000
    assert len(clean_title(long)) <= TITLE_MAX_CHARS and clean_title(long).endswith("word")


def test_unclosed_title_tags_give_none_not_a_crash():
    head = "<title" * 10_000
    assert page_title(f"<html><head>{head}</head><body></body></html>") is None
    assert page_title("<html><head><titles>no</titles></head><body></body></html>") is None
    assert page_title(None) is None and page_title("") is None
    stuffed = "<script>" + "og:title " * 100_000 + "</script>" + '<meta property="og:title" content="late">'
    assert page_title(f"<html><head>{stuffed}</head><body></body></html>") is None   # past the tries
    assert page_title('<html><head><meta property="og:title" content="x"></head><body></body></html>') == "x"


class EverythingIsMain:
    model_id = "test/everything"

    def predict_proba(self, pages, paths=None):
        return [[1.0] * len(blocks) for blocks in pages]


class NothingIsMain(EverythingIsMain):
    def predict_proba(self, pages, paths=None):
        return [[0.0] * len(blocks) for blocks in pages]


def test_extractor_gives_the_title_on_the_model_path_and_from_the_fallback():
    html = ('<html><head><title>Quark matter | Physics Daily</title></head><body><h1>Quark matter</h1>'
            + BODY * 4 + "</body></html>")
    served = Extractor(classifier=EverythingIsMain(), fallback="none").extract(html)
    assert served.title == "Quark matter" and not served.fallback_used
    rescued = Extractor(classifier=NothingIsMain(), fallback="trafilatura").extract(html)
    assert rescued.fallback_used and rescued.title == "Quark matter"
