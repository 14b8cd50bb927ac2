"""jobs/train.py on a tiny table: Spark feature cache, training, TorchDistributor local mode."""

from __future__ import annotations

import importlib.util
import json

import pandas as pd
import pytest

from helpers_data import ROOT


def _train_job():
    spec = importlib.util.spec_from_file_location("pulpie_train_job", ROOT / "jobs" / "train.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.TrainJob()


def _args(job, tmp_path, data_dir, *extra):
    return job.build_parser().parse_args([
        "--input", str(data_dir / "model_pages.parquet"), "--output", str(tmp_path / "model"),
        "--features-cache", str(tmp_path / "cache.parquet"), "--epochs", "2", "--batch-pages", "2",
        "--hidden", "16", "--embed-dim", "8", "--buckets", "2048", *extra])


def test_train_job_builds_cache_prints_coverage_and_saves_model(spark, tmp_path, data_dir, capsys):
    from pulpie_spark.classify.blockmodel.model import DefaultBlockClassifier, load_model

    job = _train_job()
    assert job.run(spark, _args(job, tmp_path, data_dir)) == 0
    out = capsys.readouterr().out
    assert "label coverage" in out and "wcxb" in out and "mozilla_readability" in out
    cache = pd.read_parquet(tmp_path / "cache.parquet")
    assert len(cache) == 6                       # every input page has a row, kept or not
    assert set(cache["split"]) == {"train", "dev"}
    kept = cache[cache["kept"]]
    assert len(kept) >= 3 and (kept["n_blocks"] > 0).all()
    assert all(len(r.labels) == r.n_blocks for r in kept.itertuples())
    report = json.loads((tmp_path / "model" / "training_report.json").read_text())
    assert report["train_pages"] + report["dev_pages"] == len(kept)
    assert len(report["history"]) == 2
    model = DefaultBlockClassifier(load_model(tmp_path / "model"))
    probs = model.predict_proba([["<p _item_id=\"1\">Some text here.</p>"]])
    assert probs[0].shape == (1,)

    # same cache + seed -> byte-identical weights
    first = (tmp_path / "model" / "model.safetensors").read_bytes()
    args = _args(job, tmp_path, data_dir, "--reuse-cache")
    args.output = str(tmp_path / "model2")
    assert job.run(spark, args) == 0
    assert (tmp_path / "model2" / "model.safetensors").read_bytes() == first

    # --page-gate ships a fitted gate next to the weights; the loader picks it up
    from pulpie_spark.classify.blockmodel.gate import GATE_FEATURES, PageGate
    from pulpie_spark.classify.registry import load_classifier

    n = len(GATE_FEATURES)
    gate = PageGate(mean=(0.0,) * n, scale=(1.0,) * n, weights=(0.5,) * n, bias=-1.0, threshold=0.4)
    gate.save(tmp_path)
    args = _args(job, tmp_path, data_dir, "--reuse-cache", "--page-gate", str(tmp_path / "page_gate.json"))
    args.output = str(tmp_path / "gated")
    assert job.run(spark, args) == 0
    assert load_classifier(str(tmp_path / "gated")).page_gate == gate
    assert load_classifier(str(tmp_path / "model2")).page_gate is None

    # --members 2: the first member is the single model of the seed, the second one of seed + 1;
    # the gate ships next to them and sees their averaged output
    args = _args(job, tmp_path, data_dir, "--reuse-cache", "--members", "2", "--page-gate",
                 str(tmp_path / "page_gate.json"))
    args.output = str(tmp_path / "ensemble")
    assert job.run(spark, args) == 0
    assert (tmp_path / "ensemble" / "model.safetensors").read_bytes() == first
    assert (tmp_path / "ensemble" / "member-1" / "model.safetensors").read_bytes() != first
    ensemble = load_classifier(str(tmp_path / "ensemble"))
    assert len(ensemble.members) == 1 and ensemble.page_gate == gate
    assert json.loads((tmp_path / "ensemble" / "training_report.json").read_text())["members"][0]["seed"] == 14
    # --first-member-page-gate: the first member's own gate, for loading it alone; only with members
    first_gate = PageGate(mean=(0.0,) * n, scale=(1.0,) * n, weights=(0.25,) * n, bias=-2.0, threshold=0.4)
    first_gate.save(tmp_path, "first.json")
    args = _args(job, tmp_path, data_dir, "--reuse-cache", "--members", "2", "--page-gate",
                 str(tmp_path / "page_gate.json"), "--first-member-page-gate", str(tmp_path / "first.json"))
    args.output = str(tmp_path / "ensemble")
    assert job.run(spark, args) == 0
    from pulpie_spark.classify.blockmodel.model import load_block_classifier

    assert load_block_classifier(tmp_path / "ensemble", first_only=True).page_gate == first_gate
    assert load_classifier(str(tmp_path / "ensemble")).page_gate == gate
    args = _args(job, tmp_path, data_dir, "--reuse-cache", "--first-member-page-gate", str(tmp_path / "first.json"))
    with pytest.raises(SystemExit, match="members"):
        job.run(spark, args)

    # the Spark cache carries the container groups; a pooling model with token dropout trains on it
    from pulpie_spark.classify.blockmodel.data import CACHED_CONTAINER_LEVELS

    assert all(len(r.groups) == CACHED_CONTAINER_LEVELS * r.n_blocks for r in kept.itertuples())
    args = _args(job, tmp_path, data_dir, "--reuse-cache", "--container-levels", "2", "--token-dropout", "0.2")
    args.output = str(tmp_path / "model3")
    assert job.run(spark, args) == 0
    config = json.loads((tmp_path / "model3" / "config.json").read_text())
    assert config["container_levels"] == 2 and config["training"]["config"]["token_dropout"] == 0.2
    pooled = DefaultBlockClassifier(load_model(tmp_path / "model3"))
    assert pooled.predict_proba([["<p _item_id=\"1\">Some text here.</p>"]], [["html > body > p"]])[0].shape == (1,)


def test_train_job_through_torch_distributor_local_mode(spark, tmp_path, data_dir, capsys):
    pytest.importorskip("pyspark.ml.torch.distributor")
    job = _train_job()
    args = _args(job, tmp_path, data_dir, "--distributor", "torch", "--num-processes", "1", "--local-mode",
                 "--epochs", "1")
    assert job.run(spark, args) == 0
    report = json.loads((tmp_path / "model" / "training_report.json").read_text())
    assert report["world_size"] == 1 and report["best_epoch"] == 1
    assert (tmp_path / "model" / "model.safetensors").is_file()


def test_train_job_dedupe_builds_the_cache_locally_without_near_duplicates(spark, tmp_path, data_dir, capsys):
    pages = pd.read_parquet(data_dir / "model_pages.parquet")
    copy = pages.iloc[[0]].copy()
    copy["source"], copy["page_id"] = "another_set", "copy"
    table = tmp_path / "pages.parquet"
    pd.concat([pages, copy], ignore_index=True).to_parquet(table, index=False)
    job = _train_job()
    args = job.build_parser().parse_args([
        "--input", str(table), "--output", str(tmp_path / "model"), "--dedupe", "--workers", "1",
        "--features-cache", str(tmp_path / "cache.parquet"), "--epochs", "1", "--batch-pages", "2",
        "--hidden", "16", "--embed-dim", "8", "--buckets", "2048", "--max-pages-per-source", "2",
        "--main-weight", "1.0"])
    assert job.run(spark, args) == 0
    assert "6 pages, 1 near-duplicates dropped" in capsys.readouterr().out
    cache = pd.read_parquet(tmp_path / "cache.parquet")
    assert len(cache) == 6 and "copy" not in set(cache["page_id"])
    report = json.loads((tmp_path / "model" / "training_report.json").read_text())
    assert report["config"]["max_pages_per_source"] == 2
    assert report["main_weight"] == 1.0 and report["config"]["main_weight"] == 1.0
    assert report["train_pages"] <= 2 * cache[cache["split"] != "dev"]["source"].nunique()
