"""Tiny EuroBERT token classifiers built inside the tests (no hub, no downloads).

``save_tiny_classifier`` writes a checkpoint directory (safetensors + config + fast
tokenizer) exactly like a published one, so loading goes through the real code path.

``rigged=True`` sets the weights by hand so the label at a ``<|sep|>`` is decided by
the token just before it: a block whose last word is ``MAIN`` is main, any other
block is other. The single attention head attends (through RoPE and constant q/k
biases) to the previous position only; its value carries an embedding dimension that
is 1 only for the marker word; the classifier reads that dimension. A label that
lands on the wrong block (off by one, across chunks or batches) is therefore visible.
"""

from __future__ import annotations

import math
from pathlib import Path

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa",
         "lambda", "mu", "nu", "xi", "omicron", "pi", "rho", "sigma", "tau", "upsilon",
         "p", "div", "h1", "li", "ul", "_item_id", "=", '"', "<", ">", "</", "/", "1", "2", "3",
         "hello", "world", "text", "MAIN"]
SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|pad|>", "[UNK]"]
SEP = "<|sep|>"
MARKER = "MAIN"
HIDDEN = 32
HEAD_DIM = 16
ROPE_THETA = 100.0


def build_tokenizer(with_sep: bool = True):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIALS + ([SEP] if with_sep else []) + WORDS)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<|begin_of_text|>",
                                        eos_token="<|end_of_text|>", pad_token="<|pad|>",
                                        unk_token="[UNK]")
    if with_sep:
        tokenizer.add_tokens([SEP], special_tokens=True)
    return tokenizer


def build_config(vocab_size: int, tokenizer, *, layers: int = 2, rigged: bool = False):
    from transformers import EuroBertConfig

    return EuroBertConfig(
        vocab_size=vocab_size, hidden_size=HIDDEN, intermediate_size=64, num_hidden_layers=layers,
        num_attention_heads=HIDDEN // HEAD_DIM, max_position_embeddings=512,
        rope_parameters={"rope_type": "default", "rope_theta": ROPE_THETA},
        attention_bias=rigged, mlp_bias=False, num_labels=2,
        id2label={0: "other", 1: "main"}, label2id={"other": 0, "main": 1},
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, mask_token_id=tokenizer.unk_token_id)


def rig_weights(model, tokenizer) -> None:
    """Make P(main) at each position depend only on whether the previous token is MARKER."""
    import torch

    marker_id = tokenizer.convert_tokens_to_ids(MARKER)
    half = HEAD_DIM // 2
    thetas = [ROPE_THETA ** (-2 * j / HEAD_DIM) for j in range(half)]
    strength = 30.0  # |q||k| per rotary pair: makes the previous-token peak sharp
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        emb = model.model.embed_tokens.weight
        emb[:, 1] = 1.0                # a constant dimension keeps RMSNorm finite
        emb[marker_id, 0] = 1.0        # dimension 0 flags the marker word
        for layer in model.model.layers:
            layer.input_layernorm.weight.fill_(1.0)
            layer.post_attention_layernorm.weight.fill_(1.0)
        attn = model.model.layers[0].self_attn
        # Head 0: constant q and k (biases only). With RoPE, score(m, n) =
        # strength * sum_j cos(theta_j * (m - n - 1)): largest for n = m - 1.
        for j, theta in enumerate(thetas):
            attn.q_proj.bias[j] = math.sqrt(strength) * math.cos(theta)
            attn.q_proj.bias[j + half] = -math.sqrt(strength) * math.sin(theta)
            attn.k_proj.bias[j] = math.sqrt(strength)
        attn.v_proj.weight[0, 0] = 1.0          # head 0 value = normalized marker flag
        attn.o_proj.weight[2, 0] = 1.0          # ... written to residual dimension 2
        model.model.norm.weight.fill_(1.0)
        model.classifier.weight[1, 2] = 2.0
        model.classifier.bias[1] = -1.0


def save_tiny_classifier(directory: Path, *, rigged: bool = False, with_sep: bool = True,
                         seed: int = 0, layers: int = 2) -> Path:
    import torch
    from transformers import EuroBertForTokenClassification

    tokenizer = build_tokenizer(with_sep=with_sep)
    config = build_config(len(tokenizer), tokenizer, layers=layers, rigged=rigged)
    torch.manual_seed(seed)
    model = EuroBertForTokenClassification(config).eval()
    if rigged:
        rig_weights(model, tokenizer)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory, safe_serialization=True)
    tokenizer.save_pretrained(directory)
    return directory
