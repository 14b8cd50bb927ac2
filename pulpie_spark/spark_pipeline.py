"""Extract wiring: a table with ``url`` + ``html`` -> output rows + rejects with a reason.

    input --doc_id--> --segment (pandas UDF, CPU)--> [repartition when GPUs]
          --classify (mapInPandas, GPU profile when configured)--> --render (pandas UDF)-->
          processed (staged once as Parquet) --> output (reason is null) | rejects (reason set)

Every input row ends in exactly one of the two tables. The output keeps every input
column unchanged and adds ``doc_id`` (kept if present), ``title`` (segment/title.py),
``markdown``, ``text``, ``main_html`` (optional), ``n_blocks``, ``n_main``, ``model_id``,
``error`` and ``fallback``. With ``fallback="trafilatura"`` (the default) a page the model could not
serve (no blocks, a classify/render error, empty Markdown, a text under
``page.SHORT_OUTPUT_CHARS`` non-space characters) is extracted by trafilatura
(``fallback="resiliparse"``: by resiliparse, faster, plain text only): it stays in the
output with ``fallback`` = ``<fallback>:<why>`` and the model path's failure in ``error``.
Rejects keep the input columns and add ``doc_id``, ``reason`` and ``stage``.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass

from pulpie_spark import reasons
from pulpie_spark.classify.base import MAIN_THRESHOLD
from pulpie_spark.page import KEEPS_MODEL_OUTPUT, SHORT_OUTPUT_CHARS, WHITE_SPACE_RE
from pulpie_spark.render.fallback import DEFAULT_FALLBACK

log = logging.getLogger(__name__)

OUTPUT_COLUMNS = ("doc_id", "title", "markdown", "text", "main_html", "n_blocks", "n_main", "model_id", "error",
                  "fallback")
REJECT_COLUMNS = ("doc_id", "reason", "stage")
# Input columns that the WARC ingest adds and that decide rejects here.
INGEST_ERROR_COL = "error"
INGEST_SKIP_COL = "skip_reason"
_P = "_px_"  # prefix of working columns: never collides with a user's column
INPUT_PREFIX = "input_"  # an input column whose name the output adds goes out as input_<name>


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
    compile: str = "auto"                    # torch.compile scope of a transformers encoder (auto: layers on CUDA)
    fallback: str = DEFAULT_FALLBACK
    main_threshold: float = MAIN_THRESHOLD   # P(main) at or above which a block is main
    unsure_threshold: float | None = None    # page-gate score sending a page to the fallback (None: the model's)
    html_col: str = "html"
    url_col: str = "url"
    charset_col: str = "declared_charset"


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


def html_byte_limit(spark) -> int:
    """The page size above which a page is rejected (``html_too_large``) before the
    per-page stages: the guard the executors apply (``spark.executorEnv.PULPIE_MAX_HTML_BYTES``
    when set, else this process's ``PULPIE_MAX_HTML_BYTES`` or 10 MiB), and at most the
    largest page a task's heap is planned for (:func:`pulpie_spark.memory.largest_page_for_heap`):
    one such page among small ones would otherwise end the job in a Java heap error."""
    from pulpie_spark import memory
    from pulpie_spark.guards import ENV_MAX_HTML_BYTES, max_html_bytes

    guard = max_html_bytes()
    configured = spark.conf.get("spark.executorEnv." + ENV_MAX_HTML_BYTES, None)
    if configured and configured.strip():
        try:
            if int(configured) > 0:
                guard = int(configured)
        except ValueError:
            pass
    heap = memory.heap_bytes(spark)
    for_heap = memory.largest_page_for_heap(heap)
    if for_heap < guard:
        log.warning("pages over %.1f MiB are rejected as %s: a %d MiB heap is planned for pages up to that size "
                    "(raise %s to process larger ones; docs/running.md, 'Memory')", for_heap / memory.MiB,
                    reasons.HTML_TOO_LARGE, heap // memory.MiB, memory.heap_setting(spark))
        return for_heap
    return guard


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

    from pulpie_spark.classify.spark_adapter import classify_dataframe, resolve_gpu_amount
    from pulpie_spark.render.fallback import validate_fallback
    from pulpie_spark.render.spark_adapter import fallback_column, render_column
    from pulpie_spark.segment.spark_adapter import segment_column

    options = options or ExtractOptions()
    validate_input(df, options)
    spark = df.sparkSession
    input_cols = [c for c in df.columns if c != "doc_id"]
    df = with_doc_id(df, options.url_col, options.html_col)

    # Rows the ingest already marked as unusable never reach the parser.
    in_reason = F.lit(None).cast("string")
    if INGEST_SKIP_COL in df.columns:
        in_reason = F.when(F.col(INGEST_SKIP_COL).isNotNull(), F.concat(F.lit(reasons.SKIPPED_PREFIX), F.col(INGEST_SKIP_COL)))
    if INGEST_ERROR_COL in df.columns:
        in_reason = F.when(F.col(INGEST_ERROR_COL).isNotNull(),
                           F.concat(F.lit(reasons.INGEST_PREFIX), F.col(INGEST_ERROR_COL).cast("string"))).otherwise(in_reason)
    df = df.withColumn(_P + "in_reason", in_reason)

    charset = (F.col(options.charset_col).cast("string") if options.charset_col in df.columns
               else F.lit(None).cast("string"))
    # A page over the size guard never enters the per-page stages: it is rejected in SQL
    # with the reason the parser's guard gives it (html_too_large), so its bytes are not
    # copied into the stages' row queues and Arrow batches (a 50 MB page would be, about
    # ten times). Its row joins the others after the stages.
    too_large = F.coalesce(F.octet_length(F.col(options.html_col)) > F.lit(html_byte_limit(spark)), F.lit(False))
    big = df.where(F.col(_P + "in_reason").isNull() & too_large)
    df = df.where(F.col(_P + "in_reason").isNotNull() | ~too_large)
    html_for_parser = F.when(F.col(_P + "in_reason").isNull(), F.col(options.html_col))
    seg = segment_column(html_for_parser, charset)
    df = df.withColumn(_P + "seg", seg).select(
        *[F.col(c) for c in df.columns],
        F.col(_P + "seg.blocks").alias(_P + "blocks"),
        F.col(_P + "seg.block_paths").alias(_P + "block_paths"),
        F.col(_P + "seg.map_html").alias(_P + "map_html"),
        F.col(_P + "seg.title").alias(_P + "title"),
        F.col(_P + "seg.seg_error").alias(_P + "seg_error"),
    )
    if resolve_gpu_amount(spark, options.gpu_amount) > 0:
        # A shuffle boundary keeps segmentation in CPU tasks and gives the GPU stage
        # its own tasks (stage-level scheduling applies per stage).
        df = df.repartition(df.rdd.getNumPartitions(), "doc_id")
    df = classify_dataframe(df, options.model, blocks_col=_P + "blocks", paths_col=_P + "block_paths",
                            device=options.device, gpu_amount=options.gpu_amount,
                            batch_tokens=options.batch_tokens, prefix=_P, main_threshold=options.main_threshold,
                            unsure_threshold=options.unsure_threshold, compile=options.compile)
    rendered = render_column(F.when(F.col(_P + "classify_error").isNull(), F.col(_P + "map_html")),
                             F.col(_P + "labels"), links=options.links, images=options.images)
    df = df.withColumn(_P + "render", rendered)
    model_error = F.coalesce(F.col(_P + "seg_error"), F.col(_P + "classify_error"), F.col(_P + "render.render_error"))
    markdown, text = F.col(_P + "render.markdown"), F.col(_P + "render.text")
    fallback = error = F.lit(None).cast("string")
    fallback_name = validate_fallback(options.fallback)
    if fallback_name != "none":
        # In SQL so that only the rows that need it ship their HTML to the fallback UDF.
        why = fallback_reason_column(F.col(_P + "seg_error"), model_error, markdown, F.col(_P + "unsure_page"), text)
        needed = F.col(_P + "in_reason").isNull() & why.isNotNull()
        df = df.withColumn(_P + "why", why).withColumn(
            _P + "fb", fallback_column(F.when(needed, F.col(options.html_col)), charset,
                                       links=options.links, images=options.images, fallback=fallback_name))
        used = needed & F.col(_P + "fb.fallback").isNotNull()
        markdown = F.when(used, F.col(_P + "fb.markdown")).otherwise(markdown)
        text = F.when(used, F.col(_P + "fb.text")).otherwise(text)
        fallback = F.when(used, F.concat(F.lit(fallback_name + ":"), F.col(_P + "why")))
        # The Python API's rule (page.extract_pages): a failed fallback's error is kept too.
        # A short or unsure page the fallback cannot serve keeps the model's output, without an error.
        error = F.when(used, model_error).when(needed & ~F.col(_P + "why").isin(*KEEPS_MODEL_OUTPUT),
                                               F.col(_P + "fb.fallback_error"))
        # A page rescued by the fallback is output, not a reject.
        model_error = F.when(~used, model_error)
    reason = F.coalesce(F.col(_P + "in_reason"), model_error)
    stage = (F.when(F.col(_P + "in_reason").isNotNull(), F.lit("ingest"))
             .when(model_error.isNull(), F.lit(None))
             .when(F.col(_P + "seg_error").isNotNull(), F.lit("segment"))
             .when(F.col(_P + "classify_error").isNotNull(), F.lit("classify"))
             .when(F.col(_P + "render.render_error").isNotNull(), F.lit("render")))
    df = df.select(
        *[F.col(c) for c in input_cols],
        "doc_id",
        F.col(_P + "title"),
        markdown.alias(_P + "markdown"),
        text.alias(_P + "text"),
        F.col(_P + "render.main_html").alias(_P + "main_html"),
        F.size(_P + "blocks").cast("int").alias(_P + "n_blocks"),
        F.col(_P + "render.n_main").alias(_P + "n_main"),
        F.col(_P + "model_id").alias(_P + "model_id"),
        reason.alias(_P + "reason"),
        stage.alias(_P + "stage"),
        error.alias(_P + "error"),
        fallback.alias(_P + "fallback"),
    )
    # What the stages give a page over the size guard (the fallback's guard refuses it too).
    big_error = (reasons.prefixed(reasons.FALLBACK_FAILED_PREFIX, reasons.HTML_TOO_LARGE)
                 if fallback_name != "none" else None)
    types = dict(df.dtypes)
    big = big.select(
        *[F.col(c) for c in input_cols],
        "doc_id",
        *[F.lit(None).cast(types[_P + c]).alias(_P + c) for c in ("title", "markdown", "text", "main_html")],
        F.lit(0).cast("int").alias(_P + "n_blocks"),
        *[F.lit(None).cast(types[_P + c]).alias(_P + c) for c in ("n_main", "model_id")],
        F.lit(reasons.HTML_TOO_LARGE).alias(_P + "reason"),
        F.lit("segment").alias(_P + "stage"),
        F.lit(big_error).cast("string").alias(_P + "error"),
        F.lit(None).cast("string").alias(_P + "fallback"),
    )
    return df.unionByName(big), input_cols


def _input_columns(input_cols: list[str], added: tuple[str, ...]) -> list:
    """The input columns as they go out: one whose name the stage adds is kept as
    ``input_<name>`` (never dropped), except the WARC ingest's ``error``, which the
    stage consumed (a row with one is a reject with reason ``ingest:<error>``)."""
    from pyspark.sql import functions as F

    cols = []
    for c in input_cols:
        if c == INGEST_ERROR_COL and c in added:
            continue
        cols.append(F.col(c).alias(INPUT_PREFIX + c) if c in added else F.col(c))
    return cols


def fallback_reason_column(seg_error, model_error, markdown, unsure=None, text=None):
    """:func:`pulpie_spark.page.fallback_reason` as a Spark Column (same order, same names)."""
    from pyspark.sql import functions as F

    reason = (F.when(seg_error == reasons.NO_BLOCKS, F.lit(reasons.FALLBACK_NO_BLOCKS))
              .when(model_error.isNotNull(), F.lit(reasons.FALLBACK_ERROR))
              # str.strip() in Python: Unicode white space ((?U) in Java's regex)
              .when(~F.coalesce(markdown, F.lit("")).rlike(r"(?U)\S"), F.lit(reasons.FALLBACK_EMPTY_OUTPUT)))
    if text is not None:
        # length() counts code points, as Python's len() does
        visible = F.length(F.regexp_replace(text, WHITE_SPACE_RE, ""))
        reason = reason.when(text.isNotNull() & (visible < SHORT_OUTPUT_CHARS), F.lit(reasons.FALLBACK_SHORT_OUTPUT))
    if unsure is not None:
        reason = reason.when(F.coalesce(unsure, F.lit(False)), F.lit(reasons.FALLBACK_UNSURE))
    return reason


def output_frame(processed, input_cols: list[str], options: ExtractOptions):
    from pyspark.sql import functions as F

    kept = [c for c in input_cols if not (options.drop_html and c == options.html_col)]
    cols = _input_columns(kept, OUTPUT_COLUMNS) + [
        F.col("doc_id"),
        F.col(_P + "title").alias("title"),
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

    return processed.where(F.col(_P + "reason").isNotNull()).select(
        *_input_columns(input_cols, REJECT_COLUMNS), F.col("doc_id"),
        F.col(_P + "reason").alias("reason"), F.col(_P + "stage").alias("stage"))


def rejects_path_for(output: str) -> str:
    return output.rstrip("/") + "_rejects"


def staging_path_for(output: str) -> str:
    return output.rstrip("/") + "_staging-" + uuid.uuid4().hex[:12]


def _delete_path(spark, path: str) -> None:
    jvm = spark.sparkContext._jvm
    hpath = jvm.org.apache.hadoop.fs.Path(_spark_path(path))
    hpath.getFileSystem(spark._jsc.hadoopConfiguration()).delete(hpath, True)


def _spark_path(path: str) -> str:
    from pulpie_spark.io import _spark_path as spark_path

    return spark_path(path)


# Arrow batches to and from Python, bounded in bytes (page sizes vary by orders of
# magnitude). Set for the job's actions when the user has not set them. The bound that
# holds is the rows per batch, sized from the input's footers in run_extract
# (memory.arrow_batch_rows): Spark 4.3 does not apply maxBytesPerBatch to pandas_udf /
# mapInPandas batches, which is set for the Arrow paths that do.
ARROW_BATCH_SETTINGS = {
    "spark.sql.execution.arrow.maxBytesPerBatch": str(16 << 20),
}


def run_extract(df, output: str, *, fmt: str = "parquet", rejects: str | None = None,
                options: ExtractOptions | None = None, mode: str = "overwrite",
                staging: str | None = None) -> dict:
    """Process ``df``, write the output and the rejects tables, return a summary dict.

    Memory stays bounded whatever the pages' and row groups' sizes (pulpie_spark.memory):
    the input is read with a reader batch sized in bytes, spread over partitions that
    fit, and the processed rows (page bytes included) are staged once as Parquet next to
    the output (``staging``, default ``<output>_staging-<id>``, deleted at the end)
    instead of being cached in memory; the summary, the output and the rejects are read
    from there (the summary reads only the small columns).
    """
    from pyspark.sql import functions as F

    from pulpie_spark import memory
    from pulpie_spark.io import parquet_write_options, write_table

    options = options or ExtractOptions()
    started = time.time()
    spark = df.sparkSession
    footprint = memory.table_footprint(df)
    memory.check_fits(spark, footprint)
    settings = {**ARROW_BATCH_SETTINGS, memory.ARROW_RECORDS_CONF: str(memory.arrow_batch_rows(spark, footprint)),
                **memory.bounded_read_settings(spark, footprint)}
    df = memory.spread(df, footprint, [c for c in (options.url_col, options.html_col) if c in df.columns])
    processed, input_cols = process(df, options)
    staging = staging or staging_path_for(output)
    rejects = rejects or rejects_path_for(output)
    with memory.session_conf(spark, settings) as applied:
        try:
            # Sorted within partitions: same input and config -> byte-identical files.
            (processed.sortWithinPartitions("doc_id").write.mode("overwrite")
             .options(**parquet_write_options(spark)).parquet(_spark_path(staging)))
            # The staged files are Spark's (row groups <= 128 MB): size the reader for them.
            staged = spark.read.parquet(_spark_path(staging))
            for key, value in memory.bounded_read_settings(spark, memory.table_footprint(staged)).items():
                if key in applied:  # only what this call set, never the user's own value
                    spark.conf.set(key, value)
            # One small aggregation (a row per reason) gives every number of the summary.
            reason_key = F.regexp_extract(F.col(_P + "reason"), r"^([^:]*(:[a-z_]+)?)", 1)
            groups = staged.groupBy(reason_key.alias("reason")).agg(
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
            reject_reasons = {g["reason"]: g["n"] for g in sorted(groups, key=lambda g: str(g["reason"]))
                              if g["reason"] is not None}
            out_df = output_frame(staged, input_cols, options).sortWithinPartitions("doc_id")
            rej_df = rejects_frame(staged, input_cols).sortWithinPartitions("doc_id")
            write_table(out_df, output, fmt, mode=mode)
            write_table(rej_df, rejects, fmt, mode=mode)
        finally:
            _delete_path(spark, staging)
    stats.update({
        "output": output, "rejects_path": rejects, "format": fmt, "reject_reasons": reject_reasons,
        "seconds": round(time.time() - started, 2), "model": options.model,
    })
    stats["output_rows"] = stats["rows"] - stats["rejects"]
    return stats
