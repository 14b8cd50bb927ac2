"""Spark adapter of the block model's training data: pages -> cached training examples.

Segmentation, label alignment and block features (``blockmodel.data.build_examples``,
pure pandas) run in ``mapInPandas`` on the executors; the result is a Parquet cache the
trainer reads (on the driver or through TorchDistributor).
"""

from __future__ import annotations

from typing import Sequence

EXAMPLE_SCHEMA = ("source string, page_id string, split string, kept boolean, gold_recall double, "
                  "error string, n_blocks int, ids array<int>, numeric array<float>, labels array<tinyint>, "
                  "words array<int>, teacher array<float>, groups array<int>, feature_version int")
EXAMPLE_COLUMNS = ["source", "page_id", "split", "kept", "gold_recall", "error", "n_blocks", "ids",
                   "numeric", "labels", "words", "teacher", "groups", "feature_version"]


def _examples_fn(teacher_name: str | None, min_recall: float, n_buckets: int, feature_version: int):
    def fn(batches):
        from pulpie_spark.classify.blockmodel.data import build_examples

        teacher = None
        if teacher_name:
            from pulpie_spark.classify.registry import load_classifier

            teacher = load_classifier(teacher_name)
        for pdf in batches:
            frame = build_examples(pdf, min_recall=min_recall, keep_unconfident=True, teacher=teacher,
                                   n_buckets=n_buckets, feature_version=feature_version)
            frame["n_blocks"] = frame["n_blocks"].astype("int32")
            yield frame[EXAMPLE_COLUMNS]
    return fn


def build_feature_cache(spark, input_path: str, cache_path: str, *, sources: Sequence[str] | None = None,
                        limit: int | None = None, teacher: str | None = None, min_recall: float = 0.7,
                        n_buckets: int, feature_version: int | None = None) -> None:
    """Read a labelled table (``html`` + ``gold_text`` or ``labels``) and write the examples cache."""
    from pulpie_spark.classify.blockmodel.features import FEATURE_VERSION

    feature_version = FEATURE_VERSION if feature_version is None else feature_version
    from pyspark.sql import functions as F

    df = spark.read.parquet(input_path)
    cols = set(df.columns)
    if "html" not in cols or not ({"gold_text", "labels"} & cols):
        raise SystemExit(f"--input needs html and gold_text (or labels) columns, has {sorted(cols)}")
    if sources:
        df = df.where(F.col("source").isin(list(sources)))
    if limit:
        df = df.orderBy(*[c for c in ("source", "page_id") if c in cols]).limit(limit)
    if "source" not in cols:
        df = df.withColumn("source", F.lit("input"))
    if "page_id" not in cols:
        df = df.withColumn("page_id", F.sha2(F.col("html").cast("binary"), 256))
    if "split" not in cols:
        # Stable dev split without a host column: 1 page in 10 by crc32 of page_id.
        df = df.withColumn("split", F.when(F.crc32(F.col("page_id")) % 10 == 0, "dev").otherwise("train"))
    keep = [c for c in ("source", "page_id", "split", "html", "gold_text", "labels", "declared_charset")
            if c in df.columns]
    out = df.select(*keep).mapInPandas(_examples_fn(teacher, min_recall, n_buckets, feature_version), EXAMPLE_SCHEMA)
    out.write.mode("overwrite").parquet(cache_path)
