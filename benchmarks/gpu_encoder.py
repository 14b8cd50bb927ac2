"""GPU encoder throughput: a Pulpie-Small-shaped EuroBERT over real pages, end to end.

    python benchmarks/gpu_encoder.py --pages 2000                    # on a GPU box (H200 target)
    nice .venv/bin/python benchmarks/gpu_encoder.py --device cpu --tiny   # smoke test, < 1 min

What runs:
- pages: ``html`` of the ``*.parquet`` files in ``--data`` (default
  ../shared/data/extraction), taken round-robin over the files so every source is in the
  mix; ``--save-pages DIR`` writes exactly those pages to ``DIR/pages.parquet`` and exits
  (copy that folder to a GPU machine and pass it as ``--data``);
- segmentation: ``pulpie_spark.segment.simplify`` on ``--workers`` CPU processes (producer);
- tokenization + chunk packing: in the same worker processes, each holding the model's
  tokenizer (``--tokenize-in workers``, default), or in a thread of the model's process
  (``--tokenize-in thread``: on the H200 that thread's GIL and cores halved the GPU's rate);
- model: EuroBERT token classifier with EuroBERT-210m's shape (hidden 768, 12 layers, 12
  heads, intermediate 3072, vocab 128256: Pulpie Small's shape) and random weights, saved
  as safetensors and loaded through ``pulpie_spark.classify.hf.load_hf_classifier`` (bf16 on
  CUDA; packed attention: unpadded chunks, varlen flash attention), batched by
  ``HFBlockClassifier`` under a token budget;
- the three stages overlap through bounded queues; GPU utilisation is sampled with
  ``nvidia-smi`` every 100 ms while the model runs.
No Hub: the tokenizer is a byte-level BPE trained here on the pages' blocks, or with
``--tokenizer FILE`` a given ``tokenizer.json``: EuroBERT's is Llama 3's (128,000 BPE tokens,
its specials renamed), which ``benchmarks/llama3_tokenizer.py`` rebuilds from the npm package
llama3-tokenizer-js. The script prints chars/token.
``--compile mlp|layers``: ``torch.compile`` parts of the encoder
(:func:`pulpie_spark.classify.hf.compile_encoder`), compiled during the warm-up, before the clock.

Anchor, measured in the same run: the sequential per-page loop of pulpie 0.0.2's
``Extractor.extract`` (each chunk of each page alone, batch size 1) on the first
``--anchor-pages`` segmented pages, same model, same device; the ratio is model-only
pages/s (batched) / model-only pages/s (sequential) on those pages. On those pages the run
also times the padded SDPA path (rows padded to the longest, attention mask) against the
packed one, checks that both give the same labels, and sweeps the token budget. The published number
(Pulpie Small, 25.7 pages/s on an A100, batched) is printed next to ours for reference; it
is other hardware, so that ratio is indicative only.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PUBLISHED_PULPIE_SMALL_A100 = 25.7   # pages/s, docs/anchors.md
TARGET_PAGES_PER_S = 150.0           # issue 3 target on one H200


# ----------------------------------------------------------------------------- pages
def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def load_pages(data: Path, n_pages: int) -> list[bytes]:
    import pyarrow.parquet as pq

    files = sorted(data.glob("*.parquet"))
    if not files:
        raise SystemExit(f"no *.parquet files in {data}")
    columns = [pq.read_table(f, columns=["html"]).column("html").to_pylist() for f in files]
    pages: list[bytes] = []
    row = 0
    while len(pages) < n_pages and any(row < len(c) for c in columns):
        for col in columns:
            if row < len(col) and len(pages) < n_pages:
                html = col[row]
                pages.append(html.encode("utf-8") if isinstance(html, str) else (html or b""))
        row += 1
    if len(pages) < n_pages:   # fewer pages than asked: repeat (reported)
        pages = (pages * (n_pages // max(len(pages), 1) + 1))[:n_pages]
    return pages


def segment(html: bytes) -> tuple[list[str], float, str | None]:
    """Worker process: one page -> its blocks, the seconds simplify took, its error."""
    from pulpie_spark.segment.simplify import simplify

    start = time.perf_counter()
    page = simplify(html)
    return list(page.blocks), time.perf_counter() - start, page.error


_BLOCK_TOKENIZER = None   # per worker process (--tokenize-in workers)


def init_chunker(model_dir: str, max_tokens: int) -> None:
    """Worker initializer: the model's tokenizer, without the model."""
    global _BLOCK_TOKENIZER
    os.environ["TOKENIZERS_PARALLELISM"] = "false"   # one core per worker process
    from pulpie_spark.classify.hf import load_block_tokenizer

    _BLOCK_TOKENIZER = load_block_tokenizer(model_dir, max_tokens=max_tokens)


def segment_and_chunk(html: bytes):
    """Worker process: one page -> (block count, its chunks, simplify s, tokenize s, error)."""
    blocks, seconds, error = segment(html)
    start = time.perf_counter()
    chunks = _BLOCK_TOKENIZER.chunk_page(blocks) if blocks else []
    return len(blocks), chunks, seconds, time.perf_counter() - start, error


# ----------------------------------------------------------------------------- model
def train_tokenizer(texts: list[str], vocab_size: int, out_dir: Path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|pad|>", "<|sep|>"]
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    core.train_from_iterator(texts, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, bos_token=specials[0],
                                        eos_token=specials[1], pad_token=specials[2])
    tokenizer.add_tokens(["<|sep|>"], special_tokens=True)
    tokenizer.save_pretrained(out_dir)
    return tokenizer


def given_tokenizer(tokenizer_json: Path, out_dir: Path):
    """A tokenizer.json with EuroBERT's specials (BOS <|begin_of_text|>, EOS = pad <|end_of_text|>)."""
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_json), bos_token="<|begin_of_text|>",
                                        eos_token="<|end_of_text|>", pad_token="<|end_of_text|>")
    missing = [t for t in ("<|begin_of_text|>", "<|end_of_text|>") if t not in tokenizer.get_vocab()]
    if missing:
        raise SystemExit(f"{tokenizer_json} lacks {missing}: not a Llama 3 / EuroBERT tokenizer")
    tokenizer.save_pretrained(out_dir)
    return tokenizer


def save_model(out_dir: Path, tokenizer, tiny: bool) -> int:
    import torch
    from transformers import EuroBertConfig, EuroBertForTokenClassification

    shape = (dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  vocab_size=max(len(tokenizer), 1024))
             if tiny else
             dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12,
                  vocab_size=128256))
    config = EuroBertConfig(**shape, max_position_embeddings=8192, num_labels=2,
                            id2label={0: "other", 1: "main"}, label2id={"other": 0, "main": 1},
                            rope_parameters={"rope_type": "default", "rope_theta": 250000.0},
                            bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                            pad_token_id=tokenizer.pad_token_id, mask_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    model = EuroBertForTokenClassification(config)
    model.save_pretrained(out_dir, safe_serialization=True)
    return sum(p.numel() for p in model.parameters())


# ------------------------------------------------------------------------ GPU sampler
class GpuSampler:
    """nvidia-smi utilisation/memory every 100 ms in a child process (no extra package)."""

    def __init__(self, device: str):
        self.samples: list[tuple[float, float, float]] = []
        self.proc = None
        self.thread = None
        if not device.startswith("cuda") or shutil.which("nvidia-smi") is None:
            return
        index = device.split(":")[1] if ":" in device else os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
        self.proc = subprocess.Popen(
            ["nvidia-smi", "-i", index, "--query-gpu=utilization.gpu,memory.used",
             "--format=csv,noheader,nounits", "-lms", "100"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                util, mem = (float(x) for x in line.strip().split(","))
                self.samples.append((time.perf_counter(), util, mem))
            except ValueError:
                continue

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=5)

    def summary(self, start: float, end: float) -> dict:
        window = [(u, m) for t, u, m in self.samples if start <= t <= end]
        if not window:
            return {"gpu_util_mean": None, "gpu_util_median": None, "gpu_mem_used_mib_max": None,
                    "gpu_samples": 0}
        utils = sorted(u for u, _ in window)
        return {"gpu_util_mean": round(sum(utils) / len(utils), 1),
                "gpu_util_median": utils[len(utils) // 2],
                "gpu_mem_used_mib_max": max(m for _, m in window), "gpu_samples": len(window)}


# ---------------------------------------------------------------------------- pipeline
def run_pipeline(clf, pages: list[bytes], workers: int, pages_per_call: int, pool,
                 chunk_pool=None) -> dict:
    """Segment (processes) -> tokenize + pack -> model (main thread), overlapped.

    Tokenizing runs in the segmentation processes when ``chunk_pool`` is given (their
    initializer loaded the tokenizer), else in a thread of this process.
    """
    from pulpie_spark.classify.inference import scatter_page_probs

    packed: queue.Queue = queue.Queue(maxsize=3)
    stats = {"segment_s": 0.0, "segment_errors": 0, "blocks": 0, "tokenize_s": 0.0}

    def thread_producer() -> None:
        group: list[list[str]] = []
        for blocks, seconds, error in pool.imap(segment, pages, chunksize=4):
            stats["segment_s"] += seconds
            stats["segment_errors"] += error is not None
            stats["blocks"] += len(blocks)
            group.append(blocks)
            if len(group) == pages_per_call:
                packed.put(_pack(clf, group, stats))
                group = []
        if group:
            packed.put(_pack(clf, group, stats))

    def worker_producer() -> None:
        sizes: list[int] = []
        chunks: list = []
        chunk_pages: list[int] = []
        for n_blocks, page_chunks, seconds, tokenize_s, error in chunk_pool.imap(
                segment_and_chunk, pages, chunksize=4):
            stats["segment_s"] += seconds
            stats["tokenize_s"] += tokenize_s
            stats["segment_errors"] += error is not None
            stats["blocks"] += n_blocks
            chunks.extend(page_chunks)
            chunk_pages.extend([len(sizes)] * len(page_chunks))
            sizes.append(n_blocks)
            if len(sizes) == pages_per_call:
                packed.put((sizes, chunks, chunk_pages))
                sizes, chunks, chunk_pages = [], [], []
        if sizes:
            packed.put((sizes, chunks, chunk_pages))

    def producer() -> None:
        try:
            (worker_producer if chunk_pool is not None else thread_producer)()
        finally:
            packed.put(None)

    thread = threading.Thread(target=producer, daemon=True)
    results: list = []
    model_s = 0.0
    real_tokens = padded_tokens = n_chunks = 0
    start = time.perf_counter()
    thread.start()
    while True:
        item = packed.get()
        if item is None:
            break
        sizes, chunks, chunk_pages = item
        t0 = time.perf_counter()
        probs = clf.chunk_probs(chunks)
        model_s += time.perf_counter() - t0
        results.extend(scatter_page_probs(sizes, chunk_pages, chunks, probs))
        real_tokens += sum(len(c) for c in chunks)
        padded_tokens += _padded(chunks, clf)
        n_chunks += len(chunks)
    end = time.perf_counter()
    thread.join()
    assert len(results) == len(pages)
    return dict(stats, start=start, end=end, wall_s=end - start, model_s=model_s, chunks=n_chunks,
                real_tokens=real_tokens, padded_tokens=padded_tokens,
                main_blocks=int(sum((p >= 0.5).sum() for p in results)))


def _pack(clf, group, stats):
    t0 = time.perf_counter()
    chunks, chunk_pages = clf.chunk_pages(group)
    stats["tokenize_s"] += time.perf_counter() - t0
    return [len(g) for g in group], chunks, chunk_pages


def transformers_version() -> str:
    import transformers

    return transformers.__version__


def _padded(chunks, clf) -> int:
    from pulpie_spark.classify.inference import plan_batches, round_up

    lengths = [len(c) for c in chunks]
    if clf.packed:   # packed rows carry no padding
        return sum(lengths)
    return sum(round_up(lengths[b[0]], clf.pad_multiple) * len(b)
               for b in plan_batches(lengths, clf.batch_tokens, pad_multiple=clf.pad_multiple))


def run_sequential_anchor(clf, page_blocks: list[list[str]]) -> float:
    """pulpie 0.0.2's per-page loop: each chunk alone (batch size 1). Returns seconds."""
    from pulpie_spark.classify.inference import chunk_main_probs

    start = time.perf_counter()
    for blocks in page_blocks:
        if not blocks:
            continue
        for chunk in clf.chunk_page(blocks):
            chunk_main_probs(clf.model, [chunk], batch_tokens=len(chunk), pad_id=clf.pad_id,
                             device=clf.device, main_index=clf.main_index, packed=clf.packed)
    _sync(clf.device)
    return time.perf_counter() - start


def compare_padded(clf, model_dir: Path, page_blocks, packed_probs, args) -> dict:
    """The padded SDPA path on the same pages: its model-only time and label agreement."""
    import numpy as np

    from pulpie_spark.classify.hf import load_hf_classifier

    if not clf.packed:
        return {"padded_compare": "run was padded"}
    padded = load_hf_classifier(str(model_dir), device=clf.device, max_tokens=args.max_tokens,
                                batch_tokens=clf.batch_tokens, packed=False)
    padded.predict_proba(page_blocks[:8])   # warm-up
    _sync(clf.device)
    t0 = time.perf_counter()
    padded_probs = padded.predict_proba(page_blocks)
    _sync(clf.device)
    seconds = time.perf_counter() - t0
    a = np.concatenate([p for p in packed_probs if len(p)] or [np.zeros(0)])
    b = np.concatenate([p for p in padded_probs if len(p)] or [np.zeros(0)])
    del padded
    return {"padded_same_pages_per_s": round(len(page_blocks) / seconds, 2),
            "packed_vs_padded_max_abs_diff": round(float(np.abs(a - b).max()) if len(a) else 0.0, 5),
            "packed_vs_padded_label_agreement": round(float(((a >= 0.5) == (b >= 0.5)).mean()) if len(a) else 1.0, 5)}


def sweep_budgets(clf, page_blocks) -> dict:
    """Model-only pages/s on pre-tokenized chunks for a few token budgets."""
    from pulpie_spark.classify.inference import chunk_main_probs

    chunks, _ = clf.chunk_pages(page_blocks)
    out = {}
    for budget in (32768, 65536, 131072, 262144):
        if budget < clf.max_tokens:
            continue
        kwargs = dict(batch_tokens=budget, pad_id=clf.pad_id, device=clf.device,
                      main_index=clf.main_index, pad_multiple=clf.pad_multiple, packed=clf.packed)
        chunk_main_probs(clf.model, chunks, **kwargs)   # warm-up at this shape
        _sync(clf.device)
        t0 = time.perf_counter()
        chunk_main_probs(clf.model, chunks, **kwargs)
        _sync(clf.device)
        out[str(budget)] = round(len(page_blocks) / (time.perf_counter() - t0), 2)
    return {"model_only_pages_per_s_by_budget": out}


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "extraction")
    parser.add_argument("--pages", type=int, default=None, help="pages to run (default 2000; 16 with --tiny)")
    parser.add_argument("--device", default=None, help="cuda, cuda:N or cpu (default: cuda if available)")
    parser.add_argument("--tiny", action="store_true", help="tiny model (smoke test on CPU)")
    parser.add_argument("--workers", type=int, default=max((os.cpu_count() or 2) - 2, 1),
                        help="segmentation processes")
    parser.add_argument("--pages-per-call", type=int, default=256, help="pages per model call")
    parser.add_argument("--batch-tokens", type=int, default=None, help="tokens per forward (padding included)")
    parser.add_argument("--attention", choices=("auto", "packed", "padded"), default="auto",
                        help="packed (unpadded, varlen) or padded SDPA batches (auto: packed on CUDA)")
    parser.add_argument("--tokenize-in", choices=("workers", "thread"), default="workers",
                        help="tokenize + pack in the segmentation processes (default) or in a thread "
                             "of the model's process")
    parser.add_argument("--max-tokens", type=int, default=None,
                        help="chunk length (default 8192; 256 with --tiny: CPU attention is quadratic)")
    parser.add_argument("--vocab", type=int, default=None, help="BPE vocab (default 50000; 2000 with --tiny)")
    parser.add_argument("--tokenizer", type=Path, default=None,
                        help="a tokenizer.json to use instead of training a BPE (EuroBERT's / Llama 3's: "
                             "benchmarks/llama3_tokenizer.py)")
    parser.add_argument("--compile", choices=("none", "mlp", "layers"), default="none",
                        help="torch.compile scope of the encoder (pulpie_spark.classify.hf.compile_encoder)")
    parser.add_argument("--anchor-pages", type=int, default=None, help="default 100; 4 with --tiny")
    parser.add_argument("--save-pages", type=Path, default=None, help="write the pages a run would use to DIR/pages.parquet and exit")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out" / "gpu_encoder.json")
    args = parser.parse_args(argv)
    n_pages = args.pages or (16 if args.tiny else 2000)
    args.max_tokens = args.max_tokens or (256 if args.tiny else 8192)
    anchor_pages = args.anchor_pages if args.anchor_pages is not None else (4 if args.tiny else 100)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")

    import multiprocessing as mp

    t_setup = time.perf_counter()
    pages = load_pages(args.data, n_pages)
    log(f"loaded {len(pages)} pages from {args.data}")
    if args.save_pages:
        import pyarrow as pa
        import pyarrow.parquet as pq

        args.save_pages.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"html": pa.array(pages, pa.binary())}), args.save_pages / "pages.parquet")
        log(f"wrote {len(pages)} pages to {args.save_pages / 'pages.parquet'}; run with --data {args.save_pages}")
        return 0
    # Spawned (not forked) workers: the parent is about to initialise CUDA.
    pool = mp.get_context("spawn").Pool(args.workers)

    import torch

    from pulpie_spark.classify.hf import load_hf_classifier, pick_device
    from pulpie_spark.classify.packed import varlen_kernel_works

    device = pick_device(args.device)
    work = Path(tempfile.mkdtemp(prefix="pulpie-gpu-bench-"))
    chunk_pool = None
    try:
        # Tokenizer training data: the blocks of the first pages (what the model reads).
        sample = [b for blocks, _, _ in pool.imap(segment, pages[: min(200, n_pages)], chunksize=4)
                  for b in blocks]
        log(f"segmented {len(sample)} blocks for the tokenizer")
        if args.tokenizer:
            tokenizer = given_tokenizer(args.tokenizer, work)
            log(f"tokenizer {args.tokenizer} ({len(tokenizer)} tokens)")
        else:
            tokenizer = train_tokenizer(sample, args.vocab or (2000 if args.tiny else 50000), work)
            log("tokenizer trained")
        n_params = save_model(work, tokenizer, args.tiny)
        log(f"model saved ({n_params / 1e6:.1f}M params)")
        clf = load_hf_classifier(str(work), device=device, max_tokens=args.max_tokens,
                                 batch_tokens=args.batch_tokens, model_id="bench/eurobert-210m-random",
                                 packed={"auto": None, "packed": True, "padded": False}[args.attention],
                                 compile=args.compile)
        chars = sum(len(b) for b in sample)
        toks = sum(len(x) for x in clf.tokenize_blocks(sample))
        # Warm-up: CUDA context, kernels, allocator (and the compile, with --compile).
        t_warm = time.perf_counter()
        clf.predict_proba([sample[:64]])
        clf.predict_proba([sample[64:1000]])
        _sync(device)
        warmup_s = time.perf_counter() - t_warm
        log(f"warm-up {warmup_s:.1f} s")
        setup_s = time.perf_counter() - t_setup

        if args.tokenize_in == "workers":
            chunk_pool = mp.get_context("spawn").Pool(args.workers, initializer=init_chunker,
                                                      initargs=(str(work), args.max_tokens))
            chunk_pool.map(time.sleep, [0.0] * args.workers)   # workers up before the clock starts
        log("model loaded and warm")
        sampler = GpuSampler(device)
        if device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        run = run_pipeline(clf, pages, args.workers, args.pages_per_call, pool, chunk_pool)
        _sync(device)
        time.sleep(0.3)
        sampler.stop()
        gpu = sampler.summary(run["start"], run["end"])

        log(f"pipeline done: {n_pages / run['wall_s']:.2f} pages/s")
        # Anchor and batched model-only rate on the same pre-segmented pages.
        anchor_blocks = [b for b, _, _ in pool.imap(segment, pages[:anchor_pages], chunksize=4)]
        anchor_s = run_sequential_anchor(clf, anchor_blocks)
        t0 = time.perf_counter()
        packed_probs = clf.predict_proba(anchor_blocks)
        _sync(device)
        batched_s = time.perf_counter() - t0
        compare = compare_padded(clf, work, anchor_blocks, packed_probs, args)
        sweep = sweep_budgets(clf, anchor_blocks)
    finally:
        pool.terminate()
        if chunk_pool is not None:
            chunk_pool.terminate()
        shutil.rmtree(work, ignore_errors=True)

    pages_per_s = n_pages / run["wall_s"]
    result = {
        "command": " ".join([Path(sys.executable).name] + sys.argv),
        "device": device,
        "device_name": torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu",
        "dtype": str(clf.model.dtype), "attn": clf.model.config._attn_implementation,
        "packed": clf.packed, "varlen_kernel": clf.packed and device.startswith("cuda")
        and varlen_kernel_works(torch.device(device), clf.model.dtype),
        "torch": torch.__version__, "transformers": transformers_version(),
        "params": n_params, "tiny": args.tiny, "pages": n_pages, "workers": args.workers,
        "tokenize_in": args.tokenize_in, "compile": args.compile, "warmup_s": round(warmup_s, 1),
        "tokenizer": str(args.tokenizer) if args.tokenizer else f"trained BPE {len(tokenizer)}",
        "batch_tokens": clf.batch_tokens, "max_tokens": args.max_tokens,
        "pages_per_s": round(pages_per_s, 2),
        "wall_s": round(run["wall_s"], 2), "model_s": round(run["model_s"], 2),
        "model_busy_share": round(run["model_s"] / run["wall_s"], 3),
        "model_only_pages_per_s": round(n_pages / run["model_s"], 2),
        "segment_pages_per_s_per_core": round(n_pages / run["segment_s"], 1),
        "tokenize_s": round(run["tokenize_s"], 2),
        "blocks": run["blocks"], "chunks": run["chunks"], "segment_errors": run["segment_errors"],
        "tokens_per_page": round(run["real_tokens"] / n_pages, 1),
        "tokens_per_s": round(run["real_tokens"] / run["wall_s"]),
        "padding_share": round(1 - run["real_tokens"] / max(run["padded_tokens"], 1), 4),
        "chars_per_token": round(chars / max(toks, 1), 2),
        "main_share": round(run["main_blocks"] / max(run["blocks"], 1), 3),
        "peak_gpu_mem_gib": round(torch.cuda.max_memory_allocated(device) / 2**30, 2)
        if device.startswith("cuda") else None,
        **gpu,
        "anchor_pages": anchor_pages,
        "anchor_sequential_pages_per_s": round(anchor_pages / anchor_s, 2),
        "batched_same_pages_per_s": round(anchor_pages / batched_s, 2),
        "setup_s": round(setup_s, 1),
        **compare, **sweep,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")

    ratio_anchor = result["batched_same_pages_per_s"] / max(result["anchor_sequential_pages_per_s"], 1e-9)
    print(f"model {n_params / 1e6:.1f}M params, {result['dtype']}, attn={result['attn']}, compile={args.compile}, "
          f"device {result['device_name']}, {n_pages} pages, {args.workers} segmentation workers")
    print(f"{'':38s}{'ours':>12s}{'anchor':>12s}{'ratio':>8s}")
    print(f"{'model-only pages/s, first ' + str(anchor_pages) + ' pages':38s}"
          f"{result['batched_same_pages_per_s']:12.2f}{result['anchor_sequential_pages_per_s']:12.2f}"
          f"{ratio_anchor:8.2f}   (anchor: sequential per-page loop, same run)")
    print(f"{'end-to-end pages/s':38s}{pages_per_s:12.2f}{PUBLISHED_PULPIE_SMALL_A100:12.2f}"
          f"{pages_per_s / PUBLISHED_PULPIE_SMALL_A100:8.2f}   (anchor: published Pulpie Small, A100)")
    print(f"target >= {TARGET_PAGES_PER_S:.0f} pages/s on one H200: "
          f"{'met' if pages_per_s >= TARGET_PAGES_PER_S else 'NOT met'} ({device})")
    print(f"GPU util mean/median: {result['gpu_util_mean']}/{result['gpu_util_median']} % "
          f"({result['gpu_samples']} samples), model busy {result['model_busy_share']:.0%} of wall, "
          f"tokens/page {result['tokens_per_page']}, padding {result['padding_share']:.1%}, "
          f"chars/token {result['chars_per_token']}, segmentation "
          f"{result['segment_pages_per_s_per_core']} pages/s/core")
    if "padded_same_pages_per_s" in result:
        print(f"{'model-only pages/s, packed vs padded':38s}{result['batched_same_pages_per_s']:12.2f}"
              f"{result['padded_same_pages_per_s']:12.2f}"
              f"{result['batched_same_pages_per_s'] / max(result['padded_same_pages_per_s'], 1e-9):8.2f}"
              f"   (same pages; labels agree {result['packed_vs_padded_label_agreement']:.4f}, "
              f"max |dP| {result['packed_vs_padded_max_abs_diff']})")
    print(f"model-only pages/s by token budget: {result['model_only_pages_per_s_by_budget']}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
