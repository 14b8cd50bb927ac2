"""One page, one path: the Python API and the Spark stages give the same result, errors
and fallback decisions for the same page (pulpie_spark.page is the core of both)."""

from __future__ import annotations

import pytest
from helpers_data import DATA
from helpers_models import save_tiny_classifier

from pulpie_spark import reasons
from pulpie_spark.extractor import Extractor
from pulpie_spark.page import fallback_reason
from pulpie_spark.spark_pipeline import ExtractOptions, fallback_reason_column, output_frame, process, rejects_frame

LONG = "Body text " * 20
_CASES = [  # (seg_error, model_error, markdown, text, unsure)
    (None, None, "# Title\n\n" + LONG, LONG, None), (None, None, "", "", None), (None, None, " \n\t\u00a0", "", None),
    (None, None, None, None, None),
    (reasons.NO_BLOCKS, reasons.NO_BLOCKS, None, None, None), (reasons.HTML_TOO_DEEP, reasons.HTML_TOO_DEEP, None, None, None),
    (None, "classify:error:RuntimeError: boom", None, None, None), (None, "render:timeout", "text", "text", None),
    # short output: non-space characters, counted alike by both (U+3000 is a space, U+001C is not)
    (None, None, "# Short", "Short", None), (None, None, "x", "x" * 159 + " \u3000\n", True),
    (None, None, "x", "x" * 160, None), (None, None, "x", "x" * 159 + "\x1c", None),
    (None, None, LONG, LONG, True), (None, None, LONG, LONG, False), (None, None, "x", None, None),
]


def test_fallback_rule_is_the_same_in_python_and_in_spark(spark):
    from pyspark.sql import functions as F

    df = spark.createDataFrame(_CASES, "seg_error string, model_error string, markdown string, text string, "
                                       "unsure boolean")
    got = [r.why for r in df.select(fallback_reason_column(F.col("seg_error"), F.col("model_error"),
                                                            F.col("markdown"), F.col("unsure"),
                                                            F.col("text")).alias("why")).collect()]
    assert got == [fallback_reason(s, e, m, u, text=t) for s, e, m, t, u in _CASES]
    assert got[:5] == [None, reasons.FALLBACK_EMPTY_OUTPUT, reasons.FALLBACK_EMPTY_OUTPUT,
                       reasons.FALLBACK_EMPTY_OUTPUT, reasons.FALLBACK_NO_BLOCKS]
    assert got[8:] == [reasons.FALLBACK_SHORT_OUTPUT, reasons.FALLBACK_SHORT_OUTPUT, None, None,
                       reasons.FALLBACK_UNSURE, None, None]


@pytest.fixture(scope="module")
def rigged_model(tmp_path_factory):
    """Labels main only blocks whose last token is MAIN: real pages get empty output."""
    return str(save_tiny_classifier(tmp_path_factory.mktemp("page-model") / "rigged", rigged=True))


@pytest.fixture(scope="module")
def pages():
    real = (DATA / "cls_daringfireball-1.html").read_bytes()
    return [("http://a/real", real), ("http://a/no-blocks", b"<html><body> </body></html>"),
            ("http://a/empty", b""), ("http://a/deep", b"<div>" * 12_000 + b"x" + b"</div>" * 12_000),
            ("http://a/short", b"<html><body><article><h1>Closed</h1><p>The shop is closed on Monday.</p>"
                               b"</article></body></html>")]


@pytest.mark.parametrize("fallback", ["none", "trafilatura", "resiliparse"])
@pytest.mark.parametrize("model", ["default", "rigged"])
def test_api_and_spark_agree_page_by_page(spark, pages, rigged_model, fallback, model):
    model = rigged_model if model == "rigged" else model
    api = {url: r for (url, _), r in zip(pages, Extractor(model=model, fallback=fallback).extract_batch(
        [html for _, html in pages]))}
    df = spark.createDataFrame(pages, "url string, html binary")
    options = ExtractOptions(model=model, fallback=fallback)
    processed, input_cols = process(df, options)
    out = {r.url: r for r in output_frame(processed, input_cols, options).collect()}
    rejects = {r.url: r.reason for r in rejects_frame(processed, input_cols).collect()}
    assert set(out) | set(rejects) == {url for url, _ in pages} and not set(out) & set(rejects)
    for url, result in api.items():
        if url in out:
            row = out[url]
            assert (row.markdown or "", row.text or "") == (result.markdown, result.text), url
            assert row.n_main == result.n_main and row.n_blocks == result.n_blocks, url
            assert row.error == result.error, url
            expected_fallback = f"{fallback}:{result.fallback_reason}" if result.fallback_used else None
            assert row.fallback == expected_fallback, url
        else:   # a reject: the API reports the same model-path error (then the fallback's, if it ran)
            assert result.error.split("; ")[0] == rejects[url], url
            assert not result.fallback_used and not result.markdown, url
    assert rejects["http://a/deep"] == reasons.HTML_TOO_DEEP
    assert rejects["http://a/empty"] == reasons.HTML_EMPTY
    if model == "default":   # a real short page: the fallback's text where it finds one, no error
        short = api["http://a/short"]
        assert short.n_main > 0 and short.error is None and "closed on Monday" in short.text
        assert short.fallback_reason == (None if fallback == "none" else reasons.FALLBACK_SHORT_OUTPUT)


def test_main_threshold_trades_recall_for_precision_alike_in_api_and_spark(spark):
    """A raised main threshold keeps fewer blocks (a subset), a lowered one more; the Spark
    stages (ExtractOptions.main_threshold -> classify labels) give the API's result."""
    html = (DATA / "cls_daringfireball-1.html").read_bytes()
    results = {t: Extractor(fallback="none", main_threshold=t).extract(html) for t in (0.3, 0.5, 0.8)}
    assert results[0.3].n_main > results[0.5].n_main > results[0.8].n_main > 0
    kept = {t: {i for i, label in enumerate(r.labels) if label} for t, r in results.items()}
    assert kept[0.8] < kept[0.5] < kept[0.3]
    assert results[0.5].text == Extractor(fallback="none").extract(html).text   # 0.5 is the default
    df = spark.createDataFrame([("http://a/real", html)], "url string, html binary")
    for t in (0.3, 0.8):
        options = ExtractOptions(fallback="none", main_threshold=t)
        processed, input_cols = process(df, options)
        row = output_frame(processed, input_cols, options).collect()[0]
        assert (row.n_main, row.markdown, row.text) == (results[t].n_main, results[t].markdown, results[t].text)


@pytest.mark.parametrize("bad", [0, 1, 1.5, -0.1, float("nan"), "high", None])
def test_main_threshold_outside_0_1_is_refused(bad):
    from pulpie_spark.classify.base import validate_main_threshold

    with pytest.raises(ValueError, match="main threshold"):
        validate_main_threshold(bad)
    with pytest.raises(ValueError, match="main threshold"):
        Extractor(fallback="none", main_threshold=bad)


def test_one_nesting_bound(monkeypatch):
    """PULPIE_MAX_HTML_DEPTH bounds simplify() itself too (it once had its own 5,000)."""
    from pulpie_spark.page import segment_page
    from pulpie_spark.segment.simplify import simplify

    deep = "<div>" * 6_000 + "<p>deep text</p>" + "</div>" * 6_000
    assert simplify(deep).error is None and segment_page(deep)["seg_error"] is None
    monkeypatch.setenv("PULPIE_MAX_HTML_DEPTH", "5000")
    assert simplify(deep).error == reasons.HTML_TOO_DEEP
    assert segment_page(deep)["seg_error"] == reasons.HTML_TOO_DEEP


def test_no_input_column_is_dropped(spark):
    """Input columns named like the stage's own keep their values as input_<name>."""
    rows = [("http://a/1", (DATA / "cls_daringfireball-1.html").read_bytes(), "mine", "lbl", "m", "r", "s"),
            ("http://a/2", b"", "mine2", "lbl2", "m2", "r2", "s2")]
    df = spark.createDataFrame(rows, "url string, html binary, markdown string, labels string, "
                                     "model_id string, reason string, stage string")
    options = ExtractOptions(fallback="none")
    processed, input_cols = process(df, options)
    out = output_frame(processed, input_cols, options).collect()
    rej = rejects_frame(processed, input_cols).collect()
    assert len(out) == 1 and len(rej) == 1
    row = out[0].asDict()
    assert (row["input_markdown"], row["labels"], row["input_model_id"], row["reason"], row["stage"]) == \
        ("mine", "lbl", "m", "r", "s")
    assert row["markdown"] and row["model_id"] != "m"
    bad = rej[0].asDict()
    assert (bad["markdown"], bad["input_reason"], bad["input_stage"], bad["reason"]) == \
        ("mine2", "r2", "s2", reasons.HTML_EMPTY)
