"""Hugging Face token classifiers (published Pulpie EuroBERT checkpoints, or any other).

Loading rules: weights only from safetensors (pickle ``.bin`` is refused: it can run
code), ``trust_remote_code`` off unless asked, ``<|sep|>`` added to the tokenizer
when missing (embeddings resized, new row set deterministically), rotary ``inv_freq``
buffers checked against a fresh computation and restored if loading lost them,
bf16 on CUDA and fp32 on CPU. Models that route attention through transformers' attention
interface (EuroBERT does) run packed: unpadded chunks, each attending only to itself (varlen
flash attention on CUDA, one unmasked SDPA per chunk elsewhere:
:mod:`pulpie_spark.classify.packed`); others run padded batches with SDPA and a mask.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Sequence

import numpy as np

from pulpie_spark.classify.chunker import DEFAULT_MAX_TOKENS, SEP_TOKEN, Chunk, pack_chunks
from pulpie_spark.classify.base import ModelLoadError, probs_to_labels
from pulpie_spark.classify.inference import chunk_main_probs, scatter_page_probs
from pulpie_spark.classify.packed import enable_packed_attention

log = logging.getLogger(__name__)

DEFAULT_BATCH_TOKENS = {"cuda": 65536, "cpu": 16384}
# A huge block (a 5 MB table) is cut to this many characters per budget token before
# tokenizing, so its cost is bounded. The cut only changes tokens at the cut, far beyond
# the chunk budget; if the cut string yields fewer than max_tokens ids the full string is
# tokenized instead, so the ids the model sees are those of the full string.
_CHARS_PER_TOKEN_CUT = 64


def pick_device(device: str | None = None) -> str:
    import torch

    if device in (None, "", "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def _check_local_weights(path: Path) -> None:
    if any(path.glob("*.safetensors")):
        return
    pickles = sorted(p.name for p in path.glob("*.bin")) + sorted(p.name for p in path.glob("*.pt"))
    if pickles:
        raise ModelLoadError(
            f"{path} holds only pickle weights ({', '.join(pickles)}); pickle can run code on load, "
            "so pulpie-spark loads safetensors only. Convert once with "
            "`model.save_pretrained(dir, safe_serialization=True)` in a trusted environment.")
    raise ModelLoadError(f"{path} holds no *.safetensors weights")


def restore_rotary_buffers(model) -> int:
    """Recompute rotary ``inv_freq`` buffers and restore any that loading lost or altered.

    They are non-persistent buffers (not in the checkpoint); depending on the
    transformers version they can come back uninitialised (meta-device init) or cast to
    bf16, which shifts positions in long chunks. Returns how many modules were fixed.
    """
    import torch

    fixed = 0
    for module in model.modules():
        inv_freq = getattr(module, "inv_freq", None)
        config = getattr(module, "config", None)
        if not isinstance(inv_freq, torch.Tensor) or config is None:
            continue
        try:
            with torch.device("cpu"):
                fresh = type(module)(config)
        except Exception as exc:  # a rotary class with another constructor: leave it
            log.debug("cannot rebuild %s: %s", type(module).__name__, exc)
            continue
        for name in ("inv_freq", "original_inv_freq"):
            current = getattr(module, name, None)
            reference = getattr(fresh, name, None)
            if not isinstance(current, torch.Tensor) or not isinstance(reference, torch.Tensor):
                continue
            device = current.device if not current.is_meta else next(model.parameters()).device
            if (current.is_meta or current.shape != reference.shape or current.dtype != reference.dtype
                    or not torch.equal(current.detach().cpu(), reference)):
                setattr(module, name, reference.to(device))
                fixed += 1
    return fixed


class BlockTokenizer:
    """Blocks -> model chunks: each block tokenized alone, packed with ``<|sep|>`` (no model).

    Apart from :class:`HFBlockClassifier` so tokenizing can run where the model is not
    (CPU worker processes feeding one GPU process: tokenizing in the model's process
    halved its GPU's rate in benchmarks/gpu_encoder.py).
    """

    def __init__(self, tokenizer, *, max_tokens: int = DEFAULT_MAX_TOKENS):
        self.tokenizer = tokenizer
        self.max_tokens = max_tokens
        self.sep_id = tokenizer.convert_tokens_to_ids(SEP_TOKEN)
        self.bos_id = tokenizer.bos_token_id
        self.eos_id = tokenizer.eos_token_id

    def tokenize_blocks(self, blocks: Sequence[str]) -> list[list[int]]:
        if not blocks:
            return []
        cut = self.max_tokens * _CHARS_PER_TOKEN_CUT
        texts = [b if isinstance(b, str) else "" for b in blocks]
        short = [t[:cut] for t in texts]
        ids = self.tokenizer(short, add_special_tokens=False)["input_ids"]
        for i, t in enumerate(texts):
            if len(t) > cut and len(ids[i]) < self.max_tokens:
                ids[i] = self.tokenizer(t, add_special_tokens=False)["input_ids"]
        return [list(x) for x in ids]

    def chunk_page(self, blocks: Sequence[str]) -> list[Chunk]:
        return pack_chunks(self.tokenize_blocks(blocks), sep_id=self.sep_id, bos_id=self.bos_id,
                           eos_id=self.eos_id, max_tokens=self.max_tokens)

    def chunk_pages(self, pages: Sequence[Sequence[str]]) -> tuple[list[Chunk], list[int]]:
        """All chunks of all pages (one tokenizer call), with the page index of each."""
        flat = [b for blocks in pages for b in blocks]
        ids = self.tokenize_blocks(flat)
        chunks: list[Chunk] = []
        chunk_pages: list[int] = []
        start = 0
        for page_index, blocks in enumerate(pages):
            page_ids = ids[start:start + len(blocks)]
            start += len(blocks)
            if not page_ids:
                continue  # a page with no blocks never reaches the model
            for chunk in pack_chunks(page_ids, sep_id=self.sep_id, bos_id=self.bos_id,
                                     eos_id=self.eos_id, max_tokens=self.max_tokens):
                chunks.append(chunk)
                chunk_pages.append(page_index)
        return chunks, chunk_pages


class HFBlockClassifier:
    """A transformers token classifier that labels blocks at their ``<|sep|>`` tokens."""

    def __init__(self, model, tokenizer, *, model_id: str, device: str,
                 max_tokens: int = DEFAULT_MAX_TOKENS, batch_tokens: int | None = None,
                 packed: bool = False):
        self.model = model
        self.packed = packed   # the model was switched to packed attention (see load_hf_classifier)
        self.tokenizer = tokenizer
        self.block_tokenizer = BlockTokenizer(tokenizer, max_tokens=max_tokens)
        self.model_id = model_id
        self.device = device
        self.max_tokens = max_tokens
        kind = "cuda" if str(device).startswith("cuda") else "cpu"
        self.batch_tokens = batch_tokens or max(DEFAULT_BATCH_TOKENS[kind], max_tokens)
        self.pad_multiple = 8 if kind == "cuda" else 1   # tensor-core friendly shapes
        self.sep_id = self.block_tokenizer.sep_id
        self.eos_id = self.block_tokenizer.eos_id
        pad = tokenizer.pad_token_id
        if pad is None:
            pad = getattr(model.config, "pad_token_id", None)
        self.pad_id = int(pad if pad is not None else (self.eos_id if self.eos_id is not None else 0))
        self.main_index = _main_label_index(model.config)

    # -- tokenization and packing (BlockTokenizer's) ----------------------------------
    def tokenize_blocks(self, blocks: Sequence[str]) -> list[list[int]]:
        return self.block_tokenizer.tokenize_blocks(blocks)

    def chunk_page(self, blocks: Sequence[str]) -> list[Chunk]:
        return self.block_tokenizer.chunk_page(blocks)

    def chunk_pages(self, pages: Sequence[Sequence[str]]) -> tuple[list[Chunk], list[int]]:
        return self.block_tokenizer.chunk_pages(pages)

    def chunk_probs(self, chunks: Sequence[Chunk]) -> list[np.ndarray]:
        """P(main) at each chunk's seps, for chunks made by a :class:`BlockTokenizer`."""
        return chunk_main_probs(self.model, chunks, batch_tokens=self.batch_tokens,
                                pad_id=self.pad_id, device=self.device,
                                main_index=self.main_index, pad_multiple=self.pad_multiple,
                                packed=self.packed)

    # -- BlockClassifier ------------------------------------------------------------
    def predict_proba(self, pages: Sequence[Sequence[str]],
                      paths: Sequence[Sequence[str]] | None = None) -> list[np.ndarray]:
        pages = [list(p) if p is not None else [] for p in pages]
        chunks, chunk_pages = self.chunk_pages(pages)
        chunk_probs = self.chunk_probs(chunks)
        return scatter_page_probs([len(p) for p in pages], chunk_pages, chunks, chunk_probs)

    def predict(self, pages, paths=None) -> list[list[int]]:
        return probs_to_labels(self.predict_proba(pages, paths))


def _main_label_index(config) -> int:
    """Index of the "main" class: from id2label when it names one, else 1 (Pulpie's)."""
    id2label = getattr(config, "id2label", None) or {}
    for index, name in id2label.items():
        if str(name).strip().lower() in {"main", "content", "main_content"}:
            return int(index)
    return 1


def _set_deterministic(device: str) -> None:
    import torch

    if str(device).startswith("cuda"):
        # cuBLAS needs a fixed workspace for deterministic matmuls (before first use).
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=True)


def load_hf_classifier(name_or_path: str, device: str | None = None, *, model_id: str | None = None,
                       trust_remote_code: bool = False, max_tokens: int = DEFAULT_MAX_TOKENS,
                       batch_tokens: int | None = None, dtype: str | None = None,
                       deterministic: bool = True, packed: bool | None = None,
                       compile: str = "auto") -> HFBlockClassifier:
    """Load a token classifier from a local directory or a Hub id (offline-aware).

    ``packed``: run unpadded packed attention (default: wherever the model supports it; on
    CPU too, where masked SDPA over padded rows measured 1.5x slower than per-chunk SDPA on a
    4-layer EuroBERT with 100-2,500-token chunks, probabilities equal to 2e-7).
    ``compile``: :func:`compile_encoder` scope (``none``, ``mlp``, ``layers``); ``auto``:
    ``layers`` on CUDA (1.19x end to end, 1.38x model-only on an H200, docs/BENCHMARKS.md),
    ``none`` elsewhere (not measured on CPU, and CPU compiling needs a C++ toolchain).
    """
    import torch
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    device = pick_device(device)
    if deterministic:
        _set_deterministic(device)
    local = Path(name_or_path).expanduser()
    is_local = local.is_dir()
    if is_local:
        _check_local_weights(local)
        source = str(local)
    elif local.exists() or name_or_path.startswith((".", "/", "~")):
        raise ModelLoadError(f"model path {name_or_path!r} is not a checkpoint directory")
    else:
        source = name_or_path
    on_cuda = device.startswith("cuda")
    if dtype is None:
        torch_dtype = (torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16) if on_cuda \
            else torch.float32
    else:
        torch_dtype = getattr(torch, dtype)

    try:
        tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
        model, info = AutoModelForTokenClassification.from_pretrained(
            source, use_safetensors=True, trust_remote_code=trust_remote_code, dtype=torch_dtype,
            attn_implementation="sdpa", output_loading_info=True)
    except ModelLoadError:
        raise
    except Exception as exc:
        offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in {"1", "true", "yes"}
        hint = ("" if is_local else
                f" {name_or_path!r} is not a local directory, so it was looked up on the Hugging Face Hub"
                + (" but HF_HUB_OFFLINE is set" if offline else "")
                + ": download it where the Hub is reachable (`hf download "
                f"{name_or_path} --local-dir DIR`) and pass DIR, or a shared path (dbfs:/, /mnt, /dbfs).")
        raise ModelLoadError(f"cannot load model {name_or_path!r}: {type(exc).__name__}: {exc}.{hint}") from exc

    missing = [k for k in info.get("missing_keys", []) if "classifier" in k or "score" in k]
    if missing:
        raise ModelLoadError(f"{name_or_path!r} has no trained token-classification head "
                             f"(missing {', '.join(sorted(missing))}); it is a base encoder, not a block classifier")

    _add_sep_token(tokenizer)
    embeddings = model.get_input_embeddings()
    if len(tokenizer) > embeddings.weight.shape[0]:
        _grow_embeddings(model, len(tokenizer))

    fixed = restore_rotary_buffers(model)
    if fixed:
        log.warning("restored %d rotary buffer(s) that loading %s left wrong", fixed, name_or_path)
    model.to(device).eval()
    packed = (packed is None or packed) and enable_packed_attention(model)
    compile_encoder(model, resolve_compile_scope(compile, device))
    return HFBlockClassifier(model, tokenizer, model_id=model_id or name_or_path, device=device,
                             max_tokens=max_tokens, batch_tokens=batch_tokens, packed=packed)


COMPILE_SCOPES = ("none", "mlp", "layers")
COMPILE_CHOICES = ("auto",) + COMPILE_SCOPES


def resolve_compile_scope(choice: str | None, device: str) -> str:
    """``auto`` (or None) -> ``layers`` on CUDA, ``none`` elsewhere; other choices as they are."""
    choice = choice or "auto"
    if choice not in COMPILE_CHOICES:
        raise ValueError(f"compile must be one of {', '.join(COMPILE_CHOICES)}, not {choice!r}")
    if choice == "auto":
        return "layers" if str(device).startswith("cuda") else "none"
    return choice


def compile_encoder(model, scope: str = "none") -> int:
    """``torch.compile`` parts of an encoder in place, so Inductor fuses their elementwise work.

    ``mlp``: each layer's MLP and RMSNorms (tensor in, tensor out: one graph each, the token
    count dynamic). ``layers``: each whole encoder layer; packed attention stays eager inside
    it (:func:`pulpie_spark.classify.packed.enable_packed_attention` registers it behind
    ``torch.compiler.disable``), so chunk boundaries and their max length stay Python values
    and never cause a recompile. Returns how many modules were compiled.
    Probabilities agree with eager up to rounding (tests/test_classify_hf.py).
    """
    if scope not in COMPILE_SCOPES:
        raise ValueError(f"compile scope must be one of {', '.join(COMPILE_SCOPES)}, not {scope!r}")
    if scope == "none":
        return 0
    import torch._dynamo

    # Compiling happens at the first forward; a cluster whose GPU nodes lack a working
    # Triton/compiler then runs the layers eager (logged) instead of failing the task.
    torch._dynamo.config.suppress_errors = True
    layers = _encoder_layers(model)
    if not layers:
        raise ModelLoadError(f"{type(model).__name__}: no encoder layers found to compile")
    compiled = 0
    for layer in layers:
        if scope == "layers":
            layer.compile(dynamic=True)
            compiled += 1
            continue
        for name, child in layer.named_children():
            if name == "mlp" or "norm" in name.lower():
                child.compile(dynamic=True)
                compiled += 1
    return compiled


def _encoder_layers(model) -> list:
    base = getattr(model, getattr(model, "base_model_prefix", "model"), model)
    layers = getattr(base, "layers", None)
    return list(layers) if layers is not None else []


def load_block_tokenizer(name_or_path: str, *, max_tokens: int = DEFAULT_MAX_TOKENS,
                         trust_remote_code: bool = False) -> BlockTokenizer:
    """The tokenizer of a checkpoint as :func:`load_hf_classifier` sets it up, without the model
    (for processes that only tokenize; ``<|sep|>`` added the same way, so ids agree)."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(name_or_path, trust_remote_code=trust_remote_code)
    except Exception as exc:
        raise ModelLoadError(f"cannot load the tokenizer of {name_or_path!r}: {type(exc).__name__}: {exc}") from exc
    _add_sep_token(tokenizer)
    return BlockTokenizer(tokenizer, max_tokens=max_tokens)


def _add_sep_token(tokenizer) -> None:
    if SEP_TOKEN not in tokenizer.get_vocab():
        tokenizer.add_tokens([SEP_TOKEN], special_tokens=True)


def _grow_embeddings(model, n_rows: int) -> None:
    """Resize input embeddings; new rows = mean of the old ones (deterministic, unlike
    transformers' sampled init, so every Spark worker computes the same labels)."""
    import torch

    old = model.get_input_embeddings().weight.shape[0]
    id2label = dict(model.config.id2label)
    model.resize_token_embeddings(n_rows, mean_resizing=False)
    with torch.no_grad():
        weight = model.get_input_embeddings().weight
        weight[old:] = weight[:old].float().mean(dim=0).to(weight.dtype)
    if dict(model.config.id2label) != id2label:   # keep the classifier config as it was
        model.config.id2label = id2label
        model.config.label2id = {v: k for k, v in id2label.items()}
