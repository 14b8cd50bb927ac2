"""Questions asked of finished leave-one-source-out runs (jobs/evaluate.py --protocol loso --output RUN),
without training anything again. Each prints the model's number next to trafilatura's from the
same run (the anchor).

    # pooled shingle F1 on the pages of <= 5 blocks (block counts from RUN/fold_features.parquet)
    python benchmarks/loso_pages.py few-blocks RUN [RUN ...]
    # trafilatura for pages whose model text has fewer than C non-space characters (its text
    # from the same run): mean shingle F1 over folds, ROUGE-5, non-English, per fold
    python benchmarks/loso_pages.py short-fallback RUN [RUN ...]
    # post-processing rules on held-out block probabilities (needs --keep-models): word-weighted
    # block F1 against the training labels, mean over folds (a proxy: no rendering)
    python benchmarks/loso_pages.py rules RUN
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pulpie_spark.evaluate.harness import add_page_metrics  # noqa: E402
from pulpie_spark.evaluate.loso import MODEL, score_loso, summarize  # noqa: E402
from pulpie_spark.evaluate.metrics import shingle_scores, shingle_tp_fp_fn  # noqa: E402

TRAFILATURA = "trafilatura"
FEW_BLOCKS = 5
SHORT_CHARS = (1, 10, 20, 40, 80, 160)


def few_blocks(run: Path) -> None:
    pages = pd.read_parquet(run / "pages.parquet")
    blocks = pd.read_parquet(run / "fold_features.parquet", columns=["source", "page_id", "n_blocks"])
    pages = pages.merge(blocks, on=["source", "page_id"], how="left")
    few = pages[pages["n_blocks"].fillna(0) <= FEW_BLOCKS]
    f1 = {name: shingle_scores([shingle_tp_fp_fn(t or "", r or "") for t, r in
                                zip(few[f"{name}_text"], few["reference"])])["f1"] for name in (MODEL, TRAFILATURA)}
    print(f"{run}: {len(few)} pages of <= {FEW_BLOCKS} blocks, shingle F1 model {f1[MODEL]:.3f}, "
          f"trafilatura {f1[TRAFILATURA]:.3f} (model - trafilatura {f1[MODEL] - f1[TRAFILATURA]:+.3f})")


def short_fallback(run: Path) -> None:
    base = add_page_metrics(pd.read_parquet(run / "pages.parquet"), (MODEL, TRAFILATURA))
    chars = base[f"{MODEL}_text"].fillna("").str.replace(r"\s+", "", regex=True).str.len()
    print(f"{run}\n| fewer than C chars | pages to trafilatura | mean sh-F1 | mean R5 | non-En sh-F1 CJK | per fold |")
    print("|---|---|---|---|---|---|")
    for limit in SHORT_CHARS:
        pages = base.copy()
        use = chars < limit
        for column in ("text", "rouge5", "shingle", "shingle_cjk"):
            pages.loc[use, f"{MODEL}_{column}"] = pages.loc[use, f"{TRAFILATURA}_{column}"]
        scores = score_loso(pages, (MODEL, TRAFILATURA))
        s = summarize(scores, pages, 100)
        folds = scores[(scores["by"] == "fold") & (scores["extractor"] == MODEL)].set_index("group")["shingle_f1"]
        print(f"| {limit} | {int(use.sum())} | {s['model_mean_fold_shingle_f1']:.4f} "
              f"(traf {s['trafilatura_mean_fold_shingle_f1']:.4f}) | {s['model_mean_fold_rouge5_f1']:.4f} | "
              f"{s['model_non_english_shingle_cjk_f1']:.4f} | "
              + " ".join(f"{g}={v:.3f}" for g, v in folds.items()) + " |")


def _held_out_probabilities(run: Path) -> list[dict]:
    import torch

    from pulpie_spark.classify.blockmodel.data import frame_to_examples
    from pulpie_spark.classify.blockmodel.model import DefaultBlockClassifier, load_model

    torch.set_num_threads(2)
    cache = pd.read_parquet(run / "fold_features.parquet")
    cache = cache[cache["kept"] & (cache["n_blocks"] > 0)]
    rows = []
    for fold, part in cache.groupby("fold"):
        if not (run / "models" / fold).is_dir():
            continue   # training-only pages (--train-only) have no fold model
        model = load_model(run / "models" / fold)
        levels = model.config.container_levels
        examples = frame_to_examples(part)
        feats = [(e.ids, e.numeric, e.groups[:, :levels]) if levels else (e.ids, e.numeric) for e in examples]
        for e, p in zip(examples, DefaultBlockClassifier(model).predict_proba_features(feats)):
            rows.append({"fold": fold, "p": p, "labels": e.labels, "words": e.words.astype(float),
                         "groups": e.groups})
    return rows


def _threshold(t):
    return lambda r: r["p"] >= t


def _fill_gaps(t, width=1):
    """An other block with P >= t between main blocks (within ``width`` on each side) becomes main."""
    def rule(r):
        main = r["p"] >= 0.5
        out = main.copy()
        for i in np.flatnonzero(~main & (r["p"] >= t)):
            out[i] = main[max(0, i - width):i].any() and main[i + 1:i + 1 + width].any()
        return out
    return rule


def _container_vote(level, share, t):
    """In a container (``groups`` column ``level``) whose words are >= ``share`` main, blocks with P >= t become main."""
    def rule(r):
        main = r["p"] >= 0.5
        out = main.copy()
        group, weight = r["groups"][:, level], r["words"] + 1
        for g in np.unique(group):
            inside = group == g
            if inside.sum() >= 2 and (weight[inside] * main[inside]).sum() / weight[inside].sum() >= share:
                out[inside & (r["p"] >= t)] = True
        return out
    return rule


def _drop_isolated(t):
    """A main block with P < t and no main block within two on either side becomes other."""
    def rule(r):
        main = r["p"] >= 0.5
        out = main.copy()
        for i in np.flatnonzero(main & (r["p"] < t)):
            out[i] = main[max(0, i - 2):i].any() or main[i + 1:i + 3].any()
        return out
    return rule


RULES = {"threshold 0.5 (as shipped)": _threshold(0.5), "threshold 0.4": _threshold(0.4),
         "threshold 0.6": _threshold(0.6), "fill gaps, P >= 0.2": _fill_gaps(0.2),
         "fill gaps, P >= 0.1": _fill_gaps(0.1), "fill gaps of 2, P >= 0.3": _fill_gaps(0.3, 2),
         "container vote, level 0, share 0.6, P >= 0.2": _container_vote(0, 0.6, 0.2),
         "container vote, level 0, share 0.8, P >= 0.1": _container_vote(0, 0.8, 0.1),
         "container vote, level 1, share 0.7, P >= 0.2": _container_vote(1, 0.7, 0.2),
         "drop isolated, P < 0.7": _drop_isolated(0.7), "drop isolated, P < 0.9": _drop_isolated(0.9)}


def rules(run: Path) -> None:
    rows = _held_out_probabilities(run)
    folds = sorted({r["fold"] for r in rows})
    print(f"{run}: word-weighted block F1 against the labels, {len(rows)} held-out pages")
    print("| rule | mean over folds | " + " | ".join(folds) + " |")
    print("|---|---|" + "---|" * len(folds))
    for name, rule in RULES.items():
        counts = {f: np.zeros(3) for f in folds}
        for r in rows:
            pred, gold = rule(r), r["labels"] == 1
            counts[r["fold"]] += [r["words"][pred & gold].sum(), r["words"][pred & ~gold].sum(),
                                  r["words"][~pred & gold].sum()]
        f1 = {f: 2 * tp / (2 * tp + fp + fn) if tp else 0.0 for f, (tp, fp, fn) in counts.items()}
        print(f"| {name} | {np.mean(list(f1.values())):.4f} | " + " | ".join(f"{f1[f]:.3f}" for f in folds) + " |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("question", choices=["few-blocks", "short-fallback", "rules"])
    parser.add_argument("runs", nargs="+", type=Path, help="output folders of jobs/evaluate.py --protocol loso")
    args = parser.parse_args(argv)
    ask = {"few-blocks": few_blocks, "short-fallback": short_fallback, "rules": rules}[args.question]
    for run in args.runs:
        ask(run)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
