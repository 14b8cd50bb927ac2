"""Pack tokenized blocks into model-sized chunks (block-format.md, "Model input").

Each block is tokenized on its own, without special tokens. Chunks are packed
greedily as ``[BOS] b0 <|sep|> b1 <|sep|> ... bk <|sep|> [EOS]`` with at most
``max_tokens`` ids. A block longer than the budget is cut to fit and packed alone.
The model's label for a block is read at the ``<|sep|>`` that follows it, so every
chunk carries the indices of the blocks it holds and the positions of their seps.

Pure functions over token-id lists: no tokenizer, no torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

SEP_TOKEN = "<|sep|>"
DEFAULT_MAX_TOKENS = 8192


@dataclass(frozen=True)
class Chunk:
    """One model input: ``input_ids`` with one ``<|sep|>`` per block it holds."""

    input_ids: list[int]
    block_indices: list[int]   # page-level index of each block, in order
    sep_positions: list[int]   # position in input_ids of the <|sep|> closing each block

    def __len__(self) -> int:
        return len(self.input_ids)


def pack_chunks(block_token_ids: Sequence[Sequence[int]], *, sep_id: int,
                bos_id: int | None = None, eos_id: int | None = None,
                max_tokens: int = DEFAULT_MAX_TOKENS) -> list[Chunk]:
    """Greedily pack the blocks of one page into chunks of at most ``max_tokens`` ids.

    Matches pulpie 0.0.2's packing (the format the published checkpoints were
    trained on): BOS and EOS are optional (omitted when the tokenizer has none).
    """
    overhead = (bos_id is not None) + (eos_id is not None)
    budget = max_tokens - overhead   # room for blocks and their seps
    if budget < 2:
        raise ValueError(f"max_tokens={max_tokens} leaves no room for a block and its <|sep|>")

    chunks: list[Chunk] = []
    body: list[int] = []
    indices: list[int] = []
    seps: list[int] = []
    offset = 1 if bos_id is not None else 0

    def flush() -> None:
        if not indices:
            return
        ids = ([bos_id] if bos_id is not None else []) + body
        if eos_id is not None:
            ids.append(eos_id)
        chunks.append(Chunk(ids, list(indices), list(seps)))
        body.clear()
        indices.clear()
        seps.clear()

    for block_index, tokens in enumerate(block_token_ids):
        cost = len(tokens) + 1
        if len(body) + cost > budget:
            flush()
            if cost > budget:
                # Cut an over-long block to fill a chunk of its own.
                body.extend(tokens[: budget - 1])
                body.append(sep_id)
                indices.append(block_index)
                seps.append(offset + len(body) - 1)
                flush()
                continue
        body.extend(tokens)
        body.append(sep_id)
        indices.append(block_index)
        seps.append(offset + len(body) - 1)
    flush()
    return chunks
