"""Ensembles of the block model (blockmodel/ensemble.py): members of seeds seed, seed+1, ..,
saved in one model directory, averaged on the pages where the first member is unsure."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from test_blockmodel_containers import _cache_frame

from pulpie_spark.classify.blockmodel.data import frame_to_examples
from pulpie_spark.classify.blockmodel.ensemble import ENSEMBLE_FILE, Cascade, unsure_char_share
from pulpie_spark.classify.blockmodel.gate import chars_from_features
from pulpie_spark.classify.blockmodel.model import (BlockModelConfig, DefaultBlockClassifier, load_block_classifier,
                                                   load_model)
from pulpie_spark.classify.blockmodel.training import TrainConfig, train_from_cache
from pulpie_spark.classify.registry import load_classifier

BASE = dict(epochs=1, batch_pages=2, seed=3, max_pages_per_source=3,
            model=BlockModelConfig(n_buckets=1024, hidden=16, embed_dim=8, container_levels=2))


def _features(frame):
    """The classifier's per-page features (ids, numeric, container groups) of a cache's pages."""
    return [(e.ids, e.numeric, e.groups) for e in frame_to_examples(frame.sort_values("page_id"))]


def _same_weights(a, b) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def test_unsure_char_share_and_the_cascade_rule():
    probs = np.array([0.1, 0.5, 0.69, 0.7, 0.95])
    chars = np.array([10, 20, 30, 15, 25])
    assert unsure_char_share(probs, chars, 0.3, 0.7) == pytest.approx(50 / 100)   # 0.7 itself is sure
    assert Cascade(min_share=0.5).wants_members(probs, chars)
    assert not Cascade(min_share=0.51).wants_members(probs, chars)
    assert Cascade(min_share=0.0).wants_members(np.array([0.99]), np.array([5]))   # 0: every page
    assert not Cascade(min_share=0.0).wants_members(np.zeros(0), np.zeros(0))     # no blocks: nothing to average
    for bad in (dict(low=0.7, high=0.3), dict(min_share=1.5), dict(high=1.2)):
        with pytest.raises(ValueError):
            Cascade(**bad)


def test_an_ensemble_holds_each_seeds_model_and_averages_where_the_first_is_unsure(tmp_path):
    frame = _cache_frame()
    out = tmp_path / "ens"
    first, report, train_rows, _ = train_from_cache(frame, TrainConfig(members=3, cascade_share=0.0, **BASE),
                                                    output_dir=out)
    # member k is the model a run of seed 3 + k trains (its own page sample, weights, order)
    singles = [train_from_cache(frame, TrainConfig(**{**BASE, "seed": seed}))[0] for seed in (3, 4, 5)]
    assert _same_weights(first, singles[0]) and _same_weights(load_model(out), singles[0])
    for k in (1, 2):
        assert _same_weights(load_model(out / f"member-{k}"), singles[k])
    assert [m["seed"] for m in report["members"]] == [4, 5] and report["config"]["members"] == 3
    saved = json.loads((out / "config.json").read_text())["training"]
    assert saved["config"]["members"] == 3 and [m["seed"] for m in saved["members"]] == [4, 5]
    assert report["train_pages_seen"] >= len(train_rows)
    assert json.loads((out / ENSEMBLE_FILE).read_text()) == {
        "members": ["member-1", "member-2"], "cascade": {"low": 0.3, "high": 0.7, "min_share": 0.0}}

    feats = _features(frame)
    alone = [DefaultBlockClassifier(m).predict_proba_features(feats) for m in singles]
    classifier = load_classifier(str(out))
    assert len(classifier.members) == 2
    # min_share 0: every page gets the mean of the three
    for i, probs in enumerate(classifier.predict_proba_features(feats)):
        assert probs.dtype == np.float32
        assert np.allclose(probs, np.mean([a[i] for a in alone], axis=0), atol=1e-6)
    # a cascade that picks some pages: those get the mean, the others the first model's own
    shares = [unsure_char_share(p, chars_from_features(f[1]), 0.0, float(np.median(np.concatenate(alone[0]))))
              for p, f in zip(alone[0], feats)]
    cascade = Cascade(low=0.0, high=float(np.median(np.concatenate(alone[0]))), min_share=float(np.median(shares)))
    picked = [cascade.wants_members(p, chars_from_features(f[1])) for p, f in zip(alone[0], feats)]
    assert 0 < sum(picked) < len(picked)
    cascaded = DefaultBlockClassifier(singles[0], members=singles[1:], cascade=cascade).predict_proba_features(feats)
    for i, probs in enumerate(cascaded):
        want = np.mean([a[i] for a in alone], axis=0) if picked[i] else alone[0][i]
        assert np.allclose(probs, want, atol=1e-6)
    assert all(np.array_equal(a, b) for a, b, p in zip(cascaded, alone[0], picked) if not p)
    # the same again: byte-identical
    again = DefaultBlockClassifier(singles[0], members=singles[1:], cascade=cascade).predict_proba_features(feats)
    assert all(np.array_equal(a, b) for a, b in zip(cascaded, again))


def test_a_model_saved_over_an_ensemble_loads_without_the_old_members(tmp_path):
    frame = _cache_frame()
    out = tmp_path / "m"
    train_from_cache(frame, TrainConfig(members=2, **BASE), output_dir=out)
    (out / "notes").mkdir()
    assert len(load_block_classifier(out).members) == 1
    single, _, _, _ = train_from_cache(frame, TrainConfig(**BASE), output_dir=out)
    assert not (out / ENSEMBLE_FILE).exists() and not (out / "member-1").exists() and (out / "notes").is_dir()
    classifier = load_block_classifier(out)
    assert classifier.members == [] and _same_weights(classifier.model, single)


def test_members_of_other_features_and_bad_recipes_are_refused(tmp_path):
    frame = _cache_frame()
    out = tmp_path / "m"
    train_from_cache(frame, TrainConfig(members=2, **BASE), output_dir=out)
    config_path = out / "member-1" / "config.json"
    config = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({**config, "feature_version": 2}))   # same weights, other features
    with pytest.raises(ValueError, match="feature_version"):
        load_block_classifier(out)
    config_path.write_text(json.dumps(config))
    (out / ENSEMBLE_FILE).write_text(json.dumps({"members": ["../elsewhere"]}))
    with pytest.raises(ValueError, match="sub-directory"):
        load_block_classifier(out)
    with pytest.raises(ValueError, match="members"):
        train_from_cache(frame, TrainConfig(members=0, **BASE))
    with pytest.raises(ValueError, match="teachers"):
        train_from_cache(frame, TrainConfig(members=2, teachers=1, **BASE))
    with pytest.raises(ValueError, match="min_share"):
        train_from_cache(frame, TrainConfig(members=2, cascade_share=2.0, **BASE))


def test_the_first_member_alone_loads_with_its_own_gate_and_a_name_that_says_so(tmp_path):
    from pulpie_spark.classify.blockmodel.gate import FIRST_MEMBER_GATE_FILE, GATE_FEATURES, PageGate, load_page_gate

    frame = _cache_frame()
    out = tmp_path / "m"
    train_from_cache(frame, TrainConfig(members=2, **BASE), output_dir=out)
    n = len(GATE_FEATURES)
    ensemble_gate = PageGate(mean=(0.0,) * n, scale=(1.0,) * n, weights=(0.1,) * n, bias=-1.0, threshold=0.3)
    first_gate = PageGate(mean=(0.0,) * n, scale=(1.0,) * n, weights=(0.2,) * n, bias=-2.0, threshold=0.3)
    ensemble_gate.save(out)
    full = load_block_classifier(out)
    # no gate of its own: the ensemble's was fitted on other probabilities, so none rather than that one
    alone = load_block_classifier(out, first_only=True)
    assert alone.members == [] and alone.page_gate is None and full.page_gate == ensemble_gate
    assert alone.model_id == full.model_id + "-fast" and _same_weights(alone.model, full.model)
    first_gate.save(out, FIRST_MEMBER_GATE_FILE)
    alone = load_block_classifier(out, first_only=True)
    assert alone.page_gate == first_gate and load_block_classifier(out).page_gate == ensemble_gate
    feats = _features(frame)
    assert all(np.array_equal(a, b) for a, b in zip(alone.predict_proba_features(feats),
                                                     DefaultBlockClassifier(load_model(out)).predict_proba_features(feats)))
    # a new model saved there drops the old model's gates with its members
    train_from_cache(frame, TrainConfig(**BASE), output_dir=out)
    assert load_page_gate(out) is None and load_page_gate(out, FIRST_MEMBER_GATE_FILE) is None
    single = load_block_classifier(out, first_only=True)   # a single model: first_only changes nothing
    assert single.members == [] and single.model_id == load_block_classifier(out).model_id
