"""Train (or distil) the embedded default block model.

    spark-submit jobs/train.py --input ../shared/data/extraction --output /tmp/pulpie-default \
        --features-cache /tmp/pulpie_train_features.parquet

Input: any Parquet table (file or folder) with ``html`` and ``gold_text`` (labels by
alignment, pages under 70% gold recall dropped) or ``html`` and ``labels`` (one per
block of our segmentation). Optional ``split`` ("train"/"dev", else a stable hash of
``page_id`` decides), ``source`` and ``page_id`` columns.

1. Spark segments every page (pulpie_spark.simplify), aligns labels and computes block
   features in ``mapInPandas``; the result is cached to ``--features-cache`` (Parquet).
2. The model trains on the driver, or with ``--distributor torch`` through
   ``pyspark.ml.torch.distributor.TorchDistributor`` (``--num-processes``, ``--use-gpu``;
   ``--local-mode`` runs the processes on the driver).
3. ``--output`` receives model.safetensors + config.json + training_report.json, the
   layout of pulpie_spark/models/default/.

Distillation: ``--teacher orange-small`` (any name for load_classifier) adds the
teacher's P(main) per block; the loss becomes 0.7 x KL(teacher||student) at T=2 + 0.3 x CE.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pulpie_spark.cli import SparkJob, run_job  # noqa: E402

log = logging.getLogger("pulpie_spark.train")

EXAMPLE_SCHEMA = ("source string, page_id string, split string, kept boolean, gold_recall double, "
                  "error string, n_blocks int, ids array<int>, numeric array<float>, labels array<tinyint>, "
                  "words array<int>, teacher array<float>")


def _examples_udf(teacher_name: str | None, min_recall: float, n_buckets: int):
    def fn(batches):
        from pulpie_spark.blockmodel.data import build_examples

        teacher = None
        if teacher_name:
            from pulpie_spark.classify.registry import load_classifier

            teacher = load_classifier(teacher_name)
        for pdf in batches:
            frame = build_examples(pdf, min_recall=min_recall, keep_unconfident=True, teacher=teacher,
                                   n_buckets=n_buckets)
            frame["n_blocks"] = frame["n_blocks"].astype("int32")
            yield frame[["source", "page_id", "split", "kept", "gold_recall", "error", "n_blocks", "ids",
                         "numeric", "labels", "words", "teacher"]]
    return fn


class TrainJob(SparkJob):
    name = "pulpie-train"
    description = "Train or distil the embedded default block model"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--features-cache", default="/tmp/pulpie_train_features.parquet",
                            help="Parquet cache of block features + labels (reused with --reuse-cache)")
        parser.add_argument("--reuse-cache", action="store_true", help="skip segmentation if the cache exists")
        parser.add_argument("--teacher", default=None, help="distil from this classifier (load_classifier name)")
        parser.add_argument("--min-recall", type=float, default=0.7, help="label confidence filter (gold recall)")
        parser.add_argument("--sources", default=None, help="comma-separated sources to keep")
        parser.add_argument("--limit", type=int, default=None, help="first N pages per input (smoke runs)")
        parser.add_argument("--epochs", type=int, default=20)
        parser.add_argument("--batch-pages", type=int, default=16)
        parser.add_argument("--lr", type=float, default=2e-3)
        parser.add_argument("--patience", type=int, default=4)
        parser.add_argument("--max-minutes", type=float, default=None,
                            help="stop after the epoch that crosses this training-time budget")
        parser.add_argument("--seed", type=int, default=13)
        parser.add_argument("--threads", type=int, default=1, help="torch threads per training process")
        parser.add_argument("--hidden", type=int, default=96)
        parser.add_argument("--embed-dim", type=int, default=48)
        parser.add_argument("--buckets", type=int, default=1 << 15)
        parser.add_argument("--distributor", choices=["none", "torch"], default="none")
        parser.add_argument("--num-processes", type=int, default=1)
        parser.add_argument("--use-gpu", action="store_true")
        parser.add_argument("--local-mode", action="store_true", help="TorchDistributor processes on the driver")

    def build_cache(self, spark, args) -> None:
        from pyspark.sql import functions as F

        df = spark.read.parquet(args.input)
        cols = set(df.columns)
        if "html" not in cols or not ({"gold_text", "labels"} & cols):
            raise SystemExit(f"--input needs html and gold_text (or labels) columns, has {sorted(cols)}")
        if args.sources:
            df = df.where(F.col("source").isin([s.strip() for s in args.sources.split(",")]))
        if args.limit:
            df = df.orderBy(*[c for c in ("source", "page_id") if c in cols]).limit(args.limit)
        if "source" not in cols:
            df = df.withColumn("source", F.lit("input"))
        if "page_id" not in cols:
            df = df.withColumn("page_id", F.sha2(F.col("html").cast("binary"), 256))
        if "split" not in cols:
            # Stable dev split without a host column: 1 page in 10 by crc32 of page_id.
            df = df.withColumn("split", F.when(F.crc32(F.col("page_id")) % 10 == 0, "dev").otherwise("train"))
        keep = [c for c in ("source", "page_id", "split", "html", "gold_text", "labels", "declared_charset")
                if c in df.columns]
        out = df.select(*keep).mapInPandas(_examples_udf(args.teacher, args.min_recall, args.buckets),
                                                 EXAMPLE_SCHEMA)
        out.write.mode("overwrite").parquet(args.features_cache)

    def run(self, spark, args) -> int:
        from pulpie_spark.blockmodel.training import TrainConfig, train_entry
        from pulpie_spark.labels import coverage_by_source, format_coverage

        if not args.input or not args.output:
            raise SystemExit("--input and --output are required")
        if not (args.reuse_cache and Path(args.features_cache).exists()):
            self.build_cache(spark, args)
        import pandas as pd

        cache = pd.read_parquet(args.features_cache, columns=["source", "kept", "labels", "gold_recall"])
        print("label coverage (pages kept: main blocks recover >= "
              f"{args.min_recall:.0%} of the gold words)")
        print(format_coverage(coverage_by_source(
            {"source": r.source, "kept": bool(r.kept), "labels": list(r.labels) if r.kept else [],
             "gold_recall": r.gold_recall} for r in cache.itertuples(index=False))))
        cfg = TrainConfig(epochs=args.epochs, batch_pages=args.batch_pages, lr=args.lr,
                          patience=args.patience, seed=args.seed, threads=args.threads,
                          max_minutes=args.max_minutes,
                          device="cuda" if args.use_gpu else "cpu")
        cfg_dict = {k: v for k, v in cfg.__dict__.items() if k != "model"}
        cfg_dict["model"] = {"hidden": args.hidden, "embed_dim": args.embed_dim, "n_buckets": args.buckets}
        config_json = json.dumps(cfg_dict)
        distill = bool(args.teacher)
        if args.distributor == "torch":
            from pyspark.ml.torch.distributor import TorchDistributor

            distributor = TorchDistributor(num_processes=args.num_processes, local_mode=args.local_mode,
                                           use_gpu=args.use_gpu)
            report = distributor.run(train_entry, os.path.abspath(args.features_cache),
                                     os.path.abspath(args.output), config_json, distill)
        else:
            report = train_entry(args.features_cache, args.output, config_json, distill)
        print(json.dumps(report, indent=2, default=str))
        return 0


if __name__ == "__main__":
    run_job(TrainJob())
