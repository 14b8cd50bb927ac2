"""Extract wiring: a table with ``url`` + ``html`` -> output rows + rejects with a reason.

    input --doc_id--> --segment (pandas UDF, CPU)--> [repartition when GPUs]
          --classify (mapInPandas, GPU profile when configured)--> --render (pandas UDF)-->
          processed (persisted once) --> output (reason is null) | rejects (reason set)

Every input row ends in exactly one of the two tables. The output keeps every input
column unchanged and adds ``doc_id`` (kept if present), ``markdown``, ``text``,
``main_html`` (optional), ``n_blocks``, ``n_main``, ``model_id``, ``error`` and
``fallback``. With ``fallback="trafilatura"`` (the default) a page the model could not
serve (no blocks, a classify/render error, empty Markdown) is extracted by trafilatura:
it stays in the output with ``fallback`` = ``trafilatura:<why>`` and the model path's
failure in ``error``. Rejects keep the input columns and add ``doc_id``, ``reason`` and
``stage``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from pulpie_spark.fallback import DEFAULT_FALLBACK

log = logging.getLogger(__name__)

OUTPUT_COLUMNS = ("doc_id", "markdown", "text", "main_html", "n_blocks", "n_main", "model_id", "error", "fallback")
REJECT_COLUMNS = ("doc_id", "reason", "stage")
# Input columns that the WARC ingest adds and that decide rejects here.
INGEST_ERROR_COL = "error"
INGEST_SKIP_COL = "skip_reason"
_P = "_px_"  # prefix of working columns: never collides with a user's column


@dataclass
class ExtractOptions:
    model: str = "default"
    keep_main_html: bool = False
    drop_html: bool = False   # leave the raw HTML out of the output (rejects always keep it)
    links: bool = False
    images: bool = False
    device: str | None = None
    gpu_amount: float | None = None
    batch_tokens: int | None = None
    fallback: str = DEFAULT_FALLBACK
    html_col: str = "html"
    url_col: str = "url"
    charset_col: str = "declared_charset"
    extra: dict = field(default_factory=dict)


def with_doc_id(df, url_col: str = "url", html_col: str = "html"):
    """Add ``doc_id`` where missing: sha256(url NUL html bytes) hex, as the WARC ingest does."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType

    html_type = df.schema[html_col].dataType
    html_bytes = F.col(html_col) if isinstance(html_type, BinaryType) else F.encode(F.col(html_col), "UTF-8")
    url_bytes = F.encode(F.coalesce(F.col(url_col).cast("string"), F.lit("")), "UTF-8")
    computed = F.sha2(F.concat(url_bytes, F.unhex(F.lit("00")), F.coalesce(html_bytes, F.unhex(F.lit("")))), 256)
    if "doc_id" in df.columns:
        return df.withColumn("doc_id", F.coalesce(F.col("doc_id").cast("string"), computed))
    return df.withColumn("doc_id", computed)


def validate_input(df, options: ExtractOptions) -> None:
    from pyspark.sql.types import BinaryType, StringType

    missing = [c for c in (options.url_col, options.html_col) if c not in df.columns]
    if missing:
        raise ValueError(f"extract input needs columns {missing}; it has {df.columns}")
    html_type = df.schema[options.html_col].dataType
    if not isinstance(html_type, (BinaryType, StringType)):
        raise ValueError(f"column {options.html_col!r} must be string or binary, not {html_type.simpleString()}")


def process(df, options: ExtractOptions | None = None):
    """All rows with the stage results and ``_px_reason``/``_px_stage`` (null when fine).

    Returns (processed DataFrame, list of input column names in order).
    """
    from pyspark.sql import functions as F

    from pulpie_spark.classify.spark import classify_dataframe, resolve_gpu_amount
    from pulpie_spark.fallback import REASON_EMPTY, REASON_ERROR, REASON_NO_BLOCKS, validate_fallback
    from pulpie_spark.pipeline.fallback import fallback_column
    from pulpie_spark.pipeline.render import render_column
    from pulpie_spark.pipeline.segment import NO_BLOCKS, segment_column

    options = options or ExtractOptions()
    validate_input(df, options)
    spark = df.sparkSession
    input_cols = [c for c in df.columns if c != "doc_id"]
    df = with_doc_id(df, options.url_col, options.html_col)

    # Rows the ingest already marked as unusable never reach the parser.
    in_reason = F.lit(None).cast("string")
    if INGEST_SKIP_COL in df.columns:
        in_reason = F.when(F.col(INGEST_SKIP_COL).isNotNull(), F.concat(F.lit("skipped:"), F.col(INGEST_SKIP_COL)))
    if INGEST_ERROR_COL in df.columns:
        in_reason = F.when(F.col(INGEST_ERROR_COL).isNotNull(),
                           F.concat(F.lit("ingest:"), F.col(INGEST_ERROR_COL).cast("string"))).otherwise(in_reason)
    df = df.withColumn(_P + "in_reason", in_reason)

    charset = (F.col(options.charset_col).cast("string") if options.charset_col in df.columns
               else F.lit(None).cast("string"))
    html_for_parser = F.when(F.col(_P + "in_reason").isNull(), F.col(options.html_col))
    seg = segment_column(html_for_parser, charset)
    df = df.withColumn(_P + "seg", seg).select(
        *[F.col(c) for c in df.columns],
        F.col(_P + "seg.blocks").alias(_P + "blocks"),
        F.col(_P + "seg.block_paths").alias(_P + "block_paths"),
        F.col(_P + "seg.map_html").alias(_P + "map_html"),
        F.col(_P + "seg.seg_error").alias(_P + "seg_error"),
    )
    if resolve_gpu_amount(spark, options.gpu_amount) > 0:
        # A shuffle boundary keeps segmentation in CPU tasks and gives the GPU stage
        # its own tasks (stage-level scheduling applies per stage).
        df = df.repartition(df.rdd.getNumPartitions(), "doc_id")
    df = classify_dataframe(df, options.model, blocks_col=_P + "blocks", paths_col=_P + "block_paths",
                            device=options.device, gpu_amount=options.gpu_amount,
                            batch_tokens=options.batch_tokens)
    rendered = render_column(F.when(F.col("classify_error").isNull(), F.col(_P + "map_html")),
                             F.col("labels"), links=options.links, images=options.images)
    df = df.withColumn(_P + "render", rendered)
    model_error = F.coalesce(F.col(_P + "seg_error"), F.col("classify_error"), F.col(_P + "render.render_error"))
    markdown, text = F.col(_P + "render.markdown"), F.col(_P + "render.text")
    fallback = error = F.lit(None).cast("string")
    if validate_fallback(options.fallback) != "none":
        # Same rule as Extractor (pulpie_spark.fallback.fallback_reason), in SQL so that
        # only the rows that need it ship their HTML to the fallback UDF.
        why = (F.when(F.col(_P + "seg_error") == NO_BLOCKS, F.lit(REASON_NO_BLOCKS))
               .when(model_error.isNotNull(), F.lit(REASON_ERROR))
               .when(F.trim(F.coalesce(markdown, F.lit(""))) == "", F.lit(REASON_EMPTY)))
        needed = F.col(_P + "in_reason").isNull() & why.isNotNull()
        df = df.withColumn(_P + "why", why).withColumn(
            _P + "fb", fallback_column(F.when(needed, F.col(options.html_col)), charset,
                                       links=options.links, images=options.images))
        used = needed & F.col(_P + "fb.fallback").isNotNull()
        markdown = F.when(used, F.col(_P + "fb.markdown")).otherwise(markdown)
        text = F.when(used, F.col(_P + "fb.text")).otherwise(text)
        fallback = F.when(used, F.concat(F.lit("trafilatura:"), F.col(_P + "why")))
        error = F.when(used, model_error)
        # A page rescued by the fallback is output, not a reject.
        model_error = F.when(~used, model_error)
    reason = F.coalesce(F.col(_P + "in_reason"), model_error)
    stage = (F.when(F.col(_P + "in_reason").isNotNull(), F.lit("ingest"))
             .when(model_error.isNull(), F.lit(None))
             .when(F.col(_P + "seg_error").isNotNull(), F.lit("segment"))
             .when(F.col("classify_error").isNotNull(), F.lit("classify"))
             .when(F.col(_P + "render.render_error").isNotNull(), F.lit("render")))
    df = df.select(
        *[F.col(c) for c in input_cols if c not in ("labels", "main_probs", "model_id", "classify_error")],
        "doc_id",
        markdown.alias(_P + "markdown"),
        text.alias(_P + "text"),
        F.col(_P + "render.main_html").alias(_P + "main_html"),
        F.size(_P + "blocks").cast("int").alias(_P + "n_blocks"),
        F.col(_P + "render.n_main").alias(_P + "n_main"),
        F.col("model_id").alias(_P + "model_id"),
        reason.alias(_P + "reason"),
        stage.alias(_P + "stage"),
        error.alias(_P + "error"),
        fallback.alias(_P + "fallback"),
    )
    return df, input_cols


def output_frame(processed, input_cols: list[str], options: ExtractOptions):
    from pyspark.sql import functions as F

    # Input columns that the output defines anew (e.g. the ingest's `error`) are replaced.
    kept = [c for c in input_cols if c not in OUTPUT_COLUMNS
            and not (options.drop_html and c == options.html_col)]
    cols = [F.col(c) for c in kept] + [
        F.col("doc_id"),
        F.col(_P + "markdown").alias("markdown"),
        F.col(_P + "text").alias("text"),
    ]
    if options.keep_main_html:
        cols.append(F.col(_P + "main_html").alias("main_html"))
    cols += [
        F.col(_P + "n_blocks").alias("n_blocks"),
        F.col(_P + "n_main").alias("n_main"),
        F.col(_P + "model_id").alias("model_id"),
        F.col(_P + "error").alias("error"),
        F.col(_P + "fallback").alias("fallback"),
    ]
    return processed.where(F.col(_P + "reason").isNull()).select(*cols)


def rejects_frame(processed, input_cols: list[str]):
    from pyspark.sql import functions as F

    kept = [c for c in input_cols if c not in REJECT_COLUMNS]
    return processed.where(F.col(_P + "reason").isNotNull()).select(
        *[F.col(c) for c in kept], F.col("doc_id"),
        F.col(_P + "reason").alias("reason"), F.col(_P + "stage").alias("stage"))


def extract_dataframes(df, options: ExtractOptions | None = None):
    """(output, rejects, processed) DataFrames, lazily. ``processed`` is what to persist
    when both tables are written, so the model runs once per row."""
    options = options or ExtractOptions()
    processed, input_cols = process(df, options)
    return output_frame(processed, input_cols, options), rejects_frame(processed, input_cols), processed


def rejects_path_for(output: str) -> str:
    return output.rstrip("/") + "_rejects"


def run_extract(df, output: str, *, fmt: str = "parquet", rejects: str | None = None,
                options: ExtractOptions | None = None, mode: str = "overwrite") -> dict:
    """Process ``df``, write the output and the rejects tables, return a summary dict."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from pulpie_spark.io import write_table

    options = options or ExtractOptions()
    started = time.time()
    processed, input_cols = process(df, options)
    # Sorted within partitions: same input and config -> byte-identical files.
    processed = processed.sortWithinPartitions("doc_id").persist(StorageLevel.MEMORY_AND_DISK)
    try:
        # One small aggregation (a row per reason) gives every number of the summary.
        reason_key = F.regexp_extract(F.col(_P + "reason"), r"^([^:]*(:[a-z_]+)?)", 1)
        groups = processed.groupBy(reason_key.alias("reason")).agg(
            F.count(F.lit(1)).alias("n"), F.sum(_P + "n_blocks").alias("blocks"),
            F.sum(_P + "n_main").alias("main")).collect()
        ok = [g for g in groups if g["reason"] is None]
        n_ok = sum(g["n"] for g in ok)
        stats = {
            "rows": sum(g["n"] for g in groups),
            "rejects": sum(g["n"] for g in groups if g["reason"] is not None),
            "mean_n_blocks": (sum(g["blocks"] or 0 for g in ok) / n_ok) if n_ok else None,
            "mean_n_main": (sum(g["main"] or 0 for g in ok) / n_ok) if n_ok else None,
        }
        reasons = {g["reason"]: g["n"] for g in sorted(groups, key=lambda g: str(g["reason"]))
                   if g["reason"] is not None}
        out_df = output_frame(processed, input_cols, options)
        rej_df = rejects_frame(processed, input_cols)
        rejects = rejects or rejects_path_for(output)
        write_table(out_df, output, fmt, mode=mode)
        write_table(rej_df, rejects, fmt, mode=mode)
    finally:
        processed.unpersist()
    stats.update({
        "output": output, "rejects_path": rejects, "format": fmt, "reject_reasons": reasons,
        "seconds": round(time.time() - started, 2), "model": options.model,
    })
    stats["output_rows"] = stats["rows"] - stats["rejects"]
    return stats
