"""Loading the extract job's input: a Parquet / Delta table, or WARC files ingested on the fly."""

from __future__ import annotations

import os
from urllib.parse import urlparse

from pulpie_spark.ingest.spark import is_warc_name


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
    from pulpie_spark.ingest.spark import read_warc
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
