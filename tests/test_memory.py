"""Bounded memory (issue 16): byte-sized reader batches from the footers, the refusal of
a page the heap cannot hold, and (slow tier) the extract and curate jobs at Spark's 1g
default heap on a one-row-group Parquet of ~300 MB of HTML and on the adversarial corpus."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers_data import DATA
from pulpie_spark import memory

ROOT = Path(__file__).resolve().parents[1]
MiB = 1 << 20


def _write_pages(path: Path, n: int, page_bytes: int, row_group_size: int | None = None) -> None:
    base = (DATA / "md_wcxb_dev_0488.html").read_bytes()
    para = b"<p>Salmon return to the river every autumn, past the old mill weirs.</p>\n"
    html = base.replace(b"</body>", para * max(0, (page_bytes - len(base)) // len(para)) + b"</body>")
    pages = [html.replace(b"<title>", f"<title>{i} ".encode(), 1) for i in range(n)]
    table = pa.table({"url": [f"https://mem.test/{i}" for i in range(n)], "html": pages})
    pq.write_table(table, path, row_group_size=row_group_size)


class _Frame:
    """The one DataFrame method table_footprint uses."""

    def __init__(self, files):
        self.files = files

    def inputFiles(self):
        return self.files


def test_reader_batch_is_sized_in_bytes(tmp_path):
    path = tmp_path / "pages.parquet"
    _write_pages(path, 40, 200_000)
    footprint = memory.table_footprint(_Frame([str(path)]))
    assert footprint.rows == 40 and footprint.files == 1
    assert 200_000 <= footprint.max_row_bytes < 260_000
    rows = memory.reader_batch_rows(footprint, 16 * MiB)
    assert rows * footprint.max_row_bytes <= 16 * MiB < (rows + 1) * footprint.max_row_bytes
    assert memory.reader_batch_rows(footprint, 1) == 1
    assert memory.reader_batch_rows(None) == memory.SPARK_READER_BATCH_ROWS
    tiny = memory.Footprint(files=1, rows=10, bytes=100, max_group_bytes=100, max_row_bytes=10, min_largest_page=10)
    assert memory.reader_batch_rows(tiny) == memory.SPARK_READER_BATCH_ROWS


def test_footprint_of_a_frame_without_parquet_files_is_none(tmp_path):
    assert memory.table_footprint(_Frame([])) is None
    assert memory.table_footprint(_Frame([str(tmp_path / "missing.parquet")])) is None


@pytest.mark.parametrize("text, expected", [("1g", 1 << 30), ("512m", 512 * MiB), ("4096", 4096 * MiB),
                                            ("2G", 2 << 30), ("bad", 7)])
def test_sizes_parse_like_spark(text, expected):
    assert memory._size_to_bytes(text, 7) == expected


def test_a_page_the_heap_cannot_hold_is_refused_naming_the_setting():
    class Conf:
        def get(self, key, default=None):
            return {"spark.driver.memory": "1g"}.get(key, default)

    class Context:
        master = "local[2]"

        def getConf(self):
            return Conf()

    class Spark:
        sparkContext = Context()

    # Measured (benchmarks/memory.py grid): at 1g, block-dense 7.5 MiB pages are parsed,
    # 9.7 MiB ones are not; a 50 MB page is read and rejected, a 100 MiB one is not.
    assert 1 * MiB <= memory.largest_page_for_heap(1 << 30) < int(7.5 * MiB)
    limit = memory.largest_row_for_heap(1 << 30)
    assert 10 * MiB < limit <= 50 * MiB
    fits = memory.Footprint(files=1, rows=1, bytes=limit, max_group_bytes=limit, max_row_bytes=limit,
                            min_largest_page=limit)
    memory.check_fits(Spark(), fits)
    huge = memory.Footprint(files=1, rows=1, bytes=limit + MiB, max_group_bytes=limit + MiB,
                            max_row_bytes=limit + MiB, min_largest_page=limit + MiB)
    with pytest.raises(memory.InputTooLarge, match=r"Raise spark\.driver\.memory to at least \d+m"):
        memory.check_fits(Spark(), huge, "pages.parquet")


class _Conf(dict):
    def get(self, key, default=None):
        return super().get(key, default)


class _Session:
    """The conf reads of memory's helpers."""

    def __init__(self, **conf):
        self.conf = _Conf(conf)


def test_arrow_batches_to_python_are_sized_in_bytes(tmp_path):
    # Spark 4.3 ignores maxBytesPerBatch for pandas_udf/mapInPandas: the rows are the bound.
    path = tmp_path / "pages.parquet"
    _write_pages(path, 40, 200_000)
    footprint = memory.table_footprint(_Frame([str(path)]))
    rows = memory.arrow_batch_rows(_Session(), footprint)
    assert rows * footprint.max_row_bytes <= memory.DEFAULT_ARROW_BATCH_BYTES < (rows + 1) * footprint.max_row_bytes
    assert memory.arrow_batch_rows(_Session(**{memory.ARROW_BATCH_BYTES_CONF: "2m"}), footprint) == \
        2 * MiB // footprint.max_row_bytes
    assert memory.arrow_batch_rows(_Session(), None) == memory.ARROW_BATCH_MOST_ROWS
    small = memory.Footprint(files=1, rows=10, bytes=100, max_group_bytes=100, max_row_bytes=10, min_largest_page=10)
    assert memory.arrow_batch_rows(_Session(), small) == memory.ARROW_BATCH_MOST_ROWS


def test_the_local_jvm_retries_allocations_that_meet_a_jni_critical_section(spark):
    # CI failed once at 1g with "Retried waiting for GCLocker too often" (Java 17's default of 2).
    from pulpie_spark.session import LOCAL_JVM_OPTIONS

    jvm = spark.sparkContext._jvm
    arguments = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert set(LOCAL_JVM_OPTIONS.split()) <= set(arguments)
    if int(jvm.java.lang.System.getProperty("java.specification.version")) < 22:
        diagnostic = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
            jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
        assert diagnostic.getVMOption("GCLockerRetryAllocationCount").getValue() == "100"


def test_our_session_defaults_are_refined_and_restored_but_user_choices_kept(spark):
    from pulpie_spark.session import LOCAL_DEFAULTS

    key = memory.ARROW_RECORDS_CONF
    before = spark.conf.get(key, None)
    try:
        spark.conf.set(key, LOCAL_DEFAULTS[key])      # what get_spark gives every session
        with memory.session_conf(spark, {key: "55"}) as applied:
            assert applied == [key] and spark.conf.get(key) == "55"
        assert spark.conf.get(key) == LOCAL_DEFAULTS[key]   # put back, not unset to Spark's 10,000
        spark.conf.set(key, "32")                      # a user's choice
        with memory.session_conf(spark, {key: "55"}) as applied:
            assert applied == [] and spark.conf.get(key) == "32"
        spark.conf.unset(key)
        with memory.session_conf(spark, {key: "55"}):
            assert spark.conf.get(key) == "55"
        assert spark.conf.get(key, None) in (None, "10000")
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


class _Cluster:
    """The session reads of spark_pipeline.html_byte_limit: heap, master, executor env."""

    def __init__(self, heap: str, executor_env: dict | None = None):
        heap_conf = {"spark.driver.memory": heap}

        class Conf:
            def get(self, key, default=None):
                return heap_conf.get(key, default)

        class Context:
            master = "local[2]"

            def getConf(self):
                return Conf()

        self.sparkContext = Context()
        self.conf = _Conf({"spark.executorEnv." + k: v for k, v in (executor_env or {}).items()})


def test_pages_larger_than_the_heap_is_planned_for_are_rejected_not_fatal(monkeypatch):
    # One block-dense 9.7 MiB page among others ended a 1g run in OutOfMemoryError
    # (docs/BENCHMARKS.md): the SQL size guard is capped by the heap's planned page size.
    from pulpie_spark.guards import ENV_MAX_HTML_BYTES
    from pulpie_spark.spark_pipeline import html_byte_limit

    monkeypatch.delenv(ENV_MAX_HTML_BYTES, raising=False)
    assert html_byte_limit(_Cluster("1g")) == memory.largest_page_for_heap(1 << 30) < 10 * MiB
    assert html_byte_limit(_Cluster("4g")) == 10 * MiB                      # the guard itself
    assert html_byte_limit(_Cluster("4g", {ENV_MAX_HTML_BYTES: str(2 * MiB)})) == 2 * MiB
    raised = _Cluster("1g", {ENV_MAX_HTML_BYTES: str(64 * MiB)})
    assert html_byte_limit(raised) == memory.largest_page_for_heap(1 << 30)


def _rss_mib() -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) // 1024 for line in fh if line.startswith("VmRSS"))


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc (Linux)")
def test_freed_arrow_memory_goes_back_to_the_os():
    arrays = [pa.array([b"x" * 1000] * 2000) for _ in range(100)]   # ~200 MB in pyarrow's pool
    held = _rss_mib()
    del arrays
    freed = _rss_mib()
    if freed < held - 100:
        pytest.skip("this pyarrow pool returned the memory by itself")
    memory.release_freed_memory()
    assert _rss_mib() < freed - 100


def test_a_udf_body_releases_memory_after_every_batch_even_when_it_raises(monkeypatch):
    import typing

    calls = []
    monkeypatch.setattr(memory, "release_freed_memory", lambda: calls.append("released"))

    @memory.releasing_memory
    def body(html: pd.Series, charset: pd.Series) -> pd.DataFrame:
        calls.append("batch")
        if html.empty:
            raise ValueError("empty batch")
        return pd.DataFrame({"n": html.str.len()})

    assert body(pd.Series(["ab"]), pd.Series([None]))["n"].tolist() == [2]
    with pytest.raises(ValueError, match="empty batch"):
        body(pd.Series([], dtype=object), pd.Series([], dtype=object))
    assert calls == ["batch", "released", "batch", "released"]
    # what pandas_udf reads to infer the UDF type
    assert typing.get_type_hints(body) == {"html": pd.Series, "charset": pd.Series, "return": pd.DataFrame}


# ----------------------------------------------------------------------------- slow tier

def _job(args: list[str], heap: str = "1g", env: dict | None = None) -> subprocess.CompletedProcess:
    """A job in a fresh process: in local mode the heap is fixed when the JVM starts."""
    cmd = [sys.executable, *args, "--master", "local[2]", "--spark-conf", f"spark.driver.memory={heap}"]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800,
                          env=dict(os.environ, **(env or {})))


def _ids(path: Path, column: str = "url") -> list:
    files = sorted(p for p in path.rglob("*.parquet"))
    return [v for f in files for v in pq.read_table(f, columns=[column]).column(column).to_pylist()]


def _accounted(out: Path, source_ids: list, column: str = "url") -> None:
    got = _ids(out, column) + _ids(Path(str(out) + "_rejects"), column)
    assert sorted(got, key=str) == sorted(source_ids, key=str)


@pytest.mark.slow
def test_extract_and_curate_at_1g_on_a_300mb_row_group(tmp_path):
    src = tmp_path / "one_group.parquet"
    _write_pages(src, 2000, 150_000)  # ~300 MB of HTML, one row group (pyarrow's default)
    meta = pq.ParquetFile(src).metadata
    assert meta.num_row_groups == 1 and meta.row_group(0).column(1).total_uncompressed_size > 280 * MiB
    out = tmp_path / "out"
    run = _job(["jobs/extract.py", "--input", str(src), "--output", str(out), "--show", "0"])
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "OutOfMemoryError" not in run.stderr
    _accounted(out, [f"https://mem.test/{i}" for i in range(2000)])
    curated = tmp_path / "curated"
    run = _job(["jobs/curate.py", "--input", str(out), "--output", str(curated)])
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    kept, removed = _ids(curated, "doc_id"), _ids(tmp_path / "curated_removed", "doc_id")
    assert len(kept) + len(removed) == len(_ids(out, "doc_id"))


@pytest.mark.slow
def test_extract_at_1g_on_the_adversarial_corpus(tmp_path):
    from adversarial import build_corpus

    corpus = build_corpus(tmp_path / "adv")
    out = tmp_path / "out"
    run = _job(["jobs/extract.py", "--input", str(tmp_path / "adv" / "pages.parquet"), "--output", str(out),
                "--show", "0"])
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    _accounted(out, corpus.doc_ids, "doc_id")
    rejects = pq.read_table(Path(str(out) + "_rejects")).to_pylist()
    assert {r["doc_id"]: r["reason"] for r in rejects}["adv-huge-50mb"] == "html_too_large"
    out_warc = tmp_path / "out_warc"
    run = _job(["jobs/extract.py", "--input", str(tmp_path / "adv" / "warc"), "--output", str(out_warc),
                "--show", "0"])
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "OutOfMemoryError" not in run.stderr


@pytest.mark.slow
def test_a_page_larger_than_the_heap_is_refused_before_any_work(tmp_path):
    src = tmp_path / "huge.parquet"
    _write_pages(src, 1, 700 * MiB // 10)  # 70 MB page alone in its row group
    run = _job(["jobs/extract.py", "--input", str(src), "--output", str(tmp_path / "out"), "--show", "0"],
               heap="512m")
    assert run.returncode != 0
    assert "Raise spark.driver.memory to at least" in run.stderr and "Traceback" not in run.stderr
    assert "OutOfMemoryError" not in run.stderr and "at org.apache" not in run.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_one_page_over_the_heaps_planned_size_among_small_ones_is_a_reject(tmp_path):
    """The densest row group's mean page fits, so nothing is refused up front; the one
    block-dense 9.7 MiB page (pages like it died with OutOfMemoryError at 1g) is rejected
    as html_too_large at 1g, the others are processed."""
    src = tmp_path / "mixed.parquet"
    _write_pages(src, 20, 150_000)
    small = pq.read_table(src)
    big_path = tmp_path / "big.parquet"
    _write_pages(big_path, 1, int(9.7 * MiB))
    big = pq.read_table(big_path).to_pylist()[0]
    big["url"] = "https://mem.test/big"
    pq.write_table(pa.concat_tables([small.slice(0, 10), pa.Table.from_pylist([big], schema=small.schema),
                                     small.slice(10)]), src)
    out = tmp_path / "out"
    run = _job(["jobs/extract.py", "--input", str(src), "--output", str(out), "--show", "0"])
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "OutOfMemoryError" not in run.stderr
    _accounted(out, [f"https://mem.test/{i}" for i in range(20)] + ["https://mem.test/big"])
    rejects = pq.read_table(Path(str(out) + "_rejects")).to_pylist()
    assert [(r["url"], r["reason"]) for r in rejects] == [("https://mem.test/big", "html_too_large")]
