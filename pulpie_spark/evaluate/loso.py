"""Leave-one-source-out (LOSO) evaluation of the default model's training recipe.

For every fold (a source of the labelled table, or a group of small sources) a model is
trained on the other folds' pages with the same code and rule as the shipped model
(``blockmodel.training.train_from_cache``) and scored end to end
(``Extractor``, fallback included) on the held-out fold's pages. trafilatura and
resiliparse run on the same pages in the same run. This measures pages the model never
saw, from sources it never saw: the number the project quotes.

Protocol (``run_loso``):

1. Load every ``*.parquet`` of the input folder (all splits).
2. Near-identical pages are counted once (``dedupe_pages``): two pages are the same when
   they share the html bytes, the normalised gold text, the first 40 normalised gold
   words (>= 40 words), or, across sources, the normalised URL. The copy kept is the
   one in the larger source (then by name, then page_id); a training-only page
   (``train_only``: e.g. ``../shared/data/extraction-weak``, gold from another extractor)
   always yields to a scored one. Training-only pages are in every fold's training data,
   never held out, never scored.
3. Folds (``assign_folds``): a source with >= ``min_fold_pages`` pages is its own fold;
   a smaller one joins the fold of its family (``FOLD_FAMILIES``: same annotation
   project or fork) when that fold exists, else the pooled ``small-sources`` fold.
4. One feature cache for all pages (segmentation, label alignment, block features:
   ``blockmodel.data.build_examples``), built once; a fold only filters its rows.
5. Per fold (one process, one torch thread): train on the other folds' train-split
   pages (per-source cap ``max_pages_per_source``, ``epochs``, dev split of the other
   folds for the best epoch), extract the held-out pages with that model.
6. Score per fold, per source, per language, per page type (a ``page_type`` column,
   where the input has one) and pooled non-English pages: ROUGE-5 F1, shingle F1,
   shingle F1 with CJK characters as tokens, pages/s per core (CPU seconds).

``label_ceiling``: each page is also rendered with its training labels
(``harness.render_training_labels``; extractor ``labels``): how far the fold model is from what it
was taught, and how far its teaching is from the gold. The labels' main share per block
tag and source goes to ``conventions.csv`` (which sources keep captions, titles, lists).
"""

from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing as mp
import os
import re
import shutil
import time
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from pulpie_spark.classify.base import MAIN_THRESHOLD
from pulpie_spark.evaluate.harness import (BASELINES, RESILIPARSE, TRAFILATURA, add_page_metrics,
                                          render_training_labels, score)
from pulpie_spark.evaluate.metrics import shingle_scores, shingle_tp_fp_fn

log = logging.getLogger("pulpie_spark.evaluate.loso")

MODEL = "model"
EXTRACTORS = (MODEL, TRAFILATURA, RESILIPARSE)
REFERENCE = "reference"   # --reference-model: a fixed model (the shipped one) on every page, no folds
LABELS = "labels"         # --label-ceiling: every page rendered with its training labels
SMALL_FOLD = "small-sources"
# The fold of training-only pages (run_loso's ``train_only``): never held out, so in every fold's training.
TRAIN_ONLY_FOLD = "train-only"
# Small sources held out together with the set they derive from (same annotators or fork):
# otherwise the "unseen" fold would be trained on its sibling's copies and conventions.
FOLD_FAMILIES = {
    "cleanportaleval": "cleaneval",          # CleanEval format and guidelines
    "newspaper4k_tests": "newspaper3k_tests",  # fork of newspaper3k, shares fixtures
    "goose3_tests": "newspaper3k_tests",       # article-extractor test fixtures of the same kind
}
_WORD_RE = re.compile(r"\w+", re.UNICODE)
HEAD_WORDS = 40


# ----------------------------------------------------------------------------- data

def load_sources(path: str | os.PathLike, sources: Sequence[str] | None = None,
                 limit_per_source: int | None = None) -> pd.DataFrame:
    """All pages of a Parquet file or folder: source, page_id, url, html, reference, lang, split, page_type."""
    path = Path(path)
    files = sorted(path.glob("*.parquet")) if path.is_dir() else [path]
    frames = []
    for f in files:
        df = pd.read_parquet(f)
        if "gold_text" not in df.columns or "html" not in df.columns:
            raise ValueError(f"{f}: a labelled table needs html and gold_text columns")
        if "source" not in df.columns:
            df["source"] = f.stem
        if "page_id" not in df.columns:
            df["page_id"] = [f"{f.stem}/{i}" for i in range(len(df))]
        for col in ("url", "lang", "split", "page_type"):
            if col not in df.columns:
                df[col] = None
        frames.append(df[["source", "page_id", "url", "html", "gold_text", "lang", "split", "page_type"]])
    if not frames:
        raise ValueError(f"no Parquet files in {path}")
    table = pd.concat(frames, ignore_index=True)
    table["page_id"] = table["page_id"].astype(str)
    table["split"] = table["split"].fillna("train")
    table["lang"] = table["lang"].fillna("unknown")
    if sources:
        table = table[table["source"].isin(sources)]
    table = table.sort_values(["source", "page_id"], kind="stable").reset_index(drop=True)
    if limit_per_source:
        table = table.groupby("source", sort=True).head(limit_per_source).reset_index(drop=True)
    return table


def _norm_url(url) -> str | None:
    if not isinstance(url, str) or "://" not in url:
        return None
    u = url.strip().lower().split("#", 1)[0]
    u = re.sub(r"^[a-z]+://(www\.)?", "", u).rstrip("/")
    return u or None


def _sha(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()


def dedupe_pages(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(kept pages, dropped pages with ``duplicate_of``): near-identical pages counted once."""
    sizes = table["source"].value_counts()
    train_only = table["train_only"] if "train_only" in table.columns else pd.Series(False, index=table.index)
    order = sorted(range(len(table)), key=lambda i: (bool(train_only.iat[i]), -int(sizes[table["source"].iat[i]]),
                                                     table["source"].iat[i], table["page_id"].iat[i]))
    seen: dict[tuple, tuple[str, str]] = {}
    duplicate_of: dict[int, str] = {}
    for i in order:
        source, page_id = table["source"].iat[i], table["page_id"].iat[i]
        html = table["html"].iat[i]
        html_b = html if isinstance(html, (bytes, bytearray)) else str(html or "").encode("utf-8", "replace")
        words = _WORD_RE.findall(str(table["gold_text"].iat[i] or "").lower())
        keys = [("html", hashlib.sha1(bytes(html_b)).hexdigest())]
        if len(words) >= 5:
            keys.append(("gold", _sha(" ".join(words))))
        if len(words) >= HEAD_WORDS:
            keys.append(("head", _sha(" ".join(words[:HEAD_WORDS]))))
        url = _norm_url(table["url"].iat[i])
        if url:
            keys.append(("url", url))
        hit = None
        for k in keys:
            owner = seen.get(k)
            # URLs are matched across sources only: a set may hold two captures of one URL.
            if owner is not None and not (k[0] == "url" and owner[0] == source):
                hit = owner
                break
        if hit is not None:
            duplicate_of[i] = f"{hit[0]}:{hit[1]}"
            continue
        for k in keys:
            seen.setdefault(k, (source, page_id))
    dropped_idx = sorted(duplicate_of)
    dropped = table.iloc[dropped_idx][["source", "page_id", "url"]].copy()
    dropped["duplicate_of"] = [duplicate_of[i] for i in dropped_idx]
    kept = table.drop(index=table.index[dropped_idx]).reset_index(drop=True)
    return kept, dropped.reset_index(drop=True)


def assign_folds(counts: dict[str, int], min_fold_pages: int = 100,
                 families: dict[str, str] | None = None) -> dict[str, str]:
    """source -> fold name. Big sources are folds; small ones join their family or ``small-sources``."""
    families = FOLD_FAMILIES if families is None else families
    folds = {s: s for s, n in counts.items() if n >= min_fold_pages}
    for s, n in sorted(counts.items()):
        if s in folds:
            continue
        target = families.get(s)
        folds[s] = target if target in folds and folds[target] == target else SMALL_FOLD
    return folds


# ----------------------------------------------------------------------------- workers

def _features_chunk(args) -> pd.DataFrame:
    pages, n_buckets, min_recall, feature_version = args
    import torch

    torch.set_num_threads(1)
    from pulpie_spark.classify.blockmodel.data import build_examples

    frame = build_examples(pages, min_recall=min_recall, keep_unconfident=True, n_buckets=n_buckets,
                           feature_version=feature_version)
    frame["n_blocks"] = frame["n_blocks"].astype("int32")
    return frame


def build_feature_cache(table: pd.DataFrame, cache_path: str | os.PathLike, *, workers: int = 1,
                        n_buckets: int = 1 << 15, min_recall: float = 0.7, chunk: int = 40,
                        feature_version: int | None = None) -> pd.DataFrame:
    """Segment, label and featurize every page once (``build_examples``); one row per page."""
    from pulpie_spark.classify.blockmodel.features import FEATURE_VERSION

    feature_version = FEATURE_VERSION if feature_version is None else feature_version
    cols = ["source", "page_id", "split", "html", "gold_text"]
    tasks = [(table[cols].iloc[s:s + chunk].reset_index(drop=True), n_buckets, min_recall, feature_version)
             for s in range(0, len(table), chunk)]
    if workers <= 1:
        parts = [_features_chunk(t) for t in tasks]
    else:
        with mp.get_context("spawn").Pool(workers) as pool:
            parts = pool.map(_features_chunk, tasks, chunksize=1)
    frame = pd.concat(parts, ignore_index=True)
    Path(cache_path).parent.mkdir(parents=True, exist_ok=True)
    frame.to_parquet(cache_path, index=False)
    return frame


GATE_FEATURES_COLUMN = f"{MODEL}_gate_features"
GATELESS = "model_without_gate"   # --page-gate: the fold models' own output next to the gated one
GATE_SCORE_COLUMN = "gate_score"   # --page-gate: each page's gate score from the gate fitted without its fold


def _gate_features(classifier, html) -> list[float] | None:
    """gate.page_gate_features of one page under ``classifier``, or None (no blocks, an error)."""
    from pulpie_spark.page import segment_page

    try:
        seg = segment_page(html)
        if seg["seg_error"] is not None or not seg["blocks"]:
            return None
        _, features = classifier.predict_with_gate_features([seg["blocks"]], [seg["block_paths"]])
        return features[0].tolist()
    except Exception:   # the page scored as it was; the gate only skips it
        return None


def _time_call(fn, html) -> tuple[str, float, str | None]:
    cpu = time.process_time()
    try:
        text, error = fn(html) or "", None
    except Exception as exc:  # a failing page scores 0; it is counted, never lost
        text, error = "", f"{type(exc).__name__}: {exc}"[:200]
    return text, time.process_time() - cpu, error


_REFERENCE: dict = {}


def _baselines_chunk(payload) -> list[dict]:
    pages, reference_model, fallback, main_threshold, golds = payload
    runners = dict(BASELINES)
    if reference_model:
        if _REFERENCE.get("key") != (reference_model, fallback, main_threshold):
            import torch

            torch.set_num_threads(1)
            from pulpie_spark.evaluate.harness import ModelRunner

            _REFERENCE.update(key=(reference_model, fallback, main_threshold),
                              runner=ModelRunner(reference_model, fallback=fallback, main_threshold=main_threshold))
        runners[REFERENCE] = _REFERENCE["runner"]
    rows = []
    for idx, html in pages:
        row = {"idx": idx}
        for name, fn in runners.items():
            row[f"{name}_text"], row[f"{name}_cpu_seconds"], row[f"{name}_error"] = _time_call(fn, html)
        if golds is not None:
            tags: list = []

            def ceiling(page_html, gold=golds[idx]):
                text, tags[:] = render_training_labels(page_html, gold)
                return text

            row[f"{LABELS}_text"], row[f"{LABELS}_cpu_seconds"], row[f"{LABELS}_error"] = _time_call(ceiling, html)
            row["block_tag_labels"] = tags
        rows.append(row)
    return rows


def _run_fold(task: dict) -> dict:
    """Train without the held-out fold, then extract its pages with that model (one torch thread)."""
    import torch

    torch.set_num_threads(1)
    from pulpie_spark.classify.blockmodel.data import check_cache_version
    from pulpie_spark.classify.blockmodel.model import BlockModelConfig
    from pulpie_spark.classify.blockmodel.training import TrainConfig, train_from_cache
    from pulpie_spark.evaluate.harness import ModelRunner

    cfg_dict = dict(task["train_config"])
    cfg = TrainConfig(**{k: v for k, v in cfg_dict.items() if k != "model"},
                      model=BlockModelConfig.from_dict(cfg_dict.get("model", {})))
    cache = pd.read_parquet(task["cache_path"])
    check_cache_version(cache, cfg.model.feature_version)
    cache = cache[cache["fold"] != task["fold"]]
    if task.get("train_sources"):   # a recipe that trains on some sources only (e.g. the shipped v1 one)
        cache = cache[cache["source"].isin(task["train_sources"])]
    cpu = time.process_time()
    _, report, train_rows, dev_rows = train_from_cache(cache, cfg, output_dir=task["model_dir"])
    train_cpu = time.process_time() - cpu
    runner = ModelRunner(task["model_dir"], fallback=task["fallback"], main_threshold=task["main_threshold"])
    rows = []
    for idx, html in task["pages"]:
        text, seconds, error = _time_call(runner, html)
        rows.append({"idx": idx, f"{MODEL}_text": text, f"{MODEL}_cpu_seconds": seconds, f"{MODEL}_error": error})
    if task.get("page_gate"):
        # The page-gate statistics of the fold model on its held-out pages (outside the
        # timing: the shipped path computes them from the same features pass).
        classifier = runner.extractor.classifier
        for row, (_, html) in zip(rows, task["pages"]):
            row[GATE_FEATURES_COLUMN] = _gate_features(classifier, html)
    return {"fold": task["fold"], "rows": rows,
            "train_keys": [f"{s}/{p}" for s, p in zip(train_rows["source"], train_rows["page_id"])],
            "dev_keys": [f"{s}/{p}" for s, p in zip(dev_rows["source"], dev_rows["page_id"])],
            "train_sources": sorted(set(train_rows["source"])), "train_pages": len(train_rows),
            "train_pages_seen": report["train_pages_seen"], "dev_pages": len(dev_rows), "best_epoch": report["best_epoch"],
            "epochs_run": len(report["history"]), "train_seconds": report["seconds"],
            "train_cpu_seconds": round(train_cpu, 1)}


def _dispatch(task):
    kind, payload = task
    return kind, (_run_fold(payload) if kind == "fold" else _baselines_chunk(payload))


# ----------------------------------------------------------------------------- protocol

def run_loso(input_path: str | os.PathLike, output: str | os.PathLike, *, train_config: dict,
             min_fold_pages: int = 100, workers: int = 1, fallback: str = "trafilatura",
             main_threshold: float = MAIN_THRESHOLD,
             features_cache: str | os.PathLike | None = None, reuse_cache: bool = False,
             sources: Sequence[str] | None = None, limit_per_source: int | None = None,
             keep_models: bool = False, min_recall: float = 0.7, reference_model: str | None = None,
             train_sources: Sequence[str] | None = None, label_ceiling: bool = False,
             train_only: str | os.PathLike | None = None, page_gate: float | None = None) -> dict:
    """Run the protocol; write pages.parquet, scores.csv, folds.json, loso.md under ``output``.

    ``train_config``: TrainConfig fields plus ``model`` (BlockModelConfig fields).
    ``main_threshold``: P(main) at or above which a block is main, for the fold models and the
    reference model alike (``Extractor(main_threshold=)``).
    ``train_sources``: fold models train on these sources only (minus the held-out fold;
    every source is still scored), to measure a recipe whose data is a subset.
    ``label_ceiling``: score the training labels rendered too (extractor ``labels``) and
    write ``conventions.csv``.
    ``train_only``: a labelled Parquet file or folder whose pages every fold model also trains
    on (fold ``TRAIN_ONLY_FOLD``), never held out or scored; copies of scored pages are dropped.
    ``page_gate``: fit the page gate (blockmodel/gate.py) at this threshold: per fold on the
    other folds' held-out pages, and the pages it sends take the fallback's text (and its
    time); ``model`` is then the gated output and ``model_without_gate`` the fold models' own;
    a gate fitted on all folds' pages is written to ``page_gate.json`` (ship it next to a model
    trained with the same recipe).
    Returns {"pages", "scores", "folds", "summary", "markdown"}.
    """
    started = time.perf_counter()
    if page_gate is not None:   # refuse --page-gate with --fallback none before the folds train, not after
        from pulpie_spark.render.fallback import fallback_extractor
        fallback_extractor(fallback)
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    table = load_sources(input_path, sources=sources, limit_per_source=limit_per_source)
    table["train_only"] = False
    if train_only:
        # split "train": their gold (another extractor's output) never picks a fold model's epoch
        extra = load_sources(train_only).assign(train_only=True, split="train")
        clash = sorted(set(extra["source"]) & set(table["source"]))
        if clash:
            raise ValueError(f"training-only sources {clash} are also in {input_path}: rename them")
        table = pd.concat([table, extra], ignore_index=True)
    n_input = len(table)
    table, dropped = dedupe_pages(table)
    fold_of = assign_folds(table.loc[~table["train_only"], "source"].value_counts().to_dict(), min_fold_pages)
    fold_of.update({s: TRAIN_ONLY_FOLD for s in table.loc[table["train_only"], "source"].unique()})
    table["fold"] = table["source"].map(fold_of)
    train_only_table = table[table["train_only"]]
    table = table[~table["train_only"]]
    log.info("%d pages, %d near-duplicates dropped, %d folds, %d training-only pages", n_input, len(dropped),
             table["fold"].nunique(), len(train_only_table))

    from pulpie_spark.classify.blockmodel.data import check_cache_version
    from pulpie_spark.classify.blockmodel.features import FEATURE_VERSION

    n_buckets = int(train_config.get("model", {}).get("n_buckets", 1 << 15))
    feature_version = int(train_config.get("model", {}).get("feature_version", FEATURE_VERSION))
    cache_path = Path(features_cache) if features_cache else out / "features.parquet"
    kept = pd.concat([table, train_only_table])   # every page a fold model may train on
    if reuse_cache and cache_path.exists():
        cache = pd.read_parquet(cache_path)
        check_cache_version(cache, feature_version, f"features cache {cache_path}")
    else:
        t0 = time.perf_counter()
        cache = build_feature_cache(kept, cache_path, workers=workers, n_buckets=n_buckets,
                                    min_recall=min_recall, feature_version=feature_version)
        log.info("feature cache: %d pages in %.0f s", len(cache), time.perf_counter() - t0)
    key = cache["source"] + "/" + cache["page_id"]
    kept_keys = set(kept["source"] + "/" + kept["page_id"])
    missing = kept_keys - set(key)   # the cache holds a row for every page it was built from
    if missing:
        raise ValueError(f"features cache {cache_path} lacks {len(missing)} of the pages (e.g. "
                         f"{sorted(missing)[0]}): it was built for other input; drop --reuse-cache")
    cache = cache[key.isin(kept_keys)].copy()   # the deduped pages only
    cache["fold"] = cache["source"].map(fold_of)
    fold_cache = out / "fold_features.parquet"
    cache.to_parquet(fold_cache, index=False)
    del cache

    models_dir = out / "models"
    folds = sorted(table["fold"].unique(), key=lambda f: -int((table["fold"] == f).sum()))
    tasks = []
    for fold in folds:
        idx = table.index[table["fold"] == fold]
        tasks.append(("fold", {"fold": fold, "cache_path": str(fold_cache), "train_config": train_config,
                               "model_dir": str(models_dir / fold), "fallback": fallback,
                               "main_threshold": main_threshold, "page_gate": page_gate is not None,
                               "train_sources": sorted(train_sources) if train_sources else None,
                               "pages": [(int(i), table.at[i, "html"]) for i in idx]}))
    for s in range(0, len(table), 50):
        chunk = table.index[s:s + 50]
        golds = {int(i): table.at[i, "gold_text"] for i in chunk} if label_ceiling else None
        tasks.append(("baselines", ([(int(i), table.at[i, "html"]) for i in chunk], reference_model, fallback,
                                    main_threshold, golds)))
    if workers <= 1:
        results = [_dispatch(t) for t in tasks]
    else:
        with mp.get_context("spawn").Pool(workers, maxtasksperchild=None) as pool:
            results = list(pool.imap_unordered(_dispatch, tasks, chunksize=1))
    model_rows, base_rows, fold_info = [], [], []
    for kind, res in results:
        if kind == "fold":
            model_rows.extend(res.pop("rows"))
            fold_info.append(res)
        else:
            base_rows.extend(res)
    if not keep_models:
        shutil.rmtree(models_dir, ignore_errors=True)
    fold_info.sort(key=lambda r: r["fold"])
    per_page = (pd.DataFrame(model_rows).merge(pd.DataFrame(base_rows), on="idx").set_index("idx").sort_index())
    pages = pd.concat([table.drop(columns=["html", "train_only"]), per_page], axis=1)
    pages = pages.rename(columns={"gold_text": "reference"})
    gate_summary = None
    if page_gate is not None:
        pages, gate_summary = apply_page_gate(pages, table["html"], page_gate, out, fallback=fallback)
    pages["non_english"] = np.where(pages["lang"].isin(["en", "unknown"]), None, "non-English (known lang)")

    extractors = (EXTRACTORS + ((GATELESS,) if page_gate is not None else ())
                  + ((REFERENCE,) if reference_model else ()) + ((LABELS,) if label_ceiling else ()))
    conventions = None
    if label_ceiling:
        conventions = label_conventions(pages)
        pages = pages.drop(columns=["block_tag_labels"])
    pages = add_page_metrics(pages, extractors)
    scores = score_loso(pages, extractors)
    summary = summarize(scores, pages, min_fold_pages)
    summary["reference_model"] = reference_model
    summary["page_gate"] = gate_summary
    summary.update({"input_pages": n_input, "duplicates_dropped": len(dropped), "pages": len(pages),
                    "folds": {f: sorted(s for s, v in fold_of.items() if v == f) for f in folds},
                    "train_config": train_config, "fallback": fallback, "main_threshold": main_threshold,
                    "workers": workers,
                    "train_sources": sorted(train_sources) if train_sources else "all",
                    "train_only_pages": {s: int(n) for s, n in train_only_table["source"].value_counts().sort_index().items()},
                    "wall_seconds": round(time.perf_counter() - started, 1)})
    markdown = format_markdown(scores, summary)
    # The gate statistics stay (12 floats a page): other gates can be fitted from pages.parquet.
    pages.drop(columns=[c for c in pages.columns if c.endswith(("_shingle", "_shingle_cjk"))]).to_parquet(
        out / "pages.parquet", index=False)
    dropped.to_csv(out / "duplicates.csv", index=False)
    if conventions is not None:
        conventions.to_csv(out / "conventions.csv", index=False)
    scores.to_csv(out / "scores.csv", index=False)
    (out / "folds.json").write_text(json.dumps(fold_info, indent=1) + "\n")
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    (out / "loso.md").write_text(markdown + "\n")
    return {"pages": pages, "scores": scores, "folds": fold_info, "summary": summary, "markdown": markdown}


def run_loso_seeds(input_path: str | os.PathLike, output: str | os.PathLike, *, seeds: Sequence[int],
                   train_config: dict, features_cache: str | os.PathLike | None = None,
                   reuse_cache: bool = False, **kwargs) -> dict:
    """The protocol once per seed (``output/seed-<n>``, one features cache for all runs) and the
    model's scores side by side: ``seeds.csv`` / ``seeds.md``, one row per seed, their mean and
    their spread (max - min) per column. One seed moved a fold by up to 0.036 shingle F1
    (docs/model-card.md): a recipe is compared by its row of means and read with its spread.
    ``kwargs`` go to :func:`run_loso`. Returns {"runs": {seed: run_loso result}, "table", "markdown"}."""
    if not seeds:
        raise ValueError("seeds: give at least one seed")
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    cache = Path(features_cache) if features_cache else out / "features.parquet"
    runs = {}
    for i, seed in enumerate(seeds):
        runs[int(seed)] = run_loso(input_path, out / f"seed-{int(seed)}", train_config={**train_config, "seed": int(seed)},
                                   features_cache=cache, reuse_cache=reuse_cache or i > 0, **kwargs)
    table = seed_table(runs)
    markdown = format_seed_table(table)
    table.to_csv(out / "seeds.csv", index=False)
    (out / "seeds.md").write_text(markdown + "\n")
    return {"runs": runs, "table": table, "markdown": markdown}


def seed_table(runs: dict) -> pd.DataFrame:
    """Per seed: the model's mean shingle F1 and ROUGE-5 over folds, non-English pooled (shingle
    F1, CJK tokens) and each fold's shingle F1; then the mean and the spread over seeds, and
    trafilatura (the same in every run)."""
    def row(name: str, summary: dict, scores: pd.DataFrame, extractor: str) -> dict:
        folds = scores[(scores["by"] == "fold") & (scores["extractor"] == extractor)].set_index("group")
        out = {"row": name, "mean_shingle_f1": summary[f"{extractor}_mean_fold_shingle_f1"],
               "mean_rouge5_f1": summary[f"{extractor}_mean_fold_rouge5_f1"],
               "non_english_shingle_cjk_f1": summary[f"{extractor}_non_english_shingle_cjk_f1"]}
        out.update({f"{fold}_shingle_f1": float(folds.at[fold, "shingle_f1"]) for fold in sorted(folds.index)})
        return out

    rows = [row(f"seed {seed}", r["summary"], r["scores"], MODEL) for seed, r in runs.items()]
    values = pd.DataFrame(rows).drop(columns=["row"]).astype(float)
    rows.append({"row": "mean over seeds", **values.mean().to_dict()})
    rows.append({"row": "spread (max - min)", **(values.max() - values.min()).to_dict()})
    first = next(iter(runs.values()))
    rows.append(row(TRAFILATURA, first["summary"], first["scores"], TRAFILATURA))
    return pd.DataFrame(rows)


def format_seed_table(table: pd.DataFrame) -> str:
    columns = [c for c in table.columns if c != "row"]
    names = [c.replace("_shingle_f1", "").replace("_", " ") if c.endswith("_shingle_f1") and not c.startswith("mean")
             else c.replace("_", " ") for c in columns]
    lines = ["| model | " + " | ".join(names) + " |", "|---" * (len(columns) + 1) + "|"]
    for r in table.to_dict("records"):
        cells = ["" if pd.isna(r[c]) else f"{r[c]:.3f}" for c in columns]
        lines.append(f"| {r['row']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def label_conventions(pages: pd.DataFrame) -> pd.DataFrame:
    """Per source and block tag: blocks and the share the training labels call main
    (from ``block_tag_labels``, (tag, label) per block of each page)."""
    rows = [(source, tag, label) for source, pairs in zip(pages["source"], pages["block_tag_labels"])
            for tag, label in pairs]
    frame = pd.DataFrame(rows, columns=["source", "tag", "label"])
    out = frame.groupby(["source", "tag"], sort=True)["label"].agg(blocks="size", main_share="mean").reset_index()
    out["main_share"] = out["main_share"].round(3)
    return out


def apply_page_gate(pages: pd.DataFrame, html: pd.Series, threshold: float, out: Path, *,
                    fallback: str = TRAFILATURA) -> tuple[pd.DataFrame, dict]:
    """The page gate, leave-one-fold-out: for each fold, a gate fitted on the other folds'
    pages (whether the fallback's text beats the fold model's there by GATE_MARGIN shingle F1;
    the fallback is one of the run's baselines, trafilatura (either mode) or resiliparse) decides which of
    its pages take the fallback; those pages get the fallback's text and its CPU time added.
    Also writes the gate fitted on every fold's pages to ``out``."""
    from pulpie_spark.classify.blockmodel.gate import GATE_MARGIN, fit_page_gate
    from pulpie_spark.render.fallback import fallback_extractor

    extract = fallback_extractor(fallback)   # "none" is refused: a gate needs somewhere to send pages

    pages = pages.copy()
    pages[f"{GATELESS}_text"] = pages[f"{MODEL}_text"]
    pages[f"{GATELESS}_cpu_seconds"] = pages[f"{MODEL}_cpu_seconds"]
    pages[f"{GATELESS}_error"] = pages[f"{MODEL}_error"]
    refs = pages["reference"].fillna("").tolist()

    def f1(texts):
        return np.array([shingle_scores([shingle_tp_fp_fn(t, r)])["f1"]
                         for t, r in zip(texts.fillna("").tolist(), refs)])

    # The run's baseline of the fallback's extractor: trafilatura's fast mode is fitted on
    # trafilatura's text, so that it and the full mode send the same pages (an A/B of the two).
    baseline = TRAFILATURA if fallback == "trafilatura-fast" else fallback
    better = (f1(pages[f"{baseline}_text"]) - f1(pages[f"{MODEL}_text"]) > GATE_MARGIN).astype(np.float64)
    has = pages[GATE_FEATURES_COLUMN].notna().to_numpy()
    features = np.array([f if f is not None else [] for f in pages[GATE_FEATURES_COLUMN]], dtype=object)
    sent = np.zeros(len(pages), dtype=bool)
    scores = np.full(len(pages), np.nan)   # each page's nested gate score (other thresholds, offline)
    folds = pages["fold"].to_numpy()
    for fold in sorted(set(folds)):
        train = has & (folds != fold)
        gate = fit_page_gate(np.stack(features[train]), better[train], threshold=threshold)
        held = np.flatnonzero(has & (folds == fold))
        if len(held):
            scores[held] = gate.score(np.stack(features[held]))
            sent[held] = scores[held] >= threshold
    pages[GATE_SCORE_COLUMN] = scores
    for position in np.flatnonzero(sent):
        idx = pages.index[position]
        cpu = time.process_time()
        result = extract(html.loc[idx])
        pages.at[idx, f"{MODEL}_cpu_seconds"] += time.process_time() - cpu
        if result.error is None:   # as page.extract_pages: a failed fallback keeps the model's text
            pages.at[idx, f"{MODEL}_text"] = result.text
    final = fit_page_gate(np.stack(features[has]), better[has], threshold=threshold,
                          fitted_on=f"{int(has.sum())} held-out pages of {len(set(folds))} LOSO folds")
    final.save(out)
    summary = {"threshold": threshold, "margin": GATE_MARGIN, "fallback": fallback, "pages_sent": int(sent.sum()),
               "share_sent": round(float(sent.mean()), 4),
               "sent_by_fold": {f: int(sent[folds == f].sum()) for f in sorted(set(folds))}}
    return pages, summary


def score_loso(pages: pd.DataFrame, extractors: Sequence[str] = EXTRACTORS) -> pd.DataFrame:
    """Scores of every extractor, by fold, source, language, page type and pooled non-English."""
    parts = []
    for kind, column in (("fold", "fold"), ("source", "source"), ("lang", "lang"),
                         ("page_type", "page_type"), ("pooled", "non_english")):
        if column not in pages.columns or pages[column].dropna().empty:
            continue
        s = score(pages, extractors, group_column=column, overall=(kind == "fold"))
        s.insert(0, "by", np.where(s["group"] == "overall", "overall", kind))
        parts.append(s)
    return pd.concat(parts, ignore_index=True)


def summarize(scores: pd.DataFrame, pages: pd.DataFrame, min_fold_pages: int) -> dict:
    """Headline numbers: mean over folds, pooled non-English, wins per fold, speed ratios."""
    folds = scores[scores["by"] == "fold"]
    out: dict = {}
    for name in dict.fromkeys(folds["extractor"]):
        part = folds[folds["extractor"] == name]
        out[f"{name}_mean_fold_shingle_f1"] = float(part["shingle_f1"].mean())
        out[f"{name}_mean_fold_rouge5_f1"] = float(part["rouge5_f1"].mean())
        out[f"{name}_mean_fold_shingle_cjk_f1"] = float(part["shingle_cjk_f1"].mean())
        pooled = scores[(scores["by"] == "pooled") & (scores["extractor"] == name)]
        out[f"{name}_non_english_shingle_f1"] = float(pooled["shingle_f1"].iloc[0]) if len(pooled) else None
        out[f"{name}_non_english_shingle_cjk_f1"] = (float(pooled["shingle_cjk_f1"].iloc[0])
                                                     if len(pooled) else None)
    wide = folds.pivot(index="group", columns="extractor", values=["shingle_f1", "rouge5_f1", "pages_per_s_core"])
    big = [g for g in wide.index if int((pages["fold"] == g).sum()) >= min_fold_pages]
    out["folds_model_beats_trafilatura_both"] = [
        g for g in big if wide.loc[g, ("shingle_f1", MODEL)] >= wide.loc[g, ("shingle_f1", TRAFILATURA)]
        and wide.loc[g, ("rouge5_f1", MODEL)] >= wide.loc[g, ("rouge5_f1", TRAFILATURA)]]
    out["speed_ratio_model_over_trafilatura"] = {
        g: float(wide.loc[g, ("pages_per_s_core", MODEL)] / wide.loc[g, ("pages_per_s_core", TRAFILATURA)])
        for g in wide.index}
    return out


def _fmt_row(label: str, part: pd.DataFrame) -> str:
    p = part.set_index("extractor")
    cells = [label, str(int(p["pages"].iloc[0]))]
    for name in EXTRACTORS:
        r = p.loc[name]
        cells.append(f"{r['rouge5_f1']:.3f} / {r['shingle_f1']:.3f} / {r['shingle_cjk_f1']:.3f}")
    for name in EXTRACTORS:
        cells.append(f"{p.loc[name, 'pages_per_s_core']:.1f}")
    cells.append(f"{p.loc[MODEL, 'pages_per_s_core'] / p.loc[TRAFILATURA, 'pages_per_s_core']:.2f}")
    return "| " + " | ".join(cells) + " |"


def _comparison_rows(scores: pd.DataFrame, extractors: Sequence[str], metrics: Sequence[str]) -> list[str]:
    """Table rows per fold and pooled group: pages, then each extractor's metrics joined by " / "."""
    rows = []
    for by in ("fold", "pooled"):
        part = scores[scores["by"] == by]
        for g in dict.fromkeys(part["group"]):
            p = part[part["group"] == g].set_index("extractor")
            cells = [g, str(int(p["pages"].iloc[0]))] + [" / ".join(f"{p.loc[n, m]:.3f}" for m in metrics)
                                                          for n in extractors]
            rows.append("| " + " | ".join(cells) + " |")
    return rows


def format_markdown(scores: pd.DataFrame, summary: dict) -> str:
    """The LOSO table (per fold, then per language and page type) as Markdown."""
    head = ("| {} | pages | ours R5 / sh-F1 / sh-F1 CJK | trafilatura R5 / sh-F1 / sh-F1 CJK | "
            "resiliparse R5 / sh-F1 / sh-F1 CJK | ours p/s/core | traf p/s/core | resil. p/s/core | ours/traf speed |")
    sep = "|---" * 10 + "|"
    lines = []
    sections = [("fold", "held-out fold"), ("source", "source"), ("lang", "language"),
                ("page_type", "page type"), ("pooled", "pooled")]
    for by, title in sections:
        part = scores[scores["by"] == by]
        if part.empty:
            continue
        lines += ["", f"**by {title}**" if by != "fold" else "**held-out folds** (model trained without the fold)",
                  "", head.format(title), sep]
        for g in dict.fromkeys(part["group"]):
            lines.append(_fmt_row(g, part[part["group"] == g]))
        if by == "fold":
            lines.append(_fmt_row("**all pages**", scores[scores["by"] == "overall"]))
    if REFERENCE in set(scores["extractor"]):
        lines += ["", f"**fold models vs the fixed model {summary.get('reference_model')}** (on folds it "
                  "trained on, its score is not an unseen-source score)", "",
                  "| held-out fold | pages | fold model R5 / sh-F1 / sh-F1 CJK | fixed model R5 / sh-F1 / sh-F1 CJK |",
                  "|---|---|---|---|"]
        lines += _comparison_rows(scores, (MODEL, REFERENCE), ("rouge5_f1", "shingle_f1", "shingle_cjk_f1"))
    if LABELS in set(scores["extractor"]):
        lines += ["", "**fold models vs their training labels rendered** (the labels a perfect block classifier "
                  "would reproduce, through the same segmentation and renderer)", "",
                  "| held-out fold | pages | fold model sh-P / sh-R / sh-F1 | labels sh-P / sh-R / sh-F1 | "
                  "trafilatura sh-P / sh-R / sh-F1 |", "|---|---|---|---|---|"]
        lines += _comparison_rows(scores, (MODEL, LABELS, TRAFILATURA),
                                  ("shingle_precision", "shingle_recall", "shingle_f1"))
    s = summary
    lines += ["", f"mean over folds, shingle F1: ours {s[f'{MODEL}_mean_fold_shingle_f1']:.3f}, trafilatura "
              f"{s[f'{TRAFILATURA}_mean_fold_shingle_f1']:.3f}, resiliparse {s[f'{RESILIPARSE}_mean_fold_shingle_f1']:.3f}; "
              f"ROUGE-5: ours {s[f'{MODEL}_mean_fold_rouge5_f1']:.3f}, trafilatura "
              f"{s[f'{TRAFILATURA}_mean_fold_rouge5_f1']:.3f}, resiliparse {s[f'{RESILIPARSE}_mean_fold_rouge5_f1']:.3f}"]
    if s.get(f"{MODEL}_non_english_shingle_f1") is not None:
        lines.append(f"non-English pages pooled, shingle F1 (CJK chars as tokens): ours "
                     f"{s[f'{MODEL}_non_english_shingle_cjk_f1']:.3f}, trafilatura "
                     f"{s[f'{TRAFILATURA}_non_english_shingle_cjk_f1']:.3f}, resiliparse "
                     f"{s[f'{RESILIPARSE}_non_english_shingle_cjk_f1']:.3f}")
    return "\n".join(lines).strip()


__all__ = ["assign_folds", "dedupe_pages", "load_sources", "run_loso", "score_loso", "format_markdown",
           "FOLD_FAMILIES", "SMALL_FOLD"]
