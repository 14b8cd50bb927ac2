"""Shared fixtures: one local SparkSession for the whole test session."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from helpers_data import DATA

# Executors' Python must be this interpreter (the venv), not whatever `python3` is on PATH.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def spark():
    from pulpie_spark.session import get_spark

    session = get_spark(
        "pulpie-spark-tests",
        conf={
            "spark.sql.shuffle.partitions": "4",
            "spark.default.parallelism": "2",
            "spark.driver.memory": "3g",
        },
        master="local[2]",
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return DATA


# Two tiers: `./build.sh test` runs the suite that must stay under 10 minutes on 2 cores;
# tests marked `slow` (a standalone cluster with a killed worker, the whole adversarial
# corpus through every job, second full job runs) also run with PULPIE_SLOW_TESTS=1,
# which `./build.sh test-all` and CI set.
def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long end-to-end test; runs with PULPIE_SLOW_TESTS=1")


def pytest_collection_modifyitems(config, items):
    if os.environ.get("PULPIE_SLOW_TESTS") == "1":
        return
    skip_slow = pytest.mark.skip(reason="slow tier: set PULPIE_SLOW_TESTS=1 (./build.sh test-all)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip_slow)
