"""jobs/evaluate.py on 3 fixture pages: both extractors run, the table is printed and saved."""

from __future__ import annotations

import importlib.util
import json

from helpers_data import ROOT


def _evaluate_job():
    spec = importlib.util.spec_from_file_location("pulpie_evaluate_job", ROOT / "jobs" / "evaluate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.EvaluateJob()


def test_evaluate_job_prints_side_by_side_table(tmp_path, data_dir, capsys):
    job = _evaluate_job()
    rc = job.main(["--input", str(data_dir / "model_pages.parquet"), "--split", "all", "--limit", "3",
                   "--sources", "wcxb", "--model", "default", "--output", str(tmp_path / "eval")])
    assert rc == 0
    out = capsys.readouterr().out
    assert "traf R5" in out and "model R5" in out
    lines = out.splitlines()
    overall = next(line for line in lines if line.startswith("overall "))
    assert overall.split()[1] == "3"
    assert any(line.startswith("wcxb ") for line in lines)
    assert "speed x" in out
    scores = json.loads((tmp_path / "eval" / "scores.json").read_text())
    by_name = {(r["extractor"], r["group"]): r for r in scores}
    for name in ("model", "trafilatura"):
        row = by_name[(name, "overall")]
        assert row["pages"] == 3 and row["errors"] == 0
        assert 0.0 <= row["rouge5_f1"] <= 1.0 and 0.0 <= row["shingle_f1"] <= 1.0
        assert row["pages_per_s_core"] > 0
    # per-page results are kept; the shipped model extracts most of the Arch Linux forum
    # thread (page 0541). Measured ROUGE-5: default-v4 0.773, default-v3 0.651, default-v2 0.573 (the last two can drop
    # the opening post; their recipe weights main blocks 1.0 for precision, docs/model-card.md
    # "Limits"), default-v1 0.752, trafilatura 0.749.
    import pandas as pd

    from pulpie_spark.evaluate.metrics import rouge_n_f1

    pages = pd.read_parquet(tmp_path / "eval" / "pages.parquet").set_index("page_id")
    assert list(pages.index) == ["0541", "0551", "4278"]
    forum = pages.loc["0541"]
    assert rouge_n_f1(forum["model_text"], forum["reference"]) > 0.6
    assert (pages["model_cpu_seconds"] > 0).all()


def test_load_labelled_table_reads_webmainbench_jsonl(tmp_path):
    from pulpie_spark.evaluate.harness import load_labelled_table

    path = tmp_path / "wmb.jsonl"
    rows = [{"track_id": "b", "html": "<p>x</p>", "convert_main_content": "x", "meta": {"level": "hard"}},
            {"track_id": "a", "html": "<p>y</p>", "convert_main_content": "y", "meta": {"level": "simple"}}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    table = load_labelled_table(path)
    assert table["page_id"].tolist() == ["a", "b"]
    assert table["group"].tolist() == ["webmainbench/simple", "webmainbench/hard"]
    assert table["reference"].tolist() == ["y", "x"]


def test_evaluate_job_main_threshold_reaches_the_model(tmp_path, data_dir, capsys):
    """--main-threshold: the model's texts are Extractor(main_threshold=...)'s on every page, and
    a value outside (0, 1) is a usage error."""
    import pandas as pd
    import pytest

    from pulpie_spark.evaluate.harness import load_labelled_table
    from pulpie_spark.extractor import Extractor

    job = _evaluate_job()
    assert job.build_parser().parse_args([]).main_threshold == 0.5
    with pytest.raises(SystemExit) as exit_info:
        job.build_parser().parse_args(["--main-threshold", "1.5"])
    assert exit_info.value.code == 2 and "strictly between 0 and 1" in capsys.readouterr().err
    args = ["--input", str(data_dir / "model_pages.parquet"), "--split", "all", "--limit", "3", "--sources", "wcxb",
            "--model", "default", "--fallback", "none"]
    texts = {}
    for threshold in ("0.5", "0.9"):
        assert job.main(args + ["--main-threshold", threshold, "--output", str(tmp_path / threshold)]) == 0
        assert f"main_threshold={float(threshold)}" in capsys.readouterr().out
        texts[threshold] = pd.read_parquet(tmp_path / threshold / "pages.parquet")["model_text"].tolist()
    table = load_labelled_table(data_dir / "model_pages.parquet", sources=["wcxb"], limit=3)
    strict = Extractor(fallback="none", main_threshold=0.9)
    assert texts["0.9"] == [strict.extract(html).text for html in table["html"]]
    # a higher threshold keeps fewer blocks: less text on these pages, never more
    assert all(len(hi) <= len(lo) for hi, lo in zip(texts["0.9"], texts["0.5"]))
    assert sum(map(len, texts["0.9"])) < sum(map(len, texts["0.5"]))
