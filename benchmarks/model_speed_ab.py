"""Same-process A/B of two block models through the whole ``Extractor``, with trafilatura.

    git show <old-commit>:pulpie_spark/models/default/model.safetensors > /tmp/old/model.safetensors
    (and config.json, training_report.json alike)
    nice .venv/bin/python benchmarks/model_speed_ab.py --base /tmp/old --new default --per-source 40 --runs 3

For a model change that adds features (default-v3 -> default-v4 added the landmark
columns): both extractors run in one process, page by page alternating which goes first,
and trafilatura (``extract(html, output_format="txt")``, as jobs/evaluate.py runs it) on
the same page right after, so all three see the same machine load. Process CPU time
(``time.process_time``) per page, one torch thread; each source's total is the best of
``--runs`` passes (a shared machine only ever adds time). Ratios: new over base, and
trafilatura over each (above 1: faster than trafilatura).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--input", default=str(Path(__file__).resolve().parents[2] / "shared/data/extraction"))
    parser.add_argument("--base", required=True, help="block model directory (or 'default')")
    parser.add_argument("--new", default="default", help="block model directory (or 'default')")
    parser.add_argument("--per-source", type=int, default=40, help="pages per source (first by page_id)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)
    from pulpie_spark import Extractor
    from pulpie_spark.evaluate.harness import load_labelled_table, trafilatura_text

    table = load_labelled_table(args.input)
    table = (table.sort_values(["source", "page_id"]).groupby("source", sort=True)
             .head(args.per_source).reset_index(drop=True))
    extractors = {"base": Extractor(args.base), "new": Extractor(args.new)}
    print(f"base: {extractors['base'].model_id}  new: {extractors['new'].model_id}  "
          f"pages: {len(table)} from {table.source.nunique()} sources")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    clock = time.process_time
    names = ("base", "new", "trafilatura")
    best: dict[str, dict[str, float]] = {}
    for run in range(args.runs):
        totals: dict[str, dict[str, float]] = {}
        for i, (source, html) in enumerate(zip(table.source, table.html)):
            order = ("base", "new") if (i + run) % 2 == 0 else ("new", "base")
            per = totals.setdefault(source, dict.fromkeys(names, 0.0))
            for name in order:
                t0 = clock()
                extractors[name].extract(html)
                per[name] += clock() - t0
            t0 = clock()
            trafilatura_text(html)
            per["trafilatura"] += clock() - t0
        for source, per in totals.items():
            kept = best.setdefault(source, dict(per))
            for name in names:
                kept[name] = min(kept[name], per[name])
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    counts = table.source.value_counts()
    print("| source | pages | base ms/page | new ms/page | new/base | trafilatura ms/page | traf/base | traf/new |")
    print("|---|---|---|---|---|---|---|---|")
    rows = sorted(best.items()) + [("all", {n: sum(p[n] for p in best.values()) for n in names})]
    for source, per in rows:
        n = len(table) if source == "all" else int(counts[source])
        ms = {name: 1000 * per[name] / n for name in names}
        traf = ms["trafilatura"]
        print(f"| {source} | {n} | {ms['base']:.1f} | {ms['new']:.1f} | {ms['new'] / ms['base']:.3f} | "
              f"{traf:.1f} | {traf / ms['base']:.2f}x | {traf / ms['new']:.2f}x |")


if __name__ == "__main__":
    main()
