"""WARC files -> a Spark table of response records (thin adapter over ``ingest.warc``).

* Files are listed on the driver (local paths with ``os``; ``s3a://``, ``gs://``,
  ``hdfs://``, ``abfss://``, ``dbfs:/`` through the Hadoop FileSystem API, so globs and
  directories work as in any Spark read). Only names and sizes reach the driver.
* One task per file: files are independent and a task streams its file record by
  record (``mapInArrow``), so memory is one record, not one file.
* Executors open files with ``reader``:
  ``auto`` - local / ``file:`` paths with ``open()``, ``dbfs:/`` through ``/dbfs``,
  other URIs through ``pyarrow.fs`` (S3, GCS, HDFS, Azure with the executor's
  default credentials), as a seekable stream;
  ``hadoop`` - Spark's ``binaryFiles``: the cluster's Hadoop credentials and any
  filesystem Spark can read, but each file is held in the task's memory once (about
  1 GB for a Common Crawl WARC): use it when the executors' Python cannot reach the
  storage directly, with executor memory to match.
"""

from __future__ import annotations

import functools
import glob as globlib
import io
import os
from typing import Iterable, Iterator, Sequence
from urllib.parse import urlparse

from pulpie_spark.ingest.warc import RECORD_FIELDS, iter_warc_records

WARC_SUFFIXES = (".warc", ".warc.gz")
INGEST_DDL = ("record_id string, url string, warc_date timestamp, http_status int, content_type string, "
              "declared_charset string, html binary, source_file string, offset long, doc_id string, "
              "error string, skip_reason string")
_BATCH_ROWS = 256
_BATCH_BYTES = 32 << 20


def ingest_schema():
    from pyspark.sql.types import _parse_datatype_string

    return _parse_datatype_string(INGEST_DDL)


def _arrow_schema():
    import pyarrow as pa

    return pa.schema([
        ("record_id", pa.string()), ("url", pa.string()), ("warc_date", pa.timestamp("us", tz="UTC")),
        ("http_status", pa.int32()), ("content_type", pa.string()), ("declared_charset", pa.string()),
        ("html", pa.binary()), ("source_file", pa.string()), ("offset", pa.int64()),
        ("doc_id", pa.string()), ("error", pa.string()), ("skip_reason", pa.string()),
    ])


def _is_local(path: str) -> bool:
    return urlparse(path).scheme in ("", "file")


def is_warc_name(name: str) -> bool:
    return name.lower().endswith(WARC_SUFFIXES)


def list_warc_files(spark, inputs: str | Sequence[str]) -> list[str]:
    """Sorted WARC files under ``inputs`` (files, directories, globs; comma-separated ok)."""
    if isinstance(inputs, str):
        inputs = [p for p in inputs.split(",") if p.strip()]
    found: set[str] = set()
    for raw in inputs:
        path = raw.strip()
        if _is_local(path):
            local = urlparse(path).path if path.startswith("file:") else path
            candidates = globlib.glob(local) if globlib.has_magic(local) else [local]
            for candidate in candidates:
                if os.path.isdir(candidate):
                    for dirpath, dirnames, filenames in os.walk(candidate):
                        dirnames[:] = [d for d in dirnames if not d.startswith((".", "_"))]
                        found.update(os.path.abspath(os.path.join(dirpath, f))
                                     for f in filenames if is_warc_name(f))
                elif os.path.isfile(candidate):
                    found.add(os.path.abspath(candidate))  # named explicitly: take it whatever its suffix
        else:
            found.update(_list_hadoop(spark, path))
    return sorted(found)


def _list_hadoop(spark, path: str) -> list[str]:
    jvm = spark.sparkContext._jvm
    hpath = jvm.org.apache.hadoop.fs.Path(path)
    fs = hpath.getFileSystem(spark._jsc.hadoopConfiguration())
    statuses = fs.globStatus(hpath) or []
    out = []
    for status in statuses:
        if status.isDirectory():
            it = fs.listFiles(status.getPath(), True)
            while it.hasNext():
                child = it.next().getPath()
                if is_warc_name(child.getName()):
                    out.append(child.toString())
        else:
            out.append(status.getPath().toString())
    return out


def open_stream(path: str):
    """A seekable binary stream for ``path`` on an executor (see module docstring)."""
    parsed = urlparse(path)
    if parsed.scheme in ("", "file"):
        return open(parsed.path if parsed.scheme else path, "rb")
    if parsed.scheme == "dbfs":
        return open("/dbfs/" + path.split(":", 1)[1].lstrip("/"), "rb")
    import pyarrow.fs as pafs

    uri = "s3://" + path.split("://", 1)[1] if parsed.scheme in ("s3a", "s3n") else path
    filesystem, inner = pafs.FileSystem.from_uri(uri)
    return filesystem.open_input_file(inner)


def _to_batches(rows: Iterable[dict]) -> Iterator:
    import pyarrow as pa

    schema = _arrow_schema()
    pending: list[dict] = []
    size = 0
    for row in rows:
        pending.append(row)
        size += len(row["html"] or b"")
        if len(pending) >= _BATCH_ROWS or size >= _BATCH_BYTES:
            yield pa.RecordBatch.from_pylist(pending, schema=schema)
            pending, size = [], 0
    if pending:
        yield pa.RecordBatch.from_pylist(pending, schema=schema)


def _ingest_paths(batches, *, keep_non_html: bool, keep_non_200: bool) -> Iterator:
    for batch in batches:
        for path in batch.column("source_file").to_pylist():
            rows = iter_warc_records(functools.partial(open_stream, path), path,
                                     keep_non_html=keep_non_html, keep_non_200=keep_non_200)
            yield from _to_batches(rows)


def _ingest_blobs(pairs, *, keep_non_html: bool, keep_non_200: bool) -> Iterator[tuple]:
    for path, blob in pairs:
        rows = iter_warc_records(lambda blob=blob: io.BytesIO(blob), path,
                                 keep_non_html=keep_non_html, keep_non_200=keep_non_200)
        for row in rows:
            yield tuple(row[f] for f in RECORD_FIELDS)


def read_warc(spark, inputs: str | Sequence[str], *, keep_non_html: bool = False,
              keep_non_200: bool = False, reader: str = "auto"):
    """A DataFrame of response records (``INGEST_DDL``), one task per WARC file.

    Rows with ``error`` set are always present (damaged records, unreadable files);
    rows with a ``skip_reason`` only when the matching ``keep_*`` flag is set.
    """
    files = list_warc_files(spark, inputs)
    if not files:
        raise FileNotFoundError(f"no WARC files found under {inputs!r}")
    sc = spark.sparkContext
    if reader == "hadoop":
        rdd = sc.binaryFiles(",".join(files), minPartitions=len(files)).mapPartitions(
            functools.partial(_ingest_blobs, keep_non_html=keep_non_html, keep_non_200=keep_non_200))
        return spark.createDataFrame(rdd, ingest_schema())
    if reader != "auto":
        raise ValueError(f"unknown WARC reader {reader!r}; expected auto or hadoop")
    # parallelize with one slice per file: each task reads exactly one file.
    paths = spark.createDataFrame(sc.parallelize([(f,) for f in files], len(files)), "source_file string")
    fn = functools.partial(_ingest_paths, keep_non_html=keep_non_html, keep_non_200=keep_non_200)
    return paths.mapInArrow(fn, ingest_schema())


def detect_input_format(spark, path: str) -> str:
    """``warc`` for WARC files (or a local directory of them), ``delta`` for a Delta table, else ``parquet``."""
    from pulpie_spark.io import detect_format

    first = path.split(",")[0].strip()
    if is_warc_name(first.rstrip("*")) or first.endswith((".warc.gz*", ".warc*")):
        return "warc"
    if urlparse(first).scheme in ("", "file"):
        local = urlparse(first).path if first.startswith("file:") else first
        if os.path.isdir(local) and not os.path.isdir(os.path.join(local, "_delta_log")):
            names = os.listdir(local)
            if names and any(is_warc_name(n) for n in names) and not any(n.endswith(".parquet") for n in names):
                return "warc"
    return detect_format(spark, first)


def load_input(spark, path: str, input_format: str = "auto", **warc_options):
    from pulpie_spark.io import read_table

    fmt = detect_input_format(spark, path) if input_format in (None, "auto") else input_format
    if fmt == "warc":
        # Every record comes in: the extract stage sends non-HTML / non-200 records to the
        # rejects table as "skipped:<why>", so none disappears without a trace.
        warc_options = {"keep_non_html": True, "keep_non_200": True, **warc_options}
        records = read_warc(spark, path, **warc_options)
        # Ingest runs one task per file; with fewer files than task slots (a sample, a
        # test) spread the pages over the slots for the per-page stages.
        slots = spark.sparkContext.defaultParallelism
        if records.rdd.getNumPartitions() < slots:
            records = records.repartition(slots, "doc_id")
        return records
    return read_table(spark, path, fmt)
