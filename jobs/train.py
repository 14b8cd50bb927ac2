"""Train (or distil) the embedded default block model.

    spark-submit jobs/train.py --input ../shared/data/extraction --output /tmp/pulpie-default \
        --features-cache /tmp/pulpie_train_features.parquet

Input: any Parquet table (file or folder) with ``html`` and ``gold_text`` (labels by
alignment, pages under 70% gold recall dropped) or ``html`` and ``labels`` (one per
block of our segmentation). Optional ``split`` ("train"/"dev", else a stable hash of
``page_id`` decides), ``source`` and ``page_id`` columns.

1. Spark segments every page (pulpie_spark.segment.simplify), aligns labels and computes block
   features in ``mapInPandas``; the result is cached to ``--features-cache`` (Parquet).
2. The model trains on the driver, or with ``--distributor torch`` through
   ``pyspark.ml.torch.distributor.TorchDistributor`` (``--num-processes``, ``--use-gpu``;
   ``--local-mode`` runs the processes on the driver).
3. ``--output`` receives model.safetensors + config.json + training_report.json, the
   layout of pulpie_spark/models/default/ (plus page_gate.json with ``--page-gate``); with
   ``--members N`` an ensemble of the models of seeds seed .. seed+N-1 (member-1/ .. and
   ensemble.json: blockmodel/ensemble.py), the others asked where the first is unsure;
   ``--first-member-page-gate`` adds page_gate.first.json, the gate of the first member alone.

Distillation: ``--teacher orange-small`` (any name for load_classifier) adds the
teacher's P(main) per block; the loss becomes 0.7 x KL(teacher||student) at T=2 + 0.3 x CE.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from pulpie_spark.classify.blockmodel.recipe import add_recipe_arguments, recipe_config
from pulpie_spark.cli import SparkJob, run_job


class TrainJob(SparkJob):
    name = "pulpie-train"
    description = "Train or distil the embedded default block model"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--features-cache", default="/tmp/pulpie_train_features.parquet",
                            help="Parquet cache of block features + labels (reused with --reuse-cache)")
        parser.add_argument("--reuse-cache", action="store_true", help="skip segmentation if the cache exists")
        parser.add_argument("--dedupe", action="store_true",
                            help="build the cache locally (no Spark, --workers processes) from the pages of "
                                 "--input with near-duplicates counted once, as jobs/evaluate.py --protocol loso")
        parser.add_argument("--workers", type=int, default=2, help="processes for the --dedupe cache build")
        parser.add_argument("--teacher", default=None, help="distil from this classifier (load_classifier name)")
        parser.add_argument("--min-recall", type=float, default=0.7, help="label confidence filter (gold recall)")
        parser.add_argument("--sources", default=None, help="comma-separated sources to keep")
        parser.add_argument("--limit", type=int, default=None, help="first N pages per input (smoke runs)")
        add_recipe_arguments(parser, epochs=20, max_pages_per_source=None)
        parser.add_argument("--threads", type=int, default=1, help="torch threads per training process")
        parser.add_argument("--page-gate", default=None, metavar="PAGE_GATE_JSON",
                            help="copy this page gate into --output (fitted by jobs/evaluate.py --protocol loso "
                                 "--page-gate on the same recipe; docs/model-card.md)")
        parser.add_argument("--first-member-page-gate", default=None, metavar="PAGE_GATE_JSON",
                            help="with --members N > 1: the gate of the first member alone (fitted by a "
                                 "--members 1 LOSO run of the recipe), used when the model is loaded "
                                 "first-member-only (model 'default-fast' for the shipped one)")
        parser.add_argument("--distributor", choices=["none", "torch"], default="none")
        parser.add_argument("--num-processes", type=int, default=1)
        parser.add_argument("--use-gpu", action="store_true")
        parser.add_argument("--local-mode", action="store_true", help="TorchDistributor processes on the driver")

    def run(self, spark, args) -> int:
        from pulpie_spark.classify.blockmodel.features import FEATURE_VERSION
        from pulpie_spark.classify.blockmodel.gate import FIRST_MEMBER_GATE_FILE, GATE_FILE, PageGate
        from pulpie_spark.classify.blockmodel.training import train_entry
        from pulpie_spark.classify.blockmodel.labels import coverage_by_source, format_coverage

        if args.feature_version is None:
            args.feature_version = FEATURE_VERSION

        if not args.input or not args.output:
            raise SystemExit("--input and --output are required")
        if args.first_member_page_gate and args.members < 2:
            raise SystemExit("--first-member-page-gate is the gate of an ensemble's first member: it needs "
                             "--members >= 2 (a single model's gate is --page-gate)")
        # (file name, report key, gate): parsed first, so a file of another feature list is
        # refused before training, not at load time.
        gates = [(name, key, PageGate.from_dict(json.loads(Path(path).read_text())))
                 for name, key, path in ((GATE_FILE, "page_gate", args.page_gate),
                                         (FIRST_MEMBER_GATE_FILE, "first_member_page_gate", args.first_member_page_gate))
                 if path]
        if args.dedupe and not (args.reuse_cache and Path(args.features_cache).exists()):
            from pulpie_spark.evaluate.loso import build_feature_cache as build_local_cache
            from pulpie_spark.evaluate.loso import dedupe_pages, load_sources

            if args.teacher:
                raise SystemExit("--dedupe builds the cache without a teacher; drop --teacher or --dedupe")
            sources = [x.strip() for x in args.sources.split(",")] if args.sources else None
            pages, dropped = dedupe_pages(load_sources(args.input, sources=sources, limit_per_source=args.limit))
            print(f"{len(pages)} pages, {len(dropped)} near-duplicates dropped")
            build_local_cache(pages, args.features_cache, workers=args.workers, n_buckets=args.buckets,
                              min_recall=args.min_recall, feature_version=args.feature_version)
        elif not (args.reuse_cache and Path(args.features_cache).exists()):
            from pulpie_spark.classify.blockmodel.spark_training_data import build_feature_cache

            sources = [x.strip() for x in args.sources.split(",")] if args.sources else None
            build_feature_cache(spark, args.input, args.features_cache, sources=sources, limit=args.limit,
                                teacher=args.teacher, min_recall=args.min_recall, n_buckets=args.buckets,
                                feature_version=args.feature_version)
        import pandas as pd

        cache = pd.read_parquet(args.features_cache, columns=["source", "kept", "labels", "gold_recall"])
        print("label coverage (pages kept: main blocks recover >= "
              f"{args.min_recall:.0%} of the gold words)")
        print(format_coverage(coverage_by_source(
            {"source": r.source, "kept": bool(r.kept), "labels": list(r.labels) if r.kept else [],
             "gold_recall": r.gold_recall} for r in cache.itertuples(index=False))))
        cfg_dict = recipe_config(args, threads=args.threads, device="cuda" if args.use_gpu else "cpu")
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
        for name, key, gate in gates:
            report[key] = str(gate.save(args.output, name))
        print(json.dumps(report, indent=2, default=str))
        return 0


if __name__ == "__main__":
    run_job(TrainJob())
