"""The embedded default block model: features, training, distillation loss, shipping."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from pulpie_spark.classify.blockmodel import DEFAULT_MODEL_DIR, load_default
from pulpie_spark.classify.blockmodel.features import (FEATURE_VERSION, MAX_TOKENS, N_NUMERIC, NUMERIC_NAMES,
                                                      block_texts, numeric_names, page_features)
from pulpie_spark.classify.blockmodel.model import BlockModelConfig, DefaultBlockClassifier, load_model
from pulpie_spark.classify.blockmodel.training import PageExample, TrainConfig, _loss, train_model

BLOCKS = [
    '<ul class="menu" _item_id="1"><li><a>Home</a></li><span>...</span><li><a>About</a></li></ul>',
    '<h1 _item_id="2">Growing tomatoes</h1>',
    '<p _item_id="3">Tomatoes need <b>full sun</b> and well drained soil. Water twice a week.</p>',
    '<td _item_id="4">cell text 42</td>',
    '<footer id="site-footer" _item_id="5">(c) 2025 <a>Privacy</a></footer>',
]
PATHS = ["html > body > nav.top > ul.menu", "html > body > main#content > article.post > h1",
         "html > body > main#content > article.post > p", "html > body > table > tr > td",
         "html > body > footer#site-footer"]


def test_page_features_shapes_and_determinism():
    ids, num = page_features(BLOCKS, PATHS)
    assert ids.shape == (5, MAX_TOKENS) and ids.dtype == np.int32
    assert num.shape == (5, N_NUMERIC) == (5, len(numeric_names(FEATURE_VERSION))) and num.dtype == np.float32
    assert numeric_names(FEATURE_VERSION)[:len(NUMERIC_NAMES)] == NUMERIC_NAMES   # landmarks come after
    ids2, num2 = page_features(BLOCKS, PATHS)
    assert np.array_equal(ids, ids2) and np.array_equal(num, num2)
    col = {name: i for i, name in enumerate(numeric_names(FEATURE_VERSION))}
    # nav: "Home ... About": 9 of its 14 characters are link text (the "..." is not)
    assert num[0, col["link_char_share"]] == pytest.approx(9 / 14)
    assert num[2, col["link_char_share"]] == 0.0
    assert num[1, col["is_heading"]] == 1.0 and num[2, col["is_heading"]] == 0.0
    assert num[3, col["in_table"]] == 1.0
    assert num[0, col["rel_position"]] == 0.0 and num[4, col["rel_position"]] == 1.0
    # landmarks: article.post is the body container (class "post": the strongest rule),
    # the menu and the footer are boilerplate
    assert num[1:3, col["in_body"]].tolist() == [1.0, 1.0] and num[3, col["in_body"]] == 0.0
    assert num[:, col["page_body"]].tolist() == [1.0] * 5
    assert num[:, col["boiler"]].tolist() == [1.0, 0.0, 0.0, 0.0, 1.0]
    # paths change the hashed tokens; no paths still works
    ids_nopath, _ = page_features(BLOCKS)
    assert not np.array_equal(ids, ids_nopath)
    assert (ids > 0).sum(axis=1).min() > 0
    empty_ids, empty_num = page_features([])
    assert empty_ids.shape == (0, MAX_TOKENS) and empty_num.shape == (0, N_NUMERIC)


def test_block_texts_one_parse_survives_table_fragments():
    texts = block_texts(BLOCKS)
    assert texts[2] == "Tomatoes need full sun and well drained soil. Water twice a week."
    assert texts[3] == "cell text 42"
    assert block_texts(["<p>unclosed <b>bold", "<div>next</div>"]) == ["unclosed bold", "next"]


def _examples(n_buckets=1024):
    rng = np.random.RandomState(0)
    out = []
    for _ in range(6):
        ids, num = page_features(BLOCKS, PATHS, n_buckets=n_buckets)
        labels = np.array([0, 1, 1, 0, 0])
        out.append(PageExample(ids, num + rng.rand(*num.shape).astype(np.float32) * 0.01, labels,
                               np.array([2, 2, 11, 3, 3], dtype=np.int32)))
    return out


def test_training_is_reproducible_and_roundtrips_through_safetensors(tmp_path):
    cfg = TrainConfig(epochs=2, batch_pages=2, seed=3, model=BlockModelConfig(n_buckets=1024, hidden=16,
                                                                             embed_dim=8))
    model_a, report = train_model(_examples(), _examples()[:2], cfg, output_dir=tmp_path / "m")
    model_b, _ = train_model(_examples(), _examples()[:2], cfg)
    for (name, a), (_, b) in zip(model_a.state_dict().items(), model_b.state_dict().items()):
        assert torch.equal(a, b), name
    assert report["best_epoch"] in (1, 2) and len(report["history"]) == 2
    assert (tmp_path / "m" / "model.safetensors").is_file()
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert config["n_buckets"] == 1024 and "training" in config
    loaded = DefaultBlockClassifier(load_model(tmp_path / "m"))
    direct = DefaultBlockClassifier(model_a)
    p1 = loaded.predict_proba([BLOCKS, BLOCKS[:2]], [PATHS, PATHS[:2]])
    p2 = direct.predict_proba([BLOCKS, BLOCKS[:2]], [PATHS, PATHS[:2]])
    assert [len(p) for p in p1] == [5, 2]
    assert all(p.dtype == np.float32 for p in p1)
    assert all(np.array_equal(a, b) for a, b in zip(p1, p2))
    # batched prediction equals one page at a time (padding must not leak)
    single = loaded.predict_proba([BLOCKS[:2]], [PATHS[:2]])[0]
    assert np.allclose(single, p1[1], atol=1e-6)


CJK_BLOCKS = ['<h1 _item_id="1">天気予報</h1>', '<p _item_id="2">今日は良い天気です。明日も晴れるでしょう！</p>']


def test_a_model_runs_with_the_feature_version_it_was_trained_on(tmp_path):
    """A v1 model (the first shipped ones) keeps v1 features, a v2 model gets v2; a config
    with a version this code cannot compute, or none, is refused, never run on other features."""
    assert BlockModelConfig().feature_version == FEATURE_VERSION == 3
    for version in (1, 2, 3):
        examples = []
        for _ in range(4):
            ids, num = page_features(BLOCKS, PATHS, n_buckets=1024, version=version)
            examples.append(PageExample(ids, num, np.array([0, 1, 1, 0, 0]), np.array([2, 2, 11, 3, 3], np.int32)))
        cfg = TrainConfig(epochs=1, batch_pages=2, model=BlockModelConfig(n_buckets=1024, hidden=8, embed_dim=8,
                                                                           feature_version=version))
        train_model(examples, examples[:1], cfg, output_dir=tmp_path / f"v{version}")
        assert json.loads((tmp_path / f"v{version}" / "config.json").read_text())["feature_version"] == version
        classifier = DefaultBlockClassifier(load_model(tmp_path / f"v{version}"))
        got = classifier.features([CJK_BLOCKS])[0]
        want = page_features(CJK_BLOCKS, n_buckets=1024, version=version)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    v1 = page_features(CJK_BLOCKS, n_buckets=1024, version=1)
    v2 = page_features(CJK_BLOCKS, n_buckets=1024, version=2)
    assert not np.array_equal(v1[1], v2[1])     # the two versions differ on CJK text
    # v3 reads v2's statistics and five landmark columns after them (here from the paths)
    assert json.loads((tmp_path / "v2" / "config.json").read_text())["numeric_dim"] == len(NUMERIC_NAMES)
    assert json.loads((tmp_path / "v3" / "config.json").read_text())["numeric_dim"] == len(NUMERIC_NAMES) + 5
    got = DefaultBlockClassifier(load_model(tmp_path / "v3")).features([BLOCKS], [PATHS])[0]
    v2_paths = page_features(BLOCKS, PATHS, n_buckets=1024, version=2)
    assert np.array_equal(got[1][:, :len(NUMERIC_NAMES)], v2_paths[1]) and got[1][:, len(NUMERIC_NAMES):].any()
    config = json.loads((tmp_path / "v1" / "config.json").read_text())
    (tmp_path / "v4").mkdir()
    (tmp_path / "v4" / "model.safetensors").write_bytes((tmp_path / "v1" / "model.safetensors").read_bytes())
    (tmp_path / "v4" / "config.json").write_text(json.dumps({**config, "feature_version": 4}))
    with pytest.raises(ValueError, match="v4"):
        load_model(tmp_path / "v4")
    (tmp_path / "v4" / "config.json").write_text(json.dumps({k: v for k, v in config.items()
                                                             if k != "feature_version"}))
    with pytest.raises(ValueError, match="feature version"):
        load_model(tmp_path / "v4")


def test_a_features_cache_of_another_version_is_refused(tmp_path):
    from pulpie_spark.classify.blockmodel.data import build_examples, cache_feature_version, check_cache_version
    from pulpie_spark.classify.blockmodel.training import train_entry

    html = "<html><body><nav><a href=/>Home</a></nav><article><p>" + "Tomatoes need sun. " * 20 + \
        "</p></article></body></html>"
    pages = pd.DataFrame({"source": ["s"] * 3, "page_id": ["1", "2", "3"], "split": ["train", "train", "dev"],
                          "html": [html] * 3, "gold_text": ["Tomatoes need sun. " * 20] * 3})
    v1 = build_examples(pages, n_buckets=1024, feature_version=1)
    v2 = build_examples(pages, n_buckets=1024, feature_version=2)
    assert cache_feature_version(v1) == 1 and cache_feature_version(v2) == 2
    assert cache_feature_version(build_examples(pages, n_buckets=1024)) == FEATURE_VERSION   # the default
    assert cache_feature_version(v2.drop(columns=["feature_version"])) == 1   # caches from before the column
    check_cache_version(v2, 2)
    with pytest.raises(ValueError, match="v1"):
        check_cache_version(v1, 2)
    with pytest.raises(ValueError, match="mixes"):
        cache_feature_version(pd.concat([v1, v2]))
    v1.to_parquet(tmp_path / "cache.parquet")
    config = json.dumps({"epochs": 1, "model": {"n_buckets": 1024, "hidden": 8, "embed_dim": 8}})
    with pytest.raises(ValueError, match="v1"):
        train_entry(str(tmp_path / "cache.parquet"), str(tmp_path / "m"), config, False)
    report = train_entry(str(tmp_path / "cache.parquet"), str(tmp_path / "m"),
                         json.dumps({"epochs": 1, "model": {"n_buckets": 1024, "hidden": 8, "embed_dim": 8,
                                                            "feature_version": 1}}), False)
    assert report["train_pages"] == 2
    assert json.loads((tmp_path / "m" / "config.json").read_text())["feature_version"] == 1


def test_distillation_loss_reduces_to_hard_ce_when_student_matches_teacher():
    logits = torch.tensor([[[0.3, 1.2], [2.0, -1.0], [0.0, 0.0]]])
    labels = torch.tensor([[1, 0, -100]])
    teacher = torch.softmax(logits, dim=-1)[..., 1]
    cfg = TrainConfig()
    weight = torch.tensor([1.0, 1.0])
    hard = _loss(logits, labels, None, weight, cfg)
    mixed = _loss(logits, labels, teacher, weight, cfg)
    assert mixed.item() == pytest.approx(0.3 * hard.item(), abs=1e-5)
    # a teacher that disagrees adds a positive KL term
    other = _loss(logits, labels, 1 - teacher, weight, cfg)
    assert other.item() > mixed.item()


def test_distillation_training_requires_teacher_probs():
    with pytest.raises(ValueError, match="teacher"):
        train_model(_examples(), [], TrainConfig(epochs=1), distill=True)
    examples = _examples(512)
    for e in examples:
        e.teacher = np.array([0.1, 0.9, 0.8, 0.2, 0.1], dtype=np.float32)
    _, report = train_model(examples, examples[:1], TrainConfig(epochs=1, model=BlockModelConfig(
        n_buckets=512, hidden=8, embed_dim=8)), distill=True)
    assert report["distill"] and report["history"][0]["loss"] > 0


def test_shipped_default_model_loads_and_predicts_deterministically(data_dir):
    from pulpie_spark.segment.simplify import simplify

    files = {p.name for p in DEFAULT_MODEL_DIR.iterdir()}
    assert {"model.safetensors", "config.json"} <= files
    shipped = [p for p in DEFAULT_MODEL_DIR.rglob("*") if p.is_file()]   # an ensemble's members included
    assert not any(p.name.endswith((".bin", ".pt", ".pkl")) for p in shipped)
    assert sum(p.stat().st_size for p in shipped) <= 25 * 1024 * 1024
    classifier = load_default()
    assert classifier.model_id == "pulpie-spark/default-v6" and len(classifier.members) == 2
    assert classifier.model.config.feature_version == 3 and classifier.model.config.container_levels == 3
    page = pd.read_parquet(data_dir / "model_pages.parquet").iloc[0]
    simplified = simplify(page["html"])
    probs_a = classifier.predict_proba([simplified.blocks], [simplified.paths])[0]
    probs_b = load_default().predict_proba([simplified.blocks], [simplified.paths])[0]
    assert len(probs_a) == len(simplified.blocks) > 0
    assert np.array_equal(probs_a, probs_b)
    labels = classifier.predict([simplified.blocks], [simplified.paths])[0]
    assert labels == [int(p >= 0.5) for p in probs_a]
    assert 0 < sum(labels) < len(labels)     # a forum thread page: some content, some chrome


def test_default_fast_is_the_shipped_first_member_alone_with_its_own_gate(data_dir):
    from pulpie_spark.classify.blockmodel.gate import FIRST_MEMBER_GATE_FILE, GATE_FILE, load_page_gate
    from pulpie_spark.classify.registry import load_classifier
    from pulpie_spark.segment.simplify import simplify

    fast, full = load_classifier("default-fast"), load_classifier("default")
    assert fast.members == [] and fast.model_id == "pulpie-spark/default-v6-fast"
    assert load_classifier("Default-Fast").model_id == fast.model_id   # the names are case-blind
    # both gates ship, and they differ: each was fitted on its own model's LOSO output
    assert fast.page_gate == load_page_gate(DEFAULT_MODEL_DIR, FIRST_MEMBER_GATE_FILE) is not None
    assert full.page_gate == load_page_gate(DEFAULT_MODEL_DIR, GATE_FILE) != fast.page_gate
    page = pd.read_parquet(data_dir / "model_pages.parquet").iloc[0]
    simplified = simplify(page["html"])
    feats = full.features([simplified.blocks], [simplified.paths])
    assert np.array_equal(fast.predict_proba_features(feats)[0], full._model_probs(full.model, feats)[0])


@pytest.mark.parametrize("t", [1, 3, 17, 250])
def test_conv_over_blocks_is_the_dilated_conv1d(t):
    from pulpie_spark.classify.blockmodel.model import _conv_over_blocks

    torch.manual_seed(t)
    for dilation in (1, 2, 4, 8):
        conv = torch.nn.Conv1d(12, 12, 5, dilation=dilation, padding=dilation * 2)
        h = torch.randn(2, t, 12)
        expected = conv(h.transpose(1, 2)).transpose(1, 2)
        got = _conv_over_blocks(h, conv)
        assert got.shape == expected.shape == (2, t, 12)
        assert torch.allclose(got, expected, atol=1e-5), (t, dilation)
    # gradients flow to the conv weights (training uses the same forward)
    _conv_over_blocks(h, conv).sum().backward()
    assert conv.weight.grad is not None and conv.weight.grad.abs().sum() > 0


def test_conv_over_blocks_falls_back_for_convs_that_change_the_length():
    from pulpie_spark.classify.blockmodel.model import _conv_over_blocks

    conv = torch.nn.Conv1d(6, 6, 4, dilation=1, padding=1)     # even kernel: length t - 1
    h = torch.randn(1, 9, 6)
    out = _conv_over_blocks(h, conv)
    assert out.shape == (1, 8, 6)
    assert torch.equal(out, conv(h.transpose(1, 2)).transpose(1, 2))


def test_conv_kernel_matrix_is_reused_only_while_the_weights_are_unchanged():
    from pulpie_spark.classify.blockmodel.model import _conv_over_blocks

    torch.manual_seed(3)
    conv = torch.nn.Conv1d(8, 8, 5, dilation=2, padding=4)
    h = torch.randn(1, 11, 8)
    with torch.enable_grad():
        fresh = _conv_over_blocks(h, conv).detach()       # no cache with gradients on
    with torch.inference_mode():
        first = _conv_over_blocks(h, conv)
        assert torch.equal(first, fresh)                   # bit for bit: the same product
        assert torch.equal(_conv_over_blocks(h, conv), first)
    with torch.no_grad():
        conv.weight.mul_(2.0)                              # in place, as an optimizer step
    with torch.inference_mode():
        doubled = _conv_over_blocks(h, conv)
    with torch.enable_grad():
        assert torch.equal(doubled, _conv_over_blocks(h, conv).detach())
    assert not torch.equal(doubled, first)
    conv.load_state_dict({"weight": torch.zeros_like(conv.weight), "bias": torch.zeros_like(conv.bias)})
    with torch.inference_mode():
        assert torch.count_nonzero(_conv_over_blocks(h, conv)) == 0


def test_pages_are_classified_in_groups_under_a_padded_block_budget(monkeypatch):
    """Pages of mixed sizes: each model call stays within ``batch_blocks`` padded blocks (a
    longer page alone), every page comes back in the order given, and each scores as it
    does alone (padding must not leak into a real block)."""
    classifier = load_default()
    classifier.batch_blocks = 40
    pages = [BLOCKS[:1], BLOCKS * 8, BLOCKS[:3], BLOCKS * 12, BLOCKS[1:4] * 2, BLOCKS * 8, BLOCKS[2:3]]
    paths = [PATHS[:1], PATHS * 8, PATHS[:3], PATHS * 12, PATHS[1:4] * 2, PATHS * 8, PATHS[2:3]]
    calls = []
    forward = classifier.model.forward

    def counting_forward(token_ids, numeric, lengths, groups=None):
        calls.append(tuple(token_ids.shape[:2]))
        return forward(token_ids, numeric, lengths, groups)

    monkeypatch.setattr(classifier.model, "forward", counting_forward)
    batched = classifier.predict_proba(pages, paths)
    assert [len(p) for p in batched] == [len(p) for p in pages]
    assert sum(rows for rows, _ in calls) == len(pages)
    assert all(rows * t <= 40 or rows == 1 for rows, t in calls)
    assert (1, 60) in calls and len(calls) < len(pages)     # the 60-block page alone; small ones share
    calls.clear()
    for page, page_paths, probs in zip(pages, paths, batched):
        alone = classifier.predict_proba([page], [page_paths])[0]
        assert np.allclose(alone, probs, atol=1e-6)
    assert len(calls) == len(pages)
