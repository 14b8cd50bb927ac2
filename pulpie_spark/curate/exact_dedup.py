"""Exact dedup: SHA-256 of the normalized text, one survivor per hash (keep policy).

Spark's SQL ``sha2`` hashes the UTF-8 bytes in the JVM, equal to :func:`text_sha256`.

Hot keys: a few texts repeat millions of times in a crawl (cookie banners, "404 Not
Found", parked domains). A Window partitioned by the hash would send every copy of such
a text to one task and sort them there. Instead, like datatrove / NeMo Curator / dolma,
each hash is reduced to (group size, representative) with aggregates that Spark combines
map-side, so a hot text costs one partial row per map task. The result is joined back
to the rows on (hash, slice): a hot text is cut into slices (a manual skew join, not left
to AQE's size thresholds), each joined in its own task.

The representative is the minimum of a per-row *rank* struct whose ascending order is
exactly the keep policy of :mod:`pulpie_spark.curate.keep` (``spark_order``): one null
flag per key (nulls last in both directions), then the value, or for "desc" an
order-reversing encoding of it (see :func:`_ascending_key`).
"""

from __future__ import annotations

import hashlib

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulpie_spark.curate.keep import KeepOrder, effective_order


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_HEX = "0123456789ABCDEF"
# Sorts after every hex digit: ends a reversed byte string, so a longer string (which is
# greater) gets the smaller encoding at the first position where the shorter one ends.
_REVERSED_END = "G"


def _descending_value(col: Column, dtype: T.DataType) -> list[Column]:
    """Non-null values of ``col`` encoded so that ascending order of the result is the
    descending order of ``col`` under Spark's ordering (the one ``desc_nulls_last`` uses)."""
    if isinstance(dtype, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        return [F.bitwise_not(col)]  # ~x = -x - 1: reverses the order and cannot overflow
    if isinstance(dtype, (T.FloatType, T.DoubleType)):
        # Spark orders NaN above +inf, so it comes first in "desc"; -NaN would still be NaN
        return [~F.isnan(col), -col]
    if isinstance(dtype, T.DecimalType):
        return [-col]  # same precision, exact
    if isinstance(dtype, T.BooleanType):
        return [~col]
    if isinstance(dtype, T.DateType):
        return [F.bitwise_not(F.unix_date(col))]
    if isinstance(dtype, T.TimestampType):
        return [F.bitwise_not(F.unix_micros(col))]
    if isinstance(dtype, (T.StringType, T.BinaryType)):
        if getattr(dtype, "collation", "UTF8_BINARY") != "UTF8_BINARY":
            raise TypeError(f"keep policy: 'desc' on a collated string column ({dtype}) is not supported")
        # Spark compares strings and binaries as unsigned bytes, shorter prefix first: hex
        # keeps that order, complementing each digit reverses it, the end mark handles prefixes.
        return [F.concat(F.translate(F.hex(col), _HEX, _HEX[::-1]), F.lit(_REVERSED_END))]
    raise TypeError(f"keep policy: 'desc' is not supported on {dtype.simpleString()} columns")


def _ascending_key(name: str, dtype: T.DataType, direction: str) -> list[Column]:
    """Struct fields for one policy key: ``isNull`` first (false < true: nulls last in
    both directions, as ``spark_order``), then the value in ascending order."""
    col = F.col(name)
    value = _descending_value(col, dtype) if direction == "desc" else [col]
    return [col.isNull()] + value


def _row_fingerprint(df: DataFrame, text_col: str) -> Column:
    """xxhash64 of every column but the text (already the group key): the last rank key.

    doc_id is not guaranteed unique (the same WARC record ingested twice, from two files):
    rows can tie on every policy key. Ordering those by their other columns makes the choice
    a function of the rows, not of partitioning or retries. Rows whose fingerprint ties too
    are copies of one record (a 64-bit collision aside): which physical copy stays does not
    change the output."""
    cols = []
    for field in sorted(df.schema.fields, key=lambda f: f.name):  # column order does not matter
        if field.name == text_col:
            continue
        col = F.col(field.name)
        # xxhash64 rejects maps, whose entry order is not canonical anyway
        cols.append(F.array_sort(F.map_entries(col)) if isinstance(field.dataType, T.MapType) else col)
    return F.xxhash64(*cols) if cols else F.lit(0).cast("long")


def exact_dedup(df: DataFrame, keep_order: KeepOrder = None,
                text_col: str = "text", hot_text_rows: int = 100_000) -> DataFrame:
    """Add ``text_sha256``, ``exact_group_size`` and ``exact_duplicate_of`` (the kept
    doc_id for removed copies, null for the kept one). Rows are not dropped here; rows
    with a null text form one group, as before.

    A text with more than ``hot_text_rows`` copies is joined back in slices of about that
    many rows, so no task receives all of it. The input is read more than once (aggregate,
    rows): persist it if it is expensive to compute. Existing output columns are replaced."""
    if hot_text_rows < 1:
        raise ValueError(f"hot_text_rows must be >= 1, got {hot_text_rows}")
    df = df.drop("text_sha256", "exact_group_size", "exact_duplicate_of")
    hashed = df.withColumn("text_sha256", F.sha2(F.col(text_col), 256))
    types = {f.name: f.dataType for f in hashed.schema.fields}
    order = effective_order(keep_order, hashed.columns)
    fields: list[Column] = []
    for i, (name, direction) in enumerate(order):
        fields += [c.alias(f"k{i}_{j}") for j, c in enumerate(_ascending_key(name, types[name], direction))]
    doc_id_field = f"k{len(order) - 1}_1"  # doc_id asc is always the last key: (isNull, doc_id)
    fields.append(F.col("_exact_fingerprint").alias("row_fingerprint"))
    rank = F.struct(*fields)
    # "" is never a hex digest: null texts get a join key of their own
    keyed = (hashed.withColumn("_exact_group", F.coalesce(F.col("text_sha256"), F.lit("")))
             .withColumn("_exact_fingerprint", _row_fingerprint(df, text_col)))

    # Combinable aggregate: a hot text is one partial row per map task.
    per_text = (keyed.groupBy("_exact_group")
                .agg(F.count(F.lit(1)).alias("exact_group_size"), F.min(rank).alias("_rep_rank"))
                .withColumn("_slices", F.ceil(F.col("exact_group_size") / F.lit(hot_text_rows))))
    # Hot texts are few (at most rows / hot_text_rows): broadcast, so the rows learn their
    # slice without a shuffle. A row's slice comes from its fingerprint: copies of one
    # record (same fingerprint) meet in one slice.
    hot = per_text.where(F.col("_slices") > 1).select("_exact_group", "_slices")
    sliced = (keyed.join(F.broadcast(hot), "_exact_group", "left")
              .withColumn("_slice", F.coalesce(F.pmod(F.col("_exact_fingerprint"), F.col("_slices")), F.lit(0))))
    per_slice = per_text.withColumn("_slice", F.explode(F.sequence(F.lit(0), F.col("_slices") - 1)))
    joined = sliced.join(per_slice.drop("_slices"), ["_exact_group", "_slice"])

    # Identical copies of the representative (doc_id is not unique: a record ingested twice)
    # tie on every key: exactly one stays, and any one is the same row. The window reuses
    # the join's partitioning (no shuffle); its groups are one text's rows with one doc_id.
    copy_index = F.row_number().over(Window.partitionBy("_exact_group", "_slice", "doc_id").orderBy(rank))
    kept = (rank == F.col("_rep_rank")) & (copy_index == 1)
    return (joined.withColumn("exact_duplicate_of", F.when(~kept, F.col(f"_rep_rank.{doc_id_field}")))
            .select(*df.columns, "text_sha256", "exact_group_size", "exact_duplicate_of"))
