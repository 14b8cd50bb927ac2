"""Leave-one-source-out protocol (jobs/evaluate.py --protocol loso) on a tiny local table.

The table is built from tests/data/model_pages.parquet (6 labelled pages) relabelled into
fake sources: alpha (2 pages), beta (2 pages), gamma and tiny (+ a copy of an alpha page)
(1 page each: below --min-fold-pages 2, so they are pooled into one fold).
"""

from __future__ import annotations

import importlib.util
import json

import pandas as pd
import pytest

from helpers_data import ROOT


def _evaluate_job():
    spec = importlib.util.spec_from_file_location("pulpie_evaluate_job_loso", ROOT / "jobs" / "evaluate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.EvaluateJob()


@pytest.fixture()
def fake_sources(tmp_path, data_dir):
    pages = pd.read_parquet(data_dir / "model_pages.parquet").sort_values("page_id").reset_index(drop=True)
    pages["split"] = "train"
    pages["url"] = [f"https://example.org/{i}" for i in range(len(pages))]
    names = ["alpha", "alpha", "beta", "beta", "gamma", "tiny"]
    pages["source"] = names
    copy = pages.iloc[[0]].copy()              # the same page again in another set
    copy["source"], copy["page_id"], copy["url"] = "tiny", "copy-of-alpha-0", "http://www.example.org/0/"
    folder = tmp_path / "extraction"
    folder.mkdir()
    table = pd.concat([pages, copy], ignore_index=True)
    for name, part in table.groupby("source"):
        part.to_parquet(folder / f"{name}.parquet", index=False)
    return folder, table


def test_loso_holds_each_source_out_and_tables_every_source(tmp_path, fake_sources, capsys):
    folder, table = fake_sources
    out = tmp_path / "loso"
    rc = _evaluate_job().main([
        "--protocol", "loso", "--input", str(folder), "--output", str(out), "--min-fold-pages", "2",
        "--epochs", "1", "--batch-pages", "2", "--hidden", "16", "--embed-dim", "8", "--buckets", "2048",
        "--fallback", "none", "--reference-model", "default", "--label-ceiling", "--main-threshold", "0.6",
        "--keep-models"])
    assert rc == 0
    printed = capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert summary["input_pages"] == 7 and summary["duplicates_dropped"] == 1 and summary["pages"] == 6
    assert summary["folds"] == {"alpha": ["alpha"], "beta": ["beta"], "small-sources": ["gamma", "tiny"]}
    dropped = pd.read_csv(out / "duplicates.csv")
    assert dropped[["source", "page_id"]].values.tolist() == [["tiny", "copy-of-alpha-0"]]

    fold_of = {"alpha": "alpha", "beta": "beta", "gamma": "small-sources", "tiny": "small-sources"}
    folds = json.loads((out / "folds.json").read_text())
    assert sorted(f["fold"] for f in folds) == ["alpha", "beta", "small-sources"]
    for fold in folds:
        keys = fold["train_keys"] + fold["dev_keys"]
        assert fold["train_pages"] == len(fold["train_keys"]) > 0
        held_out = {k for k in keys if fold_of[k.split("/", 1)[0]] == fold["fold"]}
        assert held_out == set(), f"fold {fold['fold']} trained on its own pages: {held_out}"
        assert fold["fold"] not in {fold_of[s] for s in fold["train_sources"]}
        assert fold["epochs_run"] == 1
        assert "tiny/copy-of-alpha-0" not in keys
    # every kept page is scored by the model of its own fold and by both baselines
    pages = pd.read_parquet(out / "pages.parquet")
    assert len(pages) == 6 and pages["fold"].map(lambda f: f in fold_of.values()).all()
    assert (pages["source"].map(fold_of) == pages["fold"]).all()
    for name in ("model", "trafilatura", "resiliparse"):
        assert pages[f"{name}_text"].notna().all() and (pages[f"{name}_cpu_seconds"] > 0).all()
    # the table has every source and every fold, for the three extractors
    scores = pd.read_csv(out / "scores.csv")
    for by, groups in (("source", {"alpha", "beta", "gamma", "tiny"}),
                       ("fold", {"alpha", "beta", "small-sources"})):
        part = scores[scores["by"] == by]
        assert set(part["group"]) == groups
        assert (part.groupby("group")["extractor"].apply(set) == {"model", "trafilatura", "resiliparse", "reference",
                                                               "labels"}).all()
    assert {"shingle_f1", "shingle_cjk_f1", "rouge5_f1", "pages_per_s_core"} <= set(scores.columns)
    # the fixed (shipped) model ran on every page too, next to the fold models
    assert pages["reference_text"].notna().all()
    assert set(scores[(scores["by"] == "fold") & (scores["extractor"] == "reference")]["group"]) == {
        "alpha", "beta", "small-sources"}
    markdown = (out / "loso.md").read_text()
    assert "fixed model default" in markdown
    # --label-ceiling: every page rendered with its training labels, scored like an extractor;
    # four of these pages have blocks that hold their gold (the other two: an anti-bot "Loading..."
    # page and a one-block page), and what their labels render is nearly all gold
    assert pages["labels_text"].str.len().gt(0).sum() == 4 and "block_tag_labels" not in pages.columns
    ceiling = scores[(scores["by"] == "overall") & (scores["extractor"] == "labels")].iloc[0]
    assert ceiling["shingle_precision"] > 0.9 and ceiling["empty"] == 2
    assert "training labels rendered" in markdown
    conventions = pd.read_csv(out / "conventions.csv")
    assert set(conventions["source"]) == {"alpha", "beta", "gamma", "tiny"}
    assert conventions["main_share"].between(0, 1).all() and (conventions["blocks"] > 0).all()
    assert "p" in set(conventions["tag"])
    # --main-threshold reaches every fold model: each page's text is its kept fold model's at 0.6
    from pulpie_spark.extractor import Extractor

    assert summary["main_threshold"] == 0.6
    html = dict(zip(table["source"] + "/" + table["page_id"], table["html"]))
    for fold, part in pages.groupby("fold"):
        extractor = Extractor(str(out / "models" / fold), fallback="none", main_threshold=0.6)
        for key, text in zip(part["source"] + "/" + part["page_id"], part["model_text"]):
            assert extractor.extract(html[key]).text == text
    for group in ("alpha", "beta", "small-sources", "gamma", "tiny"):
        assert f"| {group} |" in markdown and f"| {group} |" in printed


def test_assign_folds_groups_small_sources_by_family_then_pools():
    from pulpie_spark.evaluate.loso import SMALL_FOLD, assign_folds

    counts = {"cleaneval": 700, "cleanportaleval": 70, "newspaper3k_tests": 120, "newspaper4k_tests": 14,
              "goose3_tests": 6, "htmltotext": 28, "chinese_wce_dataset": 69}
    folds = assign_folds(counts, 100)
    assert folds == {"cleaneval": "cleaneval", "cleanportaleval": "cleaneval",
                     "newspaper3k_tests": "newspaper3k_tests", "newspaper4k_tests": "newspaper3k_tests",
                     "goose3_tests": "newspaper3k_tests", "htmltotext": SMALL_FOLD,
                     "chinese_wce_dataset": SMALL_FOLD}
    # a family whose big set is absent (or small itself) pools instead of inventing a fold
    assert assign_folds({"newspaper4k_tests": 14, "newspaper3k_tests": 50}, 100) == {
        "newspaper4k_tests": SMALL_FOLD, "newspaper3k_tests": SMALL_FOLD}


def test_dedupe_counts_near_identical_pages_once():
    from pulpie_spark.evaluate.loso import dedupe_pages

    article = " ".join(f"word{i}" for i in range(60))
    table = pd.DataFrame({
        "source": ["big", "big", "big", "small", "small", "small"],
        "page_id": ["1", "2", "3", "a", "b", "c"],
        "url": ["https://a.org/x", "https://a.org/y", None, "http://www.a.org/x/", None, "https://a.org/y"],
        "html": [b"<p>1</p>", b"<p>2</p>", b"<p>3</p>", b"<p>other html</p>", b"<p>3</p>", b"<p>z</p>"],
        "gold_text": [article, "short one", "three", "different gold", "three", "unrelated words here"],
    })
    kept, dropped = dedupe_pages(table)
    # same URL across sets (scheme/www/slash aside), same html: the copy in the larger set stays
    assert dropped.set_index("page_id")["duplicate_of"].to_dict() == {"a": "big:1", "b": "big:3", "c": "big:2"}
    assert kept["page_id"].tolist() == ["1", "2", "3"]
    # near-identical gold (same first 40 words, different tail) is one page too
    near = pd.DataFrame({"source": ["s", "t"], "page_id": ["1", "2"], "url": [None, None],
                         "html": [b"<p>x</p>", b"<div>x</div>"],
                         "gold_text": [article, article.upper() + " Share this story!"]})
    assert len(dedupe_pages(near)[0]) == 1
    # within one set, two captures of the same URL stay two pages
    same = pd.DataFrame({"source": ["s", "s"], "page_id": ["1", "2"], "url": ["https://a.org/x"] * 2,
                         "html": [b"<p>x</p>", b"<p>y</p>"], "gold_text": ["one text here", "other text there"]})
    assert len(dedupe_pages(same)[0]) == 2


def test_shingle_f1_with_cjk_characters_as_tokens():
    from pulpie_spark.evaluate.metrics import shingle_scores, shingle_tokens, shingle_tp_fp_fn

    assert shingle_tokens("東京タワー is 333 m", cjk_chars=True) == ["東", "京", "タ", "ワ", "ー", "is", "333", "m"]
    assert shingle_tokens("東京タワー is 333 m") == ["東京タワー", "is", "333", "m"]
    ref = "北京是中华人民共和国的首都。"
    pred = "北京是中华人民共和国的首都。相关新闻"
    # as \w+ tokens the whole sentence is one token and the page scores 0; per character it is close
    assert shingle_scores([shingle_tp_fp_fn(pred, ref)])["f1"] == 0.0
    f1 = shingle_scores([shingle_tp_fp_fn(pred, ref, cjk_chars=True)])["f1"]
    assert 0.7 < f1 < 1.0
    assert shingle_tp_fp_fn("plain english text here", "plain english text here", cjk_chars=True) == (1.0, 0.0, 0.0)


def test_training_rows_caps_train_pages_per_source_with_a_seeded_sample():
    from pulpie_spark.classify.blockmodel.training import training_rows

    frame = pd.DataFrame({
        "source": ["a"] * 6 + ["b"] * 2 + ["a"],
        "page_id": [f"p{i}" for i in range(9)],
        "split": ["train"] * 8 + ["dev"],
        "kept": [True] * 5 + [False] + [True] * 3,
        "n_blocks": [3] * 9,
    })
    train, dev = training_rows(frame, max_pages_per_source=3, seed=13)
    assert train.groupby("source").size().to_dict() == {"a": 3, "b": 2}
    assert "p5" not in set(train["page_id"])                  # unconfident pages never train
    assert dev["page_id"].tolist() == ["p8"]                   # dev is not capped
    again, _ = training_rows(frame.sample(frac=1, random_state=1), max_pages_per_source=3, seed=13)
    assert again["page_id"].tolist() == train["page_id"].tolist()   # order-independent, seeded
    full, _ = training_rows(frame)
    assert len(full) == 7


def test_loso_measures_a_recipe_on_some_sources_and_feature_version(tmp_path, fake_sources):
    """--train-sources: the fold models train on those sources only (the held-out fold still
    excluded) while every source is scored; --feature-version: the cache and the fold models
    use that block feature version (the first shipped model's recipe: v1 on the older sets)."""
    folder, _ = fake_sources
    out = tmp_path / "loso"
    rc = _evaluate_job().main([
        "--protocol", "loso", "--input", str(folder), "--output", str(out), "--min-fold-pages", "2",
        "--epochs", "1", "--batch-pages", "2", "--hidden", "16", "--embed-dim", "8", "--buckets", "2048",
        "--fallback", "none", "--train-sources", "alpha,beta", "--feature-version", "1", "--keep-models"])
    assert rc == 0
    folds = {f["fold"]: f for f in json.loads((out / "folds.json").read_text())}
    assert folds["alpha"]["train_sources"] == ["beta"] and folds["beta"]["train_sources"] == ["alpha"]
    assert folds["small-sources"]["train_sources"] == ["alpha", "beta"]
    for fold in folds:
        assert json.loads((out / "models" / fold / "config.json").read_text())["feature_version"] == 1
    assert pd.read_parquet(out / "features.parquet")["feature_version"].unique().tolist() == [1]
    assert json.loads((out / "summary.json").read_text())["train_sources"] == ["alpha", "beta"]
    assert set(pd.read_parquet(out / "pages.parquet")["source"]) == {"alpha", "beta", "gamma", "tiny"}
    # a cache of one version is never reused for fold models of another
    with pytest.raises(ValueError, match="v1"):
        _evaluate_job().main([
            "--protocol", "loso", "--input", str(folder), "--output", str(tmp_path / "again"),
            "--features-cache", str(out / "features.parquet"), "--reuse-cache", "--min-fold-pages", "2",
            "--epochs", "1", "--batch-pages", "2", "--hidden", "16", "--embed-dim", "8", "--buckets", "2048",
            "--fallback", "none"])


def test_loso_over_seeds_tables_each_seed_its_mean_and_spread(tmp_path, fake_sources):
    """--seeds: one run per seed on one features cache, and seeds.csv side by side."""
    folder, _ = fake_sources
    out = tmp_path / "seeds"
    rc = _evaluate_job().main([
        "--protocol", "loso", "--input", str(folder), "--output", str(out), "--min-fold-pages", "2",
        "--epochs", "1", "--batch-pages", "2", "--hidden", "16", "--embed-dim", "8", "--buckets", "2048",
        "--fallback", "none", "--seeds", "3,4"])
    assert rc == 0
    assert (out / "features.parquet").is_file() and not (out / "seed-3" / "features.parquet").exists()
    summaries = {seed: json.loads((out / f"seed-{seed}" / "summary.json").read_text()) for seed in (3, 4)}
    assert [summaries[s]["train_config"]["seed"] for s in (3, 4)] == [3, 4]
    table = pd.read_csv(out / "seeds.csv").set_index("row")
    assert list(table.index) == ["seed 3", "seed 4", "mean over seeds", "spread (max - min)", "trafilatura"]
    means = [summaries[s]["model_mean_fold_shingle_f1"] for s in (3, 4)]
    assert table.loc[["seed 3", "seed 4"], "mean_shingle_f1"].tolist() == pytest.approx(means)
    assert table.at["spread (max - min)", "mean_shingle_f1"] == pytest.approx(max(means) - min(means))
    assert table.at["mean over seeds", "mean_shingle_f1"] == pytest.approx(sum(means) / 2)
    assert table.at["trafilatura", "mean_shingle_f1"] == pytest.approx(
        summaries[3]["trafilatura_mean_fold_shingle_f1"])
    folds = sorted(json.loads((out / "seed-3" / "folds.json").read_text()), key=lambda f: f["fold"])
    assert [c for c in table.columns if c.endswith("_shingle_f1") and not c.startswith("mean")] == [
        f"{f['fold']}_shingle_f1" for f in folds]
    markdown = (out / "seeds.md").read_text()
    assert markdown.startswith("| model | mean shingle f1 |") and "| spread (max - min) |" in markdown


def test_training_only_pages_train_every_fold_and_are_never_held_out_or_scored(tmp_path, fake_sources):
    """--train-only (e.g. ../shared/data/extraction-weak): pages in every fold model's training,
    never a fold, never scored, never dev; a copy of a scored page yields to it."""
    folder, table = fake_sources
    weak = table[table["source"].isin(["beta", "gamma"])].copy()
    weak["html"] = [bytes(h) + b"<!-- weak copy -->" for h in weak["html"]]
    weak["gold_text"] = "Weak label. " + weak["gold_text"]
    weak["url"] = [f"https://weak.example.net/{i}" for i in range(len(weak))]
    weak["page_id"] = [f"w{i}" for i in range(len(weak))]
    copy = table[table["source"] == "alpha"].iloc[[1]].assign(page_id="copy-of-alpha-1")   # same html
    weak = pd.concat([weak, copy], ignore_index=True).assign(source="weak", split="dev")
    weak_dir = tmp_path / "weak"
    weak_dir.mkdir()
    weak.to_parquet(weak_dir / "weak.parquet", index=False)
    out = tmp_path / "loso"
    args = ["--protocol", "loso", "--input", str(folder), "--output", str(out), "--min-fold-pages", "2",
            "--epochs", "1", "--batch-pages", "2", "--hidden", "16", "--embed-dim", "8", "--buckets", "2048",
            "--fallback", "none"]
    assert _evaluate_job().main(args + ["--train-only", str(weak_dir)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["train_only_pages"] == {"weak": 3} and summary["pages"] == 6
    assert summary["folds"] == {"alpha": ["alpha"], "beta": ["beta"], "small-sources": ["gamma", "tiny"]}
    dropped = pd.read_csv(out / "duplicates.csv").set_index("page_id")["duplicate_of"].to_dict()
    assert dropped["copy-of-alpha-1"].startswith("alpha:")   # the larger training-only set still yields
    assert "weak" not in set(pd.read_parquet(out / "pages.parquet")["source"])
    folds = json.loads((out / "folds.json").read_text())
    assert sorted(f["fold"] for f in folds) == ["alpha", "beta", "small-sources"]
    cache = pd.read_parquet(out / "features.parquet")
    kept_weak = {f"weak/{p}" for p in cache[(cache["source"] == "weak") & cache["kept"]]["page_id"]}
    assert kept_weak and kept_weak <= {"weak/w0", "weak/w1", "weak/w2"}
    for fold in folds:
        assert {k for k in fold["train_keys"] if k.startswith("weak/")} == kept_weak
        assert "weak" in fold["train_sources"] and not any(k.startswith("weak/") for k in fold["dev_keys"])
    # a cache built without the training-only pages is not reused as if it had them
    assert _evaluate_job().main(args + ["--output", str(tmp_path / "no-weak"), "--features-cache",
                                        str(tmp_path / "plain.parquet")]) == 0
    with pytest.raises(ValueError, match="lacks 3 of the pages"):
        _evaluate_job().main(args + ["--output", str(tmp_path / "reuse"), "--train-only", str(weak_dir),
                                     "--features-cache", str(tmp_path / "plain.parquet"), "--reuse-cache"])
    clash = tmp_path / "clash"
    clash.mkdir()
    weak.assign(source="alpha").to_parquet(clash / "alpha.parquet", index=False)
    with pytest.raises(ValueError, match="alpha"):
        _evaluate_job().main(args + ["--train-only", str(clash), "--output", str(tmp_path / "clash-out")])


def test_loso_trains_each_fold_an_ensemble_with_members(tmp_path, fake_sources):
    """--members 2: every fold model is an ensemble of seeds s and s+1, and the held-out pages
    are extracted by it (the page gate, when fitted, sees the ensemble's output)."""
    from pulpie_spark.extractor import Extractor

    folder, table = fake_sources
    out = tmp_path / "loso"
    rc = _evaluate_job().main([
        "--protocol", "loso", "--input", str(folder), "--output", str(out), "--min-fold-pages", "2",
        "--epochs", "1", "--batch-pages", "2", "--hidden", "16", "--embed-dim", "8", "--buckets", "2048",
        "--fallback", "none", "--members", "2", "--cascade-share", "0", "--seed", "7", "--keep-models"])
    assert rc == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["train_config"]["members"] == 2 and summary["train_config"]["cascade_share"] == 0.0
    pages = pd.read_parquet(out / "pages.parquet")
    html = dict(zip(table["source"] + "/" + table["page_id"], table["html"]))
    for fold, part in pages.groupby("fold"):
        model_dir = out / "models" / fold
        assert json.loads((model_dir / "ensemble.json").read_text())["members"] == ["member-1"]
        member = json.loads((model_dir / "member-1" / "config.json").read_text())["training"]
        assert member["config"]["seed"] == 8
        extractor = Extractor(str(model_dir), fallback="none")
        assert len(extractor.classifier.members) == 1
        for key, text in zip(part["source"] + "/" + part["page_id"], part["model_text"]):
            assert extractor.extract(html[key]).text == text
