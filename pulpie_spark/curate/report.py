"""Curation report: funnel, drop reasons, duplicate-cluster sizes, signal distributions.

``collect_report`` runs a few aggregations on the annotated table (exact counts);
signal histograms use a bounded sample. ``write_report`` renders report.json and a
self-contained report.html (matplotlib PNGs embedded as base64).
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
from pathlib import Path
from typing import Mapping

import numpy as np

from pulpie_spark.curate.pipeline import STAGES

SIGNAL_SAMPLE_ROWS = 20000


def collect_report(annotated, stats: Mapping, signal_sample_rows: int = SIGNAL_SAMPLE_ROWS) -> dict:
    """Aggregate an annotated curate table (``CurateResult.annotated``) into a JSON-able dict."""
    from pyspark.sql import functions as F

    tagged_flag = (F.col("reason").isNull() & (F.size(F.coalesce("quality_fails", F.array())) > 0)
                   if "quality_fails" in annotated.columns else F.lit(False))
    by_reason = annotated.groupBy("removed_stage", "reason", tagged_flag.alias("tagged")).count().collect()
    total = sum(r["count"] for r in by_reason)
    tagged = sum(r["count"] for r in by_reason if r["tagged"])
    removed_at = {stage: 0 for stage in STAGES}
    reasons: dict[str, int] = {}
    for r in by_reason:
        if r["reason"] is not None:
            removed_at[r["removed_stage"]] += r["count"]
            reasons[r["reason"]] = reasons.get(r["reason"], 0) + r["count"]
    funnel, remaining = [{"stage": "input", "rows": total}], total
    for stage, label in zip(STAGES, ("valid text", "after language ID", "after quality gates", "after exact dedup", "after near dedup")):
        remaining -= removed_at[stage]
        funnel.append({"stage": label, "rows": remaining, "removed": removed_at[stage]})

    fails = (annotated.where(F.col("quality_fails").isNotNull())
             .select(F.explode("quality_fails").alias("rule")).groupBy("rule").count().collect())

    exact_hist: dict[int, int] = {}
    if "exact_group_size" in annotated.columns:
        rows = (annotated.where((F.col("exact_group_size") > 1) & F.col("exact_duplicate_of").isNull())
                .groupBy("exact_group_size").count().collect())
        exact_hist = {int(r["exact_group_size"]): int(r["count"]) for r in rows}

    signals: dict[str, dict] = {}
    scored = annotated.where(F.col("quality").isNotNull())
    n_scored = total - removed_at["input"]
    if n_scored:
        fraction = min(1.0, signal_sample_rows / n_scored)
        sample = scored.select("quality.*")
        if fraction < 1.0:
            sample = sample.sample(False, fraction, seed=17)
        pdf = sample.toPandas()
        for name in pdf.columns:
            values = pdf[name].to_numpy(dtype=float)
            values = values[np.isfinite(values)]
            if len(values):
                q = np.quantile(values, [0.01, 0.1, 0.5, 0.9, 0.99])
                # fsum: the exactly rounded mean, whatever the row order (the partitioning)
                signals[name] = {"n": int(len(values)), "mean": math.fsum(values) / len(values),
                                 "p01": float(q[0]), "p10": float(q[1]), "p50": float(q[2]),
                                 "p90": float(q[3]), "p99": float(q[4]),
                                 "_values": values}
    languages = _language_report(annotated) if "language" in annotated.columns else {}
    near = dict(stats.get("near_dedup", {}))
    return {
        "languages": languages,
        "curate_version": stats.get("curate_version"),
        "config_hash": stats.get("config_hash"),
        "config": stats.get("config"),
        "normalize": stats.get("normalize_config_json"),
        "rows": total,
        "kept": remaining,
        "funnel": funnel,
        "removed_by_reason": dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))),
        "failed_rules_all_rows": dict(sorted(((r["rule"], r["count"]) for r in fails), key=lambda kv: (-kv[1], kv[0]))),
        "kept_with_tagged_fails": int(tagged),
        "exact_cluster_size_histogram": dict(sorted(exact_hist.items())),
        "near_dedup": near,
        "signals": signals,
    }


SCORE_BINS = 20  # language_score histogram: 20 bins of 0.05 over [0, 1]


def _language_report(annotated) -> dict:
    """Per language (null: not identified): rows in, kept, removed by reason, and the
    language_score distribution (20 bins of 0.05, exact counts, plus quantiles)."""
    from pyspark.sql import functions as F

    lang = F.coalesce(F.col("language"), F.lit("(none)"))
    by_reason = annotated.groupBy(lang.alias("lang"), "reason").count().collect()
    out: dict[str, dict] = {}
    for r in by_reason:
        entry = out.setdefault(r["lang"], {"rows": 0, "kept": 0, "removed_by_reason": {}, "score": {}})
        entry["rows"] += r["count"]
        if r["reason"] is None:
            entry["kept"] += r["count"]
        else:
            entry["removed_by_reason"][r["reason"]] = r["count"]
    bins = (annotated.where(F.col("language_score").isNotNull())
            .groupBy(lang.alias("lang"),
                     F.least(F.floor(F.col("language_score") * SCORE_BINS), F.lit(SCORE_BINS - 1)).alias("bin"))
            .count().collect())
    for r in bins:
        hist = out[r["lang"]]["score"].setdefault("histogram", [0] * SCORE_BINS)
        hist[int(r["bin"])] = int(r["count"])
    quant = (annotated.where(F.col("language_score").isNotNull()).groupBy(lang.alias("lang"))
             .agg(F.percentile_approx("language_score", [0.01, 0.1, 0.5, 0.9], 10000).alias("q"),
                  F.mean("language_score").alias("mean")).collect())
    for r in quant:
        out[r["lang"]]["score"].update({"mean": float(r["mean"]), "p01": float(r["q"][0]),
                                        "p10": float(r["q"][1]), "p50": float(r["q"][2]), "p90": float(r["q"][3])})
    for entry in out.values():
        entry["removed_by_reason"] = dict(sorted(entry["removed_by_reason"].items(), key=lambda kv: (-kv[1], kv[0])))
    return dict(sorted(out.items(), key=lambda kv: (-kv[1]["rows"], kv[0])))


# ---------------------------------------------------------------------------- rendering
def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight", metadata={"Software": None})
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _plots(report: Mapping) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out: dict[str, str] = {}
    fig, ax = plt.subplots(figsize=(7, 3))
    labels = [f["stage"] for f in report["funnel"]]
    ax.barh(labels[::-1], [f["rows"] for f in report["funnel"]][::-1], color="#4c72b0")
    ax.set_xlabel("rows")
    ax.set_title("Funnel")
    out["funnel"] = _png(fig)
    plt.close(fig)

    reasons = list(report["removed_by_reason"].items())[:25]
    if reasons:
        fig, ax = plt.subplots(figsize=(7, 0.3 * len(reasons) + 1))
        ax.barh([r for r, _ in reasons][::-1], [c for _, c in reasons][::-1], color="#dd8452")
        ax.set_xlabel("rows removed")
        ax.set_title("Removal reasons")
        out["reasons"] = _png(fig)
        plt.close(fig)

    hists = [("exact", report["exact_cluster_size_histogram"]),
             ("near", report["near_dedup"].get("component_size_histogram", {}))]
    if any(h for _, h in hists):
        fig, ax = plt.subplots(figsize=(7, 3))
        for name, hist in hists:
            if hist:
                sizes = sorted(int(k) for k in hist)
                ax.plot(sizes, [hist[s] if s in hist else hist[str(s)] for s in sizes], "o-", label=name)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("cluster size (documents)")
        ax.set_ylabel("clusters")
        ax.legend()
        ax.set_title("Duplicate cluster sizes")
        out["clusters"] = _png(fig)
        plt.close(fig)

    langs = [(k, v) for k, v in report.get("languages", {}).items() if v["score"].get("histogram")][:12]
    if langs:
        fig, ax = plt.subplots(figsize=(7, 3))
        edges = np.linspace(0, 1, SCORE_BINS + 1)
        for name, entry in langs:
            hist = np.asarray(entry["score"]["histogram"], dtype=float)
            ax.step(edges[:-1], hist / max(hist.sum(), 1), where="post", label=name)
        ax.set_xlabel("language_score")
        ax.set_ylabel("share of the language's rows")
        ax.legend(fontsize=6, ncol=2)
        ax.set_title("Language-score distribution (largest languages)")
        out["language_scores"] = _png(fig)
        plt.close(fig)

    names = [n for n, s in report["signals"].items() if "_values" in s]
    if names:
        cols = 4
        rows = math.ceil(len(names) / cols)
        fig, axes = plt.subplots(rows, cols, figsize=(12, 2.2 * rows), squeeze=False)
        for ax, name in zip(axes.flat, names):
            ax.hist(report["signals"][name]["_values"], bins=40, color="#55a868")
            ax.set_title(name, fontsize=8)
            ax.tick_params(labelsize=6)
        for ax in list(axes.flat)[len(names):]:
            ax.axis("off")
        fig.tight_layout()
        out["signals"] = _png(fig)
        plt.close(fig)
    return out


def _json_ready(report: Mapping) -> dict:
    clean = dict(report)
    clean["signals"] = {k: {kk: vv for kk, vv in v.items() if kk != "_values"} for k, v in report["signals"].items()}
    return clean


def _table(rows: list[tuple]) -> str:
    return "<table>" + "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows) + "</table>"


def write_report(report: Mapping, out_dir: str | Path) -> tuple[Path, Path]:
    """Write report.json and report.html under ``out_dir`` (local path)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = _json_ready(report)
    json_path = out / "report.json"
    json_path.write_text(json.dumps(data, indent=2, sort_keys=True, default=str), encoding="utf-8")
    plots = _plots(report)
    img = {k: f'<img src="data:image/png;base64,{v}">' for k, v in plots.items()}
    near = data["near_dedup"]
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>pulpie-spark curation report</title>",
        "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto}td{padding:2px 10px;"
        "border-bottom:1px solid #ddd}h2{margin-top:1.5em}</style></head><body>",
        f"<h1>Curation report</h1><p>config hash <code>{html.escape(str(data['config_hash']))}</code>, "
        f"{data['rows']:,} rows in, {data['kept']:,} kept.</p>",
        "<h2>Funnel</h2>", _table([(f["stage"], f"{f['rows']:,}", f"-{f.get('removed', 0):,}") for f in data["funnel"]]),
        img.get("funnel", ""),
        "<h2>Languages</h2><p>Per language: rows in, kept, removed by reason; language_score "
        "quantiles of all its rows.</p>",
        _table([("language", "rows in", "kept", "removed by reason", "score p01", "p10", "p50", "p90")] + [
            (k, f"{v['rows']:,}", f"{v['kept']:,}", ", ".join(f"{r}: {c:,}" for r, c in v["removed_by_reason"].items()),
             *(f"{v['score'][q]:.3f}" if q in v["score"] else "" for q in ("p01", "p10", "p50", "p90")))
            for k, v in data.get("languages", {}).items()]),
        img.get("language_scores", ""),
        "<h2>Removal reasons</h2>", _table(list(data["removed_by_reason"].items())), img.get("reasons", ""),
        "<h2>Failed rules (all evaluated rows, drop and tag gates)</h2>",
        _table(list(data["failed_rules_all_rows"].items())),
        f"<p>{data['kept_with_tagged_fails']:,} kept rows carry tagged fails.</p>",
        "<h2>Duplicates</h2>",
        _table([(k, v) for k, v in near.items() if not isinstance(v, dict)]),
        "<p>Exact cluster sizes: " + html.escape(json.dumps(data["exact_cluster_size_histogram"])) + "</p>",
        "<p>Near component sizes: " + html.escape(json.dumps(near.get("component_size_histogram", {}))) + "</p>",
        img.get("clusters", ""),
        "<h2>Signal distributions (sample)</h2>",
        _table([(k, v["n"], *(f"{v[q]:.3g}" for q in ("mean", "p01", "p10", "p50", "p90", "p99")))
                for k, v in data["signals"].items()]),
        img.get("signals", ""),
        "<h2>Config</h2><pre>" + html.escape(json.dumps(data["config"], indent=2, sort_keys=True)) + "</pre>",
        "</body></html>",
    ]
    html_path = out / "report.html"
    html_path.write_text("\n".join(parts), encoding="utf-8")
    return json_path, html_path
