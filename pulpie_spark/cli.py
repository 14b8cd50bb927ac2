"""One job class with the same flags everywhere (in the spirit of cc-pyspark).

A job subclasses :class:`SparkJob`, adds its own flags in ``add_arguments`` and does
its work in ``run(spark, args)``. Every job accepts:

  --input PATH        input table (parquet / delta / WARC, depending on the job)
  --output PATH       output table
  --format FMT        parquet | delta (output format)
  --conf FILE         Spark properties file (spark-defaults format), e.g. conf/local.conf
  --spark-conf K=V    one Spark property (repeatable), applied after --conf
  --master URL        Spark master when not launched by spark-submit (default local[*])
  --log-level LEVEL   Spark log level (default WARN)
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Sequence

from pulpie_spark.session import get_spark, read_properties

log = logging.getLogger("pulpie_spark")


def main_threshold_arg(value: str) -> float:
    """argparse type of ``--main-threshold``: a usage error, not a stack trace, for a value
    outside (0, 1)."""
    from pulpie_spark.classify.base import validate_main_threshold

    try:
        return validate_main_threshold(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def unsure_threshold_arg(value: str) -> float | None:
    """argparse type of ``--unsure-threshold``: "model" (the model's page gate), "off", or a number >= 0."""
    from pulpie_spark.classify.base import validate_unsure_threshold

    word = value.strip().lower()
    if word == "model":
        return None
    if word == "off":
        return float("inf")
    try:
        return validate_unsure_threshold(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class SparkJob:
    name: str = "pulpie-spark-job"
    description: str = ""
    default_input: str | None = None
    default_output: str | None = None
    # False for a job that runs without Spark (jobs/evaluate.py): it then takes only
    # --input/--output, not the Spark flags it would ignore.
    uses_spark: bool = True

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Add job-specific flags."""

    def run(self, spark, args: argparse.Namespace) -> int | None:
        raise NotImplementedError

    def build_parser(self) -> argparse.ArgumentParser:
        parser = argparse.ArgumentParser(prog=self.name, description=self.description,
                                         formatter_class=argparse.ArgumentDefaultsHelpFormatter)
        parser.add_argument("--input", default=self.default_input, help="input path or URI")
        parser.add_argument("--output", default=self.default_output, help="output path or URI")
        if self.uses_spark:
            parser.add_argument("--format", default="parquet", choices=["parquet", "delta"],
                                help="output table format")
            parser.add_argument("--conf", default=None, help="Spark properties file (spark-defaults format)")
            parser.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                                help="one Spark property; repeatable")
            parser.add_argument("--master", default=None, help="Spark master for runs outside spark-submit")
            parser.add_argument("--log-level", default="WARN", help="Spark log level")
        self.add_arguments(parser)
        return parser

    def spark_conf(self, args: argparse.Namespace) -> dict[str, str]:
        conf: dict[str, str] = {}
        if args.conf:
            conf.update(read_properties(args.conf))
        for item in args.spark_conf:
            key, sep, value = item.partition("=")
            if not sep:
                raise SystemExit(f"--spark-conf expects KEY=VALUE, got {item!r}")
            conf[key.strip()] = value.strip()
        return conf

    def main(self, argv: Sequence[str] | None = None) -> int:
        args = self.build_parser().parse_args(argv)
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        if not self.uses_spark:
            return int(self.run(None, args) or 0)
        spark = get_spark(self.name, conf=self.spark_conf(args), master=args.master)
        spark.sparkContext.setLogLevel(args.log_level)
        result = self.run(spark, args)
        return int(result or 0)


def run_job(job: SparkJob, argv: Sequence[str] | None = None) -> None:
    sys.exit(job.main(argv))
