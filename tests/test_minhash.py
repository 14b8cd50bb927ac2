"""MinHash signatures: agreement with datasketch and with the true Jaccard, LSH
parameters, planted near-duplicates (recall / false positives), determinism."""

from __future__ import annotations

import random

import numpy as np
import pytest

from helpers_data import edit_to_jaccard, random_doc

from pulpie_spark.curate import minhash
from pulpie_spark.curate.config import NearDedupConfig


def planted_pairs(levels, per_level, n_words=300, seed=0):
    rng = random.Random(seed)
    pairs = []
    for level in levels:
        for _ in range(per_level):
            base = random_doc(rng, n_words)
            pairs.append((" ".join(base), " ".join(edit_to_jaccard(base, level, rng))))
    return pairs


def true_jaccard(a: str, b: str) -> float:
    return minhash.jaccard(minhash.shingle_set(a), minhash.shingle_set(b))


def test_edit_construction_hits_target_jaccard():
    for a, b in planted_pairs([0.9, 0.5], 3):
        j = true_jaccard(a, b)
        assert 0.45 < j < 0.55 or 0.88 < j < 0.92


def test_estimates_agree_with_true_jaccard_and_datasketch():
    datasketch = pytest.importorskip("datasketch")
    pairs = planted_pairs([0.95, 0.8, 0.6, 0.4, 0.2], 8, n_words=200, seed=1)
    texts = [t for pair in pairs for t in pair]
    sigs = minhash.signatures(texts, num_perm=128)
    ours, theirs, truth = [], [], []
    for i, (a, b) in enumerate(pairs):
        ours.append(minhash.estimate_jaccard(sigs[2 * i], sigs[2 * i + 1]))
        m1, m2 = datasketch.MinHash(num_perm=128), datasketch.MinHash(num_perm=128)
        for m, text in ((m1, a), (m2, b)):
            w = minhash.words(text)
            m.update_batch([" ".join(w[j:j + 5]).encode() for j in range(len(w) - 4)])
        theirs.append(m1.jaccard(m2))
        truth.append(true_jaccard(a, b))
    ours, theirs, truth = map(np.array, (ours, theirs, truth))
    # 128 permutations: standard error <= 0.045; the mean error is far smaller
    assert np.abs(ours - truth).mean() < 0.04
    assert np.abs(ours - theirs).mean() < 0.06
    assert np.abs(ours - truth).max() < 0.15


def test_signatures_deterministic_batch_independent_and_empty():
    texts = ["alpha beta gamma delta epsilon zeta eta", "", None, "short text", "Alpha BETA gamma, delta epsilon zeta eta!"]
    full = minhash.signatures(texts)
    assert full.shape == (5, 112) and full.dtype == np.uint32
    one_by_one = np.vstack([minhash.signatures([t]) for t in texts])
    assert np.array_equal(full, one_by_one)
    assert np.array_equal(full, minhash.signatures(texts))
    assert (full[1] == 0xFFFFFFFF).all() and (full[2] == 0xFFFFFFFF).all()
    assert np.array_equal(full[0], full[4])  # lowercased words, punctuation ignored
    assert not np.array_equal(full[0], minhash.signatures(texts[:1], seed=2)[0])
    # fewer words than n: one shingle of all words
    assert len(minhash.shingle_hashes("short text")) == 1
    # a chunk boundary inside a long document gives the same signature
    long_doc = " ".join(random_doc(random.Random(3), 5000))
    assert np.array_equal(minhash.signatures([long_doc, "a b c d e f"])[0], minhash.signatures([long_doc])[0])


def test_lsh_params_match_datasketch():
    lsh = pytest.importorskip("datasketch.lsh")
    for threshold, num_perm in [(0.7, 112), (0.8, 128), (0.5, 64)]:
        assert minhash.optimal_bands_rows(threshold, num_perm) == lsh._optimal_param(threshold, num_perm, 0.5, 0.5)
    assert minhash.lsh_params(NearDedupConfig(bands=14, rows=8, threshold=0.7, num_perm=112)) == (14, 8)
    assert minhash.lsh_params(NearDedupConfig(bands=0, rows=0, threshold=0.7, num_perm=112)) == (12, 9)
    # FineWeb's 14 x 8: P(candidate | J = 0.8) = 1 - (1 - 0.8^8)^14 ~ 0.92 (anchors.md),
    # measured on the live banding of planted pairs at J = 0.8
    assert 1 - (1 - 0.8 ** 8) ** 14 == pytest.approx(0.924, abs=0.005)
    pairs = planted_pairs([0.8], 200, n_words=300, seed=11)
    bands = minhash.band_hashes(minhash.signatures([t for pair in pairs for t in pair]), 14, 8)
    rate = float(np.mean([(bands[2 * i] == bands[2 * i + 1]).any() for i in range(len(pairs))]))
    assert 0.86 <= rate <= 0.98


def test_planted_recall_and_false_positives_with_verification():
    """LSH banding + signature verification at threshold 0.7, done in numpy: recall on
    pairs at J >= 0.9 and false-positive rate on pairs at J < 0.5."""
    pairs = planted_pairs([0.95, 0.9, 0.45, 0.3], 40, n_words=250, seed=5)
    texts = [t for pair in pairs for t in pair]
    sigs = minhash.signatures(texts)
    bands = minhash.band_hashes(sigs, 14, 8)
    found = []
    for i, (a, b) in enumerate(pairs):
        candidate = bool((bands[2 * i] == bands[2 * i + 1]).any())
        verified = minhash.estimate_jaccard(sigs[2 * i], sigs[2 * i + 1]) >= 0.7
        found.append((true_jaccard(a, b), candidate and verified))
    high = [ok for j, ok in found if j >= 0.88]
    low = [ok for j, ok in found if j < 0.5]
    assert len(high) == 80 and len(low) == 80
    assert sum(high) / len(high) >= 0.95
    assert sum(low) / len(low) <= 0.05
