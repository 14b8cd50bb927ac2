"""The Python API: Extractor over simplify -> classifier -> reconstruct -> Markdown."""

from __future__ import annotations

import numpy as np
import pytest

from pulpie_spark.classify.base import probs_to_labels
from pulpie_spark.extractor import Extraction, Extractor
from pulpie_spark.segment.simplify import block_text, simplify

ARTICLE = """<html><head><title>t</title></head><body>
<nav><a href="/">Home</a> <a href="/about">About</a></nav>
<div class="menu"><p>Menu entry one</p></div>
<article><h1>Quark matter</h1>
<p>Under extreme conditions quarks may become <b>deconfined</b> and exist as free particles.</p>
<p>This phase of matter is called quark-gluon plasma. It filled the early universe for a few
microseconds after the Big Bang, before the quarks were bound into protons and neutrons.</p></article>
<footer><p>Copyright 2025 Example</p></footer></body></html>"""


class KeywordClassifier:
    """Labels a block main when its text mentions quarks: tests wiring, not a model."""

    model_id = "test/keyword"

    def __init__(self, fail_on: str | None = None):
        self.calls = 0
        self.fail_on = fail_on

    def predict_proba(self, pages, paths=None):
        self.calls += 1
        if self.fail_on and any(self.fail_on in b for page in pages for b in page):
            raise RuntimeError("cannot classify")
        return [np.array([0.9 if "quark" in block_text(b).lower() else 0.1 for b in page],
                         dtype=np.float32) for page in pages]

    def predict(self, pages, paths=None):
        return probs_to_labels(self.predict_proba(pages, paths))


class NothingIsMain(KeywordClassifier):
    def predict_proba(self, pages, paths=None):
        return [np.zeros(len(p), dtype=np.float32) for p in pages]


@pytest.fixture(scope="module")
def real_page(data_dir):
    return (data_dir / "cls_daringfireball-1.html").read_bytes()


def test_public_import():
    import pulpie_spark

    assert pulpie_spark.Extractor is Extractor


def test_extract_keeps_main_blocks_only():
    result = Extractor(classifier=KeywordClassifier()).extract(ARTICLE)
    blocks = simplify(ARTICLE).blocks
    assert isinstance(result, Extraction)
    assert result.n_blocks == len(blocks) == len(result.labels)
    expected = [int("quark" in block_text(b).lower()) for b in blocks]
    assert result.labels == expected and result.n_main == sum(expected) >= 2
    assert "deconfined" in result.markdown and "quark-gluon plasma" in result.markdown
    assert "**deconfined**" in result.markdown and "**" not in result.text
    assert "Menu entry" not in result.markdown and "Copyright" not in result.markdown
    assert "deconfined" in result.html and "Copyright" not in result.html
    assert result.model_id == "test/keyword" and result.error is None and not result.fallback_used


def test_batch_is_one_model_call_and_keeps_order(real_page):
    classifier = KeywordClassifier()
    extractor = Extractor(classifier=classifier)
    inputs = [ARTICLE, None, "", real_page, ARTICLE.encode("utf-8")]
    results = extractor.extract_batch(inputs)
    assert classifier.calls == 1
    assert len(results) == len(inputs)
    assert results[0].labels == results[4].labels and results[0].markdown == results[4].markdown
    assert results[1].error and results[1].n_blocks == 0 and results[1].labels == []
    assert results[2].n_blocks == 0 and results[2].markdown == ""
    assert results[3].n_blocks == len(simplify(real_page).blocks) > 10
    single = [extractor.extract(x) for x in inputs]
    assert [r.labels for r in single] == [r.labels for r in results]


def test_failing_page_gets_error_others_survive():
    extractor = Extractor(classifier=KeywordClassifier(fail_on="Copyright"))
    results = extractor.extract_batch([ARTICLE, "<html><body><p>quark soup recipe</p></body></html>"])
    assert results[0].error.startswith("classify:error:")
    assert results[1].error is None and "quark soup" in results[1].markdown


def test_trafilatura_fallback_on_empty_output(real_page):
    plain = Extractor(classifier=NothingIsMain(), fallback="none").extract(real_page)
    assert plain.markdown == "" and not plain.fallback_used and plain.n_main == 0
    rescued = Extractor(classifier=NothingIsMain(), fallback="trafilatura").extract(real_page)
    assert rescued.fallback_used and rescued.fallback_reason == "empty_output"
    assert "Daring Fireball is written and produced by John Gruber" in rescued.text
    assert rescued.markdown.strip() and rescued.error is None
    assert rescued.labels == plain.labels   # the model's labels are still reported


def test_resiliparse_fallback_gives_its_main_text_as_both_outputs(real_page):
    from pulpie_spark.render.fallback import resiliparse_main_text
    from pulpie_spark.segment.decode import decode_html

    html = real_page if isinstance(real_page, str) else decode_html(bytes(real_page))[0]
    rescued = Extractor(classifier=NothingIsMain(), fallback="resiliparse").extract(real_page)
    by_trafilatura = Extractor(classifier=NothingIsMain(), fallback="trafilatura").extract(real_page)
    assert rescued.fallback_used and rescued.fallback_reason == "empty_output" and rescued.error is None
    assert rescued.text == rescued.markdown == resiliparse_main_text(html)
    assert "Daring Fireball is written and produced by John Gruber" in rescued.text
    assert rescued.text != by_trafilatura.text
    # a page where resiliparse finds nothing either: the model path's reason and the fallback's
    empty = Extractor(classifier=NothingIsMain(), fallback="resiliparse").extract(
        "<html><body><nav><a href='/'>Home</a></nav></body></html>")
    assert not empty.fallback_used and empty.text == "" and "fallback_empty" in (empty.error or "")


class FirstShortBlockIsMain(KeywordClassifier):
    """Main: the first block with a few words only, so the page's text is short."""

    def predict_proba(self, pages, paths=None):
        out = []
        for page in pages:
            probs = np.zeros(len(page), dtype=np.float32)
            sizes = [len(block_text(b).split()) for b in page]
            probs[next(i for i, n in enumerate(sizes) if 2 <= n <= 12)] = 0.9
            out.append(probs)
        return out


def test_short_output_goes_to_the_fallback_and_stays_where_the_fallback_finds_nothing(real_page, monkeypatch):
    """A text under SHORT_OUTPUT_CHARS non-space characters is the fallback's (reason
    short_output; labels still the model's); where the fallback finds nothing, the model's
    short text stays, without an error, as for an unsure page."""
    from pulpie_spark import reasons
    from pulpie_spark.page import SHORT_OUTPUT_CHARS, non_space_chars
    from pulpie_spark.render import fallback as fallback_module

    plain = Extractor(classifier=FirstShortBlockIsMain(), fallback="none").extract(real_page)
    assert plain.n_main == 1 and 0 < non_space_chars(plain.text) < SHORT_OUTPUT_CHARS
    rescued = Extractor(classifier=FirstShortBlockIsMain(), fallback="trafilatura").extract(real_page)
    assert rescued.fallback_used and rescued.fallback_reason == reasons.FALLBACK_SHORT_OUTPUT
    assert rescued.text == fallback_module.trafilatura_extract(real_page).text and rescued.error is None
    assert rescued.labels == plain.labels
    long_enough = Extractor(classifier=KeywordClassifier(), fallback="trafilatura").extract(ARTICLE)
    assert not long_enough.fallback_used and non_space_chars(long_enough.text) >= SHORT_OUTPUT_CHARS

    monkeypatch.setattr(fallback_module, "trafilatura_extract",
                        lambda html, **_: fallback_module.FallbackResult("", "", reasons.FALLBACK_EMPTY))
    kept = Extractor(classifier=FirstShortBlockIsMain(), fallback="trafilatura").extract(real_page)
    assert not kept.fallback_used and kept.fallback_reason == reasons.FALLBACK_SHORT_OUTPUT
    assert (kept.text, kept.markdown, kept.error) == (plain.text, plain.markdown, None)


def test_fallback_on_page_without_blocks_records_reason():
    html = "<html><body><script>var x = 1;</script></body></html>"
    result = Extractor(classifier=KeywordClassifier(), fallback="trafilatura").extract(html)
    assert result.n_blocks == 0 and result.fallback_reason in {"no_blocks", "error"}
    assert not result.fallback_used and "fallback" in result.error   # trafilatura found nothing either


def test_bad_fallback_name():
    with pytest.raises(ValueError):
        Extractor(classifier=KeywordClassifier(), fallback="readability")


def test_extractor_with_real_tiny_model(tmp_path, real_page):
    pytest.importorskip("torch")
    from helpers_models import save_tiny_classifier

    directory = save_tiny_classifier(tmp_path / "tiny", seed=5)
    extractor = Extractor(model=str(directory), device="cpu", max_tokens=64)
    results = extractor.extract_batch([real_page, ARTICLE])
    again = extractor.extract_batch([real_page, ARTICLE])
    for result, repeat in zip(results, again):
        assert result.error is None and result.model_id == str(directory)
        assert len(result.labels) == result.n_blocks > 0 and set(result.labels) <= {0, 1}
        assert result.labels == repeat.labels and result.markdown == repeat.markdown
    assert [extractor.extract(real_page).labels] == [results[0].labels]


def test_fallback_text_is_trafilatura_txt_from_one_extraction(real_page, monkeypatch):
    import trafilatura

    from pulpie_spark.segment.decode import decode_html
    from pulpie_spark.render.fallback import trafilatura_extract

    html = real_page if isinstance(real_page, str) else decode_html(bytes(real_page))[0]
    calls = []
    original = trafilatura.bare_extraction

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(trafilatura, "bare_extraction", counted)
    result = trafilatura_extract(real_page)
    monkeypatch.undo()
    assert len(calls) == 1                  # one extraction serves both outputs
    assert result.error is None
    assert result.text == trafilatura.extract(html, output_format="txt", include_comments=False)
    assert "Daring Fireball is written and produced by John Gruber" in result.markdown
    # links asked for: the Markdown keeps them (trafilatura's own markdown extraction)
    linked = trafilatura_extract(real_page, links=True)
    assert linked.markdown == trafilatura.extract(html, output_format="markdown", include_links=True,
                                                  include_comments=False)


def test_trafilatura_fast_fallback_is_trafilaturas_fast_mode(data_dir):
    """``trafilatura-fast``: trafilatura's fast mode in one extraction, on a page where the fast
    mode's text differs from the full mode's; the Extractor records it as the page's fallback."""
    import trafilatura

    from pulpie_spark.render.fallback import fallback_extractor, trafilatura_extract

    html = (data_dir / "md_wcxb_dev_2864.html").read_text(encoding="utf-8")
    full = trafilatura.extract(html, output_format="txt", include_comments=False)
    fast = trafilatura.extract(html, output_format="txt", include_comments=False, fast=True)
    assert fast and full and fast != full
    assert fallback_extractor("trafilatura-fast")(html).text == trafilatura_extract(html, fast=True).text == fast
    assert trafilatura_extract(html).text == full
    rescued = Extractor(classifier=NothingIsMain(), fallback="trafilatura-fast").extract(html)
    assert rescued.fallback_used and rescued.fallback_reason == "empty_output" and rescued.text == fast


def test_undeclared_gbk_page_is_chinese_in_the_model_path_and_the_fallback():
    # No HTTP charset, no <meta>: the bytes were read as windows-1252 before (segment/decode.py),
    # so the blocks, the fallback's input and every later stage were mojibake.
    body = ("夸克物质在极端条件下，夸克可能会解禁并以自由粒子的形式存在。这种物质相态被称为夸克胶子等离子体，"
            "它在宇宙大爆炸之后的几微秒内充满了早期宇宙。")
    html = ARTICLE.replace("Under extreme conditions quarks", body + " quarks").encode("gbk")
    result = Extractor(classifier=KeywordClassifier()).extract(html)
    assert body in result.text and result.error is None
    rescued = Extractor(classifier=NothingIsMain(), fallback="trafilatura").extract(html)
    assert rescued.fallback_used and "夸克胶子等离子体" in rescued.text
