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
* :func:`check_fits` refuses, before any work, a table holding a page that the heap
  cannot hold (``InputTooLarge`` names the setting to raise).
"""

from __future__ import annotations

import logging
import math
import os
import re
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import urlparse

log = logging.getLogger(__name__)

MiB = 1 << 20
READER_BATCH_CONF = "spark.sql.parquet.columnarReaderBatchSize"
BATCH_BYTES_CONF = "spark.pulpie.read.batchBytes"
PARTITION_BYTES_CONF = "spark.pulpie.read.partitionBytes"
DEFAULT_BATCH_BYTES = 16 * MiB
DEFAULT_PARTITION_BYTES = 64 * MiB
SPARK_READER_BATCH_ROWS = 4096  # Spark's default
CACHE_BATCH_CONF = "spark.sql.inMemoryColumnarStorage.batchSize"
SPARK_CACHE_BATCH_ROWS = 10000  # Spark's default
FOOTER_SAMPLE = 64  # footers read at most (the largest files first)
# JVM heap per byte of the largest page, on top of HEAP_BASE_BYTES, at `local[2]` (two tasks
# share the heap). Bounded by `benchmarks/memory.py grid --heap 1g` (docs/BENCHMARKS.md): at
# 1g, block-dense pages of 1 MiB complete and pages of 10 MiB die with OutOfMemoryError; at
# 2g the 10 MiB pages complete: (1g - base) / 10 MiB < per-byte <= (2g - base) / 10 MiB, i.e.
# 62.4 < per-byte <= 164.8 with a 400 MiB base (the base is not measured); 64 is the least
# refusing value inside those bounds (1g: pages to 9.75 MiB, 2g: 25.75 MiB).
HEAP_BASE_BYTES = 400 * MiB
HEAP_PER_PAGE_BYTE = 64


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
    try:
        return spark.conf.get(key, None) is not None
    except Exception:
        return False


def heap_bytes(spark) -> int:
    """The heap of the JVM that runs tasks: the driver's in local mode, else an executor's."""
    master = spark.sparkContext.master or ""
    key = "spark.driver.memory" if master.startswith("local") else "spark.executor.memory"
    return _size_to_bytes(spark.sparkContext.getConf().get(key, "1g"), 1 << 30)


def task_slots(spark) -> int:
    return max(1, int(spark.sparkContext.defaultParallelism))


def largest_page_for_heap(heap: int) -> int:
    """The largest page a core can process with ``heap`` bytes of JVM heap (measured model)."""
    return max(0, (heap - HEAP_BASE_BYTES) // HEAP_PER_PAGE_BYTE)


def heap_for_page(page_bytes: int) -> int:
    return HEAP_BASE_BYTES + HEAP_PER_PAGE_BYTE * page_bytes


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


def reader_batch_rows(footprint: Footprint | None, batch_bytes: int = DEFAULT_BATCH_BYTES) -> int:
    """Rows per vectorized-reader batch so that a batch of the densest row group holds
    about ``batch_bytes`` (Spark's 4,096 at most, 1 at least)."""
    if footprint is None or footprint.max_row_bytes <= 0:
        return SPARK_READER_BATCH_ROWS
    return int(min(SPARK_READER_BATCH_ROWS, max(1, batch_bytes // footprint.max_row_bytes)))


def check_fits(spark, footprint: Footprint | None, what: str = "input") -> None:
    """Raise :class:`InputTooLarge` when the table surely holds a page the heap cannot
    process (the densest row group's mean row is above the limit: its largest row is too)."""
    if footprint is None:
        return
    heap = heap_bytes(spark)
    limit = largest_page_for_heap(heap)
    if footprint.min_largest_page > limit:
        need = heap_for_page(footprint.min_largest_page)
        key = "spark.driver.memory" if (spark.sparkContext.master or "").startswith("local") else "spark.executor.memory"
        raise InputTooLarge(
            f"{what} holds a page of at least {footprint.min_largest_page / MiB:.0f} MiB; with {key}="
            f"{heap / MiB:.0f}m a core can process pages up to {limit / MiB:.0f} MiB. "
            f"Raise {key} to at least {math.ceil(need / MiB)}m (see docs/running.md, 'Memory').")


@contextmanager
def session_conf(spark, settings: dict[str, str]):
    """Set ``settings`` on the session for the block, leaving any key the user set
    explicitly as it is; restore the session afterwards. Yields the keys it set."""
    applied = []
    for key, value in settings.items():
        if _is_set(spark, key):
            continue
        spark.conf.set(key, value)
        applied.append(key)
    try:
        yield applied
    finally:
        for key in applied:
            spark.conf.unset(key)


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
