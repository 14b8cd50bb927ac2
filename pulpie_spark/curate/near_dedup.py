"""Near dedup in Spark: MinHash LSH buckets -> candidate edges -> (verified) edges ->
connected components (large-star / small-star) -> one representative per component.

Design choices, each against a failure seen at scale:

* No collect_list per bucket (a hot bucket of millions of ids would land in one row):
  buckets are aggregated to (min doc_id, size), which Spark combines map-side, and
  every member is linked to its bucket's minimum (a star: O(n) edges, not O(n^2)).
  Buckets above ``max_bucket_size`` make no edges and are counted in the stats.
* Connected components with large-star / small-star alternation on DataFrames
  (Kiveris et al. 2014), the lineage cut by a checkpoint every iteration; labels are
  the minimum doc_id of the component, so results do not depend on partitioning.
* Components above ``max_component_size`` (transitive chains) are not collapsed:
  their members are kept and flagged ``near_component_too_large``.
* Ids are the input's stable ``doc_id`` strings: no monotonically_increasing_id.
"""

from __future__ import annotations

import logging

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from pulpie_spark.curate import minhash
from pulpie_spark.curate.config import NearDedupConfig
from pulpie_spark.curate.keep import KeepOrder, spark_order
from pulpie_spark.curate.spark_adapter import exact_similarity_udf, signature_similarity, signature_udf

log = logging.getLogger(__name__)


def _cut_lineage(df: DataFrame) -> DataFrame:
    """Reliable checkpoint when a checkpoint dir is set (clusters), else a local one."""
    sc = df.sparkSession.sparkContext
    if sc.getCheckpointDir():
        return df.checkpoint(eager=True)
    return df.localCheckpoint(eager=True)


def minhash_bands(df: DataFrame, near_cfg: NearDedupConfig, text_col: str = "text") -> DataFrame:
    """(doc_id, signature, bands) for every row with at least one word."""
    bands, rows = minhash.lsh_params(near_cfg)
    udf = signature_udf(near_cfg, bands, rows)
    return (df.select("doc_id", udf(F.col(text_col)).alias("mh"))
            .select("doc_id", "mh.signature", "mh.bands")
            .where(F.col("signature").isNotNull()))


def candidate_edges(sigs: DataFrame, max_bucket_size: int) -> tuple[DataFrame, DataFrame]:
    """(edges (src, dst) with src > dst, bucket table (band, band_hash, bucket_min, bucket_size))."""
    band_rows = sigs.select("doc_id", F.posexplode("bands").alias("band", "band_hash"))
    buckets = (band_rows.groupBy("band", "band_hash")
               .agg(F.min("doc_id").alias("bucket_min"), F.count(F.lit(1)).alias("bucket_size")))
    usable = buckets.where((F.col("bucket_size") > 1) & (F.col("bucket_size") <= max_bucket_size))
    edges = (band_rows.join(usable.select("band", "band_hash", "bucket_min"), ["band", "band_hash"])
             .where(F.col("doc_id") != F.col("bucket_min"))
             .select(F.col("doc_id").alias("src"), F.col("bucket_min").alias("dst"))
             .distinct())
    return edges, buckets


def verify_edges(edges: DataFrame, sigs: DataFrame, texts: DataFrame, near_cfg: NearDedupConfig) -> DataFrame:
    """Keep edges whose similarity reaches the threshold; adds ``similarity``."""
    mode = near_cfg.verify
    if mode == "none":
        return edges.withColumn("similarity", F.lit(None).cast("double"))
    if mode == "signature":
        side = sigs.select("doc_id", "signature")
        sim = signature_similarity(F.col("a.signature"), F.col("b.signature"))
    else:
        side = texts.select("doc_id", F.col("text").alias("signature"))
        sim = exact_similarity_udf(near_cfg.ngram, near_cfg.seed)(
            F.col("a.signature"), F.col("b.signature"))
    joined = (edges.join(side.alias("a"), F.col("src") == F.col("a.doc_id"))
              .join(side.alias("b"), F.col("dst") == F.col("b.doc_id"))
              .select("src", "dst", sim.alias("similarity")))
    return joined.where(F.col("similarity") >= float(near_cfg.threshold))


def connected_components(edges: DataFrame, max_iterations: int = 40) -> tuple[DataFrame, int]:
    """(node, root) for every node on an edge, root = smallest node of its component;
    plus the number of iterations used. ``edges``: (src, dst), any orientation."""
    e = (edges.select(F.greatest("src", "dst").alias("u"), F.least("src", "dst").alias("v"))
         .where(F.col("u") != F.col("v")).distinct())
    e = _cut_lineage(e)
    iterations = 0
    for iterations in range(1, max_iterations + 1):
        # large-star: every neighbour v > u of u is linked to m(u) = min(N(u) + u)
        both = e.unionByName(e.select(F.col("v").alias("u"), F.col("u").alias("v")))
        mins = both.groupBy("u").agg(F.min("v").alias("m")).withColumn("m", F.least("m", "u"))
        large = (both.where(F.col("v") > F.col("u")).join(mins, "u")
                 .select(F.col("v").alias("u"), F.col("m").alias("v")).distinct())
        # small-star: u and its smaller neighbours are linked to the smallest of them
        mins2 = large.groupBy("u").agg(F.min("v").alias("m"))
        small = (large.join(mins2, "u")
                 .select(F.explode(F.array(
                     F.struct(F.col("u").alias("u"), F.col("m").alias("v")),
                     F.struct(F.col("v").alias("u"), F.col("m").alias("v")))).alias("e"))
                 .select("e.u", "e.v").where(F.col("u") != F.col("v")).distinct())
        small = _cut_lineage(small)
        # one job: any edge present on one side only means another round is needed
        changed = (small.withColumn("_new", F.lit(1))
                   .join(e.withColumn("_old", F.lit(1)), ["u", "v"], "full_outer")
                   .where(F.col("_new").isNull() | F.col("_old").isNull()).limit(1).count())
        e = small
        if changed == 0:
            break
    else:
        log.warning("connected components did not converge in %d iterations", max_iterations)
    nodes = e.select(F.col("u").alias("node"), F.col("v").alias("root"))
    roots = e.select(F.col("v").alias("node"), F.col("v").alias("root"))
    return nodes.unionByName(roots).distinct(), iterations


def near_dedup(df: DataFrame, near_cfg: NearDedupConfig, keep_order: KeepOrder = None,
               text_col: str = "text") -> tuple[DataFrame, dict]:
    """Annotate ``df`` (needs doc_id, text and the keep-policy columns) with
    ``near_component`` (root doc_id, null when alone), ``near_component_size``,
    ``near_component_too_large`` and ``near_duplicate_of`` (the representative, null for
    kept rows). Returns (annotated df, stats) ; rows are not dropped here."""
    sigs = minhash_bands(df, near_cfg, text_col).persist()
    edges, buckets = candidate_edges(sigs, near_cfg.max_bucket_size)
    buckets = buckets.persist()
    candidates = _cut_lineage(edges)
    verified = _cut_lineage(verify_edges(candidates, sigs, df.select("doc_id", text_col), near_cfg))
    n_verified = verified.count()
    if n_verified:
        comps, iterations = connected_components(verified.select("src", "dst"), near_cfg.max_cc_iterations)
    else:  # nothing to link: skip the component rounds
        comps, iterations = df.sparkSession.createDataFrame([], "node string, root string"), 0
    sizes = comps.groupBy("root").agg(F.count(F.lit(1)).alias("near_component_size"))
    comps = _cut_lineage(comps.join(sizes, "root"))
    limit = near_cfg.max_component_size

    bands, rows = minhash.lsh_params(near_cfg)
    bucket_hist = {int(r["bucket_size"]): int(r["count"])
                   for r in buckets.groupBy("bucket_size").count().collect()}
    component_hist = {int(r["near_component_size"]): int(r["count"])
                      for r in sizes.groupBy("near_component_size").count().collect()}
    stats = {
        "bands": bands,
        "rows": rows,
        "documents_with_signature": sum(size * n for size, n in bucket_hist.items()) // bands,
        "candidate_edges": candidates.count(),
        "verified_edges": n_verified,
        "cc_iterations": iterations,
        "bucket_size_histogram": dict(sorted(bucket_hist.items())),
        "buckets_over_limit": sum(n for size, n in bucket_hist.items() if size > near_cfg.max_bucket_size),
        "component_size_histogram": dict(sorted(component_hist.items())),
        "components_over_limit": sum(n for size, n in component_hist.items() if size > limit),
    }
    sigs.unpersist()
    buckets.unpersist()

    annotated = (df.join(comps.select(F.col("node").alias("doc_id"), F.col("root").alias("near_component"),
                                      "near_component_size"), "doc_id", "left")
                 .withColumn("near_component_too_large", F.coalesce(F.col("near_component_size") > limit, F.lit(False))))
    collapsible = F.col("near_component").isNotNull() & ~F.col("near_component_too_large")
    # Singletons and flagged giant components get their own doc_id as group key, so no
    # window partition is larger than max_component_size (a null key would gather all
    # non-duplicates in one task).
    annotated = annotated.withColumn("_near_group", F.when(collapsible, F.col("near_component"))
                                     .otherwise(F.col("doc_id")))
    ordered = Window.partitionBy("_near_group").orderBy(*spark_order(keep_order, annotated.columns))
    rep = F.first("doc_id").over(ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow))
    return (annotated
            .withColumn("_near_rank", F.row_number().over(ordered))
            .withColumn("near_duplicate_of", F.when(collapsible & (F.col("_near_rank") > 1), rep))
            .drop("_near_rank", "_near_group")), stats
