"""SparkSession creation and Spark-properties files shared by every job.

Presets in ``conf/*.conf`` use the ``spark-defaults.conf`` format (``key value`` per
line, ``#`` comments) so the same file works with ``spark-submit --properties-file``
and with ``--conf`` of our jobs (which applies it when the job builds its session,
e.g. when run as ``python jobs/extract.py``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Mapping

# Defaults for a local run; a cluster preset overrides any of them.
LOCAL_DEFAULTS: dict[str, str] = {
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "256",
    # HTML sizes vary by orders of magnitude: bound Arrow batches by bytes too (Spark 4.x).
    "spark.sql.execution.arrow.maxBytesPerBatch": str(64 * 1024 * 1024),
    "spark.python.worker.reuse": "true",
    "spark.ui.enabled": "false",
    # Progress bars flood job summaries and notebook cells.
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "4g",
}


# JVM options of a local run, where the driver JVM runs every task. Java 17's G1 throws
# OutOfMemoryError ("Retried waiting for GCLocker too often allocating N words") when a
# large allocation twice meets another task's JNI critical section (Parquet/Arrow codecs),
# with most of the heap free (JDK-8192647; G1 pins regions instead from JDK 22). Local mode
# does not retry a failed task, so one such fluke failed a whole job at 1g (CI, 2026-12-02).
# The flag is diagnostic, and JDKs that dropped it must still start: hence the other two.
# Set as spark.driver.defaultJavaOptions, so a user's extraJavaOptions add to it.
LOCAL_JVM_OPTIONS = ("-XX:+IgnoreUnrecognizedVMOptions -XX:+UnlockDiagnosticVMOptions "
                     "-XX:GCLockerRetryAllocationCount=100")


def read_properties(path: str | os.PathLike) -> dict[str, str]:
    """Parse a spark-defaults style file: ``key value`` or ``key=value`` per line."""
    props: dict[str, str] = {}
    for raw in Path(path).read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if "=" in line and (" " not in line or line.index("=") < line.index(" ")):
            key, _, value = line.partition("=")
        else:
            key, _, value = line.partition(" ")
        props[key.strip()] = value.strip()
    return props


def get_spark(app_name: str = "pulpie-spark", conf: Mapping[str, str] | None = None,
              master: str | None = None):
    """Return the active SparkSession or build one.

    Under spark-submit / Databricks a session (or its conf) already exists and the
    cluster's settings win; locally we default to ``local[*]`` with LOCAL_DEFAULTS.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = SparkSession.builder.appName(app_name)
    launched_by_submit = "SPARK_SUBMIT" in os.environ.get("_", "") or os.environ.get("SPARK_ENV_LOADED")
    settings = dict(LOCAL_DEFAULTS)
    settings.update(conf or {})
    local = (master or "").startswith("local") or (not master and not launched_by_submit)
    if local:
        # Local Python workers must be this interpreter (the venv), not the first
        # `python3` on PATH, which lacks the package's dependencies.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        settings.setdefault("spark.driver.defaultJavaOptions", LOCAL_JVM_OPTIONS)
    if master:
        builder = builder.master(master)
    elif not launched_by_submit and "spark.master" not in settings:
        builder = builder.master(os.environ.get("PULPIE_SPARK_MASTER", "local[*]"))
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
