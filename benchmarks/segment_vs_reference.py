"""Segmentation vs the reference (pulpie 0.0.2's simplify): block agreement and speed.

    nice .venv/bin/python benchmarks/segment_vs_reference.py [--data ../shared/data]

On the dev split of every ``extraction/*.parquet`` it compares our blocks with the
reference blocks stored in ``reference/*.parquet``: per page, the two lists of block texts
(tags stripped, whitespace collapsed) are aligned with difflib.SequenceMatcher and
``matched / max(len)`` is the page's agreement; it reports the mean per source and overall,
and the share of pages whose block lists are identical (as text and as exact HTML).

Speed (CPU seconds, ``time.process_time``, so other load on the machine counts less): our
``simplify`` and pulpie 0.0.2's own ``simplify`` run on the same dev pages, one process each,
one page at a time, concurrently in this run (both see the same machine load: ours repeats
its pass over the pages, timed but not scored, until pulpie is done, and the ratio uses all
of ours' passes; the load average is printed). Ours is timed twice, as imported (the
Cython-compiled extension module when it is built, see setup.py; the file is printed) and
as pure Python (``pulpie_spark/segment/simplify.py`` loaded from source under another name): the
repeated passes alternate between the two (pulpie in its own venv,
``benchmarks/.venv-pulpie`` with ``pulpie==0.0.2 --no-deps``, ``selectolax<1.0``, ``lxml``,
``beautifulsoup4``, ``pyarrow``). Both get text decoded by ``pulpie_spark.segment.decode``; decoding
is timed on our side only (it is part of our ``simplify``).

Robustness: it runs our simplify on *all* pages of all files and counts exceptions
(``simplify`` catches everything, so the private ``_simplify`` is called) and pages with an
``error`` value; when the imported module is compiled, it also runs the pure-Python module
on every page and counts pages whose output (blocks, paths, map_html, simplified_html,
error, encoding) is not identical.
"""

from __future__ import annotations

import argparse
import difflib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pulpie_spark.segment.simplify as imported_simplify  # noqa: E402
from pulpie_spark.segment.simplify import _simplify, block_text, simplify  # noqa: E402

_OUTPUT_FIELDS = ("blocks", "paths", "map_html", "simplified_html", "error", "encoding")


def load_pure_python():
    """pulpie_spark/segment/simplify.py as plain Python, whether or not the compiled module exists."""
    name = "pulpie_spark_simplify_pure"
    spec = importlib.util.spec_from_file_location(name, ROOT / "pulpie_spark" / "simplify.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # (dataclasses look their module up while the class is built)
    spec.loader.exec_module(module)
    return module


def is_compiled(module) -> bool:
    return not module.__file__.endswith(".py")

_ITEM = re.compile(r'_item_id="\d+"')

PULPIE_RUNNER = r"""
import importlib.util, json, sys, time
import pyarrow.parquet as pq
sys.path.insert(0, sys.argv[1])
from pulpie_spark.segment.decode import decode_html
site = [p for p in sys.path if p.endswith("site-packages")][0]
spec = importlib.util.spec_from_file_location("pulpie_simplify", site + "/pulpie/simplify.py")
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
wanted = json.load(open(sys.argv[2]))
seconds = 0.0; pages = 0; failed = 0
for path, ids in wanted.items():
    ids = set(ids)
    table = pq.read_table(path, columns=["page_id", "html"]).to_pylist()
    for row in table:
        if row["page_id"] not in ids:
            continue
        text, _ = decode_html(row["html"])
        t0 = time.process_time()
        try:
            mod.simplify(text)
        except Exception:
            failed += 1
        seconds += time.process_time() - t0
        pages += 1
print(json.dumps({"pages": pages, "seconds": seconds, "failed": failed}))
"""


def reference_blocks(simplified_html: str) -> list[str]:
    """Split the reference simplified HTML into block HTML strings (like pulpie's chunker)."""
    if not simplified_html:
        return []
    body = simplified_html
    if body.endswith("</body></html>"):
        body = body[: -len("</body></html>")]
    starts = [body.rfind("<", 0, m.start()) for m in _ITEM.finditer(body)]
    return [body[a:b].strip() for a, b in zip(starts, starts[1:] + [len(body)])]


def agreement(ours: list[str], ref: list[str]) -> float:
    if not ours and not ref:
        return 1.0
    matcher = difflib.SequenceMatcher(None, ours, ref, autojunk=False)
    matched = sum(block.size for block in matcher.get_matching_blocks())
    return matched / max(len(ours), len(ref))


def load_pages(data: Path, split: str | None):
    pages = []
    for path in sorted((data / "extraction").glob("*.parquet")):
        ref_path = data / "reference" / path.name
        cols = ["source", "page_id", "html", "split"]
        rows = pq.read_table(path, columns=cols).to_pylist()
        ref = {}
        if ref_path.exists():
            for r in pq.read_table(ref_path, columns=["page_id", "simplified_html", "seconds"]).to_pylist():
                ref[r["page_id"]] = (r["simplified_html"], r["seconds"])
        for row in rows:
            if split and row["split"] != split:
                continue
            row["file"] = str(path)
            row["reference"], row["reference_seconds"] = ref.get(row["page_id"], (None, None))
            pages.append(row)
    return pages


def start_pulpie(pages, python: Path):
    """Start pulpie 0.0.2's simplify on ``pages`` in its own venv; returns a handle or None."""
    if not python.exists():
        return None
    wanted: dict[str, list[str]] = {}
    for p in pages:
        wanted.setdefault(p["file"], []).append(p["page_id"])
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(wanted, fh)
        ids_file = fh.name
    proc = subprocess.Popen(
        [str(python), "-c", PULPIE_RUNNER, str(ROOT), ids_file],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": ""},
    )
    return proc, ids_file


def finish_pulpie(handle) -> dict | None:
    if handle is None:
        return None
    proc, ids_file = handle
    try:
        out, err = proc.communicate(timeout=3600)
    finally:
        os.unlink(ids_file)
    if proc.returncode != 0:
        print("pulpie run failed:", err[-2000:], file=sys.stderr)
        return None
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--pulpie-python", type=Path, default=ROOT / "benchmarks" / ".venv-pulpie" / "bin" / "python")
    ap.add_argument("--skip-pulpie", action="store_true")
    ap.add_argument("--skip-all-pages", action="store_true", help="skip the exception count over all pages")
    ap.add_argument("--worst", type=int, default=0, help="print the N worst dev pages with a diff")
    args = ap.parse_args()

    dev = load_pages(args.data, "dev")
    load_before = os.getloadavg()
    # pulpie runs at the same time as ours, so both see the same load on a shared machine;
    # each reports its own process CPU time.
    pulpie = None if args.skip_pulpie else start_pulpie(dev, args.pulpie_python)
    per_source: dict[str, list[tuple[float, bool, bool]]] = {}
    ours_seconds = 0.0
    worst = []
    for page in dev:
        t0 = time.process_time()
        result = simplify(page["html"])
        ours_seconds += time.process_time() - t0
        ref_blocks = reference_blocks(page["reference"] or "")
        ours_text = [block_text(b) for b in result.blocks]
        ref_text = [block_text(b) for b in ref_blocks]
        score = agreement(ours_text, ref_text)
        per_source.setdefault(page["source"], []).append(
            (score, ours_text == ref_text, result.blocks == ref_blocks)
        )
        worst.append((score, page["page_id"], ours_text, ref_text))

    print(f"Block agreement with pulpie 0.0.2 on dev pages ({len(dev)} pages)")
    print(f"{'source':<22}{'pages':>6}{'agreement':>11}{'same text':>11}{'same html':>11}")
    every = []
    for source in sorted(per_source):
        rows = per_source[source]
        every.extend(rows)
        n = len(rows)
        print(f"{source:<22}{n:>6}{sum(r[0] for r in rows) / n:>11.4f}"
              f"{sum(r[1] for r in rows) / n:>11.3f}{sum(r[2] for r in rows) / n:>11.3f}")
    n = len(every)
    print(f"{'overall':<22}{n:>6}{sum(r[0] for r in every) / n:>11.4f}"
          f"{sum(r[1] for r in every) / n:>11.3f}{sum(r[2] for r in every) / n:>11.3f}")

    # pulpie takes several times longer: ours keeps segmenting the same pages (timed, not
    # scored) until pulpie is done, so the machine carries both for all of pulpie's run. The
    # passes alternate between the imported module and the pure-Python one; each of the two
    # completes at least one pass.
    pure = load_pure_python()
    variants = {"imported": (simplify, [len(dev), ours_seconds]), "pure": (pure.simplify, [0, 0.0])}
    order = ["pure", "imported"]
    turn = 0
    while (pulpie is not None and pulpie[0].poll() is None) or variants["pure"][1][0] < len(dev):
        name = order[turn % 2]
        turn += 1
        run, totals = variants[name]
        for page in dev:
            t0 = time.process_time()
            run(page["html"])
            totals[1] += time.process_time() - t0
            totals[0] += 1
            if pulpie is not None and pulpie[0].poll() is not None and totals[0] >= len(dev):
                break

    label = "compiled" if is_compiled(imported_simplify) else "pure Python (no compiled module)"
    print(f"\nSpeed, one process, same {len(dev)} dev pages:")
    print(f"  module imported: {imported_simplify.__file__} ({label})")
    ours_rate = len(dev) / ours_seconds
    print(f"  pulpie-spark simplify, {label}: {ours_rate:8.1f} pages/s ({ours_seconds:.2f} s CPU, first pass)")
    rates = {}
    for name, (_, (pages, seconds)) in variants.items():
        rates[name] = pages / seconds
        shown = label if name == "imported" else "pure Python"
        print(f"  pulpie-spark simplify, {shown}: {rates[name]:8.1f} pages/s ({seconds:.2f} s CPU, "
              f"{pages} pages, passes alternated while pulpie ran; used for the ratio)")
    ours_rate = rates["imported"]
    recorded = [p["reference_seconds"] for p in dev if p["reference_seconds"] is not None]
    if recorded:
        rate = len(recorded) / sum(recorded)
        print(f"  pulpie 0.0.2 as recorded in reference/*.parquet (seconds column): {rate:8.1f} pages/s"
              f" -> ratio {ours_rate / rate:.1f}x")
    if not args.skip_pulpie:
        ref = finish_pulpie(pulpie)
        if ref is None:
            print("  pulpie 0.0.2 simplify: not run (no benchmarks/.venv-pulpie)")
        else:
            ref_rate = ref["pages"] / ref["seconds"]
            print(f"  pulpie 0.0.2 simplify: {ref_rate:8.1f} pages/s ({ref['seconds']:.2f} s CPU, "
                  f"{ref['failed']} exceptions)")
            print(f"  ratio: {label} {rates['imported'] / ref_rate:.1f}x, "
                  f"pure Python {rates['pure'] / ref_rate:.1f}x")

    print("  load average (1, 5, 15 min) before: %.1f %.1f %.1f, after: %.1f %.1f %.1f, on %d cores"
          % (*load_before, *os.getloadavg(), os.cpu_count() or 0))

    if not args.skip_all_pages:
        everything = load_pages(args.data, None)
        exceptions = 0
        errors: dict[str, int] = {}
        compare = is_compiled(imported_simplify)
        different = []
        elapsed = 0.0
        for page in everything:
            t0 = time.process_time()
            try:
                result = _simplify(page["html"], None, 500)
            except Exception as exc:  # noqa: BLE001 - counted, that is the point
                exceptions += 1
                print("  exception:", page["page_id"], type(exc).__name__, exc, file=sys.stderr)
                continue
            finally:
                elapsed += time.process_time() - t0
            if result.error:
                errors[result.error] = errors.get(result.error, 0) + 1
            if compare:
                reference = pure._simplify(page["html"], None, 500)
                if any(getattr(result, f) != getattr(reference, f) for f in _OUTPUT_FIELDS):
                    different.append(page["page_id"])
        print(f"\nAll pages: {len(everything)}, exceptions: {exceptions}, "
              f"error values: {errors or 0}, {len(everything) / elapsed:.1f} pages/s")
        if compare:
            print(f"  compiled vs pure Python output ({', '.join(_OUTPUT_FIELDS)}): "
                  f"{len(everything) - len(different)} of {len(everything)} pages identical"
                  + (f"; different: {different[:10]}" if different else ""))

    if args.worst:
        worst.sort(key=lambda w: w[0])
        for score, page_id, ours, ref in worst[: args.worst]:
            print(f"\n=== {page_id} agreement {score:.3f} ours {len(ours)} ref {len(ref)}")
            for line in list(difflib.unified_diff(ref, ours, "reference", "ours", n=1, lineterm=""))[:40]:
                print("   ", line[:200])


if __name__ == "__main__":
    main()
