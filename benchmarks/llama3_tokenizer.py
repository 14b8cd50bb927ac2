"""Rebuild EuroBERT's tokenizer (Llama 3's BPE) as a ``tokenizer.json``, without the Hub.

    .venv/bin/python benchmarks/llama3_tokenizer.py [--out benchmarks/out/llama3/tokenizer.json]

EuroBERT (and so the Pulpie checkpoints) uses Llama 3's tokenizer: 128,000 byte-level BPE
tokens plus 256 specials, of which EuroBERT renames id 128002 to ``<|mask|>``. The Hub is
not reachable here, but npm is, and the npm package ``llama3-tokenizer-js`` (MIT code; the
vocabulary and merges are Meta's, under the Llama 3 licence: this script fetches them and
writes the file only under ``benchmarks/out/``, which is not committed) ships the full
vocabulary (base64, one token per line) and merge list (17-bit token-id pairs). This
script downloads it with ``npm pack`` (or reads ``--package DIR``, an unpacked copy), decodes
both and writes a ``tokenizers`` BPE with Llama 3's pre-tokenizer regex.

Used by ``benchmarks/gpu_encoder.py --tokenizer`` so that the GPU benchmark's tokens per page
are the published model's. Checked against the package's own JavaScript encoder on the 7,508
blocks of 120 pages of ../shared/data/extraction (15 per file): identical ids on 7,507;
the one difference is a block with a U+FEFF, which JavaScript's ``\\s`` counts as space and
the Rust regex of ``tokenizers`` (the one Llama 3's own tokenizer.json runs) does not.
"""

from __future__ import annotations

import argparse
import base64
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "llama3-tokenizer-js@1.2.0"
# Llama 3's pre-tokenizer split (from its tokenizer.json / tiktoken pattern).
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
BASE_VOCAB = 128000
# EuroBERT's specials at 128000-128002, then Llama 3's reserved tokens up to 128255.
SPECIALS = (["<|begin_of_text|>", "<|end_of_text|>", "<|mask|>"]
            + [f"<|reserved_special_token_{i}|>" for i in range(253)])
# Known ids of Llama 3 (the package's tests and Meta's tokenizer): a cheap sanity check.
KNOWN_IDS = {"I": [40], " hello": [24748], "Hello world": [9906, 1917]}


def fetch_package(into: Path) -> Path:
    subprocess.run(["npm", "pack", PACKAGE, "--silent"], cwd=into, check=True, capture_output=True)
    tarball = next(into.glob("llama3-tokenizer-js-*.tgz"))
    subprocess.run(["tar", "xzf", tarball.name], cwd=into, check=True)
    return into / "package"


def js_string(source: str, name: str) -> str:
    match = re.search(rf'const {name} = "([^"]*)"', source)
    if match is None:
        raise SystemExit(f"{name} not found in the package's data file")
    return match.group(1)


def decode_merges(merges_base64: str, vocab: list[str]) -> list[tuple[str, str]]:
    """17-bit big-endian token ids, two per merge, in priority order."""
    import numpy as np

    bits = np.unpackbits(np.frombuffer(base64.b64decode(merges_base64), dtype=np.uint8))
    n = len(bits) // 17
    ids = bits[: n * 17].reshape(n, 17).astype(np.int64) @ (1 << np.arange(16, -1, -1, dtype=np.int64))
    ids = ids[: len(ids) // 2 * 2].reshape(-1, 2)
    return [(vocab[a], vocab[b]) for a, b in ids.tolist()]


def build(package_dir: Path):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

    source = (package_dir / "src" / "data-converted.js").read_text()
    vocab = base64.b64decode(js_string(source, "llama_vocab_base64")).decode("utf-8").split("\n")
    if len(vocab) != BASE_VOCAB:
        raise SystemExit(f"expected {BASE_VOCAB} base tokens, found {len(vocab)}")
    merges = decode_merges(js_string(source, "llama_merges_binary"), vocab)
    tokenizer = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(vocab)}, merges=merges,
                                     ignore_merges=True, fuse_unk=False, byte_fallback=False))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS])
    for text, ids in KNOWN_IDS.items():
        got = tokenizer.encode(text, add_special_tokens=False).ids
        if got != ids:
            raise SystemExit(f"{text!r} -> {got}, Llama 3 gives {ids}: the rebuild is wrong")
    return tokenizer, len(merges)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--package", type=Path, default=None,
                        help=f"an unpacked {PACKAGE} (default: fetched with npm pack)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out" / "llama3" / "tokenizer.json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        package_dir = args.package or fetch_package(Path(tmp))
        tokenizer, n_merges = build(package_dir)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(args.out))
    print(f"{tokenizer.get_vocab_size()} tokens, {n_merges} merges -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
