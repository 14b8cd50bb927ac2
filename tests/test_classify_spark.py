"""The classify stage in local Spark with a tiny EuroBERT shipped as an archive."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("torch")

from helpers_models import MARKER, WORDS, save_tiny_classifier  # noqa: E402
from pulpie_spark.classify import spark_adapter as cls_spark  # noqa: E402


@pytest.fixture(scope="module")
def rigged_dir(tmp_path_factory):
    return save_tiny_classifier(tmp_path_factory.mktemp("spark-model") / "rigged", rigged=True)


def _pages(n: int, seed: int = 3):
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        blocks = []
        for _ in range(rng.randint(0, 6)):
            words = [rng.choice(WORDS[:20]) for _ in range(rng.randint(1, 4))]
            if rng.random() < 0.4:
                words.append(MARKER)
            blocks.append(" ".join(words))
        rows.append((f"doc{i:03d}", f"http://x/{i}", blocks if i % 11 else None))
    return rows


def _expected(blocks):
    return [int(b.split()[-1] == MARKER) for b in (blocks or [])]


def test_classify_dataframe_labels_and_passthrough(spark, rigged_dir):
    rows = _pages(40)
    df = spark.createDataFrame(rows, "doc_id string, url string, blocks array<string>").repartition(2)
    previous = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "4")   # many Arrow batches
    try:
        out = cls_spark.classify_dataframe(df, model=str(rigged_dir), batch_tokens=64)
        assert out.columns == ["doc_id", "url", "blocks", "labels", "main_probs", "model_id",
                               "classify_error", "unsure_page"]
        result = {r.doc_id: r for r in out.collect()}
    finally:
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", previous)
    assert len(result) == 40
    for doc_id, url, blocks in rows:
        row = result[doc_id]
        assert row.url == url
        assert row.labels == _expected(blocks), doc_id
        assert len(row.main_probs) == len(row.labels)
        assert all((p >= 0.5) == bool(label) for p, label in zip(row.main_probs, row.labels))
        assert row.classify_error is None
        assert row.unsure_page is None   # a transformers classifier has no page gate
        assert row.model_id == str(rigged_dir)
    assert sum(len(r.labels) for r in result.values()) > 60


def test_classify_dataframe_main_threshold_sets_labels(spark, rigged_dir):
    """Labels are main_probs >= main_threshold: above every probability no block is main,
    below every one all are (the rigged model's probabilities sit near 0 and 1)."""
    rows = [r for r in _pages(30) if r[2]]
    df = spark.createDataFrame(rows, "doc_id string, url string, blocks array<string>")
    probs = [p for r in cls_spark.classify_dataframe(df, model=str(rigged_dir)).collect() for p in r.main_probs]
    assert 0 < sum(p >= 0.5 for p in probs) < len(probs)
    for threshold, expected in (((max(probs) + 1) / 2, 0), (min(probs) / 2, 1)):
        out = cls_spark.classify_dataframe(df, model=str(rigged_dir), main_threshold=threshold).collect()
        assert [p for r in out for p in r.main_probs] == probs
        assert {label for r in out for label in r.labels} == {expected}, threshold
    with pytest.raises(ValueError, match="main threshold"):
        cls_spark.classify_dataframe(df, model=str(rigged_dir), main_threshold=1.0)


def test_existing_output_columns_are_replaced(spark, rigged_dir):
    df = spark.createDataFrame([("a", ["alpha " + MARKER, "beta"], [9, 9])],
                               "doc_id string, blocks array<string>, labels array<int>")
    row = cls_spark.classify_dataframe(df, model=str(rigged_dir), gpu_amount=0.5).collect()[0]
    assert row.labels == [1, 0]


def test_unloadable_model_becomes_row_errors(spark):
    df = spark.createDataFrame([("a", ["x"]), ("b", [])], "doc_id string, blocks array<string>")
    rows = {r.doc_id: r for r in cls_spark.classify_dataframe(df, model="nobody/no-such-model").collect()}
    assert rows["a"].classify_error.startswith("classify:model_load_failed:error:")
    assert "HF_HUB_OFFLINE" in rows["a"].classify_error
    assert rows["a"].labels == [] and rows["b"].labels == [] and rows["b"].classify_error is None


class _FailsOnBoom:
    """A classifier that fails on one page: only that row may get an error."""

    model_id = "boom"

    def predict_proba(self, pages, paths=None):
        if any("BOOM" in b for page in pages for b in page):
            raise RuntimeError("model exploded")
        return [np.full(len(p), 0.75, dtype=np.float32) for p in pages]


def test_failing_page_is_isolated():
    pdf = pd.DataFrame({"doc_id": ["a", "b", "c"],
                        "blocks": [np.array(["ok", "ok"], dtype=object),
                                   np.array(["BOOM"], dtype=object), None]})
    out = cls_spark.classify_frame(pdf, _FailsOnBoom(), blocks_col="blocks", paths_col=None,
                                   model_id="boom")
    assert out["labels"].map(list).tolist() == [[1, 1], [], []]
    assert out["classify_error"].tolist()[0] is None
    assert out["classify_error"].tolist()[1] == "classify:error:RuntimeError: model exploded"
    assert out["classify_error"].tolist()[2] is None
    assert out["doc_id"].tolist() == ["a", "b", "c"]


def test_worker_cache_reuses_model(rigged_dir):
    spec = cls_spark.ModelSpec(str(rigged_dir), "rigged", device="cpu")
    first = cls_spark.get_classifier(spec)
    assert cls_spark.get_classifier(spec) is first
    assert first.model_id == "rigged"


def test_gpu_requests_and_profile(spark):
    assert cls_spark.resolve_gpu_amount(spark, None) == 0.0   # CPU-only: no GPU conf needed
    assert cls_spark.resolve_gpu_amount(spark, 0.25) == 0.25
    static = cls_spark.gpu_profile_requests({"spark.executor.resource.gpu.amount": "1"}, 0.5)
    assert static == {"task": {"cpus": 1, "gpu": 0.5}, "executor": None}
    dynamic = cls_spark.gpu_profile_requests(
        {"spark.dynamicAllocation.enabled": "true", "spark.executor.resource.gpu.amount": "2",
         "spark.executor.cores": "8", "spark.task.cpus": "2",
         "spark.executor.resource.gpu.discoveryScript": "/opt/getGpus.sh"}, 1.0)
    assert dynamic["task"] == {"cpus": 2, "gpu": 1.0}
    assert dynamic["executor"]["gpu"] == 2 and dynamic["executor"]["cores"] == 8
    profile = cls_spark.make_profile(dynamic)
    assert profile.taskResources["gpu"].amount == 1.0
    assert profile.executorResources["gpu"].amount == 2
    assert profile.executorResources["gpu"].discoveryScript == "/opt/getGpus.sh"
    assert cls_spark.build_gpu_profile(spark, 1.0) is None   # local master: no stage-level scheduling


def test_cuda_index_and_model_locations(spark):
    assert cls_spark.cuda_index("3", visible="") == 3
    assert cls_spark.cuda_index("3", visible="2,3") == 1
    assert cls_spark.cuda_index("5", visible="0") == 0
    spec = cls_spark.prepare_model(spark, "dbfs:/models/orange-small")
    assert spec.name == "/dbfs/models/orange-small" and spec.archive is None
    assert cls_spark.prepare_model(spark, "/mnt/models/x").name == "/mnt/models/x"
    assert cls_spark.prepare_model(spark, "orange-small").name == "feyninc/pulpie-orange-small"


def test_the_embedded_names_stay_in_the_package_and_name_their_model(spark):
    """"default" and "default-fast" are loaded from the package on each executor (no archive);
    the output says which of the two classified a row."""
    for name, model_id in (("default", "pulpie-spark/default-v6"), ("DEFAULT-FAST", "pulpie-spark/default-v6-fast")):
        spec = cls_spark.prepare_model(spark, name)
        assert spec.name == name.lower() and spec.archive is None
        df = spark.createDataFrame([("d1", ["<p _item_id=\"1\">Some text of a page.</p>"])],
                                   "doc_id string, blocks array<string>")
        row = cls_spark.classify_dataframe(df, model=name).collect()[0]
        assert row.model_id == model_id and row.classify_error is None and len(row.labels) == 1


def test_one_long_page_does_not_pad_the_batch():
    """Classifiers pad every page of a call to the call's longest page. The classify
    stage groups pages so that pages x longest page <= MAX_PADDED_BLOCKS (a longer page
    alone): measured, the adversarial corpus in one call peaked at 3590 MiB, grouped at
    718 MiB (docs/reliability.md). Results do not depend on the grouping."""
    import numpy as np
    import pandas as pd

    from pulpie_spark.classify.spark_adapter import MAX_PADDED_BLOCKS, classify_frame

    class PaddingRecorder:
        model_id = "recorder"

        def __init__(self):
            self.padded = []

        def predict_proba(self, pages, paths=None):
            self.padded.append(len(pages) * max(len(p) for p in pages))
            return [np.array([(len(b) % 10) / 10 for b in page], dtype=np.float32) for page in pages]

    long_page = [f"block {i}" for i in range(50_000)]
    pages = [[f"p{i} b{j}" for j in range(20 + i)] for i in range(15)] + [long_page, [], None]
    pdf = pd.DataFrame({"doc_id": [str(i) for i in range(len(pages))], "blocks": pages})
    grouped, single = PaddingRecorder(), PaddingRecorder()
    out = classify_frame(pdf, grouped, blocks_col="blocks", paths_col=None, model_id="r")
    assert max(grouped.padded) == 50_000 and sorted(grouped.padded)[:-1] == [15 * 34]
    assert all(p <= MAX_PADDED_BLOCKS or p == 50_000 for p in grouped.padded)
    one_call = classify_frame(pdf, single, blocks_col="blocks", paths_col=None, model_id="r",
                              max_padded_blocks=10**9)
    assert single.padded == [16 * 50_000]
    for a, b in zip(out["main_probs"], one_call["main_probs"]):
        assert np.array_equal(a, b)
    assert out["labels"].map(len).tolist() == [20 + i for i in range(15)] + [50_000, 0, 0]


def test_compile_choice_reaches_the_executor_loader(spark, rigged_dir):
    """--compile travels in the ModelSpec to the executor's loader (cached per choice);
    a bad choice fails on the driver before any task runs."""
    spec = cls_spark.prepare_model(spark, str(rigged_dir), compile="mlp")
    assert spec.compile == "mlp"
    compiled = cls_spark.get_classifier(spec)
    layer = compiled.model.model.layers[0]
    assert layer.mlp._compiled_call_impl is not None and layer._compiled_call_impl is None
    plain = cls_spark.get_classifier(cls_spark.prepare_model(spark, str(rigged_dir)))   # auto: none on CPU
    assert plain is not compiled and plain.model.model.layers[0].mlp._compiled_call_impl is None
    df = spark.createDataFrame(_pages(3), "doc_id string, url string, blocks array<string>")
    with pytest.raises(ValueError, match="compile must be one of"):
        cls_spark.classify_dataframe(df, model=str(rigged_dir), compile="max")
