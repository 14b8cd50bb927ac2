"""End-to-end CPU time of ``Extractor`` one page a call and in batches, next to trafilatura.

    nice .venv/bin/python benchmarks/extract_batch_speed.py --per-source 40 --runs 3

The Spark job classifies the pages of an Arrow batch together (``page.classify_pages``);
jobs/evaluate.py times one page a call. Both are measured here, per source, on the
first ``--per-source`` pages by page_id: ``single`` = ``Extractor.extract`` per page,
``batch`` = ``Extractor.extract_batch`` over groups of ``--batch-pages`` pages (segment
all, one classify call, render each, fallback where needed), and trafilatura
(``extract(html, output_format="txt")``, as jobs/evaluate.py runs it) on the same pages
right after, so all three see the same machine load. Process CPU time, one torch thread,
each source's total the best of ``--runs`` passes. The texts of both of our modes must be
equal (checked). Then the model step alone at padded-block budgets per model call
(``DefaultBlockClassifier.batch_blocks``; 0 = one page a call), on the same pages' features.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    from pulpie_spark.cli import unsure_threshold_arg
    from pulpie_spark.render.fallback import DEFAULT_FALLBACK, FALLBACKS

    parser = argparse.ArgumentParser()
    parser.add_argument("--input", default=str(Path(__file__).resolve().parents[2] / "shared/data/extraction"))
    parser.add_argument("--per-source", type=int, default=40, help="pages per source (first by page_id)")
    parser.add_argument("--batch-pages", type=int, default=16, help="pages per extract_batch call")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--model", default="default",
                        help="the Extractor's model (a load_classifier name: default, a jobs/train.py output dir)")
    parser.add_argument("--unsure-threshold", type=unsure_threshold_arg, default=None,
                        help="the page gate: 'model' (default, as shipped), 'off', or a threshold")
    parser.add_argument("--fallback", choices=list(FALLBACKS), default=DEFAULT_FALLBACK,
                        help="the Extractor's fallback (the anchor is always trafilatura's full mode)")
    parser.add_argument("--budgets", default="0,512,1024,2048,4096",
                        help="padded blocks per model call to time the model step at (0: one page a call)")
    args = parser.parse_args()

    import numpy as np
    import torch

    torch.set_num_threads(1)
    from pulpie_spark import Extractor
    from pulpie_spark.evaluate.harness import load_labelled_table, trafilatura_text
    from pulpie_spark.page import segment_page

    table = load_labelled_table(args.input)
    table = (table.sort_values(["source", "page_id"]).groupby("source", sort=True)
             .head(args.per_source).reset_index(drop=True))
    extractor = Extractor(args.model, unsure_threshold=args.unsure_threshold, fallback=args.fallback)
    classifier = extractor.classifier
    gate = classifier.page_gate
    threshold = args.unsure_threshold if args.unsure_threshold is not None else (gate.threshold if gate else None)
    gate_text = "off" if threshold is None or threshold > 1 else f"threshold {threshold}"
    print(f"model: {extractor.model_id}  page gate: {gate_text}  fallback: {args.fallback}  pages: {len(table)} from {table.source.nunique()} sources  "
          f"batch: {args.batch_pages} pages  default model budget: {classifier.batch_blocks} blocks")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for html in table.html[:3]:   # imports and caches warm, as in a running executor
        extractor.extract(html)
        trafilatura_text(html)
    clock = time.process_time
    names = ("single", "batch", "trafilatura")
    best: dict[str, dict[str, float]] = collections.defaultdict(lambda: dict.fromkeys(names, float("inf")))
    for _ in range(args.runs):
        for source, group in table.groupby("source", sort=True):
            htmls = group.html.tolist()
            t0 = clock()
            single = [extractor.extract(h).text for h in htmls]
            t1 = clock()
            batched = [r.text for s in range(0, len(htmls), args.batch_pages)
                       for r in extractor.extract_batch(htmls[s:s + args.batch_pages])]
            t2 = clock()
            for h in htmls:
                trafilatura_text(h)
            t3 = clock()
            if single != batched:
                raise SystemExit(f"{source}: batched texts differ from one page a call")
            for name, seconds in zip(names, (t1 - t0, t2 - t1, t3 - t2)):
                best[source][name] = min(best[source][name], seconds)

    print("\n| source | pages | single ms/page | batch ms/page | trafilatura ms/page | traf / single | traf / batch |")
    print("|---|---|---|---|---|---|---|")
    totals = dict.fromkeys(names, 0.0)
    for source in sorted(best):
        n = int((table.source == source).sum())
        b = best[source]
        for name in names:
            totals[name] += b[name]
        print(f"| {source} | {n} | {1000 * b['single'] / n:.1f} | {1000 * b['batch'] / n:.1f} | "
              f"{1000 * b['trafilatura'] / n:.1f} | {b['trafilatura'] / b['single']:.2f}x | "
              f"{b['trafilatura'] / b['batch']:.2f}x |")
    n = len(table)
    print(f"| all | {n} | {1000 * totals['single'] / n:.1f} | {1000 * totals['batch'] / n:.1f} | "
          f"{1000 * totals['trafilatura'] / n:.1f} | {totals['trafilatura'] / totals['single']:.2f}x | "
          f"{totals['trafilatura'] / totals['batch']:.2f}x |")

    # The model step alone, on the features of the same pages.
    budgets = [int(b) for b in args.budgets.split(",")]
    feats = []
    for html in table.html:
        seg = segment_page(html)
        if seg["blocks"]:
            feats.extend(classifier.features([seg["blocks"]], [seg["block_paths"]]))
    reference = [classifier.predict_proba_features([f])[0] for f in feats]
    default_budget = classifier.batch_blocks
    seconds = dict.fromkeys(budgets, float("inf"))
    largest_difference = 0.0
    for _ in range(args.runs):
        for budget in budgets:
            t0 = clock()
            if budget == 0:
                probs = [classifier.predict_proba_features([f])[0] for f in feats]
            else:
                classifier.batch_blocks = budget
                probs = classifier.predict_proba_features(feats)
            seconds[budget] = min(seconds[budget], clock() - t0)
            largest_difference = max(largest_difference,
                                     max(float(np.abs(p - r).max()) for p, r in zip(probs, reference)))
    classifier.batch_blocks = default_budget
    print(f"\nmodel step, {len(feats)} pages with blocks (largest |P(main)| difference to one page a call: "
          f"{largest_difference:.1e})")
    print("| padded blocks per call | " + " | ".join("one page" if b == 0 else str(b) for b in budgets) + " |")
    print("|---|" + "---|" * len(budgets))
    print("| model ms/page | " + " | ".join(f"{1000 * seconds[b] / len(feats):.2f}" for b in budgets) + " |")
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
