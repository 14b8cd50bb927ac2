"""Near-dedup wall time on local Spark for 1x, 4x and 16x documents.

    nice .venv/bin/python benchmarks/dedup_scaling.py [--base 1000] [--scales 1,4,16] [--master local[2]]

Documents: synthetic text (300 words from a 200k-word vocabulary) where 10% of the
documents are planted near-duplicates (J ~0.9) of another document and 2% exact
copies, so buckets, verification and connected components all have work. Each scale
runs MinHash -> LSH buckets -> signature verification -> connected components ->
representatives end to end (``near_dedup`` + a count of the marked rows); the ratio
column compares the time with the 1x time multiplied by the scale (1.0 = linear).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def make_docs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    docs: list[tuple[str, str]] = []
    for i in range(n):
        roll = rng.random()
        if docs and roll < 0.10:
            words = rng.choice(docs)[1].split()
            for p in rng.sample(range(4, len(words) - 4, 5), 3):  # 3 edits of 296 shingles: J ~0.9
                words[p] = f"e{rng.randrange(10**9)}"
            text = " ".join(words)
        elif docs and roll < 0.12:
            text = rng.choice(docs)[1]
        else:
            text = " ".join(f"w{rng.randrange(200000)}" for _ in range(300))
        docs.append((f"doc{seed}-{i:08d}", text))
    return docs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=int, default=1000, help="documents at 1x")
    parser.add_argument("--scales", default="1,4,16")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--shuffle-partitions", default="8")
    args = parser.parse_args()

    from pyspark.sql import functions as F

    from pulpie_spark.curate.config import make_config
    from pulpie_spark.curate.near_dedup import near_dedup
    from pulpie_spark.session import get_spark

    spark = get_spark("dedup-scaling", conf={"spark.sql.shuffle.partitions": args.shuffle_partitions},
                      master=args.master)
    spark.sparkContext.setLogLevel("ERROR")
    cfg = make_config().near_dedup
    # warm-up: JVM, Python workers, first-job overheads are not part of the scaling
    warm = spark.createDataFrame(make_docs(200, seed=99), "doc_id string, text string")
    near_dedup(warm, cfg)[0].where(F.col("near_duplicate_of").isNotNull()).count()

    results = []
    for scale in [int(s) for s in args.scales.split(",")]:
        n = args.base * scale
        docs = make_docs(n, seed=scale)
        df = spark.createDataFrame(docs, "doc_id string, text string").repartition(int(args.shuffle_partitions))
        df = df.persist()
        df.count()
        start = time.perf_counter()
        out, stats = near_dedup(df, cfg)
        marked = out.where(F.col("near_duplicate_of").isNotNull()).count()
        seconds = time.perf_counter() - start
        df.unpersist()
        results.append((scale, n, seconds, marked, stats))
        print(f"scale {scale}: {n} docs, {seconds:.1f}s, {marked} near duplicates marked, "
              f"{stats['candidate_edges']} candidate / {stats['verified_edges']} verified edges, "
              f"{stats['cc_iterations']} CC rounds", flush=True)

    base_seconds = results[0][2]
    print(f"\n{'scale':>6s}{'docs':>9s}{'seconds':>10s}{'docs/s':>9s}{'time / (1x time * scale)':>27s}")
    for scale, n, seconds, _, _ in results:
        print(f"{scale:>6d}{n:>9d}{seconds:>10.1f}{n / seconds:>9.1f}{seconds / (base_seconds * scale):>27.2f}")
    spark.stop()


if __name__ == "__main__":
    main()
