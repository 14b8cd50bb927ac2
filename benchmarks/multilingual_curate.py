"""Language-aware curation per language on ../shared/data/multilingual/dev.parquet
(17 languages, UD treebanks): clean kept, junk removed (3 kinds made from each
language's own words), near-dup recall on copies with 1% of words (characters in zh/ja)
replaced, false duplicates among distinct documents, language accuracy, docs/s.

    nice .venv/bin/python benchmarks/multilingual_curate.py [--config conf/curate.toml] [--limit N]

Decisions are the curate job's per-row core (spark_adapter.normalize_and_score: normalize,
language ID, quality gates, the function the Spark UDF calls) and its MinHash LSH
(minhash.signatures + band_hashes + signature verification at the threshold, as
near_dedup.py does in Spark); one process, one core. The anchor is today's English-only
behaviour: the same rows with [language] mode off (no language passed to the gates).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pulpie_spark.curate import minhash  # noqa: E402
from pulpie_spark.curate.config import load_config  # noqa: E402
from pulpie_spark.curate.language import LanguageDecision, to_fineweb2  # noqa: E402
from pulpie_spark.curate.spark_adapter import normalize_and_score  # noqa: E402

DEV = ROOT.parent / "shared" / "data" / "multilingual" / "dev.parquet"
NO_SPACES = {"zh", "ja"}
TARGETS = {"clean_kept": 0.90, "junk_removed": 0.90, "near_recall": 0.95, "false_dup": 0.01, "lang_acc": 0.95}


def tokens(text: str, lang: str) -> list[str]:
    if lang in NO_SPACES:
        letters = [c for c in text if c.isalpha()]
        return ["".join(letters[i:i + 2]) for i in range(0, len(letters) - 1, 2)]
    return [w.strip(".,;:!?()\"'«»„“”") for w in text.split() if any(c.isalpha() for c in w)]


def make_junk(text: str, lang: str, kind: str, rng: random.Random) -> str:
    words = tokens(text, lang)
    if kind == "stuffing":      # keyword stuffing on one long line
        keys = rng.sample(words, min(6, len(words)))
        return " ".join(rng.choice(keys) for _ in range(250))
    if kind == "menu":          # navigation-menu lines of 1-3 words
        return "\n".join(" ".join(rng.sample(words, rng.randint(1, 3))) for _ in range(40))
    para = text.split("\n\n")[0][:300]  # one paragraph repeated
    return "\n\n".join([para] * 8)


def near_copy(text: str, lang: str, rng: random.Random, pool: list[str]) -> str:
    if lang in NO_SPACES:  # 1% of the characters
        chars = list(text)
        idx = [i for i, c in enumerate(chars) if c.isalpha()]
        for i in rng.sample(idx, max(1, round(0.01 * len(idx)))):
            chars[i] = rng.choice(pool)
        return "".join(chars)
    words = text.split(" ")  # 1% of the words
    for i in rng.sample(range(len(words)), max(1, round(0.01 * len(words)))):
        words[i] = rng.choice(pool)
    return " ".join(words)


def decide(texts, cfg, lang):
    t0 = time.process_time()
    rows = [normalize_and_score(t, cfg.normalize, cfg.quality, lang) for t in texts]
    dt = time.process_time() - t0
    removed = [r["text"] is None or r["language_reason"] is not None or r["drop_reason"] is not None for r in rows]
    return rows, removed, len(texts) / dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default=str(ROOT / "conf" / "curate.toml"))
    ap.add_argument("--limit", type=int, default=0, help="documents per language (0: all)")
    args = ap.parse_args()
    import pandas as pd

    df = pd.read_parquet(DEV)
    if args.limit:
        df = df.groupby("lang", group_keys=False).head(args.limit)
    cfg = load_config(args.config)
    lang_on = LanguageDecision(cfg.language)
    lang_off = LanguageDecision(load_config(args.config, {"language": {"mode": "off"}}).language)
    near_cfg = cfg.near_dedup
    bands, rows_per_band = minhash.lsh_params(near_cfg)
    rng = random.Random(14)
    table = []
    total = defaultdict(float)
    for lang, g in sorted(df.groupby("lang")):
        texts = g.text.tolist()
        junk = [make_junk(t, lang, kind, rng) for t in texts[:30] for kind in ("stuffing", "menu", "repeated")]
        clean_rows, clean_removed, dps = decide(texts, cfg, lang_on)
        _, anchor_removed, anchor_dps = decide(texts, cfg, lang_off)
        _, junk_removed, _ = decide(junk, cfg, lang_on)
        gold = to_fineweb2(lang)
        acc = np.mean([r["language"] == gold for r in clean_rows])
        # near dup: each doc + a 1% copy; recall = copies linked to their original
        pool = sorted({c for t in texts for c in t if c.isalpha()}) if lang in NO_SPACES else \
            sorted({w for t in texts for w in t.split()})
        copies = [near_copy(t, lang, rng, pool) for t in texts]
        sig = minhash.signatures(texts + copies, near_cfg.ngram, near_cfg.num_perm, near_cfg.seed)
        bh = minhash.band_hashes(sig, bands, rows_per_band)
        n = len(texts)
        buckets = defaultdict(list)
        for i in range(2 * n):
            for b in range(bands):
                buckets[(b, int(bh[i, b]))].append(i)
        pairs = {(min(a, c), max(a, c)) for m in buckets.values() if len(m) > 1 for a in m for c in m if a != c}
        pairs = {p for p in pairs if minhash.estimate_jaccard(sig[p[0]], sig[p[1]]) >= near_cfg.threshold}
        recall = np.mean([(i, i + n) in pairs for i in range(n)])
        distinct = [p for p in pairs if p[0] < n and p[1] < n]
        false_dup = len({i for p in distinct for i in p}) / n
        row = {"lang": lang, "docs": n, "clean_kept": 1 - np.mean(clean_removed),
               "anchor_kept": 1 - np.mean(anchor_removed), "junk_removed": np.mean(junk_removed),
               "near_recall": recall, "false_dup": false_dup, "lang_acc": acc, "docs_s": dps, "anchor_docs_s": anchor_dps}
        table.append(row)
    head = ("lang", "docs", "clean kept", "(anchor: no lang)", "junk removed", "near recall", "false dup",
            "lang acc", "docs/s/core", "(anchor)", "speed ratio")
    print(f"dev set: {DEV.name}, {len(df)} docs, {len(table)} languages; junk: 3 kinds x 30 docs per language")
    print(" | ".join(head))
    fails = []
    for r in table:
        print(f"{r['lang']} | {r['docs']} | {r['clean_kept']:.3f} | {r['anchor_kept']:.3f} | {r['junk_removed']:.3f} | "
              f"{r['near_recall']:.3f} | {r['false_dup']:.3f} | {r['lang_acc']:.3f} | {r['docs_s']:.0f} | "
              f"{r['anchor_docs_s']:.0f} | {r['docs_s'] / r['anchor_docs_s']:.2f}")
        for k, v in TARGETS.items():
            if (r[k] > v) if k == "false_dup" else (r[k] < v):
                fails.append(f"{r['lang']}:{k}={r[k]:.3f}")
    print("targets: clean kept >= 0.90, junk removed >= 0.90, near-dup recall >= 0.95, false dup <= 0.01, "
          "lang acc >= 0.95")
    print(f"misses ({len(fails)}): " + (", ".join(fails) if fails else "none"))


if __name__ == "__main__":
    main()
