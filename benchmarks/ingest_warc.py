"""WARC ingest core vs plain fastwarc on the same files, in the same run.

    nice .venv/bin/python benchmarks/ingest_warc.py [FILES...] [--repeat 5]

Anchor: fastwarc's ArchiveIterator over response records reading each HTTP body (the
least any ingest must do). Ours: ``pulpie_spark.ingest.warc.iter_warc_records`` (every
record type walked for resynchronisation, header parsing, truncation checks, doc ids,
content-type sniffing). Prints records/s and MB/s (compressed) of both and the ratio.
Default files: the bundled sample and the WARC fixtures in tests/data.
"""

from __future__ import annotations

import argparse
import glob
import os
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def anchor(path: str) -> int:
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    n = 0
    with open(path, "rb") as stream:
        for record in ArchiveIterator(stream, record_types=WarcRecordType.response, parse_http=True):
            record.reader.read()
            n += 1
    return n


def ours(path: str) -> int:
    from pulpie_spark.ingest.warc import iter_warc_records, open_local

    return sum(1 for _ in iter_warc_records(open_local(path), path, keep_non_html=True, keep_non_200=True))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("files", nargs="*")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    files = args.files or [str(ROOT / "pulpie_spark/resources/sample/sample.warc.gz")] + sorted(
        glob.glob(str(ROOT / "tests/data/warc_*.warc.gz")))
    size_mb = sum(os.path.getsize(f) for f in files) / 1e6
    results = {}
    for name, fn in (("fastwarc (anchor)", anchor), ("pulpie ingest", ours)):
        best = float("inf")
        for _ in range(args.repeat):
            start = time.perf_counter()
            records = sum(fn(f) for f in files)
            best = min(best, time.perf_counter() - start)
        results[name] = (records, best)
    print(f"{len(files)} files, {size_mb:.2f} MB compressed, best of {args.repeat}")
    for name, (records, seconds) in results.items():
        print(f"{name:20s} {records:5d} records  {records / seconds:9.0f} records/s  {size_mb / seconds:7.1f} MB/s")
    ratio = results["pulpie ingest"][1] / results["fastwarc (anchor)"][1]
    print(f"ratio pulpie/anchor time: {ratio:.2f}x")


if __name__ == "__main__":
    main()
