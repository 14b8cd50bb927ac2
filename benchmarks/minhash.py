"""MinHash signatures per second per core: ours (batch-vectorized numpy + xxhash) vs
datasketch's MinHash (update_batch, its fastest path) on the same documents in the
same run, plus agreement of Jaccard estimates on planted pairs.

    nice .venv/bin/python benchmarks/minhash.py [--docs 400] [--num-perm 112]

Documents: gold_text of ../shared/data/extraction/wcxb_dev.parquet when present
(real web text, median ~1,150 words), else synthetic text. Both sides start from the
text: tokenize, build word 5-grams, hash, permute, take minima. Single process, one
core (numpy elementwise ops are single-threaded).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pulpie_spark.curate import minhash  # noqa: E402

SHARED = ROOT.parent / "shared" / "data" / "extraction" / "wcxb_dev.parquet"


def load_docs(n: int) -> tuple[list[str], str]:
    if SHARED.exists():
        import pyarrow.parquet as pq

        texts = [t for t in pq.read_table(SHARED, columns=["gold_text"]).column("gold_text").to_pylist() if t]
        return texts[:n], f"wcxb_dev gold_text ({SHARED.name})"
    rng = random.Random(0)
    return [" ".join(f"w{rng.randrange(50000)}" for _ in range(rng.randrange(300, 2000))) for _ in range(n)], "synthetic"


def datasketch_signature(text: str, num_perm: int):
    from datasketch import MinHash

    words = minhash.words(text)
    n = min(5, len(words))
    m = MinHash(num_perm=num_perm)
    m.update_batch([" ".join(words[i:i + n]).encode("utf-8") for i in range(len(words) - n + 1)])
    return m


def best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def planted_pairs(rng: random.Random, docs: list[str], levels, per_level: int):
    pairs = []
    for level in levels:
        for _ in range(per_level):
            words = rng.choice(docs).split()
            if len(words) < 200:
                continue
            m = len(words) - 4
            k = round(m * (1 - level) / (5 * (1 + level)))
            positions = rng.sample(range(4, len(words) - 4, 5), min(k, len(range(4, len(words) - 4, 5))))
            edited = list(words)
            for p in positions:
                edited[p] = f"edit{rng.randrange(10**9)}"
            pairs.append((" ".join(words), " ".join(edited)))
    return pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=400)
    parser.add_argument("--num-perm", type=int, default=112)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pairs-per-level", type=int, default=30)
    parser.add_argument("--threshold", type=float, default=0.7)
    args = parser.parse_args()

    docs, source = load_docs(args.docs)
    n_words = sum(len(minhash.words(d)) for d in docs)
    print(f"documents: {len(docs)} from {source}, {n_words:,} words, num_perm={args.num_perm}, ngram=5")

    ours = best_of(lambda: minhash.signatures(docs, num_perm=args.num_perm), args.repeats)
    ds_docs = docs[: max(50, len(docs) // 4)]  # datasketch is slower: a subset keeps the run short
    ds = best_of(lambda: [datasketch_signature(d, args.num_perm) for d in ds_docs], args.repeats)
    ours_rate, ds_rate = len(docs) / ours, len(ds_docs) / ds
    print(f"{'':28s}{'docs/s/core':>14s}{'ratio':>9s}")
    print(f"{'datasketch MinHash (anchor)':28s}{ds_rate:14.1f}{1.0:9.2f}")
    print(f"{'pulpie-spark minhash':28s}{ours_rate:14.1f}{ours_rate / ds_rate:9.2f}")

    rng = random.Random(1)
    levels = (0.95, 0.92, 0.8, 0.7, 0.45, 0.3)
    pairs = planted_pairs(rng, docs, levels, args.pairs_per_level)
    err_true, err_ds_true, err_ours_ds, found = [], [], [], []
    bands, rows = minhash.optimal_bands_rows(args.threshold, args.num_perm) if args.num_perm != 112 else (14, 8)
    for a, b in pairs:
        truth = minhash.jaccard(minhash.shingle_set(a), minhash.shingle_set(b))
        sig = minhash.signatures([a, b], num_perm=args.num_perm)
        est = float(minhash.estimate_jaccard(sig[0], sig[1]))
        band = minhash.band_hashes(sig, bands, rows)
        found.append((truth, bool((band[0] == band[1]).any()) and est >= args.threshold))
        est_ds = datasketch_signature(a, args.num_perm).jaccard(datasketch_signature(b, args.num_perm))
        err_true.append(abs(est - truth))
        err_ds_true.append(abs(est_ds - truth))
        err_ours_ds.append(abs(est - est_ds))
    print(f"\nJaccard estimates on {len(pairs)} planted pairs (true J {min(levels)}-{max(levels)}), mean abs error:")
    print(f"  datasketch vs true (anchor)  {statistics.mean(err_ds_true):.4f}")
    print(f"  ours vs true                 {statistics.mean(err_true):.4f}")
    print(f"  ours vs datasketch           {statistics.mean(err_ours_ds):.4f}")
    print(f"  max abs error ours vs true   {max(err_true):.4f}")
    high = [ok for j, ok in found if j >= 0.9]
    low = [ok for j, ok in found if j < 0.5]
    print(f"\nLSH {bands}x{rows} + signature verification at {args.threshold}:")
    if high:
        print(f"  recall, pairs with J >= 0.9:        {sum(high) / len(high):.3f} ({sum(high)}/{len(high)})")
    if low:
        print(f"  false positives, pairs with J < 0.5: {sum(low) / len(low):.3f} ({sum(low)}/{len(low)})")


if __name__ == "__main__":
    main()
