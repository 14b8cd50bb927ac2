"""Packed vs padded inference of an HF token classifier on CPU (one thread).

    nice .venv/bin/python benchmarks/packed_attention_cpu.py [--chunks 24] [--layers 4]

A random EuroBERT (hidden 256, 4 layers, 4 heads: small enough for this machine) over
chunks of 100-2,500 tokens with 20 seps each, through ``chunk_main_probs``: the anchor is
the padded path (length-sorted rows padded to the longest, SDPA with a mask), measured in
the same run; ours is the packed path (unpadded rows, one unmasked SDPA per chunk). Prints
CPU seconds of each, the ratio, and the largest probability difference.
"""

from __future__ import annotations

import argparse
import copy
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=24)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch-tokens", type=int, default=16384)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)

    import numpy as np
    import torch
    from transformers import EuroBertConfig, EuroBertForTokenClassification

    from pulpie_spark.classify.chunker import Chunk
    from pulpie_spark.classify.inference import chunk_main_probs
    from pulpie_spark.classify.packed import enable_packed_attention

    torch.set_num_threads(1)
    config = EuroBertConfig(hidden_size=256, intermediate_size=1024, num_hidden_layers=args.layers,
                            num_attention_heads=4, vocab_size=5000, num_labels=2,
                            max_position_embeddings=8192, pad_token_id=0, bos_token_id=1,
                            eos_token_id=2, mask_token_id=3)
    torch.manual_seed(0)
    padded = EuroBertForTokenClassification(copy.deepcopy(config)).eval()
    padded.set_attn_implementation("sdpa")
    packed = EuroBertForTokenClassification(copy.deepcopy(config)).eval()
    packed.load_state_dict(padded.state_dict())
    if not enable_packed_attention(packed):
        raise SystemExit("this transformers cannot take packed attention")
    rng = random.Random(0)
    chunks = []
    for _ in range(args.chunks):
        n = rng.randint(100, 2500)
        seps = sorted(rng.sample(range(1, n - 1), 20))
        chunks.append(Chunk([rng.randint(5, 4999) for _ in range(n)], list(range(20)), seps))
    best = {}
    outputs = {}
    for _ in range(args.repeat):
        for name, model, is_packed in (("padded", padded, False), ("packed", packed, True)):
            start = time.process_time()
            outputs[name] = chunk_main_probs(model, chunks, batch_tokens=args.batch_tokens, pad_id=0,
                                             device="cpu", packed=is_packed)
            best[name] = min(best.get(name, float("inf")), time.process_time() - start)
    diff = max(float(np.abs(a - b).max()) for a, b in zip(outputs["packed"], outputs["padded"]))
    tokens = sum(len(c) for c in chunks)
    print(f"{args.chunks} chunks, {tokens} tokens, {args.layers} layers, best of {args.repeat}, CPU s")
    print(f"{'':24s}{'packed':>10s}{'padded':>10s}{'ratio':>8s}")
    print(f"{'seconds':24s}{best['packed']:10.2f}{best['padded']:10.2f}{best['padded'] / best['packed']:8.2f}x")
    print(f"max |P(packed) - P(padded)| = {diff:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
