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
    # a learned page gate (needs --keep-models): from signals of the model's own output (kept
    # share, confidence, ...), and then also of its agreement with resiliparse's text, predict
    # the pages where trafilatura's text scores better and send them to trafilatura; the gate is
    # itself trained leave-one-fold-out. Mean shingle F1, pages sent, and the speed ratio to
    # trafilatura that the extra trafilatura (and resiliparse) calls leave
    python benchmarks/loso_pages.py gate RUN
    # the main threshold as a precision knob (needs --keep-models and the run's --input): each
    # fold model extracts its held-out pages end to end at each threshold (Extractor(main_threshold=),
    # trafilatura fallback); next to trafilatura as the run had it and with favor_precision=True
    python benchmarks/loso_pages.py threshold RUN --input ../shared/data/extraction --thresholds 0.5,0.6,0.7
    # fold models of several runs (other seeds, same folds; all with --keep-models) averaged:
    # each held-out page's P(main) from every run's fold model, the mean over all of them on
    # every page, and a cascade (the mean only where the first run's model is unsure: at least
    # --unsure-share of the page's characters in blocks with 0.3 < P(main) < 0.7); convention,
    # render and the empty/short-output fallback as shipped, then the first run's page-gate
    # decisions (its sent pages keep its fallback text). "first" must reproduce the first run
    python benchmarks/loso_pages.py ensemble RUN RUN2 RUN3 --input ../shared/data/extraction
    # the P(main) a box, headline, byline, caption or aside block needs (conventions.BOX_MIN_PROB),
    # replayed on the run's fold models (needs --keep-models) with its page-gate decisions; the
    # shipped value first, which must reproduce the run's texts
    python benchmarks/loso_pages.py box RUN --input ../shared/data/extraction --box-min-probs 0.85,0.95
    # the cookie/consent-dialog rule (conventions.consent_blocks) replayed the same way: without it
    # (which must reproduce a run made before it), then with it
    python benchmarks/loso_pages.py consent RUN --input ../shared/data/extraction
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


def _with_trafilatura_on(pages: pd.DataFrame, send) -> pd.DataFrame:
    """``pages`` (with add_page_metrics columns) where the pages in ``send`` take trafilatura's
    text and metrics in place of the model's: a fallback or gate, scored without re-extracting."""
    pages = pages.copy()
    for column in ("text", "rouge5", "shingle", "shingle_cjk"):
        pages.loc[send, f"{MODEL}_{column}"] = pages.loc[send, f"{TRAFILATURA}_{column}"]
    return pages


def _pages_with_fold_models(run: Path) -> pd.DataFrame:
    """RUN/pages.parquet less the folds without a kept model (--keep-models keeps one per fold)."""
    pages = pd.read_parquet(run / "pages.parquet")
    return pages[pages["fold"].isin([d.name for d in (run / "models").iterdir()])].reset_index(drop=True)


def short_fallback(run: Path) -> None:
    base = add_page_metrics(pd.read_parquet(run / "pages.parquet"), (MODEL, TRAFILATURA))
    chars = base[f"{MODEL}_text"].fillna("").str.replace(r"\s+", "", regex=True).str.len()
    print(f"{run}\n| fewer than C chars | pages to trafilatura | mean sh-F1 | mean R5 | non-En sh-F1 CJK | per fold |")
    print("|---|---|---|---|---|---|")
    for limit in SHORT_CHARS:
        use = chars < limit
        pages = _with_trafilatura_on(base, use)
        scores = score_loso(pages, (MODEL, TRAFILATURA))
        s = summarize(scores, pages, 100)
        folds = scores[(scores["by"] == "fold") & (scores["extractor"] == MODEL)].set_index("group")["shingle_f1"]
        print(f"| {limit} | {int(use.sum())} | {s['model_mean_fold_shingle_f1']:.4f} "
              f"(traf {s['trafilatura_mean_fold_shingle_f1']:.4f}) | {s['model_mean_fold_rouge5_f1']:.4f} | "
              f"{s['model_non_english_shingle_cjk_f1']:.4f} | "
              + " ".join(f"{g}={v:.3f}" for g, v in folds.items()) + " |")


def _held_out_probabilities(run: Path, labelled_only: bool = True) -> list[dict]:
    """Each held-out page's block probabilities from its fold model; ``labelled_only``: only the
    pages whose labels training would use (``kept``), else every page with blocks."""
    import torch

    from pulpie_spark.classify.blockmodel.data import frame_to_examples
    from pulpie_spark.classify.blockmodel.model import DefaultBlockClassifier, load_model

    torch.set_num_threads(2)
    cache = pd.read_parquet(run / "fold_features.parquet")
    cache = cache[(cache["kept"] | (not labelled_only)) & (cache["n_blocks"] > 0)]
    rows = []
    for fold, part in cache.groupby("fold"):
        if not (run / "models" / fold).is_dir():
            continue   # training-only pages (--train-only) have no fold model
        model = load_model(run / "models" / fold)
        levels = model.config.container_levels
        examples = frame_to_examples(part)
        feats = [(e.ids, e.numeric, e.groups[:, :levels]) if levels else (e.ids, e.numeric) for e in examples]
        for key, e, p in zip(zip(part["source"], part["page_id"]), examples,
                             DefaultBlockClassifier(model).predict_proba_features(feats)):
            rows.append({"fold": fold, "page": key, "p": np.atleast_1d(p), "labels": e.labels,
                         "words": e.words.astype(float), "groups": e.groups})
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


GATE_SIGNALS = ("log_blocks", "log_words", "kept_share", "log_kept_words", "log_kept_blocks", "uncertainty",
                "unsure_share", "kept_confidence", "max_p", "log_main_runs", "top_other_p", "near_miss_ratio",
                "weak_kept_share", "first_main_at", "main_span", "log_text_chars")


def _gate_signals(p, words, text: str) -> list[float]:
    """GATE_SIGNALS of one page: what the model's own output says of it (no second extractor)."""
    chars = np.log1p(len(text or ""))
    if p is None or len(p) == 0:
        return [0, 0, 0, 0, 0, 0.5, 0, 0, 0, 0, 0, 0, 0, 1, 0, chars]
    p, w = np.asarray(p, float), np.asarray(words, float) + 1
    main = p >= 0.5
    kept, idx = (w * main).sum(), np.flatnonzero(main)
    runs = int(main[0]) + int((~main[:-1] & main[1:]).sum())
    return [np.log1p(len(p)), np.log1p(w.sum()), kept / w.sum(), np.log1p(kept), np.log1p(main.sum()),
            (w * np.minimum(p, 1 - p)).sum() / w.sum(), (w * ((p > 0.2) & (p < 0.8))).sum() / w.sum(),
            (w * p * main).sum() / max(kept, 1), p.max(), np.log1p(runs), p[~main].max() if (~main).any() else 0,
            np.log1p((w * ((p > 0.2) & ~main)).sum()) - np.log1p(kept), (w * (main & (p < 0.8))).sum() / max(kept, 1),
            idx[0] / len(p) if len(idx) else 1, (idx[-1] - idx[0] + 1) / len(p) if len(idx) else 0, chars]


def _fit_gate(x, y, weight, hidden: int):
    """A logistic regression (hidden = 0) or a one-hidden-layer MLP, full-batch L-BFGS; returns predict."""
    import torch

    torch.manual_seed(0)
    mu, sd = x.mean(0), x.std(0) + 1e-6
    xt, yt, wt = (torch.tensor(a, dtype=torch.float32) for a in ((x - mu) / sd, y, weight))
    net = (torch.nn.Sequential(torch.nn.Linear(x.shape[1], hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 1))
           if hidden else torch.nn.Linear(x.shape[1], 1))
    opt = torch.optim.LBFGS(net.parameters(), max_iter=300)

    def closure():
        opt.zero_grad()
        loss = (torch.nn.functional.binary_cross_entropy_with_logits(net(xt)[:, 0], yt, reduction="none")
                * wt).sum() / wt.sum() + 1e-2 * sum((q ** 2).sum() for q in net.parameters())
        loss.backward()
        return loss
    opt.step(closure)
    return lambda new: torch.sigmoid(net(torch.tensor((new - mu) / sd, dtype=torch.float32))[:, 0]).detach().numpy()


def _resiliparse_agreement(ours: str, resiliparse: str) -> list[float]:
    """Share of our shingles in resiliparse's text, share of its shingles in ours, log length ratio."""
    tp, fp, fn = shingle_tp_fp_fn(ours or "", resiliparse or "")
    return [tp / max(tp + fp, 1), tp / max(tp + fn, 1), np.log1p(len(resiliparse or "")) - np.log1p(len(ours or ""))]


def gate(run: Path) -> None:
    base = add_page_metrics(_pages_with_fold_models(run), (MODEL, TRAFILATURA))
    probs = {r["page"]: r for r in _held_out_probabilities(run, labelled_only=False)}
    keys = list(zip(base["source"], base["page_id"]))
    ours = np.array([_gate_signals(probs[k]["p"] if k in probs else None, probs[k]["words"] if k in probs else None, t)
                     for k, t in zip(keys, base[f"{MODEL}_text"])], dtype=np.float32)
    agreement = np.array([_resiliparse_agreement(a, b) for a, b in zip(base[f"{MODEL}_text"], base["resiliparse_text"])],
                         dtype=np.float32)
    fell_back = np.array([k not in probs or not (probs[k]["p"] >= 0.5).any() for k in keys])
    f1 = {name: np.array([shingle_scores([counts])["f1"] for counts in base[f"{name}_shingle"]])
          for name in (MODEL, TRAFILATURA)}
    gain = f1[TRAFILATURA] - f1[MODEL]
    seconds = {name: base[f"{name}_cpu_seconds"].to_numpy() for name in (MODEL, TRAFILATURA, "resiliparse")}

    def outcome(send, resiliparse_too=False):
        pages = _with_trafilatura_on(base, send)
        s = summarize(score_loso(pages, (MODEL, TRAFILATURA)), pages, 100)
        extra = send & ~fell_back   # fallback pages already paid for trafilatura
        ours_seconds = seconds[MODEL].sum() + seconds[TRAFILATURA][extra].sum()
        speed = seconds[TRAFILATURA].sum() / (ours_seconds + resiliparse_too * seconds["resiliparse"].sum())
        return (f"{s['model_mean_fold_shingle_f1']:.4f} | {s['model_non_english_shingle_cjk_f1']:.4f} | "
                f"{int(extra.sum())} ({extra.mean():.0%}) | {speed:.2f}x")

    print(f"{run}: {len(base)} held-out pages, {int(fell_back.sum())} fell back already; pages where trafilatura "
          f"scores better {int((gain > 0).sum())}")
    print("| gate | threshold | mean sh-F1 | non-En sh-F1 CJK | pages sent to trafilatura | speed vs trafilatura |")
    print("|---|---|---|---|---|---|")
    print(f"| none (as run) | | {outcome(np.zeros(len(base), bool))} |")
    print(f"| oracle (the better text per page) | | {outcome(gain > 0)} |")
    folds = base["fold"].to_numpy()
    for signals, x, resiliparse_too in (("our output", ours, False),
                                        ("our output + resiliparse agreement", np.hstack([ours, agreement]), True)):
        for margin, hidden in ((0.05, 0), (0.1, 0), (0.05, 16), (0.1, 16)):
            score = np.zeros(len(base))
            for fold in np.unique(folds):   # the gate never sees the fold it is scored on
                test = folds == fold
                score[test] = _fit_gate(x[~test], (gain[~test] > margin).astype(float),
                                        np.abs(gain[~test]) + 0.01, hidden)(x[test])
            name = f"{signals}: {'MLP 16' if hidden else 'logistic'}, trafilatura better by > {margin}"
            for threshold in (0.4, 0.5, 0.6, 0.7):
                print(f"| {name} | {threshold} | {outcome((score >= threshold) | fell_back, resiliparse_too)} |",
                      flush=True)


TRAFILATURA_PRECISION = "trafilatura_precision"


def _threshold_chunk(payload) -> list[dict]:
    """One fold model's pages extracted at each threshold, and by trafilatura favoring precision."""
    import torch
    import trafilatura

    from pulpie_spark.classify.registry import load_classifier
    from pulpie_spark.evaluate.loso import _time_call
    from pulpie_spark.extractor import Extractor

    torch.set_num_threads(1)
    model_dir, thresholds, pages = payload
    classifier = load_classifier(model_dir)
    runners = {f"ours@{t}": (lambda html, e=Extractor(classifier=classifier, main_threshold=t, fallback="trafilatura"):
                            e.extract(html).text) for t in thresholds}
    runners[TRAFILATURA_PRECISION] = lambda html: trafilatura.extract(html, output_format="txt", favor_precision=True)
    rows = []
    for key, html in pages:
        row = {"page": key}
        for name, run in runners.items():
            row[f"{name}_text"], row[f"{name}_cpu_seconds"], row[f"{name}_error"] = _time_call(run, html)
        rows.append(row)
    return rows


def _on_fold_models(run: Path, input_path: Path, chunk, values: list[float], workers: int) -> pd.DataFrame:
    """RUN's pages (those with a kept fold model) merged with ``chunk``'s rows: ``chunk((fold model
    dir, values, [(key, html), ...]))`` runs in ``workers`` processes, 100 pages of a fold a call."""
    import multiprocessing as mp

    from pulpie_spark.evaluate.loso import load_sources

    base = _pages_with_fold_models(run)
    html = {(s, p): h for s, p, h in load_sources(input_path)[["source", "page_id", "html"]].itertuples(index=False)}
    tasks = []
    for fold, part in base.groupby("fold"):
        keys = list(zip(part["source"], part["page_id"]))
        for start in range(0, len(keys), 100):
            tasks.append((str(run / "models" / fold), values, [(k, html[k]) for k in keys[start:start + 100]]))
    with mp.get_context("spawn").Pool(workers) as pool:
        rows = [r for part in pool.map(chunk, tasks, chunksize=1) for r in part]
    out = pd.DataFrame(rows)
    out["source"], out["page_id"] = zip(*out.pop("page"))
    return base.merge(out, on=["source", "page_id"])


def threshold(run: Path, input_path: Path, thresholds: list[float], workers: int = 2) -> None:
    pages = _on_fold_models(run, input_path, _threshold_chunk, thresholds, workers)
    pages.to_parquet(run / "threshold_pages.parquet")   # the texts, to ask other questions of them
    _threshold_table(run, pages, thresholds)


def _threshold_table(run: Path, pages: pd.DataFrame, thresholds: list[float]) -> None:
    from pulpie_spark.classify.base import MAIN_THRESHOLD

    names = [f"ours@{t}" for t in thresholds] + [TRAFILATURA, TRAFILATURA_PRECISION]
    pages = add_page_metrics(pages, names)
    print(f"{run}: {len(pages)} held-out pages")
    if MAIN_THRESHOLD in thresholds:   # the run's own model text was extracted at the default
        same = (pages[f"ours@{MAIN_THRESHOLD}_text"] == pages[f"{MODEL}_text"].fillna("")).mean()
        print(f"at {MAIN_THRESHOLD} the text equals the run's on {same:.1%} of them")
    scores = score_loso(pages, names)
    folds = sorted(pages["fold"].unique())
    print("| extractor | mean sh-F1 (P / R) | non-En sh-F1 CJK | pages/s per core | " + " | ".join(folds) + " |")
    print("|---|---|---|---|" + "---|" * len(folds))
    for name in names:
        part = scores[(scores["by"] == "fold") & (scores["extractor"] == name)].set_index("group")
        pooled = scores[(scores["by"] == "pooled") & (scores["extractor"] == name)]["shingle_cjk_f1"].iloc[0]
        speed = len(pages) / pages[f"{name}_cpu_seconds"].sum()
        print(f"| {name} | {part['shingle_f1'].mean():.4f} ({part['shingle_precision'].mean():.3f} / "
              f"{part['shingle_recall'].mean():.3f}) | {pooled:.4f} | {speed:.1f} | "
              + " | ".join(f"{part.loc[f, 'shingle_f1']:.3f} ({part.loc[f, 'shingle_precision']:.3f}/"
                           f"{part.loc[f, 'shingle_recall']:.3f})" for f in folds) + " |")


def _ensemble_chunk(payload) -> list[dict]:
    """Texts of one fold's pages: the first model, the mean of all, the cascade."""
    import torch

    from pulpie_spark.classify.blockmodel.ensemble import Cascade
    from pulpie_spark.classify.blockmodel.gate import chars_from_features
    from pulpie_spark.classify.registry import load_classifier
    from pulpie_spark.page import segment_page

    torch.set_num_threads(1)
    model_dirs, unsure_share, pages = payload
    classifiers = [load_classifier(d) for d in model_dirs]
    cascade = Cascade(min_share=unsure_share)
    rows = []
    for key, html in pages:
        seg = segment_page(html)
        row = {"page": key, "cascaded": False}
        variants: dict[str, np.ndarray | None] = dict.fromkeys(ENSEMBLE_VARIANTS)
        if seg["seg_error"] is None:
            feats = classifiers[0].features([seg["blocks"]], [seg["block_paths"]])
            probs = [c.predict_proba_features(feats)[0] for c in classifiers]
            mean = np.mean(probs, axis=0).astype(np.float32)
            row["cascaded"] = cascade.wants_members(probs[0], chars_from_features(feats[0][1]))
            variants = {"first": probs[0], "mean": mean, "cascade": mean if row["cascaded"] else probs[0]}
        fallback: dict = {}
        for name, p in variants.items():
            row[f"{name}_text"] = _replayed_text(seg, p, None, html, fallback)
        rows.append(row)
    return rows


def _replayed_text(seg: dict, p, error: str | None, html, fallback: dict) -> str:
    """One page's text as shipped from its P(main) ``p`` (None, or ``error`` set: the model path
    failed): labels (threshold and convention), render, the empty/short-output fallback.
    ``fallback`` holds the page's fallback text once computed, for the next variant."""
    from pulpie_spark.page import fallback_page, fallback_reason, labels_from_probs, render_page

    text = markdown = render_error = None
    if p is not None and seg["seg_error"] is None and error is None:
        r = render_page(seg["map_html"], labels_from_probs(p, None, seg["block_paths"]).tolist())
        text, markdown, render_error = r["text"], r["markdown"], r["render_error"]
    why = fallback_reason(seg["seg_error"], seg["seg_error"] or error or render_error, markdown, False, text=text)
    if why is not None:
        if "text" not in fallback:
            fb = fallback_page(html)
            fallback["text"] = fb["text"] if fb["fallback"] is not None else ""
        text = fallback["text"] or text
    return text or ""


ENSEMBLE_VARIANTS = ("first", "mean", "cascade")


def ensemble(runs: list[Path], input_path: Path, unsure_share: float, workers: int = 2) -> None:
    import multiprocessing as mp

    from pulpie_spark.classify.blockmodel.ensemble import Cascade
    from pulpie_spark.evaluate.loso import load_sources

    first = runs[0]
    base = _pages_with_fold_models(first)
    html = {(s, p): h for s, p, h in load_sources(input_path)[["source", "page_id", "html"]].itertuples(index=False)}
    tasks = []
    for fold, part in base.groupby("fold"):
        dirs = [str(run / "models" / fold) for run in runs]
        missing = [d for d in dirs if not Path(d).is_dir()]
        if missing:
            raise SystemExit(f"no fold model {missing[0]} (every run needs --keep-models and the same folds)")
        keys = list(zip(part["source"], part["page_id"]))
        for start in range(0, len(keys), 100):
            tasks.append((dirs, unsure_share, [(k, html[k]) for k in keys[start:start + 100]]))
    with mp.get_context("spawn").Pool(workers) as pool:
        rows = [r for chunk in pool.map(_ensemble_chunk, tasks, chunksize=1) for r in chunk]
    out = pd.DataFrame(rows)
    out["source"], out["page_id"] = zip(*out.pop("page"))
    pages = base.merge(out, on=["source", "page_id"])
    print(f"models of {len(runs)} runs: {', '.join(map(str, runs))}; cascade on {pages['cascaded'].mean():.1%} "
          f"of the pages (>= {unsure_share} of the characters at {Cascade.low} < P(main) < {Cascade.high})")
    _replayed_table(first, pages, list(ENSEMBLE_VARIANTS))


def _replayed_table(run: Path, pages: pd.DataFrame, names: list[str]) -> None:
    """Score texts replayed on ``run``'s fold models (``<name>_text`` per page), alone and with
    ``run``'s nested page-gate decisions (its sent pages keep its fallback text), next to
    trafilatura; the first name must reproduce the run's texts (checked and printed)."""
    import json

    from pulpie_spark.evaluate.loso import GATE_SCORE_COLUMN, GATELESS

    gate = json.loads((run / "summary.json").read_text()).get("page_gate")
    first = names[0]
    if gate:
        sent = pages[GATE_SCORE_COLUMN].fillna(-1.0).to_numpy() >= gate["threshold"]
        for name in list(names):
            pages[f"{name}+gate_text"] = np.where(sent, pages[f"{MODEL}_text"].fillna(""), pages[f"{name}_text"])
        names = names + [f"{name}+gate" for name in names]
        same = (pages[f"{first}+gate_text"] == pages[f"{MODEL}_text"].fillna("")).mean()
        same_gateless = (pages[f"{first}_text"] == pages[f"{GATELESS}_text"].fillna("")).mean()
        print(f"{run}: '{first}' equals the run's text on {same:.1%} of {len(pages)} pages "
              f"({same_gateless:.1%} without the gate); gate threshold {gate['threshold']}")
    else:
        same = (pages[f"{first}_text"] == pages[f"{MODEL}_text"].fillna("")).mean()
        print(f"{run}: '{first}' equals the run's text on {same:.1%} of {len(pages)} pages (no page gate)")
    for name in names:   # the per-page columns score_loso reads
        pages[f"{name}_cpu_seconds"] = np.nan
        pages[f"{name}_error"] = None
    pages = add_page_metrics(pages, names + [TRAFILATURA])
    scores = score_loso(pages, names + [TRAFILATURA])
    folds = sorted(pages["fold"].unique())
    print("| texts | mean sh-F1 | mean R5 | non-En sh-F1 CJK | " + " | ".join(folds) + " |")
    print("|---|---|---|---|" + "---|" * len(folds))
    for name in names + [TRAFILATURA]:
        part = scores[(scores["by"] == "fold") & (scores["extractor"] == name)].set_index("group")
        pooled = scores[(scores["by"] == "pooled") & (scores["extractor"] == name)]["shingle_cjk_f1"]
        print(f"| {name} | {part['shingle_f1'].mean():.4f} | {part['rouge5_f1'].mean():.4f} | "
              f"{pooled.iloc[0] if len(pooled) else float('nan'):.4f} | "
              + " | ".join(f"{part.loc[f, 'shingle_f1']:.4f}" for f in folds) + " |")
    print("ROUGE-5 per fold")
    print("| texts | " + " | ".join(folds) + " |")
    print("|---|" + "---|" * len(folds))
    for name in names + [TRAFILATURA]:
        part = scores[(scores["by"] == "fold") & (scores["extractor"] == name)].set_index("group")
        print(f"| {name} | " + " | ".join(f"{part.loc[f, 'rouge5_f1']:.4f}" for f in folds) + " |")


def _fold_model_probabilities(model_dir: str, pages: list) -> tuple[list, list, list]:
    """Segments, P(main) and model errors of ``pages`` ([(key, html), ...]) from one fold model,
    as the shipped path gets them (page.classify_pages, one torch thread)."""
    import torch

    from pulpie_spark.classify.registry import load_classifier
    from pulpie_spark.page import classify_pages, segment_page

    torch.set_num_threads(1)
    classifier = load_classifier(model_dir)
    segments = [segment_page(html) for _, html in pages]
    probs, errors, _ = classify_pages(classifier, [s["blocks"] for s in segments],
                                      [s["block_paths"] for s in segments])
    return segments, probs, errors


def _box_chunk(payload) -> list[dict]:
    """Texts of one fold's pages at each BOX_MIN_PROB: the fold model's P(main) once, then the
    labels (threshold and convention), render and the empty/short-output fallback as shipped."""
    from pulpie_spark.classify import conventions

    model_dir, values, pages = payload
    segments, probs, errors = _fold_model_probabilities(model_dir, pages)
    shipped = conventions.BOX_MIN_PROB
    rows = []
    try:
        for (key, html), seg, p, error in zip(pages, segments, probs, errors):
            row, fallback = {"page": key}, {}
            for value in values:
                # labels_from_probs reads the module's constant at each call: this process only
                conventions.BOX_MIN_PROB = value
                row[f"box{value:g}_text"] = _replayed_text(seg, p, error, html, fallback)
            rows.append(row)
    finally:
        conventions.BOX_MIN_PROB = shipped
    return rows


def box(run: Path, input_path: Path, values: list[float], workers: int = 2) -> None:
    """The P(main) that boxes, headlines, bylines, captions and asides need (conventions.BOX_MIN_PROB)
    replayed on ``run``'s fold models; the shipped value first (it must reproduce the run)."""
    from pulpie_spark.classify.conventions import BOX_MIN_PROB

    values = [BOX_MIN_PROB] + [v for v in values if v != BOX_MIN_PROB]
    pages = _on_fold_models(run, input_path, _box_chunk, values, workers)
    _replayed_table(run, pages, [f"box{v:g}" for v in values])


CONSENT_VARIANTS = ("without_consent_rule", "with_consent_rule")


def _consent_chunk(payload) -> list[dict]:
    """Texts of one fold's pages without and with the consent-dialog rule (conventions.consent_blocks)."""
    from pulpie_spark.classify import conventions

    model_dir, _, pages = payload
    segments, probs, errors = _fold_model_probabilities(model_dir, pages)
    shipped = conventions.consent_blocks
    rows = []
    try:
        for (key, html), seg, p, error in zip(pages, segments, probs, errors):
            row, fallback = {"page": key}, {}
            for name in CONSENT_VARIANTS:
                # labels_from_probs looks the function up at each call: this process only
                conventions.consent_blocks = (shipped if name == "with_consent_rule"
                                              else (lambda paths, n: np.zeros(n, dtype=bool)))
                row[f"{name}_text"] = _replayed_text(seg, p, error, html, fallback)
            rows.append(row)
    finally:
        conventions.consent_blocks = shipped
    return rows


def consent(run: Path, input_path: Path, workers: int = 2) -> None:
    """The cookie/consent-dialog rule (conventions.consent_blocks) replayed on ``run``'s fold models:
    without it first (it must reproduce a run made before the rule), then with it."""
    pages = _on_fold_models(run, input_path, _consent_chunk, [], workers)
    pages.to_parquet(run / "consent_pages.parquet")   # the texts, to ask other questions of them
    changed = pages["with_consent_rule_text"] != pages["without_consent_rule_text"]
    print(f"{run}: the rule changes the text of {int(changed.sum())} of {len(pages)} pages "
          f"({', '.join(f'{s} {n}' for s, n in pages[changed]['source'].value_counts().items())})")
    _replayed_table(run, pages, list(CONSENT_VARIANTS))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("question", choices=["few-blocks", "short-fallback", "rules", "gate", "threshold",
                                             "ensemble", "box", "consent"])
    parser.add_argument("runs", nargs="+", type=Path, help="output folders of jobs/evaluate.py --protocol loso")
    parser.add_argument("--input", type=Path, help="threshold: the labelled pages the run read (its --input)")
    parser.add_argument("--thresholds", default="0.5,0.6,0.7", help="threshold: main thresholds to compare")
    parser.add_argument("--workers", type=int, default=2, help="threshold, ensemble, box, consent: extraction processes")
    parser.add_argument("--box-min-probs", default="0.85,0.95,0.98,1.01",
                        help="box: values of conventions.BOX_MIN_PROB next to the shipped one (above 1: no box rule)")
    parser.add_argument("--unsure-share", type=float, default=0.05,
                        help="ensemble: the cascade averages the models where at least this share of the "
                             "page's characters is in blocks the first model scores 0.3-0.7")
    args = parser.parse_args(argv)
    if args.question == "ensemble":
        if args.input is None or len(args.runs) < 2:
            parser.error("ensemble needs --input and at least two runs")
        ensemble(args.runs, args.input, args.unsure_share, args.workers)
        return 0
    if args.question == "consent":
        if args.input is None:
            parser.error("consent needs --input (the run's labelled pages)")
        for run in args.runs:
            consent(run, args.input, args.workers)
        return 0
    if args.question == "box":
        if args.input is None:
            parser.error("box needs --input (the run's labelled pages)")
        for run in args.runs:
            box(run, args.input, [float(v) for v in args.box_min_probs.split(",")], args.workers)
        return 0
    if args.question == "threshold":
        if args.input is None:
            parser.error("threshold needs --input (the run's labelled pages)")
        thresholds = [float(t) for t in args.thresholds.split(",")]
        for run in args.runs:
            threshold(run, args.input, thresholds, args.workers)
        return 0
    ask = {"few-blocks": few_blocks, "short-fallback": short_fallback, "rules": rules, "gate": gate}[args.question]
    for run in args.runs:
        ask(run)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
