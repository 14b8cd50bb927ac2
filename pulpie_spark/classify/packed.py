"""Unpadded ("packed") inference: the chunks of a batch laid end to end in one row.

Padded batches waste the work of every pad token in every linear layer, and an attention
mask keeps SDPA off its flash kernel. Packed, each chunk keeps its own positions (rotary
``position_ids`` restart at 0 per chunk) and attends only within itself: on CUDA through
PyTorch's variable-length flash attention (``torch.nn.attention.varlen``), elsewhere (or
on a PyTorch without it) through one unmasked SDPA call per chunk. Both give each chunk
exactly the attention it would get alone, so labels do not depend on the batch it landed in.

It plugs into transformers' attention interface under the name ``pulpie_packed``; the
chunk boundaries travel to it as the standard ``cu_seq_lens_q`` / ``max_length_q``
keyword arguments of the model's forward. Models that do not route attention through
that interface (or take no ``position_ids``) stay on the padded path.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

PACKED_ATTENTION = "pulpie_packed"

try:  # PyTorch >= 2.9 (CUDA only at run time)
    from torch.nn.attention.varlen import varlen_attn as _varlen_attn
except Exception:  # pragma: no cover - depends on the torch build
    _varlen_attn = None


def packed_attention(module, query, key, value, attention_mask, dropout: float = 0.0,
                     scaling: float | None = None, **kwargs):
    """Attention over chunks packed in one row: ``query`` is (1, heads, tokens, dim)."""
    import torch
    import torch.nn.functional as F

    cu_seq_lens = kwargs.get("cu_seq_lens_q")
    if cu_seq_lens is None:
        raise ValueError("packed attention needs cu_seq_lens_q (chunk boundaries)")
    if key.shape[1] != query.shape[1]:   # grouped-query attention: one K/V head per group
        repeat = query.shape[1] // key.shape[1]
        key = key.repeat_interleave(repeat, dim=1)
        value = value.repeat_interleave(repeat, dim=1)
    if query.is_cuda and _varlen_attn is not None:
        q, k, v = (t[0].transpose(0, 1).contiguous() for t in (query, key, value))   # (T, H, D)
        max_len = int(kwargs["max_length_q"])
        out = _varlen_attn(q, k, v, cu_seq_lens, cu_seq_lens, max_len, max_len, scale=scaling)
        return out.unsqueeze(0), None                                                  # (1, T, H, D)
    bounds = kwargs.get("chunk_bounds") or _bounds(cu_seq_lens)
    parts = [F.scaled_dot_product_attention(query[:, :, s:e], key[:, :, s:e], value[:, :, s:e],
                                            scale=scaling)
             for s, e in bounds]
    return torch.cat(parts, dim=2).transpose(1, 2).contiguous(), None


def _bounds(cu_seq_lens) -> list[tuple[int, int]]:
    edges = [int(x) for x in cu_seq_lens.tolist()]
    return list(zip(edges[:-1], edges[1:]))


def _no_mask(*args, **kwargs):
    """Mask builder for the packed path: chunk boundaries replace the mask."""
    return None


def enable_packed_attention(model) -> bool:
    """Switch ``model`` to packed attention; False (model unchanged) where it cannot take it."""
    if not getattr(model, "_supports_attention_backend", False):
        return False
    try:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface

        AttentionInterface.register(PACKED_ATTENTION, packed_attention)
        AttentionMaskInterface.register(PACKED_ATTENTION, _no_mask)
        model.set_attn_implementation(PACKED_ATTENTION)
    except Exception as exc:   # an older transformers, or a model that refuses the name
        log.info("packed attention unavailable for %s: %s", type(model).__name__, exc)
        return False
    return True


def packed_varlen_kernel() -> bool:
    """Whether CUDA runs packed attention in one varlen flash kernel (else one SDPA per chunk)."""
    return _varlen_attn is not None
