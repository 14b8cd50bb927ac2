"""Bounded JVM memory for tables of HTML: reader batches sized in bytes, partitions that fit.

Spark's defaults are made for rows of a few hundred bytes: the vectorized Parquet
reader decodes 4,096 rows per batch (``spark.sql.parquet.columnarReaderBatchSize``),
so a row group of 2,000 pages of 150 KB becomes one 300 MB column vector, and one
Parquet row group is read by one task whatever its size. Pages are 10 KB to 50 MB.

* :func:`table_footprint` reads the Parquet footers of a DataFrame's input files
  (metadata only, no data): rows, uncompressed bytes, the densest row group.
* :func:`reader_batch_rows` turns a byte budget (``spark.pulpie.read.batchBytes``,
  default 16 MiB) into the reader's batch size in rows for that table.
* :func:`bounded_read` sets it (and nothing the user set explicitly) for the duration
  of a job's actions, then restores the session.
* :func:`spread` hash-partitions a table whose partitions hold more than
  ``spark.pulpie.read.partitionBytes`` (default 64 MiB) of data, or fewer partitions
  than task slots, so one huge row group is processed by every core.
* :func:`check_fits` refuses, before any work, a table holding a row that the heap
  cannot even read (``InputTooLarge`` names the setting to raise); a page it can read but
  not parse (:func:`largest_page_for_heap`) is rejected alone, as ``html_too_large``.

And for the Python workers, which live for the whole job and see every batch:

* :func:`arrow_batch_rows` bounds the rows of an Arrow batch to Python by bytes
  (Spark 4.3 applies ``spark.sql.execution.arrow.maxBytesPerBatch`` to neither
  ``pandas_udf`` nor ``mapInPandas`` batches: measured, 256-row batches of 30-44 MB of
  HTML under a 16 MiB setting), so rows per batch is the bound that holds.
* :func:`release_freed_memory` hands what a batch freed back to the OS;
  :func:`releasing_memory` wraps a UDF body so that it does after every batch.
"""

from __future__ import annotations

import logging
import math
import os
import re
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache, wraps
from urllib.parse import urlparse

log = logging.getLogger(__name__)

MiB = 1 << 20
READER_BATCH_CONF = "spark.sql.parquet.columnarReaderBatchSize"
BATCH_BYTES_CONF = "spark.pulpie.read.batchBytes"
PARTITION_BYTES_CONF = "spark.pulpie.read.partitionBytes"
DEFAULT_BATCH_BYTES = 16 * MiB
DEFAULT_PARTITION_BYTES = 64 * MiB
ARROW_BATCH_BYTES_CONF = "spark.pulpie.arrow.batchBytes"
DEFAULT_ARROW_BATCH_BYTES = 8 * MiB
ARROW_BATCH_MOST_ROWS = 256
ARROW_RECORDS_CONF = "spark.sql.execution.arrow.maxRecordsPerBatch"
SPARK_READER_BATCH_ROWS = 4096  # Spark's default
CACHE_BATCH_CONF = "spark.sql.inMemoryColumnarStorage.batchSize"
SPARK_CACHE_BATCH_ROWS = 10000  # Spark's default
FOOTER_SAMPLE = 64  # footers read at most (the largest files first)
# JVM heap per byte of the largest page, on top of HEAP_BASE_BYTES, at `local[2]` (two tasks
# share the heap). Bounded by `benchmarks/memory.py grid` on block-dense synthetic pages
# (docs/BENCHMARKS.md): at 1g, 7.5 MiB pages complete (one heap allocation failed and was
# recovered by spilling: the edge) and 9.7 MiB pages die with OutOfMemoryError; at 2g,
# 10 MiB pages complete. With a 400 MiB base (not measured) 64.3 < per-byte <= 83.2 at the
# edge; 96 keeps a 1g heap ~15 % under it (1g: pages to 6.5 MiB, 2g: 17.2 MiB, 4g: 38.5 MiB).
# The extract job rejects larger pages as html_too_large (spark_pipeline.html_byte_limit).
HEAP_BASE_BYTES = 400 * MiB
HEAP_PER_PAGE_BYTE = 96
# JVM heap per byte of the largest ROW that is only read, rejected in SQL and written (a
# page over the size guard never reaches the per-page stages): at 1g the adversarial
# corpus's 50 MB page completes and a 100 MiB page alone dies with OutOfMemoryError (the
# Parquet writer copies the value into its column statistics), so 6.2 < per-byte <= 12.5
# with the 400 MiB base; 13 keeps 1g under the measured pass (1g: rows to 48 MiB).
HEAP_PER_READ_BYTE = 13


class InputTooLarge(ValueError):
    """An input the configured heap cannot process (raised before any work)."""


@dataclass(frozen=True)
class Footprint:
    files: int            # files whose footers were read
    rows: int
    bytes: int            # uncompressed bytes of all columns
    max_group_bytes: int  # the largest row group
    max_row_bytes: int    # bytes per row of the densest row group (its mean)
    min_largest_page: int  # a lower bound of the largest row (the densest row group's mean)
    row_groups: int = 0   # row groups read (Spark reads each in one task)


def _size_to_bytes(text: str | None, default: int) -> int:
    if not text:
        return default
    match = re.fullmatch(r"\s*(\d+)\s*([kmgt]?)b?\s*", str(text).lower())
    if not match:
        return default
    unit = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[match.group(2)]
    value = int(match.group(1)) * unit
    # Spark reads a bare number of spark.*.memory as MiB.
    return value * MiB if not match.group(2) and value < 1 << 20 else value


def conf_bytes(spark, key: str, default: int) -> int:
    return _size_to_bytes(spark.conf.get(key, None), default)


def _is_set(spark, key: str) -> bool:
    """Whether the user chose ``key``: set, and not to the value our own session builder
    gives every local session (session.LOCAL_DEFAULTS), which a job may refine."""
    from pulpie_spark.session import LOCAL_DEFAULTS

    try:
        value = spark.conf.get(key, None)
    except Exception:
        return False
    return value is not None and value != LOCAL_DEFAULTS.get(key)


def heap_setting(spark) -> str:
    """The setting that sizes the heap of the JVM that runs tasks: the driver's in local
    mode, else an executor's."""
    master = spark.sparkContext.master or ""
    return "spark.driver.memory" if master.startswith("local") else "spark.executor.memory"


def heap_bytes(spark) -> int:
    """The heap of the JVM that runs tasks (``heap_setting``; Spark's default 1g)."""
    return _size_to_bytes(spark.sparkContext.getConf().get(heap_setting(spark), "1g"), 1 << 30)


def task_slots(spark) -> int:
    return max(1, int(spark.sparkContext.defaultParallelism))


def largest_page_for_heap(heap: int) -> int:
    """The largest page a core can process with ``heap`` bytes of JVM heap (measured model)."""
    return max(0, (heap - HEAP_BASE_BYTES) // HEAP_PER_PAGE_BYTE)


def heap_for_page(page_bytes: int) -> int:
    return HEAP_BASE_BYTES + HEAP_PER_PAGE_BYTE * page_bytes


def largest_row_for_heap(heap: int) -> int:
    """The largest row a task can read, reject and write with ``heap`` bytes of JVM heap."""
    return max(0, (heap - HEAP_BASE_BYTES) // HEAP_PER_READ_BYTE)


def heap_for_row(row_bytes: int) -> int:
    return HEAP_BASE_BYTES + HEAP_PER_READ_BYTE * row_bytes


def _open_footer(path: str):
    import pyarrow.parquet as pq

    parsed = urlparse(path)
    if parsed.scheme in ("", "file"):
        return pq.ParquetFile(parsed.path if parsed.scheme else path)
    import pyarrow.fs as pafs

    uri = "s3://" + path.split("://", 1)[1] if parsed.scheme in ("s3a", "s3n") else path
    filesystem, inner = pafs.FileSystem.from_uri(uri)
    return pq.ParquetFile(filesystem.open_input_file(inner))


def table_footprint(df, sample: int = FOOTER_SAMPLE) -> Footprint | None:
    """Row-group sizes from the Parquet footers of ``df``'s input files, or None when it
    has none (a computed frame, WARC records) or they cannot be read from the driver."""
    try:
        files = [f for f in df.inputFiles() if f.endswith(".parquet") or "." not in os.path.basename(f)]
    except Exception:
        return None
    if not files:
        return None
    rows = total = max_group = max_row = groups = 0
    read = 0
    for path in sorted(files)[:sample]:
        try:
            meta = _open_footer(path).metadata
        except Exception as exc:  # not reachable from the driver: Spark's defaults apply
            log.info("no footer for %s (%s): reader batch not sized", path, exc)
            return None
        read += 1
        for i in range(meta.num_row_groups):
            group = meta.row_group(i)
            size = sum(group.column(c).total_uncompressed_size for c in range(group.num_columns))
            rows += group.num_rows
            groups += 1
            total += size
            max_group = max(max_group, size)
            if group.num_rows:
                max_row = max(max_row, size // group.num_rows)
    return Footprint(files=read, rows=rows, bytes=total, max_group_bytes=max_group,
                     max_row_bytes=max_row, min_largest_page=max_row, row_groups=groups)


def reader_batch_rows(footprint: Footprint | None, batch_bytes: int = DEFAULT_BATCH_BYTES,
                      most: int = SPARK_READER_BATCH_ROWS) -> int:
    """Rows per batch so that a batch of the densest row group holds about ``batch_bytes``
    (``most`` at most: Spark's 4,096 for the vectorized reader; 1 at least)."""
    if footprint is None or footprint.max_row_bytes <= 0:
        return most
    return int(min(most, max(1, batch_bytes // footprint.max_row_bytes)))


def arrow_batch_rows(spark, footprint: Footprint | None) -> int:
    """Rows per Arrow batch to a Python worker: about ``spark.pulpie.arrow.batchBytes``
    (default 8 MiB) of input rows, at most ARROW_BATCH_MOST_ROWS. A worker holds a batch's
    pages several times over (the Arrow buffers, their Python strings, the stage's
    outputs: the classify stage receives the HTML, map HTML, blocks and paths)."""
    return reader_batch_rows(footprint, conf_bytes(spark, ARROW_BATCH_BYTES_CONF, DEFAULT_ARROW_BATCH_BYTES),
                             ARROW_BATCH_MOST_ROWS)


def releasing_memory(batch_fn):
    """``batch_fn`` (a pandas UDF body: a batch in, a batch out) followed by
    :func:`release_freed_memory`, even when it raises. The worker lives for the whole job,
    so each batch's parse trees and strings are handed back before the next one."""
    @wraps(batch_fn)    # pandas_udf reads the type hints through __wrapped__
    def run_and_release(*args, **kwargs):
        try:
            return batch_fn(*args, **kwargs)
        finally:
            release_freed_memory()
    return run_and_release


def release_freed_memory() -> None:
    """Return memory a Python worker freed to the OS; called after each batch.

    A worker lives for the whole job, and what one batch frees stays in the process:
    pyarrow's pool (mimalloc) keeps freed pages for reuse, and glibc keeps freed heap
    (fragmented by parse trees and strings) unless trimmed. Measured in one process over
    960 real pages (segment + classify, batches of 48): RSS 1,092 MiB; after
    ``malloc_trim(0)`` 836; after the Arrow pool's ``release_unused()`` 518
    (docs/BENCHMARKS.md, "Python worker memory"). Cost: 0.4 ms measured after freeing
    1 M strings, against seconds of work per batch."""
    try:
        import pyarrow as pa

        pa.default_memory_pool().release_unused()
    except Exception:  # an old pyarrow or another pool: nothing to release
        pass
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@lru_cache(maxsize=1)
def _malloc_trim():
    """glibc's ``malloc_trim``, or None (musl, macOS)."""
    try:
        import ctypes

        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


def check_fits(spark, footprint: Footprint | None, what: str = "input") -> None:
    """Raise :class:`InputTooLarge` when the table surely holds a row the heap cannot even
    read and write (the densest row group's mean row is above :func:`largest_row_for_heap`:
    its largest row is too). Pages that can be read but not parsed are rejected one by one
    (``html_too_large``: spark_pipeline.html_byte_limit)."""
    if footprint is None:
        return
    heap = heap_bytes(spark)
    limit = largest_row_for_heap(heap)
    if footprint.min_largest_page > limit:
        need = heap_for_row(footprint.min_largest_page)
        key = heap_setting(spark)
        raise InputTooLarge(
            f"{what} holds a row of at least {footprint.min_largest_page / MiB:.0f} MiB; with {key}="
            f"{heap / MiB:.0f}m a task can read rows up to {limit / MiB:.0f} MiB. "
            f"Raise {key} to at least {math.ceil(need / MiB)}m (see docs/running.md, 'Memory').")


@contextmanager
def session_conf(spark, settings: dict[str, str]):
    """Set ``settings`` on the session for the block, leaving any key the user set
    explicitly as it is; restore the session afterwards. Yields the keys it set."""
    applied, previous = [], {}
    for key, value in settings.items():
        if _is_set(spark, key):
            continue
        previous[key] = spark.conf.get(key, None)
        spark.conf.set(key, value)
        applied.append(key)
    try:
        yield applied
    finally:
        for key in applied:
            if previous[key] is None:
                spark.conf.unset(key)
            else:  # our session builder's default: put it back
                spark.conf.set(key, previous[key])


def bounded_read_settings(spark, footprint: Footprint | None, *, cache: bool = False) -> dict[str, str]:
    """The reader batch in rows for ``footprint``; with ``cache``, also the rows per
    in-memory cached batch (Spark's 10,000 rows of HTML would be one 1.5 GB buffer)."""
    batch_bytes = conf_bytes(spark, BATCH_BYTES_CONF, DEFAULT_BATCH_BYTES)
    rows = reader_batch_rows(footprint, batch_bytes)
    settings = {READER_BATCH_CONF: str(rows)}
    if cache and footprint is not None and footprint.max_row_bytes > 0:
        settings[CACHE_BATCH_CONF] = str(int(min(SPARK_CACHE_BATCH_ROWS,
                                                 max(1, batch_bytes // footprint.max_row_bytes))))
    return settings


def apply_session_conf(spark, settings: dict[str, str]) -> list[str]:
    """Set ``settings`` for the rest of a job's session, except keys the user set."""
    applied = [key for key in settings if not _is_set(spark, key)]
    for key in applied:
        spark.conf.set(key, settings[key])
    return applied


def spread(df, footprint: Footprint | None, key_cols: list[str], *, by_row_groups: bool = False):
    """Hash-partition ``df`` on ``key_cols`` when a partition would hold more than
    ``spark.pulpie.read.partitionBytes`` or there are fewer partitions than task slots.

    Spark reads one Parquet row group in one task; the shuffle after the read (which
    spills to disk) gives the per-page stages partitions that fit and every core work.

    With ``by_row_groups`` (the curate job) a table of fewer row groups than task slots
    is spread too: Spark splits a file into as many partitions as slots, but the rows of
    one row group land in one of them, so one core would run every per-row stage."""
    from pyspark.sql import functions as F

    spark = df.sparkSession
    slots = task_slots(spark)
    current = df.rdd.getNumPartitions()
    holding = current  # partitions that hold rows
    if by_row_groups and footprint is not None and footprint.files == len(df.inputFiles()) and footprint.row_groups:
        holding = min(current, footprint.row_groups)
    target = current
    if footprint is not None and footprint.bytes:
        per_partition = conf_bytes(spark, PARTITION_BYTES_CONF, DEFAULT_PARTITION_BYTES)
        target = max(target, math.ceil(footprint.bytes / per_partition))
    target = max(target, slots)
    if target <= current and holding >= slots:
        return df
    log.info("spreading %d input partitions over %d (%s)", current, target,
             f"{footprint.bytes / MiB:.0f} MiB" if footprint else "few partitions")
    return df.repartition(target, F.xxhash64(*[F.col(c) for c in key_cols]))
