"""WARC / WARC.gz files -> a table of HTTP response records.

    spark-submit jobs/ingest_warc.py --input 's3a://commoncrawl/crawl-data/CC-MAIN-2024-33/segments/*/warc/*.warc.gz' \
        --output s3a://bucket/records --format delta
    python jobs/ingest_warc.py                      # the bundled sample -> ./output/records

Output columns: record_id, url, warc_date, http_status, content_type, declared_charset,
html (binary), source_file, offset, doc_id, error, skip_reason. One task per input file;
damaged records and unreadable files become rows with ``error`` (never a failed job).
Non-HTML and non-200 responses (unless --keep-non-html / --keep-non-200) go to the
rejects table (``<output>_rejects``) with ``reason`` ``skipped:<why>`` and no body.
"""

from __future__ import annotations


from pulpie_spark.cli import SparkJob, run_job
from pulpie_spark.resources import SAMPLE_WARC


class IngestWarcJob(SparkJob):
    name = "pulpie-ingest-warc"
    description = "WARC files -> response records table (url, html, warc metadata, errors)"
    default_input = str(SAMPLE_WARC)
    default_output = "output/records"

    def add_arguments(self, parser) -> None:
        parser.add_argument("--keep-non-html", action="store_true",
                            help="keep responses whose Content-Type is not HTML (skip_reason=non_html)")
        parser.add_argument("--keep-non-200", action="store_true",
                            help="keep responses with an HTTP status other than 200 (skip_reason=http_status)")
        parser.add_argument("--rejects", default=None,
                            help="table of the records filtered out, with reason (default <output>_rejects)")
        parser.add_argument("--reader", choices=["auto", "hadoop"], default="auto",
                            help="auto: stream files on executors (local, /dbfs, pyarrow.fs for s3/gs/hdfs); "
                                 "hadoop: Spark binaryFiles (cluster's Hadoop credentials, whole file in memory)")

    def run(self, spark, args) -> int:
        from pyspark.sql import functions as F

        from pulpie_spark.ingest.spark_adapter import read_warc
        from pulpie_spark.ingest.warc import SKIP_NON_HTML, SKIP_STATUS
        from pulpie_spark.io import write_table

        # Read every record: the ones the flags filter out go to the rejects table with
        # their reason (bodies dropped), so every response record is accounted for.
        records = read_warc(spark, args.input, keep_non_html=True, keep_non_200=True, reader=args.reader)
        kept_reasons = [r for r, keep in ((SKIP_NON_HTML, args.keep_non_html), (SKIP_STATUS, args.keep_non_200))
                        if keep]
        filtered = F.col("skip_reason").isNotNull() & ~F.col("skip_reason").isin(kept_reasons or [""])
        rejects = args.rejects or args.output.rstrip("/") + "_rejects"
        # One partition per file, records in file order: deterministic output files.
        records = records.sortWithinPartitions("source_file", "offset")
        write_table(records.where(~filtered), args.output, args.format)
        write_table(records.where(filtered).withColumn("html", F.lit(None).cast("binary"))
                    .withColumn("reason", F.concat(F.lit("skipped:"), F.col("skip_reason")))
                    .withColumn("stage", F.lit("ingest")), rejects, args.format)
        print(f"wrote {args.output} ({args.format}); filtered records -> {rejects}")
        return 0


if __name__ == "__main__":
    run_job(IngestWarcJob())
