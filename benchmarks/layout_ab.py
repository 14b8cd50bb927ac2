"""Same-run A/B of two checkouts of this repository: segmentation and end-to-end Extractor.

    git worktree add /tmp/base <old-commit> && (cd /tmp/base && ../main/.venv/bin/python setup.py build_ext --inplace)
    .venv/bin/python benchmarks/layout_ab.py --base /tmp/base --new . --runs 3

Each measurement runs in a fresh process with the checkout first on sys.path (the
compiled modules of that checkout), alternating base and new; CPU seconds of the process
(``time.process_time``), so neighbours on a shared machine disturb it less than wall time.
The end-to-end step also checks that the two checkouts give the same markdown, text and
labels on every page (dev split of ../shared/data/extraction).
"""

from __future__ import annotations

import argparse
import glob
import json
import subprocess
import sys
import time
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "extraction"


def dev_pages() -> list[bytes]:
    import pandas as pd

    pages: list[bytes] = []
    for f in sorted(glob.glob(str(SHARED / "*.parquet"))):
        df = pd.read_parquet(f, columns=["html", "split"])
        pages += df[df.split == "dev"]["html"].tolist()
    return pages


def measure(tree: str, what: str, out: str) -> None:
    """In a child process: time ``what`` (segment | extract) over the dev pages with ``tree``'s package."""
    sys.path.insert(0, tree)
    import importlib

    import pandas as pd

    pkg = importlib.import_module("pulpie_spark")
    assert pkg.__file__.startswith(tree), pkg.__file__
    pages = dev_pages()
    if what == "segment":
        simplify = pkg.simplify
        for h in pages[:50]:
            simplify(h)
        start = time.process_time()
        for h in pages:
            simplify(h)
        result = {"seconds": time.process_time() - start}
    else:
        extractor = pkg.Extractor()
        start = time.process_time()
        rows = [extractor.extract(h) for h in pages]
        result = {"seconds": time.process_time() - start}
        pd.DataFrame({"markdown": [r.markdown for r in rows], "text": [r.text for r in rows],
                      "labels": [list(r.labels) for r in rows]}).to_parquet(out + ".parquet")
    result["pages"] = len(pages)
    Path(out + ".json").write_text(json.dumps(result))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True)
    ap.add_argument("--new", default=".")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", default="/tmp/layout_ab")
    ap.add_argument("--child", nargs=3, metavar=("TREE", "WHAT", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        measure(*args.child)
        return
    import pandas as pd

    trees = {"base": str(Path(args.base).resolve()), "new": str(Path(args.new).resolve())}
    Path(args.work).mkdir(parents=True, exist_ok=True)
    for what in ("segment", "extract"):
        seconds = {"base": [], "new": []}
        for run in range(args.runs):
            for name, tree in trees.items():
                out = f"{args.work}/{what}_{name}"
                subprocess.run([sys.executable, __file__, "--base", tree, "--child", tree, what, out],
                               check=True, cwd="/tmp")
                res = json.loads(Path(out + ".json").read_text())
                seconds[name].append(res["seconds"])
        line = "  ".join(f"{n} {' / '.join(f'{s:.2f}' for s in v)} s" for n, v in seconds.items())
        ratio = sum(seconds["base"]) / sum(seconds["new"])
        print(f"{what:8s} {res['pages']} pages  {line}  new speed / base speed x{ratio:.2f}")
        if what == "extract":
            a = pd.read_parquet(f"{args.work}/extract_base.parquet")
            b = pd.read_parquet(f"{args.work}/extract_new.parquet")
            same = {c: int((a[c].astype(str) == b[c].astype(str)).sum()) for c in ("markdown", "text", "labels")}
            print(f"         identical outputs: {same} of {len(a)} pages")


if __name__ == "__main__":
    main()
