"""The ``title`` column (segment/title.py) next to trafilatura's metadata title, on the labelled pages.

    .venv/bin/python benchmarks/title_vs_trafilatura.py

Per source: the share of pages with a title (ours, trafilatura's ``extract_metadata(html).title``),
the share of pages where the two are the same text (white space collapsed, case kept), and the
CPU time per page of each: ours is ``page_title`` alone on the segmenter's map HTML and blocks
(what segmentation adds to a page), trafilatura's is its whole metadata pass (it parses the page
itself), so the ratio says what the column costs against the usual way to get a title, not a race of
equals. Then the share of pages where our title is the first line of the page's main text as
trafilatura extracts it, none of ours (where the gold keeps the headline, it is the title).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _same(a: str | None, b: str | None) -> bool:
    return bool(a) and bool(b) and " ".join(a.split()) == " ".join(b.split())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--input", default=str(Path(__file__).resolve().parents[2] / "shared/data/extraction"))
    parser.add_argument("--per-source", type=int, default=0, help="pages per source (0: all)")
    args = parser.parse_args()

    import pandas as pd
    from trafilatura.metadata import extract_metadata

    from pulpie_spark.evaluate.loso import load_sources
    from pulpie_spark.segment.simplify import simplify
    from pulpie_spark.segment.title import page_title

    table = load_sources(args.input)
    if args.per_source:
        table = table.sort_values(["source", "page_id"]).groupby("source").head(args.per_source)
    rows = []
    for source, html, gold in table[["source", "html", "gold_text"]].itertuples(index=False):
        page = simplify(html)
        t0 = time.process_time()
        ours = page_title(page.map_html, page.blocks, page.paths)
        t1 = time.process_time()
        try:
            theirs = extract_metadata(html).title
        except Exception:  # noqa: BLE001 - a page trafilatura cannot read has no title
            theirs = None
        t2 = time.process_time()
        first_gold = next((line.strip() for line in (gold or "").splitlines() if line.strip()), "")
        rows.append({"source": source, "ours": ours is not None, "theirs": bool(theirs), "same": _same(ours, theirs),
                     "ours_ms": (t1 - t0) * 1e3, "theirs_ms": (t2 - t1) * 1e3,
                     "gold_first_line": _same(ours, first_gold.lstrip("# "))})
    frame = pd.DataFrame(rows)
    by = frame.groupby("source").agg(pages=("ours", "size"), ours_has=("ours", "mean"),
                                     trafilatura_has=("theirs", "mean"), same=("same", "mean"),
                                     gold_first_line=("gold_first_line", "mean"), ours_ms=("ours_ms", "mean"),
                                     trafilatura_ms=("theirs_ms", "mean"))
    total = frame.agg({"ours": "mean", "theirs": "mean", "same": "mean", "gold_first_line": "mean",
                       "ours_ms": "mean", "theirs_ms": "mean"})
    pd.set_option("display.width", 200)
    print(by.round(3).to_string())
    print(f"\nall {len(frame)} pages: ours has a title {total.ours:.3f}, trafilatura {total.theirs:.3f}; "
          f"the same title {total.same:.3f}; ours is the gold's first line {total.gold_first_line:.3f}")
    print(f"CPU per page: ours {total.ours_ms:.3f} ms, trafilatura's metadata {total.theirs_ms:.3f} ms "
          f"(ratio {total.theirs_ms / max(total.ours_ms, 1e-9):.0f}x)")


if __name__ == "__main__":
    main()
