"""The extract pipeline: per-page cores, then Spark end to end (table -> Delta, WARC -> job).

The Spark runs use a tiny EuroBERT token classifier built in the test (random weights,
real loading and inference path): its labels are arbitrary but deterministic, so the
Spark output is checked against the same model applied page by page in plain Python.
"""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

from helpers_data import load_job
from helpers_models import save_tiny_classifier
from pulpie_spark.ingest.warc import read_warc_file
from pulpie_spark.spark_pipeline import ExtractOptions, run_extract
from pulpie_spark.page import labels_from_probs, render_page
from pulpie_spark.page import segment_page
from pulpie_spark.reasons import NO_BLOCKS
from pulpie_spark.resources import SAMPLE_WARC


@pytest.fixture(scope="module")
def sample_pages():
    rows = [r for r in read_warc_file(str(SAMPLE_WARC)) if r["html"]]
    return rows[:6]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return str(save_tiny_classifier(tmp_path_factory.mktemp("extract-model") / "tiny", seed=7))


# ------------------------------------------------------------------ pure cores

def test_segment_page_results_and_reasons(sample_pages, monkeypatch):
    page = segment_page(sample_pages[0]["html"], None)
    assert page["seg_error"] is None
    assert len(page["blocks"]) == len(page["block_paths"]) > 3
    assert 'cc-alg-uc-text' in page["map_html"] or '_item_id="1"' in page["map_html"]
    assert segment_page(None)["seg_error"] == "html_null"
    assert segment_page(b"")["seg_error"] == "html_empty"
    assert segment_page("<html><body></body></html>")["seg_error"] == NO_BLOCKS
    monkeypatch.setenv("PULPIE_MAX_HTML_BYTES", "1000")
    too_big = segment_page(sample_pages[0]["html"])
    assert too_big["seg_error"] == "html_too_large" and too_big["blocks"] == []


def test_render_page_follows_labels(sample_pages):
    from pulpie_spark.segment.simplify import block_text

    page = segment_page(sample_pages[1]["html"])
    n = len(page["blocks"])
    nothing = render_page(page["map_html"], [0] * n)
    assert nothing["n_main"] == 0 and nothing["text"] == "" and nothing["render_error"] is None
    everything = render_page(page["map_html"], [1] * n)
    assert everything["n_main"] == n and len(everything["text"]) > 200
    # One block labelled main: its words, and only a block's worth of text, come out.
    index = max(range(n), key=lambda i: len(block_text(page["blocks"][i])))
    one = render_page(page["map_html"], [int(i == index) for i in range(n)])
    words = block_text(page["blocks"][index]).replace("...", " ").split()[:5]
    assert all(w in one["text"] for w in words)
    assert len(one["text"]) < len(everything["text"])
    assert render_page(None, None)["markdown"] is None


# ------------------------------------------------------------------ Spark end to end

def _expected_by_page(model_dir: str, pages: list[dict]) -> dict:
    """The same model and cores in plain Python: what Spark must produce per doc."""
    from pulpie_spark.classify.registry import load_classifier

    classifier = load_classifier(model_dir, device="cpu")
    out = {}
    for page in pages:
        seg = segment_page(page["html"])
        # the threshold, then the output convention (captions, class-hidden blocks) by the paths
        labels = labels_from_probs(classifier.predict_proba([seg["blocks"]], [seg["block_paths"]])[0], None,
                                   seg["block_paths"])
        out[page["url"]] = (len(seg["blocks"]), {**render_page(seg["map_html"], labels), "title": seg["title"]})
    return out


def test_extract_table_to_delta_with_rejects(spark, tmp_path, sample_pages, tiny_model):
    import deltalake

    from pulpie_spark.io import read_table

    rows = [(p["url"], p["html"], "wcxb", p["doc_id"] if i % 2 else None) for i, p in enumerate(sample_pages)]
    rows += [("http://bad/null", None, "bad", None), ("http://bad/empty", b"", "bad", "given-id"),
             ("http://bad/no-blocks", b"<html><body>  </body></html>", "bad", None)]
    df = spark.createDataFrame(rows, "url string, html binary, source string, doc_id string").repartition(2)
    out_path = str(tmp_path / "extract")
    # fallback="none": the rows must equal the model's own output page by page.
    summary = run_extract(df, out_path, fmt="delta",
                          options=ExtractOptions(model=tiny_model, keep_main_html=True, fallback="none"))
    assert summary["rows"] == len(rows) and summary["rejects"] == 3
    assert summary["reject_reasons"] == {"html_null": 1, "html_empty": 1, "no_blocks": 1} or \
        sum(summary["reject_reasons"].values()) == 3

    assert deltalake.DeltaTable(out_path).version() == 0
    out = read_table(spark, out_path)
    rejects = read_table(spark, out_path + "_rejects")
    assert out.columns == ["url", "html", "source", "doc_id", "title", "markdown", "text", "main_html", "n_blocks",
                           "n_main", "model_id", "error", "fallback"]
    assert set(rejects.columns) >= {"url", "html", "source", "doc_id", "reason", "stage"}
    got = {r.url: r for r in out.collect()}
    rejected = {r.url: r for r in rejects.collect()}
    # Every input row is in exactly one table.
    assert sorted(list(got) + list(rejected)) == sorted(r[0] for r in rows)
    assert rejected["http://bad/null"].reason == "html_null" and rejected["http://bad/null"].stage == "segment"
    assert rejected["http://bad/empty"].doc_id == "given-id"

    expected = _expected_by_page(tiny_model, sample_pages)
    for page in sample_pages:
        row = got[page["url"]]
        n_blocks, rendered = expected[page["url"]]
        assert bytes(row.html) == page["html"] and row.source == "wcxb"  # passthrough unchanged
        assert row.n_blocks == n_blocks and row.n_main == rendered["n_main"]
        assert row.markdown == rendered["markdown"] and row.text == rendered["text"]
        assert row.main_html == rendered["main_html"]
        assert row.title == rendered["title"]
        assert row.error is None and row.model_id
    # doc_id: kept when given, else sha256(url NUL html).
    import hashlib

    for i, page in enumerate(sample_pages):
        want = page["doc_id"] if i % 2 else hashlib.sha256(page["url"].encode() + b"\0" + page["html"]).hexdigest()
        assert got[page["url"]].doc_id == want


def test_a_model_trained_by_train_py_runs_by_its_directory(spark, tmp_path, sample_pages):
    """jobs/train.py's output directory is a --model for Extractor and the Spark job alike
    (shipped to executors as any local checkpoint)."""
    import torch

    import numpy as np

    from pulpie_spark.classify.blockmodel.model import (BlockModelConfig, BlockSequenceModel, DefaultBlockClassifier,
                                                       save_model)
    from pulpie_spark.classify.registry import is_blockmodel_dir
    from pulpie_spark.extractor import Extractor

    torch.manual_seed(5)
    model = BlockSequenceModel(BlockModelConfig(n_buckets=1024, hidden=16, embed_dim=8, model_id="test/trained"))
    # Random weights: shift the main logit to the pages' median, so that about half the blocks are main.
    probs = np.concatenate(DefaultBlockClassifier(model.eval()).predict_proba(
        *zip(*[(seg["blocks"], seg["block_paths"]) for seg in map(segment_page, [p["html"] for p in sample_pages])])))
    with torch.no_grad():
        model.head[1].bias[1] -= float(np.median(np.log(probs / (1 - probs))))
    model_dir = save_model(model, tmp_path / "trained")
    assert is_blockmodel_dir(str(model_dir)) and not is_blockmodel_dir(str(tmp_path))
    extractor = Extractor(str(model_dir), fallback="none")
    assert extractor.model_id == "test/trained"
    rows = [(p["url"], p["html"]) for p in sample_pages]
    df = spark.createDataFrame(rows, "url string, html binary")
    run_extract(df, str(tmp_path / "out"), options=ExtractOptions(model=str(model_dir), fallback="none"))
    got = {r.url: r for r in spark.read.parquet(str(tmp_path / "out")).collect()}
    expected = _expected_by_page(str(model_dir), sample_pages)
    for page in sample_pages:
        result = extractor.extract(page["html"])
        assert got[page["url"]].text == expected[page["url"]][1]["text"] == result.text
        assert got[page["url"]].error is None and got[page["url"]].model_id == str(model_dir)
    assert 0 < sum(got[p["url"]].n_main for p in sample_pages) < sum(got[p["url"]].n_blocks for p in sample_pages)


def test_extract_job_on_warc_files(spark, tmp_path, data_dir, tiny_model, capsys):
    ExtractJob = load_job("extract").ExtractJob

    from pulpie_spark.io import read_table

    warcs = tmp_path / "warcs"
    warcs.mkdir()
    for name in ("warc_resiliparse_warcfile.warc.gz", "warc_resiliparse_clipped.warc.gz"):
        shutil.copy(data_dir / name, warcs / name)
    out_path = str(tmp_path / "out")
    code = ExtractJob().main(["--input", str(warcs), "--output", out_path, "--model", tiny_model, "--show", "0",
                              "--drop-html"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "rows 17" in printed and "rejects 1" in printed
    out = read_table(spark, out_path)
    rejects = read_table(spark, out_path + "_rejects").collect()
    assert out.count() == 16
    assert [(r.reason, r.stage) for r in rejects] == [("ingest:truncated_record", "ingest")]
    # Ingest columns pass through; the ingest's own `error` column is the output's `error` now.
    assert {"record_id", "warc_date", "source_file", "offset", "declared_charset"} <= set(out.columns)
    assert out.where("error is not null").count() == 0
    assert "html" not in out.columns and rejects[0].html  # --drop-html: rejects keep the page


def test_extract_job_main_threshold_flag(spark, tmp_path, sample_pages, monkeypatch, capsys):
    """--main-threshold reaches the pipeline's options; a value outside (0, 1) is a usage error."""
    import pulpie_spark.spark_pipeline as pipeline

    job = load_job("extract").ExtractJob()
    assert job.build_parser().parse_args([]).main_threshold == 0.5
    with pytest.raises(SystemExit) as exit_info:
        job.build_parser().parse_args(["--main-threshold", "1.5"])
    assert exit_info.value.code == 2 and "strictly between 0 and 1" in capsys.readouterr().err
    seen = []
    real_run_extract = pipeline.run_extract

    def recording_run_extract(df, output, **kwargs):
        seen.append(kwargs["options"].main_threshold)
        return real_run_extract(df, output, **kwargs)

    monkeypatch.setattr(pipeline, "run_extract", recording_run_extract)
    table = tmp_path / "pages.parquet"
    pd.DataFrame([{"url": r["url"], "html": r["html"]} for r in sample_pages[:2]]).to_parquet(table)
    assert job.main(["--input", str(table), "--output", str(tmp_path / "out"), "--fallback", "none",
                     "--main-threshold", "0.8", "--show", "0"]) == 0
    assert seen == [0.8]


def test_trafilatura_fallback_rescues_pages_the_model_leaves_empty(spark, sample_pages, tmp_path):
    """A rigged model labels main only blocks whose last token is MAIN; an HTML block ends
    in its closing tag, so a real page gets no main block and empty Markdown, which
    trafilatura fills in, recorded in ``fallback``."""
    from pulpie_spark.spark_pipeline import output_frame, process, rejects_frame

    rigged = str(save_tiny_classifier(tmp_path / "rigged", rigged=True))
    page = sample_pages[0]["url"]
    rows = [(page, sample_pages[0]["html"]), ("http://bad/no-blocks", b"<html><body> </body></html>")]
    df = spark.createDataFrame(rows, "url string, html binary")

    def run(fallback):
        options = ExtractOptions(model=rigged, fallback=fallback)
        processed, input_cols = process(df, options)
        out, rejects = output_frame(processed, input_cols, options), rejects_frame(processed, input_cols)
        return {r.url: r for r in out.collect()}, {r.url: r.reason for r in rejects.collect()}

    plain, plain_rejects = run("none")
    rescued, rescued_rejects = run("trafilatura")
    assert plain[page].markdown == "" and plain[page].n_main == 0 and plain[page].fallback is None
    assert rescued[page].fallback == "trafilatura:empty_output" and len(rescued[page].text) > 200
    assert rescued[page].n_main == 0 and rescued[page].error is None and rescued[page].markdown.strip()
    # Nothing to rescue on an empty page: it stays a reject with the model path's reason.
    assert plain_rejects == rescued_rejects == {"http://bad/no-blocks": NO_BLOCKS}
    # trafilatura's fast mode: its own text, named in ``fallback``
    from pulpie_spark.render.fallback import trafilatura_extract

    fast, _ = run("trafilatura-fast")
    assert fast[page].fallback == "trafilatura-fast:empty_output"
    assert fast[page].text == trafilatura_extract(sample_pages[0]["html"], fast=True).text


# ------------------------------------------------------------------ presets

def test_conf_presets_parse_and_are_consistent():
    import json
    import subprocess
    from pathlib import Path

    from pulpie_spark.session import read_properties

    conf_dir = Path(__file__).resolve().parents[1] / "conf"
    presets = {p.stem: read_properties(p) for p in sorted(conf_dir.glob("*.conf"))}
    assert {"local", "dataproc-gpu", "emr-gpu", "databricks-gpu"} <= set(presets)
    for name, props in presets.items():
        assert all(key.startswith("spark.") for key in props), name  # spark-submit drops other keys
        assert int(props["spark.sql.execution.arrow.maxRecordsPerBatch"]) <= 1024
        assert props["spark.python.worker.reuse"] == "true"
        if name.endswith("-gpu"):
            # CPU tasks take a small GPU share so every core works; classify asks for more.
            assert float(props["spark.task.resource.gpu.amount"]) < float(props["spark.pulpie.classify.gpuAmount"]) <= 1
            assert "spark.executor.pyspark.memory" not in props  # its RLIMIT_AS breaks CUDA
            assert "spark.executor.memoryOverhead" in props
        if name in ("dataproc-gpu", "emr-gpu"):
            assert props["spark.dynamicAllocation.enabled"] == "false"
            assert props["spark.executor.resource.gpu.discoveryScript"] == "./getGpusResources.sh"
    found = subprocess.run(["bash", str(conf_dir / "getGpusResources.sh")], capture_output=True, text=True, check=True)
    info = json.loads(found.stdout)
    assert info["name"] == "gpu" and isinstance(info["addresses"], list)
