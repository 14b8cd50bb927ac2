"""write_table / read_table: Parquet and Delta (delta-rs path: this venv has no Delta jars)."""

from __future__ import annotations

import datetime as dt

import deltalake
import pyarrow
import pytest

from pulpie_spark import io

SCHEMA = "doc_id string, url string, html binary, n_blocks int, labels array<int>, warc_date timestamp, lang string"


def _rows(start: int, n: int, lang: str = "en"):
    return [(f"d{i:03d}", f"http://x/{i}", f"<p>{i}</p>".encode(), i, [i % 2, 1], dt.datetime(2020, 8, 1, 12, 0, i % 60),
             lang) for i in range(start, start + n)]


def _df(spark, rows):
    return spark.createDataFrame(rows, SCHEMA).repartition(2)


def _sorted(df):
    return [tuple(r) for r in df.orderBy("doc_id").collect()]


def test_spark_without_delta_jars_uses_delta_rs(spark):
    # pip's PySpark has no Delta data source; the probe must say so instead of failing later.
    assert io.spark_has_delta(spark) is False


def test_parquet_round_trip(spark, tmp_path):
    df = _df(spark, _rows(0, 20))
    assert io.write_table(df, str(tmp_path / "t"), "parquet") == "spark-parquet"
    back = io.read_table(spark, str(tmp_path / "t"))
    assert back.schema == df.schema
    assert _sorted(back) == _sorted(df)
    with pytest.raises(ValueError):
        io.write_table(df, str(tmp_path / "u"), "csv")


def test_delta_round_trip_overwrite_and_append(spark, tmp_path):
    path = str(tmp_path / "delta")
    first = _df(spark, _rows(0, 10))
    assert io.write_table(first, path, "delta") == "delta-rs"
    table = deltalake.DeltaTable(path)
    assert table.version() == 0
    arrow = table.to_pyarrow_table()
    assert arrow.num_rows == 10
    assert sorted(arrow.column("doc_id").to_pylist()) == [f"d{i:03d}" for i in range(10)]
    assert arrow.schema.field("warc_date").type.unit == "us"
    # Stats come from the footers: delta-rs readers can prune and count without scanning.
    adds = pyarrow.table(table.get_add_actions(flatten=True)).to_pylist()
    assert sum(a["num_records"] for a in adds) == 10

    assert io.detect_format(spark, path) == "delta"
    back = io.read_table(spark, path)
    assert back.schema == first.schema
    assert _sorted(back) == _sorted(first)

    # Overwrite: version 1 removes the old files, which stay on disk until VACUUM; a plain
    # Parquet read of the folder would see both versions, the active file list only one.
    second = _df(spark, _rows(100, 5))
    io.write_table(second, path, "delta", mode="overwrite")
    assert deltalake.DeltaTable(path).version() == 1
    assert spark.read.parquet(path + "/part-*").count() == 15
    assert _sorted(io.read_table(spark, path, "delta")) == _sorted(second)

    io.write_table(first, path, "delta", mode="append")
    assert deltalake.DeltaTable(path).to_pyarrow_table().num_rows == 15
    assert _sorted(io.read_table(spark, path)) == sorted(_sorted(first) + _sorted(second))

    with pytest.raises(FileExistsError):
        io.write_table(first, path, "delta", mode="error")
    io.write_table(first, path, "delta", mode="ignore")
    assert deltalake.DeltaTable(path).version() == 2


def test_delta_partitioned_and_empty(spark, tmp_path):
    path = str(tmp_path / "parts")
    df = spark.createDataFrame(_rows(0, 6, "en") + _rows(6, 4, "de") + [
        ("dz", "http://x/z", b"", 0, [], dt.datetime(2020, 1, 1), None)], SCHEMA)
    io.write_table(df, path, "delta", partition_by="lang")
    table = deltalake.DeltaTable(path)
    assert table.metadata().partition_columns == ["lang"]
    counts = {}
    for row in table.to_pyarrow_table().to_pylist():
        counts[row["lang"]] = counts.get(row["lang"], 0) + 1
    assert counts == {"en": 6, "de": 4, None: 1}
    back = io.read_table(spark, path)
    assert back.schema == df.schema
    assert _sorted(back) == _sorted(df)

    empty_path = str(tmp_path / "empty")
    io.write_table(df.limit(0), empty_path, "delta", partition_by=["lang"])
    empty = io.read_table(spark, empty_path)
    assert empty.count() == 0 and empty.schema == df.schema
