"""Curate an extracted table: normalize, quality gates, exact + near dedup, report.

    spark-submit jobs/curate.py --input out/extracted --output out/curated \
        [--removed out/curated_removed] [--report out/curated_report] [--config conf/curate.toml] \
        [--languages deu_Latn,fra_Latn]

Writes the curated table (``--output``), the removed table with ``reason``,
``removed_stage`` and ``duplicate_of`` (``--removed``, default ``<output>_removed``) and
report.json + report.html (``--report``, default ``<output>_report``, a local folder).
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from pulpie_spark.cli import SparkJob, run_job
from pulpie_spark.curate.quality import GATE_NAMES

log = logging.getLogger("pulpie_spark.curate")
DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "conf" / "curate.toml"


class CurateJob(SparkJob):
    name = "pulpie-curate"
    description = "Extracted table -> curated table + removed table (with reasons) + report"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--config", default=str(DEFAULT_CONFIG) if DEFAULT_CONFIG.exists() else None,
                            help="curate TOML (gate thresholds, dedup settings)")
        parser.add_argument("--input-format", default=None, choices=["parquet", "delta"],
                            help="input table format (default: detected)")
        parser.add_argument("--removed", default=None, help="removed rows table (default <output>_removed)")
        parser.add_argument("--report", default=None, help="report folder (default <output>_report)")
        parser.add_argument("--text-col", default="text", help="column holding the plain text")
        parser.add_argument("--no-exact-dedup", action="store_true", help="skip exact dedup")
        parser.add_argument("--no-near-dedup", action="store_true", help="skip MinHash near dedup")
        parser.add_argument("--verify", default=None, choices=["none", "signature", "exact"],
                            help="override near_dedup.verify")
        parser.add_argument("--languages", default=None,
                            help="keep only these FineWeb-2 labels, comma-separated (deu_Latn,fra_Latn); "
                                 "other rows are removed with reason language:not_selected")
        parser.add_argument("--tag-only", action="store_true",
                            help="every quality gate (" + ", ".join(GATE_NAMES) + ") tags instead of dropping")

    def run(self, spark, args: argparse.Namespace) -> int:
        from pulpie_spark.curate.config import load_config
        from pulpie_spark.curate.pipeline import curate
        from pulpie_spark.curate.report import collect_report, write_report
        from pulpie_spark import memory
        from pulpie_spark.io import read_table, write_table

        if not args.input or not args.output:
            raise SystemExit("--input and --output are required")
        overrides: dict = {}
        if args.no_exact_dedup:
            overrides.setdefault("exact_dedup", {})["enabled"] = False
        if args.no_near_dedup:
            overrides.setdefault("near_dedup", {})["enabled"] = False
        if args.verify:
            overrides.setdefault("near_dedup", {})["verify"] = args.verify
        if args.tag_only:
            overrides["quality"] = {gate: {"mode": "tag"} for gate in GATE_NAMES}
        if args.languages is not None:
            chosen = [label.strip() for label in args.languages.split(",") if label.strip()]
            if not chosen:
                raise SystemExit("--languages needs at least one label, e.g. deu_Latn,fra_Latn")
            overrides.setdefault("language", {})["languages"] = chosen
        cfg = load_config(args.config, overrides)

        df = read_table(spark, args.input, args.input_format)
        # Bounded memory whatever the row groups and pages (pulpie_spark.memory): byte-sized
        # reader and cache batches, a huge row group spread over the cores.
        footprint = memory.table_footprint(df)
        memory.check_fits(spark, footprint, args.input)
        memory.apply_session_conf(spark, memory.bounded_read_settings(spark, footprint, cache=True))
        # by_row_groups: a table of fewer row groups than cores is spread too, so the
        # per-row language + quality UDF runs on every core, not on the one reading the group.
        df = memory.spread(df, footprint, ["doc_id"] if "doc_id" in df.columns else df.columns[:1],
                           by_row_groups=True)
        result = curate(df, cfg, text_col=args.text_col)
        partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
        # hash partitioning + sort by doc_id: same input and config give the same files
        kept = result.kept.repartition(partitions, "doc_id").sortWithinPartitions("doc_id")
        removed = result.removed.repartition(partitions, "doc_id").sortWithinPartitions("doc_id")
        removed_path = args.removed or args.output.rstrip("/") + "_removed"
        write_table(kept, args.output, args.format)
        write_table(removed, removed_path, args.format)
        report = collect_report(result.annotated, result.stats)
        report_dir = args.report or args.output.rstrip("/") + "_report"
        json_path, html_path = write_report(report, report_dir)
        result.annotated.unpersist()
        log.info("curate: %d rows in, %d kept; removed by reason %s; report %s",
                 report["rows"], report["kept"], json.dumps(report["removed_by_reason"]), html_path)
        return 0


if __name__ == "__main__":
    run_job(CurateJob())
