"""The page gate (classify/blockmodel/gate.py): its statistics, its fit, and the fallback it
triggers, alike in the Python API and the Spark stages."""

from __future__ import annotations

import math
import shutil

import numpy as np
import pytest
from helpers_data import DATA

from pulpie_spark import reasons
from pulpie_spark.classify.blockmodel import DEFAULT_MODEL_DIR
from pulpie_spark.classify.blockmodel.gate import (GATE_FEATURES, GATE_FILE, PageGate, chars_from_features,
                                                   fit_page_gate, load_page_gate, page_gate_features)
from pulpie_spark.extractor import Extractor


# trafilatura finds nothing in a page whose only text is in <footer>; the default model keeps it
# A footer with text enough not to be a short output (page.SHORT_OUTPUT_CHARS), which
# trafilatura leaves out.
FOOTER_PAGE = ("<html><body><footer><p>All the news that is fit to print, written by our staff every day. "
               "Our newsroom works independently of our owners and advertisers, and corrections are "
               "published on this page as soon as they are confirmed.</p></footer></body></html>")


def test_page_statistics():
    probs = np.array([0.9, 0.1, 0.6, 0.45, 0.7], dtype=np.float32)
    chars = np.array([100.0, 50.0, 0.0, 40.0, 10.0])
    got = dict(zip(GATE_FEATURES, page_gate_features(probs, chars)))
    assert got["log_blocks"] == pytest.approx(math.log1p(5))
    assert got["main_share"] == pytest.approx(3 / 5)
    assert got["main_char_share"] == pytest.approx(110 / 200)
    assert got["log_main_chars"] == pytest.approx(math.log1p(110))
    assert got["unsure"] == pytest.approx(3 / 5)              # 0.6, 0.45, 0.7
    assert got["wunsure"] == pytest.approx(50 / 200)
    assert got["near"] == pytest.approx(40 / 200)             # 0.45 only
    assert got["runs"] == pytest.approx(math.log1p(3))        # main, other, main, other (0.45), main
    assert got["wmean_p"] == pytest.approx(float((probs.astype(np.float64) * chars).sum() / 200))
    assert not page_gate_features(np.zeros(0), np.zeros(0)).any()


def test_chars_come_back_from_the_block_features():
    chars = np.array([0, 1, 17, 950, 48_000], dtype=np.float64)
    numeric = np.zeros((5, 3), dtype=np.float32)
    numeric[:, 0] = np.log1p(chars) / 8.0
    np.testing.assert_allclose(chars_from_features(numeric), chars, rtol=1e-5, atol=1e-4)


def test_fit_learns_the_signal_and_is_deterministic(tmp_path):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(400, len(GATE_FEATURES)))
    y = (x[:, 2] - x[:, 7] + 0.3 * rng.normal(size=400) > 0.8).astype(np.float64)
    gate = fit_page_gate(x, y, threshold=0.3)
    again = fit_page_gate(x, y, threshold=0.3)
    assert gate == again
    assert gate.weights[2] > 1.0 and gate.weights[7] < -1.0 and abs(gate.weights[0]) < 0.5
    flagged = gate.score(x) >= 0.5
    assert (flagged == (y == 1)).mean() > 0.9
    gate.save(tmp_path)
    assert load_page_gate(tmp_path) == gate
    assert load_page_gate(tmp_path / "nowhere") is None
    with pytest.raises(ValueError, match="page gate computed from"):
        PageGate.from_dict({**gate.to_dict(), "features": ["log_blocks"]})
    with pytest.raises(ValueError):
        fit_page_gate(x[:, 0], y, threshold=0.3)


def _gated_model(tmp_path, bias: float) -> str:
    """The default model with a gate whose score is sigmoid(bias) on every page."""
    directory = tmp_path / f"gated{bias:+g}"
    shutil.copytree(DEFAULT_MODEL_DIR, directory)
    n = len(GATE_FEATURES)
    PageGate(mean=(0.0,) * n, scale=(1.0,) * n, weights=(0.0,) * n, bias=bias, threshold=0.5).save(directory)
    return str(directory)


def test_the_shipped_model_has_a_gate():
    gate = load_page_gate(DEFAULT_MODEL_DIR)
    assert gate is not None and 0.0 < gate.threshold < 1.0 and gate.fitted_on
    assert Extractor().classifier.page_gate == gate


def test_an_unsure_page_goes_to_the_fallback(tmp_path):
    html = (DATA / "cls_daringfireball-1.html").read_bytes()
    always = _gated_model(tmp_path, 30.0)
    never = _gated_model(tmp_path, -30.0)
    sent = Extractor(model=always, fallback="trafilatura").extract(html)
    assert sent.fallback_used and sent.fallback_reason == reasons.FALLBACK_UNSURE and sent.error is None
    assert sent.n_main > 0   # the model's labels are still reported
    kept = Extractor(model=never, fallback="trafilatura").extract(html)
    assert not kept.fallback_used and kept.fallback_reason is None
    assert kept.text != sent.text
    # a threshold above 1 switches the gate off; without a fallback the gate changes nothing
    off = Extractor(model=always, fallback="trafilatura", unsure_threshold=1.5).extract(html)
    assert (off.text, off.fallback_used) == (kept.text, False)
    plain = Extractor(model=always, fallback="none").extract(html)
    assert (plain.text, plain.fallback_used) == (kept.text, False)
    with pytest.raises(ValueError, match="unsure threshold"):
        Extractor(model=always, unsure_threshold=-1)
    # an unsure page the fallback finds nothing on keeps the model's output, without an error
    # (curation drops rows with an error)
    footer = Extractor(model=always, fallback="trafilatura").extract(FOOTER_PAGE)
    assert footer.fallback_reason == reasons.FALLBACK_UNSURE and not footer.fallback_used
    assert footer.error is None and footer.n_main == 1 and "fit to print" in footer.text


def test_api_and_spark_send_the_same_pages(spark, tmp_path):
    from pulpie_spark.spark_pipeline import ExtractOptions, output_frame, process

    pages = [("http://a/real", (DATA / "cls_daringfireball-1.html").read_bytes()),
             ("http://a/short", b"<html><body><article><p>One short paragraph of text in an article body."
                                b"</p></article></body></html>"),
             ("http://a/footer", FOOTER_PAGE.encode())]
    for model in (_gated_model(tmp_path, 30.0), "default"):
        api = Extractor(model=model, fallback="trafilatura").extract_batch([h for _, h in pages])
        options = ExtractOptions(model=model, fallback="trafilatura")
        processed, input_cols = process(spark.createDataFrame(pages, "url string, html binary"), options)
        rows = {r.url: r for r in output_frame(processed, input_cols, options).collect()}
        for (url, _), result in zip(pages, api):
            expected = f"trafilatura:{result.fallback_reason}" if result.fallback_used else None
            assert rows[url].fallback == expected and (rows[url].text or "") == result.text, (model, url)
            assert rows[url].error == result.error, (model, url)
        if model != "default":
            # the short page is a short output first (page.fallback_reason's order)
            assert [r.fallback_reason for r in api] == [reasons.FALLBACK_UNSURE, reasons.FALLBACK_SHORT_OUTPUT,
                                                        reasons.FALLBACK_UNSURE]
            assert [r.fallback_used for r in api] == [True, True, False] and api[2].error is None


@pytest.mark.parametrize("fallback", ["trafilatura", "trafilatura-fast", "resiliparse"])
def test_loso_gate_stage_sends_pages_and_writes_the_gate(tmp_path, fallback):
    """The gate learns where the run's fallback beats the model (that extractor's text, not
    the other baseline's; trafilatura's for its fast mode) and sends those pages to it, which
    give them the fallback's own text; every page keeps its gate score."""
    import pandas as pd

    from pulpie_spark.evaluate.loso import GATE_FEATURES_COLUMN, GATE_SCORE_COLUMN, GATELESS, apply_page_gate
    from pulpie_spark.render.fallback import fallback_extractor

    baseline = "trafilatura" if fallback == "trafilatura-fast" else fallback
    other = "resiliparse" if baseline == "trafilatura" else "trafilatura"
    rng = np.random.default_rng(5)
    article = (DATA / "cls_daringfireball-1.html").read_bytes()
    rows = []
    for i in range(90):
        bad = i % 3 == 0    # pages where our text misses the reference: gate feature 0 is high there
        features = 0.3 * rng.normal(size=len(GATE_FEATURES))
        features[0] += 2.0 if bad else 0.0
        rows.append({"fold": f"f{i % 4}", "reference": "the quick brown fox jumps over the lazy dog " * 5,
                     "model_text": "nothing like it at all here" if bad else "the quick brown fox jumps over the lazy dog " * 5,
                     "model_cpu_seconds": 0.01, "model_error": None,
                     f"{baseline}_text": "the quick brown fox jumps over the lazy dog " * 5,
                     f"{other}_text": "nothing like it at all here",   # never better: must not drive the gate
                     GATE_FEATURES_COLUMN: None if i == 3 else features.tolist()})
    pages = pd.DataFrame(rows, index=range(100, 190))
    html = pd.Series([article] * 90, index=pages.index)
    gated, summary = apply_page_gate(pages, html, 0.5, tmp_path, fallback=fallback)
    sent = gated["model_text"] != pages["model_text"]
    assert summary["fallback"] == fallback
    assert summary["pages_sent"] == int(sent.sum()) and 20 <= summary["pages_sent"] <= 35
    assert ((gated[GATE_SCORE_COLUMN] >= 0.5) == sent).all() and np.isnan(gated.at[103, GATE_SCORE_COLUMN])
    assert not sent.loc[103]                      # no gate features: never sent
    assert sent[[i % 3 == 0 for i in range(90)]].mean() > 0.9 and not sent[[i % 3 != 0 for i in range(90)]].any()
    assert (gated.loc[sent, "model_cpu_seconds"] > 0.01).all()
    assert (gated.loc[sent, "model_text"] == fallback_extractor(fallback)(article).text).all()
    assert (gated[f"{GATELESS}_text"] == pages["model_text"]).all()
    assert load_page_gate(tmp_path).threshold == 0.5 and (tmp_path / GATE_FILE).exists()
    with pytest.raises(ValueError):
        apply_page_gate(pages, html, 0.5, tmp_path, fallback="none")


def test_loso_refuses_a_gate_without_a_fallback_before_training(tmp_path):
    from pulpie_spark.evaluate.loso import run_loso

    # the input does not exist: the refusal must come before anything is read or trained
    with pytest.raises(ValueError, match="extracts nothing"):
        run_loso(tmp_path / "missing", tmp_path / "out", train_config={}, fallback="none", page_gate=0.3)
    assert not (tmp_path / "out").exists()
