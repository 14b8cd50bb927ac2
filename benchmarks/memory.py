"""Peak JVM heap and Python worker RSS of the extract job against page and row-group size.

Each measurement is one fresh ``python jobs/extract.py --master local[2]`` process (in
local mode the heap is fixed when the JVM starts) with ``spark.driver.memory`` set; a
sampler reads the JVM's used heap with ``jstat -gc`` and the RSS of every Python worker
(children of the JVM) every 0.25 s.

    # grid: pages of 0.15/1/10/50 MB and row groups of 1 MB and 100 MB, at a 1g heap
    python benchmarks/memory.py grid --heap 1g
    # same input: this code at 4g and 1g against a baseline commit's whole tree (its own
    # driver and worker code, compiled in a git worktree) at 4g
    python benchmarks/memory.py real-input --output /tmp/real.parquet   # 285 MB, one row group
    python benchmarks/memory.py compare --input /tmp/real.parquet --baseline-commit f9abe59
    # one run of this code on any input (e.g. the adversarial corpus: python tests/adversarial.py /tmp/adv)
    python benchmarks/memory.py one --input /tmp/adv/pages.parquet --heap 1g

Inputs are generated under /tmp (``--workdir``) and deleted afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
MiB = 1 << 20
FILLER = Path(ROOT / "tests" / "data" / "md_wcxb_dev_0488.html")


def _jvm_heap_used(pid: int) -> int | None:
    jstat = shutil.which("jstat") or "/usr/lib/jvm/java-17-openjdk-amd64/bin/jstat"
    try:
        out = subprocess.run([jstat, "-gc", str(pid)], capture_output=True, text=True, timeout=5).stdout.split("\n")
        head, vals = out[0].split(), out[1].split()
        row = dict(zip(head, vals))
        return int(sum(float(row[k]) for k in ("S0U", "S1U", "EU", "OU")) * 1024)
    except Exception:
        return None


GC_LINE = re.compile(r"Pause (Young|Full|Remark|Cleanup).*?(\d+)M->(\d+)M\((\d+)M\)")


def retained_heap(gc_log: Path) -> int | None:
    """Peak heap left after a collection (MiB) in a ``-Xlog:gc`` file: what the job held
    live, plus garbage the collection did not reach. ``jstat``'s used heap also counts
    garbage not yet collected, so at a small heap it peaks near the heap whatever the job."""
    try:
        after = [int(m.group(3)) for m in GC_LINE.finditer(gc_log.read_text())]
    except OSError:
        return None
    return max(after) if after else None


def measure(cmd: list[str], env: dict | None = None, gc_log: Path | None = None, cwd: Path = ROOT) -> dict:
    """Run ``cmd``; peak JVM used heap, peak JVM RSS, peak RSS of one Python worker, wall time
    (and, with ``gc_log``, the peak heap after a collection)."""
    started = time.time()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peaks = {"jvm_heap": 0, "jvm_rss": 0, "worker_rss": 0}
    done = threading.Event()

    def sample():
        driver = psutil.Process(proc.pid)
        while not done.is_set():
            try:
                for child in driver.children(recursive=True):
                    name = " ".join(child.cmdline()[:3])
                    if "java" in name:
                        peaks["jvm_rss"] = max(peaks["jvm_rss"], child.memory_info().rss)
                        heap = _jvm_heap_used(child.pid)
                        if heap:
                            peaks["jvm_heap"] = max(peaks["jvm_heap"], heap)
                        for worker in child.children(recursive=True):
                            if "python" in worker.name():
                                peaks["worker_rss"] = max(peaks["worker_rss"], worker.memory_info().rss)
            except (psutil.Error, IndexError):
                pass
            done.wait(0.25)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    output, _ = proc.communicate()
    done.set()
    thread.join()
    summary = next((line for line in output.splitlines() if line.startswith("rows ")), None)
    if gc_log is not None:
        peaks["heap_after_gc"] = (retained_heap(gc_log) or 0) * MiB
    return {"rc": proc.returncode, "seconds": round(time.time() - started, 1), "summary": summary,
            "oom": "OutOfMemoryError" in output, **{k: round(v / MiB) for k, v in peaks.items()},
            "tail": output.splitlines()[-3:] if proc.returncode else []}


def extract_cmd(input_path: str, output: str, heap: str, extra: list[str] = ()) -> list[str]:
    """The extract job of the tree the command runs in (its working directory)."""
    return [sys.executable, "jobs/extract.py", "--input", input_path, "--output", output, "--master", "local[2]",
            "--spark-conf", f"spark.driver.memory={heap}", "--show", "0", *extra]


def write_grid_input(path: Path, page_mb: float, rows: int, row_group_mb: float) -> None:
    """``rows`` pages of ``page_mb`` MB (a real page padded with paragraphs), row groups of
    about ``row_group_mb`` MB, as pyarrow writes them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    base = FILLER.read_bytes()
    para = b"<p>The river rises in the hills above the town and runs for ninety kilometres.</p>\n"
    target = int(page_mb * MiB)
    html = base.replace(b"</body>", para * max(0, (target - len(base)) // len(para)) + b"</body>")
    pages = [html.replace(b"<title>", f"<title>{i} ".encode(), 1) for i in range(rows)]
    table = pa.table({"url": [f"https://bench.test/{i}" for i in range(rows)], "html": pages})
    per_group = max(1, int(row_group_mb * MiB // max(1, len(html))))
    pq.write_table(table, path, row_group_size=per_group)


# (page MB, pages, row group MB). Trimmed to ~100 MB of HTML per point to fit a shared
# 2-core machine; the 300 MB one-row-group point is `compare`'s 1g run (real pages).
GRID = [(0.15, 700, 1), (0.15, 700, 100), (1, 100, 100), (10, 10, 100), (50, 2, 100)]


def grid(args) -> list[dict]:
    results = []
    work = Path(tempfile.mkdtemp(dir=args.workdir))
    try:
        points = [g for g in GRID if not args.page_mb or g[0] in args.page_mb][: args.limit]
        for page_mb, rows, row_group_mb in points:
            src = work / "in.parquet"
            write_grid_input(src, page_mb, rows, row_group_mb)
            # Pages over the 10 MiB guard are rejected unparsed; raise it to measure parsing them.
            env = dict(os.environ, PULPIE_MAX_HTML_BYTES=str(64 * MiB)) if page_mb >= 10 else None
            gc_log = work / "gc.log"
            gc_log.unlink(missing_ok=True)
            extra = ["--fallback", "none", "--spark-conf", f"spark.driver.extraJavaOptions=-Xlog:gc:file={gc_log}"]
            result = measure(extract_cmd(str(src), str(work / "out"), args.heap, extra), env, gc_log)
            result.update(page_mb=page_mb, rows=rows, row_group_mb=row_group_mb, heap=args.heap)
            print(json.dumps({k: v for k, v in result.items() if k != "tail"}), flush=True)
            results.append(result)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return results


def baseline_tree(commit: str, work: Path) -> Path:
    """``commit`` checked out as a git worktree under ``work``, its hot modules compiled in
    place: the baseline runs its own driver code and its own worker code. (Python workers
    import the package from their working directory, the tree the job runs in.)"""
    tree = work / f"baseline-{commit}"
    subprocess.run(["git", "worktree", "add", "--detach", str(tree), commit], cwd=ROOT, check=True,
                   capture_output=True)
    subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace", "-j", "2"], cwd=tree, check=True,
                   capture_output=True)
    return tree


def compare(args) -> list[dict]:
    """This code at 4g and 1g against the tree of ``--baseline-commit`` at 4g, same input."""
    work = Path(tempfile.mkdtemp(dir=args.workdir))
    results = []
    tree = None
    try:
        tree = baseline_tree(args.baseline_commit, work)
        env_base = dict(os.environ, PYTHONPATH=str(tree))
        runs = [(f"baseline ({args.baseline_commit})", "4g", env_base, tree),
                ("bounded (this code)", "4g", None, ROOT), ("bounded (this code)", "1g", None, ROOT)]
        for label, heap, env, cwd in runs:
            result = measure(extract_cmd(args.input, str(work / "out"), heap), env, cwd=cwd)
            rows = int(result["summary"].split()[1]) if result["summary"] else 0
            result.update(run=label, heap=heap, pages_per_s=round(rows / result["seconds"], 2) if rows else None)
            print(json.dumps({k: v for k, v in result.items() if k != "tail"}), flush=True)
            results.append(result)
        base, new = results[0]["pages_per_s"], results[1]["pages_per_s"]
        if base and new:
            print(f"pages/s at 4g: bounded {new} / baseline {base} = {new / base:.3f}")
    finally:
        if tree is not None:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    return results


def one(args) -> None:
    """This code once on ``--input`` (a table or a WARC folder) at ``--heap``."""
    work = Path(tempfile.mkdtemp(dir=args.workdir))
    try:
        result = measure(extract_cmd(args.input, str(work / "out"), args.heap))
        result.update(input=args.input, heap=args.heap)
        print(json.dumps(result), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def real_input(args) -> None:
    """Real pages (every labelled set of ../shared/data/extraction, shuffled with ``--seed``)
    up to ``--mb`` MB of HTML, url + html, one row group: what pyarrow writes by default."""
    import glob
    import random

    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = []
    for path in sorted(glob.glob(str(ROOT.parent / "shared" / "data" / "extraction" / "*.parquet"))):
        rows += [r for r in pq.read_table(path, columns=["url", "html"]).to_pylist() if r["html"]]
    random.Random(args.seed).shuffle(rows)
    budget, kept = int(args.mb * 1e6), []
    for r in rows:
        if budget - len(r["html"]) < 0:
            break
        budget -= len(r["html"])
        kept.append(r)
    table = pa.Table.from_pylist(kept)
    pq.write_table(table, args.output, row_group_size=len(kept))
    print(f"{len(kept)} pages, {sum(len(r['html']) for r in kept) / 1e6:.1f} MB of HTML, one row group -> {args.output}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="mode", required=True)
    g = sub.add_parser("grid")
    g.add_argument("--heap", default="1g")
    g.add_argument("--limit", type=int, default=5, help="first N grid points")
    g.add_argument("--page-mb", type=float, nargs="*", help="only the grid points with these page sizes")
    c = sub.add_parser("compare")
    c.add_argument("--input", required=True)
    c.add_argument("--baseline-commit", default="f9abe59")
    o = sub.add_parser("one")
    o.add_argument("--input", required=True)
    o.add_argument("--heap", default="1g")
    for p in (g, c, o):
        p.add_argument("--workdir", default="/tmp")
    r = sub.add_parser("real-input")
    r.add_argument("--output", required=True)
    r.add_argument("--mb", type=float, default=285)
    r.add_argument("--seed", type=int, default=16)
    args = parser.parse_args()
    {"grid": grid, "compare": compare, "one": one, "real-input": real_input}[args.mode](args)


if __name__ == "__main__":
    main()
