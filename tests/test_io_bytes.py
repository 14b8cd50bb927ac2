"""write_table gives byte-identical Parquet files from two separate JVMs.

parquet-mr writes each column chunk's list of encodings in ``HashSet`` order, which
follows the identity hashes of the Encoding enum's constants: with several encodings per
chunk (Spark's default v1 pages + dictionary) two JVMs write different footer bytes for
the same rows. ``pulpie_spark.io`` writes v2 pages without a dictionary, one encoding per
chunk (checked in the fast tier). The slow test runs the same write in two Python
processes (two driver JVMs, local mode) and compares every file byte for byte.

Run by hand: ``python tests/test_io_bytes.py OUT_DIR`` writes one table.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
from helpers_data import ROOT
import pytest

# Every column type the pipeline writes: strings and binary (with nulls), ints, longs,
# floats, booleans, timestamps, arrays, structs and maps.
SCHEMA = ("doc_id string, url string, html binary, n_blocks int, offset long, score double, "
          "main_probs array<float>, labels array<int>, fallback boolean, warc_date timestamp, "
          "quality struct<words:double,lines:double>, headers map<string,string>, reason string")
ROWS = 2_000
PARTITIONS = 3


def table_rows():
    rows = []
    for i in range(ROWS):
        rows.append((
            f"doc-{i:05d}", f"https://host{i % 17}.example/page/{i}",
            None if i % 29 == 0 else (f"<html><p>page {i} " + "text " * (i % 50) + "</p></html>").encode(),
            i % 400, 10_000_000_000 + 7 * i, i / 7.0,
            [((i * j) % 100) / 100.0 for j in range(i % 6)], [j % 2 for j in range(i % 6)],
            i % 3 == 0, dt.datetime(2020, 8, 1) + dt.timedelta(seconds=37 * i),
            (float(i % 300), float(i % 40)), {"content-type": "text/html", "x-n": str(i % 5)},
            None if i % 4 else ("html_too_large" if i % 8 else "timeout"),
        ))
    return rows


def write_once(out: str) -> None:
    """One driver JVM: build the table and write it with write_table."""
    from pulpie_spark.io import write_table
    from pulpie_spark.session import get_spark

    spark = get_spark("pulpie-bytes", conf={"spark.sql.shuffle.partitions": str(PARTITIONS)}, master="local[1]")
    spark.sparkContext.setLogLevel("ERROR")
    df = spark.createDataFrame(table_rows(), SCHEMA)
    df = df.repartition(PARTITIONS, "doc_id").sortWithinPartitions("doc_id")
    write_table(df, out, "parquet")
    spark.stop()


def part_files(path: Path) -> dict[str, Path]:
    """Data files by part number (the rest of the name is a per-job UUID)."""
    return {f.name.split("-")[1]: f for f in sorted(path.glob("part-*.parquet"))}


def chunk_encodings(path: Path) -> dict[str, set[tuple[str, ...]]]:
    """Column path -> the encoding lists of its chunks, over every file and row group."""
    found: dict[str, set[tuple[str, ...]]] = {}
    for file in part_files(path).values():
        meta = pq.ParquetFile(file).metadata
        for rg in range(meta.num_row_groups):
            for c in range(meta.num_columns):
                chunk = meta.row_group(rg).column(c)
                found.setdefault(chunk.path_in_schema, set()).add(tuple(chunk.encodings))
    return found


def test_every_column_chunk_has_one_encoding(spark, tmp_path):
    """Why the bytes do not depend on the JVM: no list of encodings to order."""
    from pulpie_spark.io import write_table

    df = spark.createDataFrame(table_rows(), SCHEMA).repartition(PARTITIONS, "doc_id").sortWithinPartitions("doc_id")
    write_table(df, str(tmp_path / "t"), "parquet")
    encodings = chunk_encodings(tmp_path / "t")
    assert len(encodings) == 15  # leaf columns: quality and headers have two each
    assert {col: lists for col, lists in encodings.items() if any(len(e) != 1 for e in lists)} == {}
    back = spark.read.parquet(str(tmp_path / "t"))
    assert back.schema == df.schema
    assert back.orderBy("doc_id").collect() == df.orderBy("doc_id").collect()


@pytest.mark.slow
def test_two_jvms_write_the_same_bytes(tmp_path):
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    outputs = [tmp_path / "first", tmp_path / "second"]
    for out in outputs:
        proc = subprocess.run([sys.executable, __file__, str(out)], env=env, cwd=ROOT, check=False,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
    first, second = (part_files(out) for out in outputs)
    assert len(first) == PARTITIONS and first.keys() == second.keys()
    for part in first:
        a, b = first[part].read_bytes(), second[part].read_bytes()
        assert hashlib.sha256(a).hexdigest() == hashlib.sha256(b).hexdigest(), (
            f"part {part}: {len(a)} vs {len(b)} bytes, first difference at byte "
            f"{next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))}")

    # pyarrow reads the v2 pages too (Spark's reader: test_every_column_chunk_has_one_encoding).
    arrow = pq.read_table(outputs[0]).sort_by("doc_id")
    assert arrow.num_rows == ROWS
    assert arrow.column("html").to_pylist() == [r[2] for r in table_rows()]


def test_byte_identical_options_can_be_turned_off(spark, tmp_path):
    """spark.pulpie.parquet.byteIdentical=false: parquet-mr's defaults (dictionary pages,
    several encodings per chunk: the bytes then vary from JVM to JVM)."""
    from pulpie_spark.io import BYTE_IDENTICAL_CONF, write_table

    df = spark.createDataFrame([(f"d{i}", "same") for i in range(50)], "doc_id string, lang string").coalesce(1)
    spark.conf.set(BYTE_IDENTICAL_CONF, "false")
    try:
        write_table(df, str(tmp_path / "defaults"), "parquet")
    finally:
        spark.conf.unset(BYTE_IDENTICAL_CONF)
    write_table(df, str(tmp_path / "identical"), "parquet")

    def lang_encodings(path):
        (file,) = part_files(path).values()
        return set(pq.ParquetFile(file).metadata.row_group(0).column(1).encodings)

    assert "PLAIN_DICTIONARY" in lang_encodings(tmp_path / "defaults")
    assert lang_encodings(tmp_path / "identical") == {"DELTA_BYTE_ARRAY"}


if __name__ == "__main__":
    write_once(sys.argv[1])
