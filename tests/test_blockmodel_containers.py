"""Container pooling of the block model (containers.py, model.container_levels, container_stats) and the
training options that came with it: token dropout, a moving average of the weights, distillation from
teachers of other seeds."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from pulpie_spark.classify.blockmodel.containers import container_groups
from pulpie_spark.classify.blockmodel.data import examples_to_frame, frame_to_examples
from pulpie_spark.classify.blockmodel.features import page_features
from pulpie_spark.classify.blockmodel.model import (BlockModelConfig, BlockSequenceModel, DefaultBlockClassifier,
                                                   _container_stats, _group_means, collate, collate_groups,
                                                   load_model)
from pulpie_spark.classify.blockmodel.training import (PageExample, TrainConfig, _WeightAverage, drop_tokens,
                                                      predict_examples, train_from_cache, train_model,
                                                      training_rows)

# An article whose first paragraph sits in the article's div and the rest in a wrapper
# (the paywall of es/ABC pages in fundus), next to a teaser list.
ARTICLE = "html > body > main > article.story > div.body"
BLOCKS = [
    '<h1 _item_id="1">Title</h1>',
    '<p _item_id="2">First paragraph of the story.</p>',
    '<p _item_id="3">Second paragraph, behind the wrapper.</p>',
    '<p _item_id="4">Third paragraph, behind the wrapper.</p>',
    '<li _item_id="5"><a>Teaser one</a></li>',
    '<li _item_id="6"><a>Teaser two</a></li>',
    'loose text',
]
PATHS = [
    "html > body > main > article.story > h1",
    f"{ARTICLE} > p",
    f"{ARTICLE} > div.paywall > p",
    f"{ARTICLE} > div.paywall > p",
    "html > body > aside.related > ul > li",
    "html > body > aside.related > ul > li",
    None,
]


def test_container_groups_name_each_ancestor_once_across_levels():
    g = container_groups(BLOCKS, PATHS, 3)
    assert g.shape == (7, 3) and g.dtype == np.int32
    # level 1 (the element holding the block): the two wrapped paragraphs share div.paywall
    assert g[2, 0] == g[3, 0] != g[1, 0]
    # div.body holds paragraph 2 directly (level 1) and paragraphs 3-4 one level up
    assert g[1, 0] == g[2, 1] == g[3, 1]
    # the article element: the title's parent, paragraph 2's grandparent, the others' level 3
    assert g[0, 0] == g[1, 1] == g[2, 2] == g[3, 2]
    assert g[4, 0] == g[5, 0] and g[4, 0] not in set(g[:4].ravel())
    # a block without a path is a group of its own at every level
    assert not set(g[6]) & set(g[:6].ravel()) and len(set(g[6])) == 3
    # ids from 0 in order of first appearance; deterministic
    assert g[0, 0] == 0 and np.array_equal(g, container_groups(BLOCKS, PATHS, 3))
    assert container_groups([], None, 2).shape == (0, 2)
    # no paths at all: every block alone
    alone = container_groups(BLOCKS, None, 1)
    assert len(set(alone[:, 0])) == len(BLOCKS)


def test_deep_paths_cut_at_different_depths_still_meet():
    """Paths keep the innermost 12 elements; an ancestor is keyed by its own last 8."""
    deep = [f"div.l{i}" for i in range(20)]
    path_a = " > ".join(deep[-11:] + ["p"])               # p directly in div.l19
    path_b = " > ".join(deep[-10:] + ["div.wrap", "p"])   # p in div.wrap in div.l19 (cut one higher)
    g = container_groups(["<p>a</p>", "<p>b</p>"], [path_a, path_b], 2)
    assert g[0, 0] == g[1, 1]


def test_collate_groups_renumbers_pages_and_isolates_padding():
    g1 = np.array([[5, 9], [5, 9], [7, 9]], dtype=np.int32)
    g2 = np.array([[3, 4]], dtype=np.int32)
    out = collate_groups([g1, g2], 4, 2)
    assert out.shape == (2, 4, 2) and out.dtype == torch.int64
    assert out[0, :3].tolist() == [[0, 1], [0, 1], [2, 1]]
    assert out[1, 0].tolist() == [0, 1]
    real = set(out[1, :1].reshape(-1).tolist())
    padded = out[1, 1:].reshape(-1).tolist()
    assert len(set(padded)) == len(padded) and not real & set(padded)
    assert max(out.reshape(-1).tolist()) < 4 * 2
    with pytest.raises(ValueError, match="container levels"):
        collate_groups([g1, None], 4, 2)


def test_group_means_average_each_ancestors_blocks():
    x = torch.tensor([[[1.0], [3.0], [5.0], [100.0]]])          # last position is padding
    mask = torch.tensor([[True, True, True, False]]).unsqueeze(-1)
    groups = collate_groups([np.array([[0, 2], [0, 2], [1, 2]], dtype=np.int32)], 4, 2)
    means = _group_means(x, groups, mask)
    assert means.shape == (1, 4, 2)
    assert means[0, :3, 0].tolist() == [2.0, 2.0, 5.0]
    assert means[0, :3, 1].tolist() == [3.0, 3.0, 3.0]            # padding is not averaged in


def test_container_stats_give_each_ancestors_text_share_and_block_count():
    chars = torch.tensor([100.0, 300.0, 600.0, 5000.0])          # last position is padding
    numeric = torch.zeros(1, 4, 3)
    numeric[0, :, 0] = torch.log1p(chars) / 8.0                   # feature column 0: log1p(chars) / 8
    mask = torch.tensor([[True, True, True, False]]).unsqueeze(-1)
    groups = collate_groups([np.array([[0, 2], [0, 2], [1, 2]], dtype=np.int32)], 4, 2)
    stats = _container_stats(numeric, groups, mask)
    assert stats.shape == (1, 4, 2, 2)
    share, count = stats[0, :3, :, 0], stats[0, :3, :, 1]
    assert torch.allclose(share[:, 0], torch.tensor([0.4, 0.4, 0.6]), atol=1e-5)    # 400 / 1000, 600 / 1000
    assert torch.allclose(share[:, 1], torch.ones(3), atol=1e-5)                     # the padding's text is not counted
    assert torch.allclose(count[:, 0], torch.log1p(torch.tensor([2.0, 2.0, 1.0])) / 8.0)
    assert torch.allclose(count[:, 1], torch.log1p(torch.tensor([3.0, 3.0, 3.0])) / 8.0)


def _examples(levels=2):
    rng = np.random.RandomState(0)
    groups = container_groups(BLOCKS, PATHS, levels)
    out = []
    for _ in range(6):
        ids, num = page_features(BLOCKS, PATHS, n_buckets=1024)
        out.append(PageExample(ids, num + rng.rand(*num.shape).astype(np.float32) * 0.01,
                               np.array([1, 1, 1, 1, 0, 0, 0]), np.array([1, 4, 5, 5, 2, 2, 2], dtype=np.int32),
                               groups=groups))
    return out


def test_a_container_model_trains_reproducibly_and_predicts_alone_as_in_a_batch(tmp_path):
    cfg = TrainConfig(epochs=2, batch_pages=2, seed=3, token_dropout=0.3,
                      model=BlockModelConfig(n_buckets=1024, hidden=16, embed_dim=8, container_levels=2))
    model_a, _ = train_model(_examples(), _examples()[:2], cfg, output_dir=tmp_path / "m")
    model_b, _ = train_model(_examples(), _examples()[:2], cfg)
    for (name, a), (_, b) in zip(model_a.state_dict().items(), model_b.state_dict().items()):
        assert torch.equal(a, b), name
    assert json.loads((tmp_path / "m" / "config.json").read_text())["container_levels"] == 2
    classifier = DefaultBlockClassifier(load_model(tmp_path / "m"))
    feats = classifier.features([BLOCKS, BLOCKS[:3]], [PATHS, PATHS[:3]])
    assert len(feats[0]) == 3 and np.array_equal(feats[0][2], container_groups(BLOCKS, PATHS, 2))
    batched = classifier.predict_proba([BLOCKS, BLOCKS[:3]], [PATHS, PATHS[:3]])
    alone = classifier.predict_proba([BLOCKS[:3]], [PATHS[:3]])[0]
    assert np.allclose(alone, batched[1], atol=1e-6)
    # the pooling is used: the same tokens and statistics with every block alone differ
    ids, num, groups = classifier.features([BLOCKS], [PATHS])[0]
    assert np.allclose(classifier.predict_proba_features([(ids, num, groups)])[0], batched[0], atol=1e-6)
    alone_groups = np.arange(2 * len(BLOCKS), dtype=np.int32).reshape(len(BLOCKS), 2)
    assert not np.allclose(classifier.predict_proba_features([(ids, num, alone_groups)])[0], batched[0])


def test_a_model_with_container_stats_round_trips_and_scores_a_page_alone_as_in_a_batch(tmp_path):
    cfg = TrainConfig(epochs=1, batch_pages=2, seed=3,
                      model=BlockModelConfig(n_buckets=1024, hidden=16, embed_dim=8, container_levels=2,
                                             container_stats=True))
    train_model(_examples(), _examples()[:2], cfg, output_dir=tmp_path / "m")
    assert json.loads((tmp_path / "m" / "config.json").read_text())["container_stats"] is True
    model = load_model(tmp_path / "m")
    assert model.container_in.in_features == 2 * (16 + 2)
    classifier = DefaultBlockClassifier(model)
    batched = classifier.predict_proba([BLOCKS, BLOCKS[:3]], [PATHS, PATHS[:3]])
    alone = classifier.predict_proba([BLOCKS[:3]], [PATHS[:3]])[0]
    assert np.allclose(alone, batched[1], atol=1e-6)
    # the stats reach the output: zeroing their input weights (the last 2 levels x 2 columns) changes it
    with torch.no_grad():
        model.container_in.weight[:, -4:] = 0
        model.container_out.weight[:, -4:] = 0
    assert not np.allclose(classifier.predict_proba([BLOCKS], [PATHS])[0], batched[0], atol=1e-6)


def test_a_container_model_refuses_pages_without_groups():
    model = BlockSequenceModel(BlockModelConfig(n_buckets=1024, hidden=16, embed_dim=8, container_levels=2))
    ids, num, lengths, _ = collate([page_features(BLOCKS, PATHS, n_buckets=1024)])
    with pytest.raises(ValueError, match="container levels"):
        model(ids, num, lengths)


def test_groups_survive_the_features_cache_round_trip():
    examples = _examples(levels=3)
    back = frame_to_examples(examples_to_frame(examples))
    assert all(np.array_equal(a.groups, b.groups) for a, b in zip(examples, back))
    assert back[0].groups.shape == (len(BLOCKS), 3)
    # a cache written before groups existed loads with none
    frame = examples_to_frame(examples).drop(columns=["groups"])
    assert frame_to_examples(frame)[0].groups is None


def test_token_dropout_drops_only_real_tokens_and_rate_zero_is_identity():
    ids = torch.tensor([[[5, 6, 7, 0, 0]] * 50])
    assert drop_tokens(ids, 0.0, np.random.RandomState(0)) is ids
    dropped = drop_tokens(ids, 0.5, np.random.RandomState(0))
    assert ((dropped == 0) | (dropped == ids)).all()
    assert (dropped[..., 3:] == 0).all()
    share = float((dropped[..., :3] == 0).float().mean())
    assert 0.3 < share < 0.7
    assert torch.equal(dropped, drop_tokens(ids, 0.5, np.random.RandomState(0)))


def test_weight_average_moves_by_its_decay_and_copies_non_float_state():
    model = torch.nn.Linear(2, 1)
    with torch.no_grad():
        model.weight.fill_(1.0)
    average = _WeightAverage(model, 0.75)
    with torch.no_grad():
        model.weight.fill_(5.0)
    average.update(model)
    assert torch.allclose(average.state["weight"], torch.full((1, 2), 2.0))     # 0.75 * 1 + 0.25 * 5
    assert torch.equal(model.weight, torch.full((1, 2), 5.0))                   # the model itself is untouched
    with pytest.raises(ValueError, match="ema_decay"):
        _WeightAverage(model, 1.0)


def test_training_with_a_weight_average_is_reproducible_and_saves_the_average(tmp_path):
    base = dict(epochs=2, batch_pages=2, seed=3, model=BlockModelConfig(n_buckets=1024, hidden=16, embed_dim=8))
    plain, _ = train_model(_examples(), _examples()[:2], TrainConfig(**base))
    first, report = train_model(_examples(), _examples()[:2], TrainConfig(ema_decay=0.9, **base),
                                output_dir=tmp_path / "m")
    again, _ = train_model(_examples(), _examples()[:2], TrainConfig(ema_decay=0.9, **base))
    assert report["config"]["ema_decay"] == 0.9
    for (name, a), (_, b) in zip(first.state_dict().items(), again.state_dict().items()):
        assert torch.equal(a, b), name
    assert any(not torch.equal(a, b) for a, b in zip(first.state_dict().values(), plain.state_dict().values()))
    loaded = load_model(tmp_path / "m")
    for (name, a), (_, b) in zip(first.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(a, b), name


def _cache_frame():
    """A features cache of two sources (10 train pages, 2 dev pages) with pages that differ."""
    examples, meta = [], []
    rng = np.random.RandomState(1)
    for i, example in enumerate(_examples() + _examples()):
        example.numeric = example.numeric + rng.rand(*example.numeric.shape).astype(np.float32) * 0.1
        examples.append(example)
        meta.append({"source": "a" if i % 2 else "b", "page_id": f"p{i:02d}", "split": "dev" if i < 2 else "train",
                     "kept": True, "gold_recall": 1.0, "error": None})
    return examples_to_frame(examples, pd.DataFrame(meta))


def test_distilling_from_teachers_of_other_seeds_matches_the_steps_done_by_hand(tmp_path):
    base = dict(epochs=1, batch_pages=2, seed=3, max_pages_per_source=3,
                model=BlockModelConfig(n_buckets=1024, hidden=16, embed_dim=8))
    frame = _cache_frame()
    student, report, train_rows, dev_rows = train_from_cache(frame, TrainConfig(teachers=2, **base),
                                                             output_dir=tmp_path / "m")
    assert [t["seed"] for t in report["teachers"]] == [4, 5] and report["distill"] is True
    saved = json.loads((tmp_path / "m" / "config.json").read_text())["training"]
    assert saved["config"]["teachers"] == 2 and [t["seed"] for t in saved["teachers"]] == [4, 5]
    # by hand: each teacher on its own seed's page sample, the student on seed 3's pages with their mean
    dev = frame_to_examples(dev_rows)
    train = frame_to_examples(train_rows)
    probs = []
    for seed in (4, 5):
        rows, _ = training_rows(frame, 3, seed)
        teacher, _ = train_model(frame_to_examples(rows), dev, TrainConfig(**{**base, "seed": seed}))
        probs.append(predict_examples(teacher, train))
    assert {tuple(training_rows(frame, 3, s)[0].page_id) for s in (3, 4, 5)} != {tuple(train_rows.page_id)}
    for i, example in enumerate(train):
        example.teacher = (probs[0][i] + probs[1][i]) / 2
    by_hand, _ = train_model(train, dev, TrainConfig(**base), distill=True)
    for (name, a), (_, b) in zip(student.state_dict().items(), by_hand.state_dict().items()):
        assert torch.allclose(a, b, atol=1e-6), name
    plain, plain_report, _, _ = train_from_cache(frame, TrainConfig(**base))
    assert "teachers" not in plain_report and plain_report["distill"] is False
    assert any(not torch.equal(a, b) for a, b in zip(student.state_dict().values(), plain.state_dict().values()))
    with pytest.raises(ValueError, match="teacher"):
        train_from_cache(frame, TrainConfig(teachers=1, **base), distill=True)


def test_resampled_epochs_train_each_epoch_on_its_own_seeded_sample(tmp_path):
    base = dict(batch_pages=2, seed=5, max_pages_per_source=3,
                model=BlockModelConfig(n_buckets=1024, hidden=16, embed_dim=8))
    frame = _cache_frame()
    model, report, train_rows, dev_rows = train_from_cache(frame, TrainConfig(epochs=2, resample_epochs=True, **base),
                                                           output_dir=tmp_path / "m")
    # by hand: epoch 0 on seed 5's sample (the rows returned), epoch 1 on seed 6's
    second, _ = training_rows(frame, 3, 6)
    assert set(second.page_id) != set(train_rows.page_id)
    by_hand, _ = train_model(frame_to_examples(train_rows), frame_to_examples(dev_rows),
                             TrainConfig(epochs=2, resample_epochs=True, **base),
                             epoch_train=lambda epoch: frame_to_examples(training_rows(frame, 3, 5 + epoch)[0]))
    for (name, a), (_, b) in zip(model.state_dict().items(), by_hand.state_dict().items()):
        assert torch.equal(a, b), name
    assert report["train_pages_seen"] == len(set(train_rows.page_id) | set(second.page_id)) > report["train_pages"] == 6
    saved = json.loads((tmp_path / "m" / "config.json").read_text())["training"]
    assert saved["config"]["resample_epochs"] is True and saved["train_pages_seen"] == report["train_pages_seen"]
    plain, plain_report, _, _ = train_from_cache(frame, TrainConfig(epochs=2, **base))
    assert plain_report["train_pages_seen"] == plain_report["train_pages"] == 6
    # without dev pages the last epoch is kept: the second sample changes the model
    no_dev = frame.assign(split="train")
    assert set(training_rows(no_dev, 3, 5)[0].page_id) != set(training_rows(no_dev, 3, 6)[0].page_id)
    resampled, _, _, _ = train_from_cache(no_dev, TrainConfig(epochs=2, resample_epochs=True, **base))
    plain, _, _, _ = train_from_cache(no_dev, TrainConfig(epochs=2, **base))
    assert any(not torch.equal(a, b) for a, b in zip(resampled.state_dict().values(), plain.state_dict().values()))
    # one epoch: only epoch 0's sample, the plain recipe's model
    one, _, _, _ = train_from_cache(frame, TrainConfig(epochs=1, resample_epochs=True, **base))
    one_plain, _, _, _ = train_from_cache(frame, TrainConfig(epochs=1, **base))
    for (name, a), (_, b) in zip(one.state_dict().items(), one_plain.state_dict().items()):
        assert torch.equal(a, b), name
    with pytest.raises(ValueError, match="max_pages_per_source"):
        train_from_cache(frame, TrainConfig(epochs=2, resample_epochs=True, **{**base, "max_pages_per_source": None}))
    with pytest.raises(ValueError, match="resample_epochs"):
        train_from_cache(frame, TrainConfig(epochs=2, resample_epochs=True, teachers=1, **base))
