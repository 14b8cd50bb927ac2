"""Per-page CPU cost of the extract stages on the bundled sample, next to trafilatura.

    nice .venv/bin/python benchmarks/extract_sample.py [--model default] [--repeat 2]

The stages of jobs/extract.py run in this process without Spark (the same per-page cores
its UDFs call): ingest (WARC -> records), segment, classify, render (main HTML ->
Markdown + text). Anchor: trafilatura.extract on the same pages, same process, same run.
CPU seconds (time.process_time) are reported because the development machine is shared;
pages/s = pages / CPU seconds of one core.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cpu(fn):
    start = time.process_time()
    value = fn()
    return value, time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="default")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)
    from pulpie_spark.classify.registry import load_classifier
    from pulpie_spark.ingest.warc import read_warc_file
    from pulpie_spark.render.spark_adapter import render_page
    from pulpie_spark.segment.spark_adapter import segment_page
    from pulpie_spark.resources import SAMPLE_WARC

    classifier = load_classifier(args.model, device="cpu")
    best: dict[str, float] = {}
    for _ in range(args.repeat):
        rows, t_ingest = cpu(lambda: read_warc_file(str(SAMPLE_WARC)))
        pages = [r for r in rows if r["html"]]
        segs, t_seg = cpu(lambda: [segment_page(r["html"], r["declared_charset"]) for r in pages])
        labels, t_cls = cpu(lambda: [classifier.predict([s["blocks"]], [s["block_paths"]])[0] for s in segs])
        outs, t_render = cpu(lambda: [render_page(s["map_html"], l) for s, l in zip(segs, labels)])

        def trafilatura_all():
            import trafilatura

            return [trafilatura.extract(r["html"].decode("utf-8", "replace")) for r in pages]

        _, t_traf = cpu(trafilatura_all)
        for name, value in (("ingest", t_ingest), ("segment", t_seg), ("classify", t_cls),
                            ("render", t_render), ("trafilatura", t_traf)):
            best[name] = min(best.get(name, float("inf")), value)
    n = len(pages)
    ours = best["ingest"] + best["segment"] + best["classify"] + best["render"]
    print(f"{n} pages of {SAMPLE_WARC.name}, model {getattr(classifier, 'model_id', args.model)}, "
          f"1 thread, best of {args.repeat} (CPU seconds)")
    for name in ("ingest", "segment", "classify", "render"):
        print(f"  {name:9s} {best[name]:7.2f} s  {n / best[name]:8.1f} pages/s")
    print(f"  {'pulpie':9s} {ours:7.2f} s  {n / ours:8.1f} pages/s   (all stages)")
    print(f"  {'trafilatura':9s} {best['trafilatura']:5.2f} s  {n / best['trafilatura']:8.1f} pages/s   (anchor)")
    print(f"ratio pulpie/trafilatura CPU time: {ours / best['trafilatura']:.2f}x; "
          f"mean blocks {sum(len(s['blocks']) for s in segs) / n:.1f}, "
          f"mean main {sum(o['n_main'] or 0 for o in outs) / n:.1f}")


if __name__ == "__main__":
    main()
