"""Exact dedup: SHA-256 of the normalized text, one survivor per hash (keep policy).

Global: a Window partitioned by the hash puts every copy of a text in one group,
wherever it came from; Spark's SQL ``sha2`` hashes the UTF-8 bytes in the JVM, equal to
:func:`text_sha256` here.
"""

from __future__ import annotations

import hashlib
from typing import Sequence

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from pulpie_spark.curate.keep import spark_order


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def exact_dedup(df: DataFrame, keep_order: Sequence[Sequence[str]] | None = None,
                text_col: str = "text") -> DataFrame:
    """Add ``text_sha256``, ``exact_group_size`` and ``exact_duplicate_of`` (the kept
    doc_id for removed copies, null for the kept one). Rows are not dropped here."""
    hashed = df.withColumn("text_sha256", F.sha2(F.col(text_col), 256))
    group = Window.partitionBy("text_sha256")
    ordered = group.orderBy(*spark_order(keep_order, hashed.columns))
    rep = F.first("doc_id").over(ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow))
    return (hashed
            .withColumn("exact_group_size", F.count(F.lit(1)).over(group))
            .withColumn("_exact_rank", F.row_number().over(ordered))
            .withColumn("exact_duplicate_of", F.when(F.col("_exact_rank") > 1, rep))
            .drop("_exact_rank"))
