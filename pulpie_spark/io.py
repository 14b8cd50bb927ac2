"""Reading and writing the pipeline's tables: Parquet, and Delta with or without Delta jars.

``write_table(df, path, fmt)`` / ``read_table(spark, path, fmt)`` are the only way jobs
touch storage, so every stage gets the same behaviour:

* ``parquet``: Spark's Parquet writer.
* ``delta`` on a cluster with Delta Lake (Databricks, EMR, Dataproc with the DELTA
  component, or delta-spark jars): Spark's own ``format("delta")``.
* ``delta`` without Delta jars (pip's PySpark, local runs): a real Delta table built
  with delta-rs (the ``deltalake`` package) *without collecting rows to the driver*:
  the executors write Parquet files into a fresh sub-directory of the table, then the
  driver commits one Delta transaction whose ``add`` actions name exactly those files
  (and, for ``overwrite``, ``remove`` actions for the previous ones). Reading such a
  table goes through the log's active file list, never the folder, because the folder
  also holds files that earlier versions removed.

Which Delta writer is used can be forced with the Spark property
``spark.pulpie.delta.writer`` = ``auto`` (default) | ``spark`` | ``delta-rs``.

Byte-identical files. Spark's Parquet files (``parquet`` and the delta-rs path) are
written with v2 data pages and no dictionary (``BYTE_IDENTICAL_PARQUET_OPTIONS``), so the
same rows in the same order give the same bytes from any JVM. The default (v1 pages,
dictionary) lists up to four encodings per column chunk in the footer, and parquet-mr
(1.17) writes that list in ``HashSet`` order; a Java enum's hash is its identity hash,
so the order, and a few footer bytes, change from JVM to JVM. With v2 pages the
repetition/definition levels are not in that list and without a dictionary each chunk
has exactly one encoding (``DELTA_BYTE_ARRAY`` for strings and binary,
``DELTA_BINARY_PACKED`` for integers, ``PLAIN`` for floats, ``RLE`` for booleans).
Spark's vectorized reader, pyarrow and delta-rs read them (``tests/test_io_bytes.py``);
``spark.pulpie.parquet.byteIdentical=false`` restores parquet-mr's defaults for a
reader without v2 pages. Spark's own ``format("delta")`` writer keeps its defaults.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from typing import Sequence
from urllib.parse import urlparse

log = logging.getLogger(__name__)

FORMATS = ("parquet", "delta")
MODES = ("overwrite", "append", "error", "errorifexists", "ignore")
DELTA_WRITER_CONF = "spark.pulpie.delta.writer"
BYTE_IDENTICAL_CONF = "spark.pulpie.parquet.byteIdentical"
# Hadoop properties of parquet-mr's ParquetOutputFormat, passed as write options (which
# Spark copies into the job's Hadoop configuration): one encoding per column chunk.
BYTE_IDENTICAL_PARQUET_OPTIONS = {"parquet.writer.version": "v2", "parquet.enable.dictionary": "false"}

# One probe per SparkContext: the classpath does not change while it lives.
_spark_delta_cache: dict[str, bool] = {}


# ----------------------------------------------------------------------------- paths

def _is_local(path: str) -> bool:
    scheme = urlparse(path).scheme
    return scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt")


def _local_path(path: str) -> str:
    return urlparse(path).path if path.startswith("file:") else path


def delta_rs_uri(path: str) -> str:
    """The URI delta-rs understands for a Hadoop-style path.

    Hadoop's ``s3a://`` / ``s3n://`` are plain ``s3://`` to object_store; Databricks'
    ``dbfs:/`` is mounted at ``/dbfs`` on the driver.
    """
    if _is_local(path):
        return os.path.abspath(_local_path(path))
    scheme = urlparse(path).scheme
    if scheme in ("s3a", "s3n"):
        return "s3://" + path.split("://", 1)[1]
    if scheme == "dbfs":
        return "/dbfs/" + path.split(":", 1)[1].lstrip("/")
    return path


def _spark_path(path: str) -> str:
    """A path Spark resolves the same way on the driver and the executors."""
    return os.path.abspath(path) if _is_local(path) and not path.startswith("file:") else path


def path_exists(spark, path: str) -> bool:
    """True when ``path`` exists, through the Hadoop FileSystem for remote URIs."""
    if _is_local(path):
        return os.path.exists(_local_path(path))
    jvm = getattr(spark, "_jvm", None) or getattr(spark.sparkContext, "_jvm", None)
    hpath = jvm.org.apache.hadoop.fs.Path(path)
    fs = hpath.getFileSystem(spark._jsc.hadoopConfiguration())
    return bool(fs.exists(hpath))


# ----------------------------------------------------------------------------- delta detection

def spark_has_delta(spark) -> bool:
    """Whether Spark itself can write ``format("delta")`` (Delta data source on the classpath).

    Decided once per SparkContext. ``spark.pulpie.delta.writer`` overrides the probe.
    """
    forced = (spark.conf.get(DELTA_WRITER_CONF, "auto") or "auto").lower()
    if forced == "spark":
        return True
    if forced in ("delta-rs", "deltars", "deltalake"):
        return False
    try:
        key = spark.sparkContext.applicationId
    except Exception:  # Spark Connect has no SparkContext: assume a managed runtime (Databricks).
        return True
    if key not in _spark_delta_cache:
        _spark_delta_cache[key] = _probe_delta_source(spark)
    return _spark_delta_cache[key]


def _probe_delta_source(spark) -> bool:
    try:
        jvm = spark.sparkContext._jvm
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName("org.apache.spark.sql.delta.sources.DeltaDataSource", False, loader)
        return True
    except Exception:
        return False


# ----------------------------------------------------------------------------- write

def parquet_write_options(spark) -> dict[str, str]:
    """Options for Spark's Parquet writer: byte-identical files unless turned off."""
    enabled = (spark.conf.get(BYTE_IDENTICAL_CONF, "true") or "true").strip().lower()
    if enabled not in ("true", "false"):
        raise ValueError(f"{BYTE_IDENTICAL_CONF} must be true or false, got {enabled!r}")
    return dict(BYTE_IDENTICAL_PARQUET_OPTIONS) if enabled == "true" else {}


def write_table(df, path: str, fmt: str = "parquet", mode: str = "overwrite",
                partition_by: str | Sequence[str] | None = None) -> str:
    """Write ``df`` to ``path`` as ``fmt`` (parquet | delta). Returns the writer used.

    ``mode`` is Spark's save mode: overwrite | append | error | ignore. Row order inside
    the files is the DataFrame's: callers sort (e.g. ``sortWithinPartitions("doc_id")``)
    where byte-identical reruns matter.
    """
    fmt = (fmt or "parquet").lower()
    mode = (mode or "overwrite").lower()
    if fmt not in FORMATS:
        raise ValueError(f"unsupported table format {fmt!r}; expected one of {FORMATS}")
    if mode not in MODES:
        raise ValueError(f"unsupported write mode {mode!r}; expected one of {MODES}")
    if isinstance(partition_by, str):
        partition_by = [partition_by]
    partition_by = list(partition_by or [])
    spark = df.sparkSession
    if fmt == "parquet":
        writer = df.write.mode(mode).format("parquet").options(**parquet_write_options(spark))
        if partition_by:
            writer = writer.partitionBy(*partition_by)
        writer.save(_spark_path(path))
        return "spark-parquet"
    if spark_has_delta(spark):
        writer = df.write.mode(mode).format("delta")
        if partition_by:
            writer = writer.partitionBy(*partition_by)
        writer.save(_spark_path(path))
        return "spark-delta"
    _write_delta_rs(df, path, mode, partition_by)
    return "delta-rs"


def _write_delta_rs(df, path: str, mode: str, partition_by: list[str]) -> None:
    import deltalake
    from deltalake.transaction import AddAction, create_table_with_add_actions
    from pyspark.sql.pandas.types import to_arrow_schema

    spark = df.sparkSession
    uri = delta_rs_uri(path)
    exists = deltalake.DeltaTable.is_deltatable(uri)
    if exists and mode in ("error", "errorifexists"):
        raise FileExistsError(f"Delta table already exists: {path}")
    if exists and mode == "ignore":
        return

    # Executors write Parquet into a directory no earlier version uses; the commit
    # below is what makes the files part of the table (an aborted job leaves only
    # unreferenced files, which VACUUM removes).
    write_id = f"part-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:12]}"
    data_dir = path.rstrip("/") + "/" + write_id
    previous = spark.conf.get("spark.sql.parquet.outputTimestampType", None)
    # Delta wants TIMESTAMP_MICROS; Spark's default INT96 is not in the Delta protocol.
    spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    try:
        writer = df.write.mode("errorifexists").format("parquet").options(**parquet_write_options(spark))
        if partition_by:
            writer = writer.partitionBy(*partition_by)
        writer.save(_spark_path(data_dir))
    finally:
        if previous is None:
            spark.conf.unset("spark.sql.parquet.outputTimestampType")
        else:
            spark.conf.set("spark.sql.parquet.outputTimestampType", previous)

    data_fields = [f for f in df.schema.fields if f.name not in partition_by]
    part_fields = [df.schema[name] for name in partition_by]
    from pyspark.sql.types import StructType

    arrow_schema = to_arrow_schema(StructType(data_fields + part_fields), timezone="UTC")
    delta_schema = deltalake.Schema.from_arrow(arrow_schema)

    actions = []
    for rel_path, size, mtime_ms, partition_values in _list_data_files(spark, data_dir, partition_by):
        stats = _parquet_stats(data_dir + "/" + rel_path) if _is_local(path) else None
        actions.append(AddAction(
            path=f"{write_id}/{rel_path}", size=size, partition_values=partition_values,
            modification_time=mtime_ms, data_change=True,
            stats=json.dumps(stats) if stats else "",
        ))
    if exists:
        # One transaction: overwrite also writes `remove` actions for the previous files.
        deltalake.DeltaTable(uri).create_write_transaction(
            actions, mode=mode, schema=delta_schema, partition_by=partition_by or None)
    else:
        create_table_with_add_actions(uri, delta_schema, actions, mode="overwrite",
                                      partition_by=partition_by or None)
    log.info("delta-rs commit: %d files under %s (%s)", len(actions), path, mode)


def _list_data_files(spark, data_dir: str, partition_by: list[str]):
    """(relative path, size, mtime ms, partition values) of each Parquet file under data_dir."""
    from urllib.parse import unquote

    files: list[tuple[str, int, int]] = []
    if _is_local(data_dir):
        root = _local_path(data_dir)
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(("_", ".")))
            for name in sorted(filenames):
                if name.endswith(".parquet") and not name.startswith(("_", ".")):
                    full = os.path.join(dirpath, name)
                    st = os.stat(full)
                    files.append((os.path.relpath(full, root).replace(os.sep, "/"),
                                  st.st_size, int(st.st_mtime * 1000)))
    else:
        jvm = spark.sparkContext._jvm
        root = jvm.org.apache.hadoop.fs.Path(data_dir)
        fs = root.getFileSystem(spark._jsc.hadoopConfiguration())
        root_str = fs.makeQualified(root).toString().rstrip("/") + "/"
        it = fs.listFiles(root, True)
        while it.hasNext():
            status = it.next()
            full = status.getPath().toString()
            rel = full[len(root_str):] if full.startswith(root_str) else status.getPath().getName()
            if rel.endswith(".parquet") and not any(p.startswith(("_", ".")) for p in rel.split("/")):
                files.append((rel, int(status.getLen()), int(status.getModificationTime())))
        files.sort()
    for rel, size, mtime in files:
        values: dict[str, str | None] = {}
        for segment in rel.split("/")[:-1]:
            key, sep, value = segment.partition("=")
            if sep and key in partition_by:
                value = unquote(value)
                values[key] = None if value == "__HIVE_DEFAULT_PARTITION__" else value
        yield rel, size, mtime, {k: values.get(k) for k in partition_by}


def _parquet_stats(file_path: str) -> dict:
    """Delta ``stats`` from the Parquet footer (row count and null counts), no data read."""
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(_local_path(file_path)).metadata
    null_count: dict[str, int] = {}
    top_level = {}
    for i in range(meta.num_columns):
        column = meta.schema.column(i)
        if "." not in column.path:  # only flat top-level columns have meaningful null counts
            top_level[column.path] = i
    for name, i in top_level.items():
        total = 0
        for rg in range(meta.num_row_groups):
            st = meta.row_group(rg).column(i).statistics
            if st is None or not st.has_null_count:
                total = -1
                break
            total += st.null_count
        if total >= 0:
            null_count[name] = total
    return {"numRecords": meta.num_rows, "nullCount": null_count}


# ----------------------------------------------------------------------------- read

def detect_format(spark, path: str) -> str:
    """``delta`` when the path holds a ``_delta_log``, else ``parquet``."""
    return "delta" if path_exists(spark, path.rstrip("/") + "/_delta_log") else "parquet"


def read_table(spark, path: str, fmt: str | None = None):
    """Read a table written by :func:`write_table` (or any Parquet folder / Delta table)."""
    fmt = (fmt or detect_format(spark, path)).lower()
    if fmt not in FORMATS:
        raise ValueError(f"unsupported table format {fmt!r}; expected one of {FORMATS}")
    if fmt == "parquet":
        return spark.read.parquet(_spark_path(path))
    if spark_has_delta(spark):
        return spark.read.format("delta").load(_spark_path(path))
    return _read_delta_rs(spark, path)


def delta_active_files(path: str) -> list[tuple[str, dict]]:
    """(absolute file URI, partition values) of the files in the table's current version."""
    import deltalake

    import pyarrow as pa

    table = deltalake.DeltaTable(delta_rs_uri(path))
    # deltalake >= 1.0 returns an arro3 table: pa.table() takes it through the C stream.
    actions = pa.table(table.get_add_actions(flatten=False)).to_pylist()
    root = table.table_uri.rstrip("/")
    files = []
    for action in sorted(actions, key=lambda a: a["path"]):
        rel = action["path"]
        uri = rel if "://" in rel else f"{root}/{rel}"
        files.append((uri, action.get("partition") or action.get("partition_values") or {}))
    return files


def _read_delta_rs(spark, path: str):
    import deltalake
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    table = deltalake.DeltaTable(delta_rs_uri(path))
    partition_cols = list(table.metadata().partition_columns)
    spark_schema = from_arrow_schema(_arrow_schema(table))
    data_schema = type(spark_schema)([f for f in spark_schema.fields if f.name not in partition_cols])
    groups: dict[tuple, list[str]] = {}
    for uri, values in delta_active_files(path):
        key = tuple((c, values.get(c)) for c in partition_cols)
        groups.setdefault(key, []).append(_from_delta_rs_uri(uri, path))
    if not groups:
        return spark.createDataFrame([], spark_schema)
    frames = []
    for key, files in sorted(groups.items(), key=lambda kv: [str(v) for _, v in kv[0]]):
        frame = spark.read.schema(data_schema).parquet(*files)
        for column, value in key:
            frame = frame.withColumn(column, F.lit(value).cast(spark_schema[column].dataType))
        frames.append(frame.select(*spark_schema.fieldNames()))
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


def _arrow_schema(table):
    import pyarrow as pa

    schema = table.schema()
    try:
        return pa.schema(schema.to_arrow())
    except AttributeError:  # older deltalake
        return schema.to_pyarrow()


def _from_delta_rs_uri(uri: str, original: str) -> str:
    """Map a delta-rs file URI back to the scheme Spark was given (s3 -> s3a, file)."""
    scheme = urlparse(original).scheme
    if scheme in ("s3a", "s3n") and uri.startswith("s3://"):
        return f"{scheme}://" + uri[len("s3://"):]
    if uri.startswith("/"):
        return "file://" + uri
    return uri
