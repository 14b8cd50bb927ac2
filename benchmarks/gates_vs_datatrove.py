"""Quality gates side by side with datatrove 0.10.1 (FineWeb's own filters) on the same
English documents: per-document agreement per gate (keep/drop) and per rule (the first
failing rule, which is all datatrove reports), and docs/s of both.

datatrove is not a dependency of the package: it runs in this benchmark's own environment,
``benchmarks/.venv-datatrove`` (git-ignored), made by

    python3 -m venv benchmarks/.venv-datatrove
    benchmarks/.venv-datatrove/bin/pip install 'datatrove==0.10.1' regex 'spacy==3.8.*' pyarrow pyyaml

(datatrove 0.10.1 imports ``regex`` without declaring it, and its English word split is
``spacy.blank("en")``; no model is downloaded). ``--setup`` runs exactly these commands.
``--datatrove-python`` points at another interpreter with the same packages.

    nice .venv/bin/python benchmarks/gates_vs_datatrove.py [--limit N] [--reference-cache ref.parquet]

Documents (English): gold_text of every ../shared/data/extraction/*.parquet whose ``lang``
is ``en`` or unset, plus the ``en`` documents of ../shared/data/multilingual/dev.parquet.
Both sides score the same raw text, each gate standalone (datatrove's filter alone on the
original text), with the package's default config and the FineWeb (English) arguments of
datatrove's filters: constructor defaults except ``C4QualityFilter(filter_no_terminal_punct=False)``
(datatrove's examples/fineweb.py). ``--profile defaults`` compares with the constructor
defaults instead (our C4 then gets filter_no_terminal_punct = true).

The reference part (``--reference IN OUT``) runs inside the datatrove environment.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
VENV = ROOT / "benchmarks" / ".venv-datatrove"
GATES = ("gopher_quality", "gopher_repetition", "c4", "fineweb")
REF_PACKAGES = ("datatrove==0.10.1", "regex", "spacy==3.8.*", "pyarrow", "pyyaml")


# ------------------------------------------------------------------ reference (datatrove venv)
def reference(inp: str, out: str, profile: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    from datatrove.data import Document
    from datatrove.pipeline.filters import (C4QualityFilter, FineWebQualityFilter, GopherQualityFilter,
                                            GopherRepetitionFilter)

    classes = {"gopher_quality": GopherQualityFilter, "gopher_repetition": GopherRepetitionFilter,
               "c4": C4QualityFilter, "fineweb": FineWebQualityFilter}
    kwargs = {name: {"language": "eng_Latn"} for name in GATES}
    if profile == "fineweb":
        kwargs["c4"]["filter_no_terminal_punct"] = False
    filters = {name: classes[name](**kwargs[name]) for name in GATES}
    rows = pq.read_table(inp, columns=["doc_id", "text"]).to_pylist()
    recs = []
    t0 = time.perf_counter()
    for r in rows:
        rec = {"doc_id": r["doc_id"]}
        for name in GATES:
            try:
                res = filters[name].filter(Document(text=r["text"] or "", id=r["doc_id"]))
                ok, reason = (res if isinstance(res, tuple) else (res, None))
                rec[name] = "keep" if ok else (reason or "dropped")
            except Exception as exc:  # datatrove's own failure modes (ZeroDivisionError on 0 words)
                rec[name] = f"error:{type(exc).__name__}"
        recs.append(rec)
    seconds = time.perf_counter() - t0
    table = pa.Table.from_pylist(recs)
    table = table.replace_schema_metadata({"seconds": str(seconds), "profile": profile})
    pq.write_table(table, out)
    print(f"datatrove: {len(recs)} docs in {seconds:.1f}s")


# ------------------------------------------------------------------------ our side
def load_docs(limit: int | None) -> list[dict]:
    import pyarrow.parquet as pq

    docs = []
    for path in sorted(glob.glob(str(SHARED / "extraction" / "*.parquet"))):
        name = Path(path).stem
        for r in pq.read_table(path, columns=["page_id", "gold_text", "lang"]).to_pylist():
            if r["gold_text"] and r["lang"] in ("en", None):
                docs.append({"doc_id": f"{name}:{r['page_id']}", "text": r["gold_text"]})
    ml = SHARED / "multilingual" / "dev.parquet"
    if ml.exists():
        for r in pq.read_table(ml, columns=["doc_id", "text", "lang"]).to_pylist():
            if r["lang"] == "en" and r["text"]:
                docs.append({"doc_id": f"ml:{r['doc_id']}", "text": r["text"]})
    return docs[:limit] if limit else docs


def ours(docs: list[dict], profile: str) -> tuple[list[dict], float]:
    sys.path.insert(0, str(ROOT))
    from pulpie_spark.curate.config import QualityConfig
    from pulpie_spark.curate.quality import GATES as OUR_GATES
    from pulpie_spark.curate.words import split_words

    qcfg = QualityConfig()
    if profile == "defaults":
        qcfg = qcfg.with_overrides(c4={"filter_no_terminal_punct": True})
    recs = []
    t0 = time.perf_counter()
    for d in docs:
        rec = {"doc_id": d["doc_id"]}
        text = d["text"]
        tokens = split_words(text, "eng_Latn")  # once per document, as evaluate_quality does
        for gate in OUR_GATES:
            _, fails, _ = gate.run(text, qcfg[gate.name], tokens, "eng_Latn")
            rec[gate.name] = fails[0] if fails else "keep"
        recs.append(rec)
    return recs, time.perf_counter() - t0


def ensure_venv() -> str:
    py = VENV / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", *REF_PACKAGES], check=True)
    return str(py)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reference", nargs=2, metavar=("IN", "OUT"), help=argparse.SUPPRESS)
    ap.add_argument("--profile", choices=("fineweb", "defaults"), default="fineweb")
    ap.add_argument("--setup", action="store_true", help="create benchmarks/.venv-datatrove and exit")
    ap.add_argument("--datatrove-python", help="interpreter with datatrove 0.10.1 (default: the benchmark venv)")
    ap.add_argument("--reference-cache", help="parquet of datatrove decisions: reused when present, else written")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--show", type=int, default=3, help="disagreeing doc ids to print per gate")
    a = ap.parse_args()
    if a.reference:
        reference(*a.reference, a.profile)
        return
    if a.setup:
        print(ensure_venv())
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    docs = load_docs(a.limit)
    print(f"{len(docs)} English documents, {sum(len(d['text']) for d in docs) / 1e6:.1f} M chars; profile {a.profile}")
    cache = a.reference_cache
    if cache and os.path.exists(cache):
        ref_table = pq.read_table(cache)
    else:
        py = a.datatrove_python or ensure_venv()
        inp = cache + ".in.parquet" if cache else "/tmp/gates_vs_datatrove.in.parquet"
        out = cache or "/tmp/gates_vs_datatrove.ref.parquet"
        pq.write_table(pa.Table.from_pylist(docs), inp)
        subprocess.run([py, __file__, "--reference", inp, out, "--profile", a.profile], check=True)
        ref_table = pq.read_table(out)
    ref = {r["doc_id"]: r for r in ref_table.to_pylist()}
    ref_seconds = float((ref_table.schema.metadata or {}).get(b"seconds", b"nan"))
    mine, our_seconds = ours(docs, a.profile)
    mine = [m for m in mine if m["doc_id"] in ref]
    n = len(mine)
    print(f"\ncompared: {n} documents")
    print(f"{'gate':<20}{'agree keep/drop':>17}{'agree rule':>12}{'dt keeps':>10}{'ours keeps':>12}"
          f"{'dt only drops':>15}{'ours only drops':>17}")
    summary = {}
    for g in GATES:
        same_kd = sum((m[g] == "keep") == (ref[m["doc_id"]][g] == "keep") for m in mine)
        same_rule = sum(m[g] == ref[m["doc_id"]][g] for m in mine)
        dt_keep = sum(ref[m["doc_id"]][g] == "keep" for m in mine)
        our_keep = sum(m[g] == "keep" for m in mine)
        dt_only = sum(ref[m["doc_id"]][g] != "keep" and m[g] == "keep" for m in mine)
        our_only = sum(ref[m["doc_id"]][g] == "keep" and m[g] != "keep" for m in mine)
        summary[g] = same_kd / n
        print(f"{g:<20}{same_kd / n:>17.4f}{same_rule / n:>12.4f}{dt_keep:>10}{our_keep:>12}{dt_only:>15}{our_only:>17}")
    all_same = sum(all((m[g] == "keep") == (ref[m["doc_id"]][g] == "keep") for g in GATES) for m in mine)
    print(f"{'all four gates':<20}{all_same / n:>17.4f}")
    print("\nper rule (first failing rule as datatrove reports it): documents where datatrove and ours "
          "agree on 'this rule is the first to fail'")
    print(f"{'gate:rule':<45}{'dt':>7}{'ours':>7}{'both':>7}{'agree':>9}")
    for g in GATES:
        rules = sorted({ref[m["doc_id"]][g] for m in mine} | {m[g] for m in mine} - {"keep"})
        for rule in rules:
            if rule == "keep":
                continue
            dt = sum(ref[m["doc_id"]][g] == rule for m in mine)
            us = sum(m[g] == rule for m in mine)
            both = sum(ref[m["doc_id"]][g] == rule and m[g] == rule for m in mine)
            agree = sum((ref[m["doc_id"]][g] == rule) == (m[g] == rule) for m in mine) / n
            print(f"{g + ':' + rule:<45}{dt:>7}{us:>7}{both:>7}{agree:>9.4f}")
    for g in GATES:
        diff = [(m["doc_id"], ref[m["doc_id"]][g], m[g]) for m in mine if m[g] != ref[m["doc_id"]][g]]
        for d in diff[: a.show]:
            print(f"  {g}: {d[0]}: datatrove {d[1]!r}, ours {d[2]!r}")
    print(f"\nspeed (all four gates, one process): ours {n / our_seconds:.0f} docs/s ({our_seconds:.1f}s), "
          f"datatrove {n / ref_seconds:.1f} docs/s ({ref_seconds:.1f}s, timed when the reference was made)"
          f" -> ours/datatrove {ref_seconds / our_seconds:.1f}x")
    print(json.dumps({"docs": n, "agreement": summary}))


if __name__ == "__main__":
    main()
