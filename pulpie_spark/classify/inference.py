"""Batched token-classification inference over packed chunks.

Chunks from many pages are sorted by length (longest first, ties by arrival order,
so the plan is deterministic) and grouped into padded batches whose padded size
``batch_len * n_rows`` stays within a token budget. Logits are read at each
chunk's ``<|sep|>`` positions; P(main) is the softmax probability of the main class.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from pulpie_spark.chunker import Chunk


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


def chunk_main_probs(model, chunks: Sequence[Chunk], *, batch_tokens: int, pad_id: int,
                     device, main_index: int = 1, pad_multiple: int = 1) -> list[np.ndarray]:
    """P(main) at each chunk's seps (float32 array per chunk, in ``chunks`` order)."""
    import torch

    results: list[np.ndarray | None] = [None] * len(chunks)
    lengths = [len(c.input_ids) for c in chunks]
    for batch in plan_batches(lengths, batch_tokens, pad_multiple=pad_multiple):
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
        with torch.inference_mode():
            logits = model(input_ids=input_ids.to(device),
                           attention_mask=attention_mask.to(device)).logits
            sep_logits = logits[torch.tensor(rows, device=logits.device),
                                torch.tensor(cols, device=logits.device)]
            probs = torch.softmax(sep_logits.float(), dim=-1)[:, main_index].cpu().numpy()
        start = 0
        for i in batch:
            n = len(chunks[i].sep_positions)
            results[i] = probs[start:start + n].astype(np.float32)
            start += n
    return results  # type: ignore[return-value]


def scatter_page_probs(n_blocks: Sequence[int], chunk_pages: Sequence[int],
                       chunks: Sequence[Chunk], chunk_probs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Map chunk predictions back to per-page block arrays; unpredicted blocks stay 0 (other)."""
    pages = [np.zeros(n, dtype=np.float32) for n in n_blocks]
    for page, chunk, probs in zip(chunk_pages, chunks, chunk_probs):
        pages[page][chunk.block_indices] = probs
    return pages
