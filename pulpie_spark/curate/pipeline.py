"""The curation stages wired together on Spark DataFrames.

    extracted rows
      -> input checks   (extract error, empty text after normalization)   reason extract_error | empty_text
      -> language ID    (fastText lid.176 on the normalized text: columns  reason language:not_selected |
                        language, language_score; --languages filter,      language:low_confidence
                        per-language minimum score, drop or tag)
      -> quality gates  (drop-mode gates; tag-mode gates only list fails)  reason quality:<gate>:<rule>
                        (a row whose normalization + scoring runs over the
                        per-row deadline, PULPIE_PAGE_TIMEOUT_S, or fails)  reason timeout | out_of_memory | error:...
      -> exact dedup    (SHA-256 of normalized text, keep policy)          reason exact_duplicate
      -> near dedup     (MinHash LSH + connected components, keep policy)  reason near_duplicate
      -> curated rows

Every input row ends in exactly one of the two outputs; removed rows carry ``reason``,
``removed_stage`` and, for duplicates, ``duplicate_of`` (the kept doc_id).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pulpie_spark import reasons
from pulpie_spark.curate.config import CurateConfig, config_hash, config_json
from pulpie_spark.curate.exact_dedup import exact_dedup
from pulpie_spark.curate.near_dedup import near_dedup
from pulpie_spark.curate.normalize import NORMALIZE_VERSION, normalization_fingerprint
from pulpie_spark.curate.spark_adapter import normalize_and_score_udf

CURATE_VERSION = "1"
STAGES = ("input", "language", "quality", "exact_dedup", "near_dedup")


@dataclass
class CurateResult:
    annotated: DataFrame                      # every row, reason null when kept (persisted)
    stats: dict = field(default_factory=dict)

    @property
    def kept(self) -> DataFrame:
        # the removal columns are null on every kept row
        return self.annotated.where(F.col("reason").isNull()).drop(
            "reason", "removed_stage", "duplicate_of", "exact_duplicate_of", "near_duplicate_of")

    @property
    def removed(self) -> DataFrame:
        return self.annotated.where(F.col("reason").isNotNull())


def curate(df: DataFrame, cfg: CurateConfig, *, text_col: str = "text",
           storage: StorageLevel = StorageLevel.MEMORY_AND_DISK) -> CurateResult:
    """Annotate every row of an extracted table; see the module docstring."""
    if "doc_id" not in df.columns:
        raise ValueError("curate needs a stable `doc_id` column (see docs/architecture.md)")
    has_error = "error" in df.columns
    norm_hash, _ = normalization_fingerprint(cfg.normalize)
    udf = normalize_and_score_udf(cfg)
    keep_order = cfg.keep
    cfg_hash = config_hash(cfg)

    scored = (df.withColumn("_q", udf(F.col(text_col)))
              .withColumn(text_col, F.col("_q.text"))
              .withColumn("language", F.col("_q.language"))
              .withColumn("language_score", F.col("_q.language_score"))
              .withColumn("_lang", F.col("_q.language_reason"))
              .withColumn("quality", F.col("_q.signals"))
              .withColumn("quality_fails", F.col("_q.fails"))
              .withColumn("quality_score", F.col("_q.score"))
              .withColumn("_drop", F.col("_q.drop_reason"))
              .withColumn("_failure", F.col("_q.failure"))
              .drop("_q")
              .withColumn("normalize_version", F.lit(NORMALIZE_VERSION))
              .withColumn("normalize_config_hash", F.lit(norm_hash))
              .withColumn("curate_config_hash", F.lit(cfg_hash)))
    error_cond = F.col("error").isNotNull() & (F.col("error") != "") if has_error else F.lit(False)
    scored = scored.withColumn(
        "reason",
        F.when(error_cond, F.lit(reasons.EXTRACT_ERROR))
         .when(F.col("_failure").isNotNull(), F.col("_failure"))
         .when(F.col(text_col).isNull(), F.lit(reasons.EMPTY_TEXT))
         .when(F.col("_lang").isNotNull(), F.col("_lang"))
         .when(F.col("_drop").isNotNull(), F.concat(F.lit(reasons.QUALITY_PREFIX), F.col("_drop"))),
    ).withColumn(
        "removed_stage",
        F.when(F.col("reason").isNull(), F.lit(None))
         .when(error_cond, F.lit("input"))
         .when(F.col("_failure").isNull() & F.col("_lang").isNotNull(), F.lit("language"))
         .when(F.col("reason").startswith(reasons.QUALITY_PREFIX) | F.col("_failure").isNotNull(), F.lit("quality"))
         .otherwise(F.lit("input")),
    ).drop("_drop", "_failure", "_lang").persist(storage)

    stats: dict = {"curate_version": CURATE_VERSION, "config_hash": cfg_hash,
                   "config": cfg.to_dict(), "normalize_config_json": config_json(
                       {"version": NORMALIZE_VERSION, "config": cfg.normalize.to_dict()})}
    survivors = scored.where(F.col("reason").isNull())
    dropped = scored.where(F.col("reason").isNotNull()).withColumn("duplicate_of", F.lit(None).cast("string"))

    if cfg.exact_dedup.enabled:
        survivors = exact_dedup(survivors, keep_order, text_col, hot_text_rows=cfg.exact_dedup.hot_text_rows)
        survivors = survivors.withColumn(
            "reason", F.when(F.col("exact_duplicate_of").isNotNull(), F.lit(reasons.EXACT_DUPLICATE)))
        survivors = survivors.withColumn(
            "removed_stage", F.when(F.col("reason").isNotNull(), F.lit("exact_dedup")))
        survivors = survivors.withColumn("duplicate_of", F.col("exact_duplicate_of")).persist(storage)
        exact_persisted = survivors
        exact_removed = survivors.where(F.col("reason").isNotNull())
        survivors = survivors.where(F.col("reason").isNull())
    else:
        exact_removed = None
        survivors = survivors.withColumn("duplicate_of", F.lit(None).cast("string"))

    if cfg.near_dedup.enabled:
        near, near_stats = near_dedup(survivors, cfg.near_dedup, keep_order, text_col)
        stats["near_dedup"] = near_stats
        survivors = (near.withColumn("reason", F.when(F.col("near_duplicate_of").isNotNull(),
                                                       F.lit(reasons.NEAR_DUPLICATE)))
                     .withColumn("removed_stage", F.when(F.col("reason").isNotNull(), F.lit("near_dedup")))
                     .withColumn("duplicate_of", F.coalesce(F.col("near_duplicate_of"), F.col("duplicate_of"))))

    parts = [dropped] + ([exact_removed] if exact_removed is not None else []) + [survivors]
    annotated = parts[0]
    for part in parts[1:]:
        annotated = annotated.unionByName(part, allowMissingColumns=True)
    annotated = annotated.persist(storage)
    stats["rows"] = annotated.count()  # materialize before dropping the upstream caches
    scored.unpersist()
    if exact_removed is not None:
        exact_persisted.unpersist()
    return CurateResult(annotated=annotated, stats=stats)
