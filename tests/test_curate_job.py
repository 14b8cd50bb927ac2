"""jobs/curate.py end to end on a small extracted table: every row lands in exactly one
output with a reason, config/normalization fingerprints recorded, report written,
rerun gives the same rows."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from pulpie_spark.curate.normalize import normalization_fingerprint
from pulpie_spark.curate.quality import evaluate_quality
from helpers_data import GOOD, edit_to_jaccard, load_job


WORDS = ("river mill bridge valley meadow harvest council museum archive letter survey storm village "
         "harbour school market winter summer autumn spring garden orchard library station railway "
         "engineer teacher farmer painter writer doctor baker miller sailor student neighbour visitor").split()
VERBS = "explained described recorded announced reviewed measured restored visited painted repaired".split()


def _prose(rng: random.Random, n_lines: int = 8) -> str:
    """Varied sentences that pass every default gate (checked in test_prose_passes_gates)."""
    lines = []
    for _ in range(n_lines):
        a, b, c = rng.sample(WORDS, 3)
        lines.append(f"The {a} {rng.choice(VERBS)} that the {b} of the {c} had {rng.choice(VERBS)} "
                     f"{rng.randrange(2, 900)} {rng.choice(WORDS)}s with the {rng.choice(WORDS)} "
                     f"in {rng.randrange(1800, 2024)}.")
    return "\n".join(lines)


def test_prose_passes_gates():
    rng = random.Random(8)
    assert all(evaluate_quality(_prose(rng)).fails == [] for _ in range(24))


@pytest.fixture(scope="module")
def extracted(spark, tmp_path_factory):
    rng = random.Random(8)
    rows = [(f"doc{i:03d}", f"https://example.org/{i}", _prose(rng), None, f"2024-01-{1 + i % 28:02d}")
            for i in range(24)]
    rows.append(("dup-exact", "https://mirror.example/3", rows[3][2] + "  \r\n", None, "2024-02-01"))
    words = rows[5][2].split(" ")
    near = " ".join(edit_to_jaccard(words, 0.92, rng, ngram=5))
    rows.append(("dup-near", "https://mirror.example/5", near, None, "2023-12-31"))
    rows.append(("err", "https://example.org/err", None, "html_too_large", None))
    rows.append(("blank", "https://example.org/blank", " \u200b\n\t ", None, None))
    rows.append(("short", "https://example.org/short", "Too short to keep.", None, None))
    rows.append(("good", "https://example.org/good", GOOD, None, None))
    df = spark.createDataFrame(rows, "doc_id string, url string, text string, error string, warc_date string")
    path = tmp_path_factory.mktemp("curate") / "extracted"
    df.write.parquet(str(path))
    return path, len(rows)


def _run(extracted, out_dir: Path):
    CurateJob = load_job("curate").CurateJob

    path, _ = extracted
    code = CurateJob().main(["--input", str(path), "--output", str(out_dir / "curated"), "--log-level", "ERROR"])
    assert code == 0


@pytest.fixture(scope="module")
def first_run(extracted, tmp_path_factory):
    out = tmp_path_factory.mktemp("curate-run-a")
    _run(extracted, out)
    return out


def test_curate_job_end_to_end(spark, extracted, first_run):
    tmp_path = first_run
    kept = spark.read.parquet(str(tmp_path / "curated"))
    removed = spark.read.parquet(str(tmp_path / "curated_removed"))
    kept_ids = {r["doc_id"] for r in kept.select("doc_id").collect()}
    reasons = {r["doc_id"]: (r["reason"], r["removed_stage"], r["duplicate_of"]) for r in removed.collect()}
    assert len(kept_ids) + len(reasons) == extracted[1] and not kept_ids & set(reasons)
    assert reasons["err"] == ("extract_error", "input", None)
    assert reasons["blank"] == ("empty_text", "input", None)
    assert reasons["short"][0] == "quality:gopher_quality:gopher_short_doc"
    assert reasons["dup-exact"] == ("exact_duplicate", "exact_dedup", "doc003")
    # the near copy has the earlier crawl date and equal quality: it is the one kept
    assert reasons["doc005"] == ("near_duplicate", "near_dedup", "dup-near")
    assert "good" in kept_ids and "dup-near" in kept_ids
    row = kept.where("doc_id = 'good'").first()
    assert row["normalize_config_hash"] == normalization_fingerprint()[0]
    assert row["quality"]["gq_stop_words"] > 2 and row["quality_fails"] == []
    report = json.loads((tmp_path / "curated_report" / "report.json").read_text())
    assert report["rows"] == extracted[1] and report["kept"] == len(kept_ids)
    assert report["removed_by_reason"]["exact_duplicate"] == 1
    assert report["near_dedup"]["component_size_histogram"] == {"2": 1}
    assert report["funnel"][-1]["rows"] == len(kept_ids)
    html = (tmp_path / "curated_report" / "report.html").read_text()
    assert html.count("data:image/png;base64,") >= 3


@pytest.mark.slow  # a second full job run; partition independence is in test_dedup.py
def test_curate_job_rerun_is_identical(extracted, first_run, tmp_path):
    _run(extracted, tmp_path)
    for name in ("curated", "curated_removed"):
        files_a = sorted((first_run / name).glob("part-*.parquet"))
        files_b = sorted((tmp_path / name).glob("part-*.parquet"))
        assert files_a and [f.name.split("-")[1] for f in files_a] == [f.name.split("-")[1] for f in files_b]
        assert [f.read_bytes() for f in files_a] == [f.read_bytes() for f in files_b]


# --- per-row deadline -------------------------------------------------------------

def _long_prose(n_words: int) -> str:
    """Prose long enough that normalizing and scoring it takes seconds (~3 s per
    100,000 words on one core): far over a 1 s deadline."""
    rng = random.Random(3)
    return "\n".join(" ".join(rng.choice(WORDS) for _ in range(12)) + "." for _ in range(n_words // 12))


def test_row_over_deadline_gets_failure_and_keeps_its_text():
    from pulpie_spark.curate.config import load_config
    from pulpie_spark.curate.spark_adapter import guarded_normalize_and_score

    cfg = load_config(None, {})
    text = _long_prose(300_000)
    slow = guarded_normalize_and_score(text, cfg.normalize, cfg.quality, seconds=0.2)
    assert slow["failure"] == "timeout" and slow["text"] == text and slow["score"] is None
    fast = guarded_normalize_and_score(GOOD, cfg.normalize, cfg.quality, seconds=30)
    assert fast["failure"] is None and fast["text"] and fast["score"] is not None


def test_curate_removes_a_row_over_the_deadline_with_reason_timeout(spark):
    """Inside Spark: the deadline is read on the executor (PULPIE_PAGE_TIMEOUT_S, set on a
    cluster with spark.executorEnv.*); the slow row is removed with reason `timeout`,
    the other rows of its batch are scored as usual."""
    from pulpie_spark.curate.config import load_config
    from pulpie_spark.curate.pipeline import curate

    rng = random.Random(5)
    # Far over the limit however fast the gates get (300,000 words once took seconds; the
    # faster per-language gates took it under 1 s on a quiet machine).
    slow = _long_prose(1_500_000)
    rows = [("slow", slow, None), ("fine", _prose(rng), None), ("short", "Too short to keep.", None),
            ("err", slow, "html_too_large")]
    df = spark.createDataFrame(rows, "doc_id string, text string, error string").coalesce(1)
    sc = spark.sparkContext
    saved = sc.environment.get("PULPIE_PAGE_TIMEOUT_S")
    # A distinct worker environment: fresh Python workers that see the 1 s limit.
    sc.environment["PULPIE_PAGE_TIMEOUT_S"] = "1"
    try:
        result = curate(df, load_config(None, {}))
        removed = {r["doc_id"]: r for r in result.removed.collect()}
        kept = [r["doc_id"] for r in result.kept.collect()]
        result.annotated.unpersist()
    finally:
        if saved is None:
            sc.environment.pop("PULPIE_PAGE_TIMEOUT_S", None)
        else:
            sc.environment["PULPIE_PAGE_TIMEOUT_S"] = saved
    assert kept == ["fine"]
    assert (removed["slow"]["reason"], removed["slow"]["removed_stage"]) == ("timeout", "quality")
    assert removed["slow"]["text"] == slow  # the raw text, for whoever looks into it
    assert removed["short"]["reason"] == "quality:gopher_quality:gopher_short_doc"
    # An extract error stays an extract error, even when its text would also time out.
    assert (removed["err"]["reason"], removed["err"]["removed_stage"]) == ("extract_error", "input")
