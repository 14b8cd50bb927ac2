"""Cost of the per-page guards, next to the work they guard (measured in the same run).

    nice .venv/bin/python benchmarks/bench_guards.py [--pages 400]

Anchor: ``simplify`` of the same pages (the per-page work every guard wraps).
Reports, per page, CPU time of: the size check, the structure check (depth and
attributes estimate), ``call_with_deadline`` around a no-op (SIGALRM timer in the main
thread, watchdog thread elsewhere), and ``simplify``; and the ratios guard / simplify.
Reads ../shared/data/extraction (developer machines only).
"""

from __future__ import annotations

import argparse
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq

from pulpie_spark import guards
from pulpie_spark.segment.simplify import simplify

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "extraction"


def per_page(fn, items) -> float:
    started = time.process_time()
    for item in items:
        fn(item)
    return (time.process_time() - started) / len(items)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=400, help="pages per source file")
    args = parser.parse_args()
    pages = []
    for name in ("wcxb_dev", "dragnet"):
        pages += [r["html"] for r in pq.read_table(SHARED / f"{name}.parquet", columns=["html"])
                  .slice(0, args.pages).to_pylist()]

    size = per_page(guards.check_html_size, pages)
    structure = per_page(guards.check_html_structure, pages)
    rejected = sum(guards.check_html_structure(p) is not None for p in pages)
    anchor = per_page(lambda p: simplify(p), pages)

    calls = 20_000
    direct = per_page(lambda _: None, range(calls))
    signal_mode = per_page(lambda _: guards.call_with_deadline(lambda: None, seconds=30), range(calls))
    box = {}
    worker = threading.Thread(target=lambda: box.update(
        thread=per_page(lambda _: guards.call_with_deadline(lambda: None, seconds=30), range(calls))))
    worker.start()
    worker.join()

    ms = 1000.0
    print(f"pages: {len(pages)} (wcxb_dev + dragnet, {args.pages} each); structure rejects: {rejected}")
    print(f"{'per page, CPU':38s} {'ms':>9s} {'vs simplify':>12s}")
    print(f"{'simplify (anchor)':38s} {anchor * ms:9.3f} {1.0:12.4f}")
    print(f"{'check_html_size':38s} {size * ms:9.3f} {size / anchor:12.4f}")
    print(f"{'check_html_structure':38s} {structure * ms:9.3f} {structure / anchor:12.4f}")
    print(f"{'call_with_deadline, signal (no-op fn)':38s} {(signal_mode - direct) * ms:9.3f} "
          f"{(signal_mode - direct) / anchor:12.4f}")
    print(f"{'call_with_deadline, thread (no-op fn)':38s} {(box['thread'] - direct) * ms:9.3f} "
          f"{(box['thread'] - direct) / anchor:12.4f}")


if __name__ == "__main__":
    main()
