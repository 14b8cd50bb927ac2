"""Chunk packing per block-format.md "Model input"."""

from __future__ import annotations

import pytest

from pulpie_spark.classify.chunker import pack_chunks
from pulpie_spark.classify.inference import plan_batches, scatter_page_probs

SEP, BOS, EOS = 99, 1, 2


def test_single_chunk_layout():
    chunks = pack_chunks([[10, 11], [12], [13, 14, 15]], sep_id=SEP, bos_id=BOS, eos_id=EOS)
    assert len(chunks) == 1
    assert chunks[0].input_ids == [BOS, 10, 11, SEP, 12, SEP, 13, 14, 15, SEP, EOS]
    assert chunks[0].block_indices == [0, 1, 2]
    assert [chunks[0].input_ids[p] for p in chunks[0].sep_positions] == [SEP] * 3
    assert chunks[0].sep_positions == [3, 5, 9]


def test_greedy_packing_respects_max_tokens():
    blocks = [[10] * 3, [11] * 3, [12] * 3, [13] * 3]   # each costs 4 with its sep
    chunks = pack_chunks(blocks, sep_id=SEP, bos_id=BOS, eos_id=EOS, max_tokens=10)
    assert [c.block_indices for c in chunks] == [[0, 1], [2, 3]]
    assert all(len(c.input_ids) <= 10 for c in chunks)
    assert chunks[1].input_ids == [BOS, 12, 12, 12, SEP, 13, 13, 13, SEP, EOS]


def test_exact_fit_stays_in_one_chunk():
    chunks = pack_chunks([[10] * 3, [11] * 3], sep_id=SEP, bos_id=BOS, eos_id=EOS, max_tokens=10)
    assert len(chunks) == 1 and len(chunks[0].input_ids) == 10


def test_overlong_block_is_cut_and_packed_alone():
    blocks = [[10], list(range(100, 130)), [11]]
    chunks = pack_chunks(blocks, sep_id=SEP, bos_id=BOS, eos_id=EOS, max_tokens=8)
    assert [c.block_indices for c in chunks] == [[0], [1], [2]]
    assert chunks[1].input_ids == [BOS, 100, 101, 102, 103, 104, SEP, EOS]
    assert chunks[1].sep_positions == [6]


def test_without_bos_eos_and_empty_blocks():
    chunks = pack_chunks([[], [5]], sep_id=SEP, max_tokens=4)
    assert [c.input_ids for c in chunks] == [[SEP, 5, SEP]]
    assert chunks[0].sep_positions == [0, 2]
    assert pack_chunks([], sep_id=SEP) == []


def test_every_block_gets_exactly_one_sep():
    blocks = [[7] * (i % 13) for i in range(200)]
    chunks = pack_chunks(blocks, sep_id=SEP, bos_id=BOS, eos_id=EOS, max_tokens=32)
    seen = [i for c in chunks for i in c.block_indices]
    assert seen == list(range(200))
    for c in chunks:
        assert len(c.input_ids) <= 32
        assert [i for i, t in enumerate(c.input_ids) if t == SEP] == c.sep_positions


def test_too_small_budget_is_an_error():
    with pytest.raises(ValueError):
        pack_chunks([[1]], sep_id=SEP, bos_id=BOS, eos_id=EOS, max_tokens=3)


def test_plan_batches_counts_padding():
    lengths = [5, 100, 7, 60, 60, 3]
    batches = plan_batches(lengths, 128)
    assert batches == [[1], [3, 4], [2, 0, 5]]
    for batch in batches:
        assert max(lengths[i] for i in batch) * len(batch) <= 128 or len(batch) == 1
    assert sorted(i for b in batches for i in b) == list(range(6))
    assert plan_batches([300], 128) == [[0]]
    assert plan_batches([5, 5, 5], 24, pad_multiple=8) == [[0, 1, 2]]
    assert plan_batches([5, 5, 5], 23, pad_multiple=8) == [[0, 1], [2]]


def test_scatter_leaves_unpredicted_blocks_other():
    import numpy as np

    chunks = pack_chunks([[1], [2], [3]], sep_id=SEP, max_tokens=4)
    assert [c.block_indices for c in chunks] == [[0, 1], [2]]
    probs = [np.array([0.9, 0.2], dtype=np.float32)]
    pages = scatter_page_probs([3, 0], [0], chunks[:1], probs)   # chunk 2 got no prediction
    assert pages[0].tolist() == pytest.approx([0.9, 0.2, 0.0])
    assert pages[0].dtype == np.float32 and len(pages[1]) == 0
