"""Batched token-classification inference over packed chunks.

Chunks from many pages are sorted by length (longest first, ties by arrival order,
so the plan is deterministic) and grouped into padded batches whose padded size
``batch_len * n_rows`` stays within a token budget. Logits are read at each
chunk's ``<|sep|>`` positions; P(main) is the softmax probability of the main class.
Models on packed attention get unpadded rows instead (:func:`plan_packed_batches`).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from pulpie_spark.classify.chunker import Chunk


def round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple if multiple > 1 else n


def plan_batches(lengths: Sequence[int], batch_tokens: int, *, pad_multiple: int = 1) -> list[list[int]]:
    """Group item indices into batches with ``padded_len * rows <= batch_tokens``.

    Items are taken longest first, so a batch's first item fixes its padded length.
    An item longer than the budget still gets a batch of its own.
    """
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[list[int]] = []
    current: list[int] = []
    padded_len = 0
    for i in order:
        if current and (len(current) + 1) * padded_len > batch_tokens:
            batches.append(current)
            current = []
        if not current:
            padded_len = round_up(max(lengths[i], 1), pad_multiple)
        current.append(i)
    if current:
        batches.append(current)
    return batches


def plan_packed_batches(lengths: Sequence[int], batch_tokens: int) -> list[list[int]]:
    """Group item indices into packed rows with ``sum(lengths) <= batch_tokens`` (no padding).

    Longest first, like :func:`plan_batches`, so the plan is the same on every run; an item
    longer than the budget gets a row of its own.
    """
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[list[int]] = []
    current: list[int] = []
    used = 0
    for i in order:
        if current and used + lengths[i] > batch_tokens:
            batches.append(current)
            current, used = [], 0
        current.append(i)
        used += lengths[i]
    if current:
        batches.append(current)
    return batches


def chunk_main_probs(model, chunks: Sequence[Chunk], *, batch_tokens: int, pad_id: int,
                     device, main_index: int = 1, pad_multiple: int = 1,
                     packed: bool = False) -> list[np.ndarray]:
    """P(main) at each chunk's seps (float32 array per chunk, in ``chunks`` order).

    ``packed``: the model runs packed attention (:mod:`pulpie_spark.classify.packed`): a
    batch is one unpadded row of chunks laid end to end; else rows padded to the longest.
    """
    import torch

    lengths = [len(c.input_ids) for c in chunks]
    batches = (plan_packed_batches(lengths, batch_tokens) if packed
               else plan_batches(lengths, batch_tokens, pad_multiple=pad_multiple))
    # Probabilities stay on the device until every batch is queued: no host sync per
    # batch, so building the next batch on the CPU overlaps the GPU's work.
    on_cuda = str(device).startswith("cuda")

    def to_device(t):
        # Pinned + non_blocking: the copy is queued behind the running batch instead of
        # blocking the host until the GPU is idle.
        return t.pin_memory().to(device, non_blocking=True) if on_cuda else t.to(device)

    def padded_inputs(batch):
        width = round_up(lengths[batch[0]], pad_multiple)
        input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(batch), width), dtype=torch.long)
        rows, cols = [], []
        for row, i in enumerate(batch):
            ids = chunks[i].input_ids
            input_ids[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
            attention_mask[row, : len(ids)] = 1
            rows.extend([row] * len(chunks[i].sep_positions))
            cols.extend(chunks[i].sep_positions)
        return {"input_ids": input_ids, "attention_mask": attention_mask}, rows, cols

    def packed_inputs(batch):
        ids: list[int] = []
        positions: list[int] = []
        edges = [0]
        cols: list[int] = []
        for i in batch:
            cols.extend(len(ids) + p for p in chunks[i].sep_positions)
            ids.extend(chunks[i].input_ids)
            positions.extend(range(lengths[i]))
            edges.append(len(ids))
        cu_seq_lens = torch.tensor(edges, dtype=torch.int32)
        longest = max(lengths[i] for i in batch)
        inputs = {"input_ids": torch.tensor([ids], dtype=torch.long),
                  "position_ids": torch.tensor([positions], dtype=torch.long),
                  "cu_seq_lens_q": cu_seq_lens, "cu_seq_lens_k": cu_seq_lens,
                  "max_length_q": longest, "max_length_k": longest}
        return inputs, [0] * len(cols), cols

    pending = []
    with torch.inference_mode():
        for batch in batches:
            inputs, rows, cols = (packed_inputs if packed else padded_inputs)(batch)
            inputs = {k: to_device(v) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
            logits = model(**inputs).logits
            index_rows = to_device(torch.tensor(rows, dtype=torch.long))
            index_cols = to_device(torch.tensor(cols, dtype=torch.long))
            sep_logits = logits[index_rows, index_cols].float()
            pending.append(torch.softmax(sep_logits, dim=-1)[:, main_index])
        flat = torch.cat(pending).cpu().numpy().astype(np.float32) if pending else np.zeros(0, np.float32)

    results: list[np.ndarray | None] = [None] * len(chunks)
    start = 0
    for batch in batches:
        for i in batch:
            n = len(chunks[i].sep_positions)
            results[i] = flat[start:start + n]
            start += n
    return results  # type: ignore[return-value]


def scatter_page_probs(n_blocks: Sequence[int], chunk_pages: Sequence[int],
                       chunks: Sequence[Chunk], chunk_probs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Map chunk predictions back to per-page block arrays; unpredicted blocks stay 0 (other)."""
    pages = [np.zeros(n, dtype=np.float32) for n in n_blocks]
    for page, chunk, probs in zip(chunk_pages, chunks, chunk_probs):
        pages[page][chunk.block_indices] = probs
    return pages
