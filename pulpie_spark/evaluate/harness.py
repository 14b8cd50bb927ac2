"""Run extractors over a labelled table and score them side by side (no Spark needed).

Inputs: our Parquet schema (``html``, ``gold_text``, ``source``, ``split``, ...) or
WebMainBench JSONL (``html``, ``convert_main_content``, ``meta.level``). Every
extractor sees the same pages in the same run; per page we keep its text and the
CPU seconds it took (process CPU time of the worker: extraction runs single-threaded,
torch with one thread), so pages/s per core = pages / summed CPU seconds; wall seconds are kept too.

Workers are processes (``multiprocessing``, spawn): each loads the model once.
"""

from __future__ import annotations

import json
import logging
import multiprocessing as mp
import os
import time
from pathlib import Path
from typing import Callable, Sequence

import pandas as pd

from pulpie_spark.classify.base import MAIN_THRESHOLD
from pulpie_spark.evaluate.metrics import rouge_n_f1, shingle_scores, shingle_tp_fp_fn

log = logging.getLogger("pulpie_spark.evaluate")

TRAFILATURA = "trafilatura"
RESILIPARSE = "resiliparse"


# ----------------------------------------------------------------------------- loading

def load_labelled_table(path: str | os.PathLike, split: str | None = None,
                        sources: Sequence[str] | None = None, limit: int | None = None) -> pd.DataFrame:
    """A frame with ``page_id, source, html, reference, group`` from Parquet (file or folder) or JSONL.

    ``reference`` is ``gold_text`` (Parquet) or ``convert_main_content`` (JSONL);
    ``group`` is the source, or ``webmainbench/<level>`` for JSONL.
    """
    path = Path(path)
    files = sorted(path.glob("*.parquet")) if path.is_dir() else [path]
    frames = []
    for f in files:
        if f.suffix in (".jsonl", ".json"):
            records = []
            with open(f, encoding="utf-8") as fh:
                for i, line in enumerate(fh):
                    if not line.strip():
                        continue
                    rec = json.loads(line)
                    level = (rec.get("meta") or {}).get("level") or "all"
                    records.append({"page_id": str(rec.get("track_id") or rec.get("id") or i),
                                    "source": "webmainbench", "html": rec.get("html") or "",
                                    "reference": rec.get("convert_main_content") or "",
                                    "group": f"webmainbench/{level}", "url": rec.get("url")})
            frames.append(pd.DataFrame(records))
        else:
            df = pd.read_parquet(f)
            if split is not None and "split" in df.columns:
                df = df[df["split"] == split]
            if "gold_text" not in df.columns:
                raise ValueError(f"{f}: a labelled Parquet table needs a gold_text column")
            df = df.rename(columns={"gold_text": "reference"})
            if "source" not in df.columns:
                df["source"] = f.stem
            df["group"] = df["source"]
            if "page_id" not in df.columns:
                df["page_id"] = [str(i) for i in range(len(df))]
            frames.append(df[[c for c in ("page_id", "source", "html", "reference", "group", "url")
                              if c in df.columns]])
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["page_id", "source", "html", "reference", "group"])
    if sources:
        table = table[table["source"].isin(sources)]
    table = table.sort_values(["source", "page_id"], kind="stable").reset_index(drop=True)
    if limit:
        table = table.head(limit)
    return table


# ----------------------------------------------------------------------------- extractors

def trafilatura_text(html) -> str:
    import trafilatura

    return trafilatura.extract(html, output_format="txt") or ""


def resiliparse_text(html) -> str:
    """DCLM's extractor: resiliparse ``extract_plain_text(main_content=True)``. Bytes are
    decoded with resiliparse's own charset detection (counted in its time)."""
    from pulpie_spark.render.fallback import resiliparse_main_text

    if isinstance(html, (bytes, bytearray)):
        from resiliparse.parse.encoding import bytes_to_str, detect_encoding

        html = bytes_to_str(bytes(html), detect_encoding(bytes(html)))
    return resiliparse_main_text(html)


BASELINES: dict[str, Callable] = {TRAFILATURA: trafilatura_text, RESILIPARSE: resiliparse_text}


def render_training_labels(html, gold_text: str | None) -> tuple[str, list[tuple[str, int]]]:
    """The page rendered with its training labels, and (block tag, label) per block.

    The labels are the ones every block model is trained on (``blockmodel.labels.label_blocks``
    of the gold text over the blocks' full texts, as ``blockmodel.data.simplify_segmenter``
    gives them; no confidence filter), rendered by the production renderer: what a block
    classifier that learned its labels perfectly would score through this segmentation and
    renderer. Its distance to the gold is the segmentation/labelling ceiling; a model's
    distance to it is the model's own error. The tags show each source's convention
    (captions, titles, lists, tables in or out)."""
    from pulpie_spark.classify.blockmodel.data import full_texts_from_map
    from pulpie_spark.classify.blockmodel.features import _ROOT_TAG_RE
    from pulpie_spark.classify.blockmodel.labels import label_blocks
    from pulpie_spark.page import render_page
    from pulpie_spark.segment.simplify import simplify

    page = simplify(html)
    if page.error or not page.blocks:
        return "", []
    labels = label_blocks(full_texts_from_map(page.map_html, len(page.blocks)), gold_text, min_recall=0.0).labels
    # The block's root tag as the block features read it (features._ROOT_TAG_RE).
    tags = []
    for block, label in zip(page.blocks, labels):
        root = _ROOT_TAG_RE.match(block or "")
        tags.append((root.group(1).lower() if root else "#text", label))
    return render_page(page.map_html, labels)["text"] or "", tags


class ModelRunner:
    """End-to-end extraction through :class:`pulpie_spark.Extractor` (the per-page core of
    every path: segment, classify, render, fallback); ``model`` is any name Extractor takes,
    a directory written by jobs/train.py (a candidate default model) among them."""

    def __init__(self, model: str = "default", output: str = "text", device: str | None = None,
                 fallback: str = "none", main_threshold: float = MAIN_THRESHOLD):
        from pulpie_spark.extractor import Extractor

        self.output = output
        self.extractor = Extractor(model=model, device=device, fallback=fallback, main_threshold=main_threshold)

    def __call__(self, html) -> str:
        result = self.extractor.extract(html)
        return (result.markdown if self.output == "markdown" else result.text) or ""


_WORKER: dict = {}


def _init_worker(model: str | None, output: str, threads: int, fallback: str = "none",
                 main_threshold: float = MAIN_THRESHOLD) -> None:
    import torch

    torch.set_num_threads(threads)
    _WORKER["model"] = (ModelRunner(model, output, fallback=fallback, main_threshold=main_threshold)
                        if model else None)


def _run_page(args) -> dict:
    idx, html = args
    row = {"idx": idx}
    runners: list[tuple[str, Callable]] = [(TRAFILATURA, trafilatura_text)]
    if _WORKER.get("model") is not None:
        runners.insert(0, ("model", _WORKER["model"]))
    for name, fn in runners:
        start = time.perf_counter()
        cpu_start = time.process_time()
        try:
            text, error = fn(html), None
        except Exception as exc:  # a failing page scores 0; it is counted, never lost
            text, error = "", f"{type(exc).__name__}: {exc}"[:200]
        row[f"{name}_seconds"] = time.perf_counter() - start
        # CPU time of this worker process: on a shared machine wall time measures the neighbours too.
        row[f"{name}_cpu_seconds"] = time.process_time() - cpu_start
        row[f"{name}_text"] = text
        row[f"{name}_error"] = error
    return row


def run_extractors(table: pd.DataFrame, model: str | None = "default", output: str = "text",
                   workers: int = 1, threads: int = 1, fallback: str = "none",
                   main_threshold: float = MAIN_THRESHOLD) -> pd.DataFrame:
    """Extract every page with the model (via Extractor, blocks main at P(main) >= ``main_threshold``)
    and trafilatura; one row per page."""
    tasks = list(enumerate(table["html"].tolist()))
    initargs = (model, output, threads, fallback, main_threshold)
    if workers <= 1:
        _init_worker(*initargs)
        rows = [_run_page(t) for t in tasks]
    else:
        ctx = mp.get_context("spawn")
        with ctx.Pool(workers, initializer=_init_worker, initargs=initargs) as pool:
            rows = pool.map(_run_page, tasks, chunksize=4)
    results = pd.DataFrame(rows).sort_values("idx").reset_index(drop=True)
    return pd.concat([table.drop(columns=["html"]).reset_index(drop=True), results.drop(columns=["idx"])],
                     axis=1)


# ----------------------------------------------------------------------------- scoring

def add_page_metrics(results: pd.DataFrame, extractors: Sequence[str] = ("model", TRAFILATURA)) -> pd.DataFrame:
    """Per-page metric columns (``<name>_rouge5``, ``<name>_shingle``, ``<name>_shingle_cjk``: TP/FP/FN),
    computed once so that scoring many groupings of the same pages only aggregates."""
    results = results.copy()
    refs = results["reference"].fillna("").tolist()
    for name in extractors:
        if f"{name}_text" not in results.columns:
            continue
        texts = results[f"{name}_text"].fillna("").tolist()
        results[f"{name}_rouge5"] = [rouge_n_f1(t, r, 5) for t, r in zip(texts, refs)]
        results[f"{name}_shingle"] = [shingle_tp_fp_fn(t, r) for t, r in zip(texts, refs)]
        results[f"{name}_shingle_cjk"] = [shingle_tp_fp_fn(t, r, cjk_chars=True) for t, r in zip(texts, refs)]
    return results


def score(results: pd.DataFrame, extractors: Sequence[str] = ("model", TRAFILATURA),
          group_column: str = "group", overall: bool = True) -> pd.DataFrame:
    """Per group (and overall): pages, ROUGE-5 F1, shingle P/R/F1, shingle F1 with CJK
    characters as tokens, empty pages, pages/s per core."""
    extractors = [n for n in extractors if f"{n}_text" in results.columns]
    if any(f"{n}_rouge5" not in results.columns for n in extractors):
        results = add_page_metrics(results, extractors)
    rows = []
    groups = ([("overall", results)] if overall else []) + [
        (g, results[results[group_column] == g]) for g in sorted(results[group_column].dropna().unique())]
    for name in extractors:
        for group, part in groups:
            texts = part[f"{name}_text"].fillna("").tolist()
            rouge = part[f"{name}_rouge5"].tolist()
            shingle = shingle_scores(part[f"{name}_shingle"].tolist())
            cjk = shingle_scores(part[f"{name}_shingle_cjk"].tolist())
            seconds = float(part[f"{name}_cpu_seconds"].sum())
            rows.append({"extractor": name, "group": group, "pages": len(part),
                         "rouge5_f1": sum(rouge) / len(rouge) if rouge else 0.0,
                         "shingle_precision": shingle["precision"], "shingle_recall": shingle["recall"],
                         "shingle_f1": shingle["f1"], "shingle_cjk_f1": cjk["f1"],
                         "empty": int(sum(1 for t in texts if not t.strip())),
                         "errors": int(part[f"{name}_error"].notna().sum()),
                         "pages_per_s_core": len(part) / seconds if seconds > 0 else float("nan")})
    return pd.DataFrame(rows)


def format_table(scores: pd.DataFrame) -> str:
    """Side-by-side text table: one line per group, model and trafilatura next to each other."""
    names = list(dict.fromkeys(scores["extractor"]))
    header = f"{'group':<26}{'pages':>6}"
    for n in names:
        short = "traf" if n == TRAFILATURA else n
        header += f" | {short + ' R5':>10}{'sh-F1':>7}{'empty':>6}{'p/s':>7}"
    lines = [header, "-" * len(header)]
    for group in dict.fromkeys(scores["group"]):
        part = scores[scores["group"] == group].set_index("extractor")
        line = f"{group:<26}{int(part['pages'].iloc[0]):>6}"
        for n in names:
            if n not in part.index:
                line += " | " + " " * 30
                continue
            r = part.loc[n]
            line += (f" | {r['rouge5_f1']:>10.3f}{r['shingle_f1']:>7.3f}{int(r['empty']):>6}"
                     f"{r['pages_per_s_core']:>7.1f}")
        lines.append(line)
    if len(names) >= 2 and TRAFILATURA in names:
        other = [n for n in names if n != TRAFILATURA][0]
        ov = scores[scores["group"] == "overall"].set_index("extractor")
        ratio = ov.loc[other, "pages_per_s_core"] / ov.loc[TRAFILATURA, "pages_per_s_core"]
        lines.append(f"overall {other}/trafilatura: ROUGE-5 {ov.loc[other, 'rouge5_f1'] - ov.loc[TRAFILATURA, 'rouge5_f1']:+.3f}, "
                     f"shingle F1 {ov.loc[other, 'shingle_f1'] - ov.loc[TRAFILATURA, 'shingle_f1']:+.3f}, "
                     f"speed x{ratio:.2f} pages/s per core")
    return "\n".join(lines)
