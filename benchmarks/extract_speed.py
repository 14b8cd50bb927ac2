"""Where the end-to-end CPU time of an extraction goes, stage by stage, next to trafilatura.

    nice .venv/bin/python benchmarks/extract_speed.py --input ../shared/data/extraction --split dev

The stages ``Extractor`` runs for one page, timed separately (process CPU time, one
thread): simplify (decode + segmentation), block features, model (the default block
classifier on the features, its page gate and the output convention), render (main HTML,
Markdown and text, as ``Extractor`` and the render stage make them: ``reconstruct.render_main``),
and the trafilatura fallback on the pages the shipped rule sends (``page.fallback_reason``:
no blocks, empty or short output, the gate unsure). trafilatura (``extract(html, output_format="txt")``,
as jobs/evaluate.py runs it) extracts each page right after ours, in the same process,
so both see the same machine load; the ratio is trafilatura's CPU time over ours.
The load average is printed before and after: the development machine is shared.
So is which of the hot modules run compiled (setup.py's Cython extensions) or as Python.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

STAGES = ("simplify", "features", "model", "render", "fallback")
HOT_MODULES = ("pulpie_spark.segment.simplify", "pulpie_spark.classify.blockmodel.features", "pulpie_spark.render.reconstruct",
               "pulpie_spark.render.markdown")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--input", default=str(Path(__file__).resolve().parents[2] / "shared/data/extraction"))
    parser.add_argument("--split", default="dev")
    parser.add_argument("--sources", default=None, help="comma-separated sources to keep")
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)
    from pulpie_spark import reasons
    from pulpie_spark.classify.blockmodel import load_default
    from pulpie_spark.evaluate.harness import load_labelled_table, trafilatura_text
    from pulpie_spark.page import fallback_reason, labels_from_probs
    from pulpie_spark.render.fallback import trafilatura_extract
    from pulpie_spark.render.reconstruct import render_main
    from pulpie_spark.segment.simplify import simplify

    sources = [s.strip() for s in args.sources.split(",")] if args.sources else None
    table = load_labelled_table(args.input, split=None if args.split == "all" else args.split,
                                sources=sources, limit=args.limit)
    classifier = load_default()
    gate = classifier.page_gate
    seconds = dict.fromkeys(STAGES + ("trafilatura",), 0.0)
    fallback_pages = 0
    clock = time.process_time
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    modules = {name: importlib.import_module(name) for name in HOT_MODULES}
    print("compiled: " + (", ".join(name for name, m in modules.items() if not m.__file__.endswith(".py"))
                          or "none") + "; pure Python: "
          + (", ".join(name for name, m in modules.items() if m.__file__.endswith(".py")) or "none"))
    for html in table["html"]:
        start = clock()
        page = simplify(html)
        mark = clock()
        seconds["simplify"] += mark - start
        markdown = text = unsure = None
        if page.blocks and not page.error:
            features = classifier.features([page.blocks], [page.paths])
            seconds["features"] += clock() - mark
            mark = clock()
            probs = classifier.predict_proba_features(features)[0]
            if gate is not None:
                unsure = bool(gate.score(classifier.gate_features([probs], features)[0]) >= gate.threshold)
            labels = labels_from_probs(probs, None, page.paths).tolist()
            seconds["model"] += clock() - mark
            mark = clock()
            _, markdown, text = render_main(page.map_html, labels)
            seconds["render"] += clock() - mark
        mark = clock()
        seg_error = page.error or (None if page.blocks else reasons.NO_BLOCKS)
        if fallback_reason(seg_error, None, markdown, unsure, text=text):
            fallback_pages += 1
            trafilatura_extract(html)
        seconds["fallback"] += clock() - mark
        mark = clock()
        trafilatura_text(html)
        seconds["trafilatura"] += clock() - mark
    n = len(table)
    ours = sum(seconds[s] for s in STAGES)
    print(f"{n} pages ({args.split}), model {classifier.model_id}, 1 thread, CPU ms per page:")
    for name in STAGES:
        print(f"  {name:12s} {seconds[name] / n * 1000:7.1f}")
    print(f"  {'ours':12s} {ours / n * 1000:7.1f}   ({n / ours:.1f} pages/s per core)")
    print(f"  {'trafilatura':12s} {seconds['trafilatura'] / n * 1000:7.1f}   "
          f"({n / seconds['trafilatura']:.1f} pages/s per core)")
    print(f"ratio trafilatura/ours CPU time: {seconds['trafilatura'] / ours:.2f}x; fallback on "
          f"{fallback_pages} pages ({seconds['fallback'] / max(1, fallback_pages) * 1000:.0f} ms each, "
          f"{seconds['fallback'] / ours:.0%} of ours)")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
