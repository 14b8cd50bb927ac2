"""Exact dedup on a hot key: the old Window version against the aggregate + join one.

    nice .venv/bin/python benchmarks/exact_dedup_skew.py [--sizes 200000,1000000] [--master local[2]]

Rows: N documents where one text (a cookie banner) is half of the rows and every other
text is unique, like the boilerplate that repeats millions of times in a crawl. The input
is generated in the JVM, persisted and counted before the clock starts; each variant then
computes every output column (``noop`` sink); the fastest of ``--repeats`` runs is shown.
Reports rows/s for both and their ratio, and, from Spark's REST status API, the longest
task of the slowest stage against that stage's median task (the straggler a hot key makes).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

HOT_TEXT = ("We use cookies to improve your experience on our site. By continuing to browse you "
            "agree to our use of cookies. Accept all | Manage preferences | Privacy policy")


def old_window_exact_dedup(df, keep_order=None, text_col="text"):
    """OLD BASELINE (pulpie_spark/curate/exact_dedup.py before the aggregate rewrite),
    kept here only to measure against: every copy of a hash is sorted in one window."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from pulpie_spark.curate.keep import spark_order

    hashed = df.withColumn("text_sha256", F.sha2(F.col(text_col), 256))
    group = Window.partitionBy("text_sha256")
    ordered = group.orderBy(*spark_order(keep_order, hashed.columns))
    rep = F.first("doc_id").over(ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow))
    return (hashed
            .withColumn("exact_group_size", F.count(F.lit(1)).over(group))
            .withColumn("_exact_rank", F.row_number().over(ordered))
            .withColumn("exact_duplicate_of", F.when(F.col("_exact_rank") > 1, rep))
            .drop("_exact_rank"))


def make_rows(spark, n: int, partitions: int):
    from pyspark.sql import functions as F

    ids = spark.range(n, numPartitions=partitions)
    unique = F.concat(F.lit("unique page "), F.col("id").cast("string"), F.lit(" "),
                      F.sha2(F.col("id").cast("string"), 256), F.lit(" "), F.lit(HOT_TEXT[:120]))
    return ids.select(
        F.format_string("doc%010d", F.col("id")).alias("doc_id"),
        F.when(F.col("id") % 2 == 0, F.lit(HOT_TEXT)).otherwise(unique).alias("text"),
        ((F.col("id") * 7919) % 1000 / 1000.0).alias("quality_score"),
        F.date_format(F.date_add(F.lit("2020-01-01").cast("date"), (F.col("id") % 1500).cast("int")),
                      "yyyy-MM-dd").alias("warc_date"),
    )


def stage_skew(spark, group: str) -> tuple[float, float, float]:
    """(slowest stage's max task s, its median task s, max/median) from the REST status API."""
    sc = spark.sparkContext
    base = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}"
    worst = (0.0, 0.0, 0.0)
    for job_id in sc.statusTracker().getJobIdsForGroup(group):
        for stage_id in sc.statusTracker().getJobInfo(job_id).stageIds:
            try:
                with urllib.request.urlopen(f"{base}/stages/{stage_id}/0/taskSummary?quantiles=0.5,1.0") as r:
                    run = json.load(r)["executorRunTime"]
            except urllib.error.HTTPError:  # skipped stages (reused shuffle) have no task summary
                continue
            median, peak = run[0] / 1000.0, run[1] / 1000.0
            if peak > worst[0]:
                worst = (peak, median, peak / median if median else float("inf"))
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="200000,1000000")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--shuffle-partitions", default="8")
    parser.add_argument("--repeats", type=int, default=2, help="runs per variant; the fastest is shown")
    args = parser.parse_args()

    from pulpie_spark.curate.exact_dedup import exact_dedup
    from pulpie_spark.session import get_spark

    spark = get_spark("exact-dedup-skew", master=args.master,
                      conf={"spark.sql.shuffle.partitions": args.shuffle_partitions,
                            "spark.ui.enabled": "true", "spark.ui.port": "0"})
    spark.sparkContext.setLogLevel("ERROR")
    variants = [("old window", old_window_exact_dedup), ("aggregate+join", exact_dedup)]
    # warm-up: JVM code generation and first-job overheads are not part of the comparison
    warm = make_rows(spark, 2000, 2)
    for _, fn in variants:
        fn(warm).write.format("noop").mode("overwrite").save()

    print(f"{'rows':>9} {'variant':>15} {'seconds':>8} {'rows/s':>9} {'max task s':>10} "
          f"{'median s':>8} {'skew':>6}")
    for n in [int(s) for s in args.sizes.split(",")]:
        rows = make_rows(spark, n, int(args.shuffle_partitions)).persist()
        rows.count()
        best = {}
        for repeat in range(args.repeats):  # alternate the variants: load changes hit both
            for label, fn in variants:
                group = f"{label}-{n}-{repeat}"
                spark.sparkContext.setJobGroup(group, group)
                start = time.perf_counter()
                fn(rows).write.format("noop").mode("overwrite").save()
                seconds = time.perf_counter() - start
                if label not in best or seconds < best[label][0]:
                    best[label] = (seconds, *stage_skew(spark, group))
        for label, _ in variants:
            seconds, peak, median, skew = best[label]
            print(f"{n:>9} {label:>15} {seconds:>8.1f} {n / seconds:>9.0f} {peak:>10.1f} {median:>8.2f} "
                  f"{skew:>6.1f}", flush=True)
        print(f"{n:>9} {'new/old':>15} rows/s ratio {best['old window'][0] / best['aggregate+join'][0]:.2f}",
              flush=True)
        rows.unpersist()
    spark.stop()


if __name__ == "__main__":
    main()
