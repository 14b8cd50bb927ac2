"""Unpadded ("packed") inference: the chunks of a batch laid end to end in one row.

Padded batches waste the work of every pad token in every linear layer, and an attention
mask keeps SDPA off its flash kernel. Packed, each chunk keeps its own positions (rotary
``position_ids`` restart at 0 per chunk) and attends only within itself: on CUDA through
PyTorch's variable-length flash attention (``torch.nn.attention.varlen``), elsewhere (or
on a PyTorch without it) through one unmasked SDPA call per chunk. Both give each chunk the
attention it would get alone (per-chunk SDPA bit for bit whatever the batch; the varlen
kernel up to the rounding of its split-KV choice, which depends on the batch's longest
chunk: the same input still gives the same batches, so runs are deterministic).

It plugs into transformers' attention interface under the name ``pulpie_packed``; the
chunk boundaries travel to it as the standard ``cu_seq_lens_q`` / ``max_length_q``
keyword arguments of the model's forward. Called without them (``model(input_ids,
attention_mask=...)``), the model behaves exactly as with SDPA. Models that do not route
attention through that interface stay on the padded path.
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
    cu_seq_lens = kwargs.get("cu_seq_lens_q")
    if cu_seq_lens is None:   # an ordinary call (no chunk boundaries): plain SDPA, mask and all
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

        return ALL_ATTENTION_FUNCTIONS["sdpa"](module, query, key, value, attention_mask,
                                              dropout=dropout, scaling=scaling, **kwargs)
    if key.shape[1] != query.shape[1]:   # grouped-query attention: one K/V head per group
        repeat = query.shape[1] // key.shape[1]
        key = key.repeat_interleave(repeat, dim=1)
        value = value.repeat_interleave(repeat, dim=1)
    if query.is_cuda and varlen_kernel_works(query.device, query.dtype):
        max_len = int(kwargs["max_length_q"])
        return _varlen(query, key, value, cu_seq_lens, max_len, scaling), None
    return _per_chunk_sdpa(query, key, value, cu_seq_lens, scaling), None


def _varlen(query, key, value, cu_seq_lens, max_len: int, scaling):
    """One varlen flash kernel over all chunks: (1, H, T, D) in, (1, T, H, D) out."""
    q, k, v = (t[0].transpose(0, 1).contiguous() for t in (query, key, value))   # (T, H, D)
    # ``scale`` is passed only when it is not the default: older varlen_attn lack the argument.
    extra = {} if scaling is None or abs(scaling - q.shape[-1] ** -0.5) < 1e-9 else {"scale": scaling}
    return _varlen_attn(q, k, v, cu_seq_lens, cu_seq_lens, max_len, max_len, **extra).unsqueeze(0)


def _per_chunk_sdpa(query, key, value, cu_seq_lens, scaling):
    """One unmasked SDPA call per chunk: (1, H, T, D) in, (1, T, H, D) out."""
    import torch
    import torch.nn.functional as F

    edges = [int(x) for x in cu_seq_lens.tolist()]
    parts = [F.scaled_dot_product_attention(query[:, :, s:e], key[:, :, s:e], value[:, :, s:e],
                                            scale=scaling)
             for s, e in zip(edges[:-1], edges[1:])]
    return torch.cat(parts, dim=2).transpose(1, 2).contiguous()


_VARLEN_CHECKED: dict[tuple[str, str], bool] = {}


def varlen_kernel_works(device, dtype) -> bool:
    """Whether this torch's varlen kernel runs here and matches per-chunk SDPA (checked once).

    Its signature and support vary across PyTorch releases and GPUs; a failure or a
    mismatch falls back to per-chunk SDPA (still unpadded) with a warning, never a crash.
    """
    import torch

    key = (str(device), str(dtype))
    if key not in _VARLEN_CHECKED:
        ok = False
        if _varlen_attn is not None:
            try:
                gen = torch.Generator(device="cpu").manual_seed(0)
                q, k, v = (torch.randn(1, 2, 40, 64, generator=gen).to(device=device, dtype=dtype)
                           for _ in range(3))
                cu = torch.tensor([0, 17, 40], dtype=torch.int32, device=device)
                got = _varlen(q, k, v, cu, 23, None).float()
                want = _per_chunk_sdpa(q, k, v, cu, None).float()
                ok = bool(torch.allclose(got, want, atol=3e-2, rtol=0))
                if not ok:
                    log.warning("varlen attention differs from SDPA on %s (max %.3g): using per-chunk SDPA",
                                device, float((got - want).abs().max()))
            except Exception as exc:
                log.warning("varlen attention unavailable on %s (%s): using per-chunk SDPA", device, exc)
        _VARLEN_CHECKED[key] = ok
    return _VARLEN_CHECKED[key]


def enable_packed_attention(model) -> bool:
    """Switch ``model`` to packed attention; False (model unchanged) where it cannot take it."""
    if not getattr(model, "_supports_attention_backend", False):
        return False
    try:
        from transformers import AttentionInterface
        from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

        import torch

        # Behind compiler.disable: an encoder layer compiled around it (hf.compile_encoder)
        # breaks its graph here instead of tracing the chunk boundaries (Python ints that
        # would recompile per batch); in an eager model the wrapper does nothing.
        AttentionInterface.register(PACKED_ATTENTION, torch.compiler.disable(packed_attention))
        # SDPA's mask builder: packed calls pass no attention_mask (so it builds none), and
        # an ordinary call with padding gets the mask plain SDPA would.
        AttentionMaskInterface.register(PACKED_ATTENTION, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])
        model.set_attn_implementation(PACKED_ATTENTION)
    except Exception as exc:   # an older transformers, or a model that refuses the name
        log.info("packed attention unavailable for %s: %s", type(model).__name__, exc)
        return False
    return True
