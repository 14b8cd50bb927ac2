"""MinHash signatures over word n-grams, vectorized per batch of documents.

Scheme (pure numpy, no Python call per word or shingle, no Spark):

1. words: lowercase ``\\w+`` runs of the text (exactly ``words()``), found on the
   batch's code points (UTF-32, all documents joined by a separator) with one table
   ``V[code point]`` that lowercases and marks non-word chars with 0; in the scripts
   written without spaces between words (Han, Hiragana/Katakana, Thai, Lao, Khmer,
   Myanmar, Tibetan, Yi, ... ``SOLO_RANGES``) every character (letters, digits and
   combining marks) is a word by itself, so a shingle there is a character n-gram and
   one changed character changes only n shingles. The script of each character decides,
   so a Japanese page with English menu words gets character n-grams for the Japanese
   and word n-grams for the English; a text without such characters is hashed exactly
   as before (same signatures);
2. word hash: polynomial ``sum_t V[c_t] * B^-t mod 2^64`` over its chars, read off one
   prefix sum of the whole batch (``(Q[end] - Q[start]) * B^start``), finished with
   splitmix64 of (hash, length, seed); a shingle (n consecutive words) is the rolling
   combination of its word hashes, finished with splitmix64 (a document with fewer than
   n words is one shingle); everything is numpy over the batch, no Python per word;
3. one-permutation hashing (Li, Owen & Zhang 2012): each 64-bit shingle hash picks its
   bin ``((h >> 32) * num_perm) >> 32`` and the bin keeps the minimum of the low 32 bits
   (capped at 0xFFFFFFFE); one pass over the shingles instead of num_perm;
4. empty bins are filled by optimal densification (Shrivastava 2017): bin j copies
   the first non-empty bin of a probe sequence that depends only on (j, attempt, seed),
   so P(equal position) = Jaccard exactly as for classic MinHash;
5. signature: (n_docs, num_perm) uint32; a document without words is all 0xFFFFFFFF.

Two signatures estimate Jaccard as the share of equal positions, like
``datasketch.MinHash.jaccard``. Bands hash ``rows`` consecutive values to one int64.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from pulpie_spark.curate.config import NearDedupConfig

_U32 = np.uint64(0xFFFFFFFF)
_EMPTY = np.uint32(0xFFFFFFFF)
_MAX_VALUE = np.uint64(0xFFFFFFFE)  # a shingle's value never equals the empty marker
_ROLL = np.uint64(0x100000001B3)  # FNV-64 prime: odd, spreads across all 64 bits
_SM1 = np.uint64(0xBF58476D1CE4E5B9)
_SM2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_LEN_MUL = np.uint64(0xC2B2AE3D27D4EB4F)
_PROBE_MUL = np.uint64(0x165667B19E3779F9)
_WORD = re.compile(r"\w+")
_BATCH_CHARS = 1 << 20  # code points per vectorized step: bounds temporary memory (~50 MB)
_BASE = np.uint64(0x9FB21C651E98DF25)  # odd: invertible mod 2^64
_BASE_INV = np.uint64(pow(0x9FB21C651E98DF25, -1, 1 << 64))


def _splitmix64(v: np.ndarray) -> np.ndarray:
    v = v ^ (v >> np.uint64(30))
    v = v * _SM1
    v = v ^ (v >> np.uint64(27))
    v = v * _SM2
    return v ^ (v >> np.uint64(31))


def _seed_mix(seed: int) -> np.uint64:
    return np.uint64(int(_splitmix64(np.array([seed & 0xFFFFFFFFFFFFFFFF], dtype=np.uint64))[0]))


# Blocks of the scripts written without spaces between words: each word character (and
# each combining mark) here is one "word" of its own (character n-grams).
SOLO_RANGES: tuple[tuple[int, int], ...] = (
    (0x0E00, 0x0E7F),    # Thai
    (0x0E80, 0x0EFF),    # Lao
    (0x0F00, 0x0FFF),    # Tibetan
    (0x1000, 0x109F),    # Myanmar
    (0x1780, 0x17FF),    # Khmer
    (0x1950, 0x19FF),    # Tai Le, New Tai Lue, Khmer symbols
    (0x1A20, 0x1AAF),    # Tai Tham
    (0x3005, 0x3007),    # ideographic iteration mark, closing mark, number zero
    (0x3021, 0x3029),    # Hangzhou numerals
    (0x3031, 0x3035),    # kana repeat marks
    (0x303B, 0x303C),
    (0x3040, 0x30FF),    # Hiragana, Katakana
    (0x3100, 0x312F),    # Bopomofo
    (0x31A0, 0x31BF),    # Bopomofo extended
    (0x31F0, 0x31FF),    # Katakana phonetic extensions
    (0x3400, 0x4DBF),    # CJK extension A
    (0x4E00, 0x9FFF),    # CJK unified ideographs
    (0xA000, 0xA4CF),    # Yi
    (0xA9E0, 0xA9FF),    # Myanmar extended-B
    (0xAA60, 0xAA7F),    # Myanmar extended-A
    (0xF900, 0xFAFF),    # CJK compatibility ideographs
    (0xFF66, 0xFF9F),    # halfwidth Katakana
    (0x1B000, 0x1B16F),  # Kana supplement / extended-A
    (0x20000, 0x323AF),  # CJK extensions B-H, compatibility supplement
)
_SOLO_MIN = min(lo for lo, _ in SOLO_RANGES)


@lru_cache(maxsize=1)
def _solo_table() -> np.ndarray:
    """S[code point] (bool): a word character or combining mark of a SOLO_RANGES block."""
    solo = np.zeros(0x110000, dtype=bool)
    for lo, hi in SOLO_RANGES:
        for cp in range(lo, hi + 1):
            ch = chr(cp)
            if ch.isalnum() or unicodedata.category(ch).startswith("M"):
                solo[cp] = True
    solo.setflags(write=False)
    return solo


def _class_ranges(flags: np.ndarray) -> str:
    """A regex character class body for the code points set in ``flags``."""
    cps = np.flatnonzero(flags)
    breaks = np.flatnonzero(np.diff(cps) != 1)
    starts = np.concatenate(([cps[0]], cps[breaks + 1]))
    ends = np.concatenate((cps[breaks], [cps[-1]]))
    return "".join(re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
                   for a, b in zip(starts.tolist(), ends.tolist()))


@lru_cache(maxsize=1)
def _word_regex() -> re.Pattern:
    solo = _class_ranges(_solo_table())
    return re.compile(f"[{solo}]|[^\\W{solo}]+")


# chars that str.lower() does not map one-to-one: capital sigma (final-sigma context)
# plus, filled by _char_table(), those with a multi-char lowercase (U+0130)
_CONTEXT_LOWER: list[str] = ["\u03a3"]


@lru_cache(maxsize=1)
def _char_table() -> np.ndarray:
    """V[code point] (uint64): 0 when the lowercased char is not a ``\\w`` char
    (``\\w`` is isalnum() or '_'), else a fixed random non-zero value of the lowercased
    char, so that the table both lowercases and finds words. Single-char lowercasing is
    exact except for U+0130 (two chars) and U+03A3 (final sigma depends on context):
    texts with these are lowercased by str.lower() first (lower() is idempotent)."""
    n = 0x110000
    lowered = list(map(str.lower, map(chr, range(n))))
    multi = [cp for cp, low in enumerate(lowered) if len(low) != 1]  # [0x130] on CPython 3.x
    for cp in multi:
        lowered[cp] = chr(cp)
    _CONTEXT_LOWER[:] = sorted(set(_CONTEXT_LOWER) | {chr(cp) for cp in multi})
    lower = np.fromiter(map(ord, lowered), dtype=np.int64, count=n)
    is_word = np.fromiter(map(str.isalnum, map(chr, range(n))), dtype=bool, count=n)
    is_word[ord("_")] = True
    # splitmix64 of the code point: fixed across numpy versions (no RNG stream)
    rand = _splitmix64(np.arange(n, dtype=np.uint64) + np.uint64(0x5EED0000))
    rand[rand == 0] = 1
    table = np.where(is_word[lower], rand[lower], np.uint64(0))
    # combining marks of the SOLO_RANGES scripts (Thai, Myanmar, ... vowel signs) are
    # characters of their own there, not separators
    marks = _solo_table() & ~is_word
    table[marks] = rand[marks]
    table.setflags(write=False)
    return table


_POW_CACHE: dict[str, np.ndarray] = {}


def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(B^m, B^-m) mod 2^64 for m < n (uint64); cached for one step (_BATCH_CHARS)."""
    cached = _POW_CACHE.get("p")
    if cached is not None and len(cached) >= n:
        return cached[:n], _POW_CACHE["q"][:n]
    size = max(n, _BATCH_CHARS + 2)
    p = np.full(size, _BASE, dtype=np.uint64)
    p[0] = 1
    np.multiply.accumulate(p, out=p)
    q = np.full(size, _BASE_INV, dtype=np.uint64)
    q[0] = 1
    np.multiply.accumulate(q, out=q)
    if size <= _BATCH_CHARS + 2:
        _POW_CACHE["p"], _POW_CACHE["q"] = p, q
    return p[:n], q[:n]


def words(text: str) -> list[str]:
    """Lowercase ``\\w+`` runs; in SOLO_RANGES scripts each character is a word."""
    low = text.lower()
    if low.isascii() or max(map(ord, low)) < _SOLO_MIN:
        return _WORD.findall(low)
    return _word_regex().findall(low)


def _batch_shingles(texts: Sequence[str | None], ngram: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(shingle hashes uint64, document index int64) of a batch, documents in order."""
    table = _char_table()  # first: also fills _CONTEXT_LOWER
    docs = [t if t else "" for t in texts]
    for i, t in enumerate(docs):
        if not t.isascii() and any(c in t for c in _CONTEXT_LOWER):
            docs[i] = t.lower()
    n_docs = len(docs)
    empty = (np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.int64))
    if n_docs == 0:
        return empty
    # a separator (non-word char) around each document: no word spans two documents,
    # and the first and last code points are never word chars
    cps = np.frombuffer((" " + " ".join(docs) + " ").encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    lens = np.fromiter(map(len, docs), dtype=np.int64, count=n_docs)
    doc_start = np.ones(n_docs, dtype=np.int64)
    np.cumsum(lens[:-1] + 1, out=doc_start[1:])
    doc_start[1:] += 1
    v = table[cps]
    mask = v != 0
    # SOLO characters of the batch: looked up only among the code points >= _SOLO_MIN
    # (a table lookup over the whole batch would cost English text ~10% of the time)
    high = np.flatnonzero(cps >= _SOLO_MIN)
    solo_at = high[_solo_table()[cps[high]]] if len(high) else high
    if len(solo_at) == 0:
        # change[i]: last index before a word starts / last index of a word (they alternate)
        change = np.flatnonzero(mask[1:] != mask[:-1])
        if len(change) == 0:
            return empty
        before, last = change[0::2], change[1::2]
    else:
        # a SOLO character is a word alone: it starts and ends one, and so do its neighbours
        solo = np.zeros(len(cps), dtype=bool)
        solo[solo_at] = True
        cut = solo[1:] | solo[:-1]
        before = np.flatnonzero(mask[1:] & (cut | ~mask[:-1]))
        last = np.flatnonzero(mask[:-1] & (cut | ~mask[1:]))
        if len(before) == 0:
            return empty
    wlen = last - before
    # word [s, e): sum_t V[c_{s+t}] * B^-t = (Q[e-1] - Q[s-1]) * B^s, Q = cumsum(V[c_m] * B^-m)
    pw, pw_inv = _powers(len(cps))
    v *= pw_inv
    np.cumsum(v, out=v)
    word_hash = v.take(last)
    word_hash -= v.take(before)
    word_hash *= pw[1:].take(before)
    word_hash ^= wlen.view(np.uint64) * _LEN_MUL + _seed_mix(seed)
    word_hash = _splitmix64(word_hash)
    first_word = np.searchsorted(before, doc_start - 1)
    n_words = np.diff(first_word, append=len(before))
    word_doc = np.repeat(np.arange(n_docs), n_words)

    out_h, out_d = [], []
    count = len(word_hash) - ngram + 1
    if count > 0:
        acc = word_hash[:count].copy()
        for k in range(1, ngram):
            acc *= _ROLL
            acc += word_hash[k: k + count]
        ok = word_doc[:count] == word_doc[ngram - 1:]
        out_h.append(_splitmix64(acc[ok] ^ np.uint64(ngram)))
        out_d.append(word_doc[:count][ok])
    # documents with 1 .. ngram-1 words: one shingle of all their words
    short = np.flatnonzero((n_words > 0) & (n_words < ngram))
    if len(short):
        first = np.searchsorted(word_doc, short)
        vals = np.empty(len(short), dtype=np.uint64)
        for i, (d, f) in enumerate(zip(short.tolist(), first.tolist())):
            n = int(n_words[d])
            wh = word_hash[f: f + n].tolist()
            acc = wh[0]
            for k in range(1, n):
                acc = (acc * int(_ROLL) + wh[k]) & 0xFFFFFFFFFFFFFFFF
            vals[i] = acc ^ n
        out_h.append(_splitmix64(vals))
        out_d.append(short)
    if len(out_h) == 1:
        return out_h[0], out_d[0]
    h, d = np.concatenate(out_h), np.concatenate(out_d)
    order = np.argsort(d, kind="stable")
    return h[order], d[order]


def _chunks(texts: Sequence[str | None]):
    """Consecutive (lo, hi) document ranges of at most ~_BATCH_CHARS characters."""
    lo, size = 0, 0
    for i, t in enumerate(texts):
        n = len(t) if t else 0
        if size and size + n > _BATCH_CHARS:
            yield lo, i
            lo, size = i, 0
        size += n + 1
    yield lo, len(texts)


def shingle_hashes(text: str | None, ngram: int = 5, seed: int = 1) -> np.ndarray:
    """64-bit hashes of the word n-grams of ``text`` (uint64; empty for no words).

    Not deduplicated: the MinHash minimum ignores repeats; use np.unique for sets.
    """
    return _batch_shingles([text], ngram, seed)[0]


def shingle_set(text: str | None, ngram: int = 5, seed: int = 1) -> np.ndarray:
    return np.unique(shingle_hashes(text, ngram, seed))


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Exact Jaccard of two sorted unique hash arrays (1.0 for two empty sets)."""
    if len(a) == 0 and len(b) == 0:
        return 1.0
    inter = len(np.intersect1d(a, b, assume_unique=True))
    return inter / (len(a) + len(b) - inter)


def _probe(bins: np.ndarray, attempt: int, num_perm: int, seed_mix: np.uint64) -> np.ndarray:
    """Densification probe: bin to copy from for empty bin ``bins`` at ``attempt``."""
    offset = np.uint64((attempt * int(_GOLDEN) + int(seed_mix)) & 0xFFFFFFFFFFFFFFFF)
    x = bins.astype(np.uint64) * _PROBE_MUL + offset
    return ((_splitmix64(x) >> np.uint64(32)) * np.uint64(num_perm)) >> np.uint64(32)


def _densify(sig: np.ndarray, seed: int) -> None:
    """Optimal densification in place for rows with some (not all) empty bins."""
    num_perm = sig.shape[1]
    empty = sig == _EMPTY
    n_empty = empty.sum(axis=1)
    rows = np.flatnonzero((n_empty > 0) & (n_empty < num_perm))
    if len(rows) == 0:
        return
    # a row with one non-empty bin: every probe sequence ends there
    single = rows[n_empty[rows] == num_perm - 1]
    if len(single):
        sig[single] = sig[single].min(axis=1, keepdims=True)
        rows = rows[n_empty[rows] < num_perm - 1]
    if len(rows) == 0:
        return
    src = sig[rows]  # snapshot: borrow only from originally non-empty bins
    r, j = np.nonzero(src == _EMPTY)
    mix = _seed_mix(seed ^ 0x0DE45)
    attempt = 0
    while len(r):
        attempt += 1
        if attempt > 4096:  # never seen in practice: next non-empty bin to the right
            for rr, jj in zip(r.tolist(), j.tolist()):
                row = src[rr]
                k = next(k for k in range(1, num_perm) if row[(jj + k) % num_perm] != _EMPTY)
                sig[rows[rr], jj] = row[(jj + k) % num_perm]
            break
        val = src[r, _probe(j, attempt, num_perm, mix).astype(np.intp)]
        hit = val != _EMPTY
        sig[rows[r[hit]], j[hit]] = val[hit]
        r, j = r[~hit], j[~hit]


def _oph(h: np.ndarray, doc: np.ndarray, n_docs: int, num_perm: int, seed: int) -> np.ndarray:
    sig = np.full(n_docs * num_perm, _EMPTY, dtype=np.uint32)
    if len(h):
        bins = ((h >> np.uint64(32)) * np.uint64(num_perm)) >> np.uint64(32)
        flat = doc.astype(np.uint64) * np.uint64(num_perm) + bins
        vals = np.minimum(h & _U32, _MAX_VALUE).astype(np.uint32)
        np.minimum.at(sig, flat.astype(np.intp), vals)
    sig = sig.reshape(n_docs, num_perm)
    _densify(sig, seed)
    return sig


def signatures(texts: Sequence[str | None], ngram: int = 5, num_perm: int = 112,
               seed: int = 1) -> np.ndarray:
    """MinHash signatures of a batch of texts, (n_docs, num_perm) uint32."""
    texts = list(texts)
    parts = []
    for lo, hi in _chunks(texts):
        h, doc = _batch_shingles(texts[lo:hi], ngram, seed)
        parts.append(_oph(h, doc, hi - lo, num_perm, seed))
    if not parts:
        return np.full((0, num_perm), _EMPTY, dtype=np.uint32)
    return parts[0] if len(parts) == 1 else np.vstack(parts)


def estimate_jaccard(sig_a: np.ndarray, sig_b: np.ndarray) -> np.ndarray | float:
    """Share of equal positions; works row-wise on (n, num_perm) arrays."""
    eq = np.asarray(sig_a) == np.asarray(sig_b)
    return eq.mean(axis=-1)


def band_hashes(sig: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """(n_docs, bands) int64: one hash per band of ``rows`` signature values."""
    n_docs = sig.shape[0]
    block = sig[:, : bands * rows].astype(np.uint64).reshape(n_docs, bands, rows)
    acc = np.zeros((n_docs, bands), dtype=np.uint64)
    for r in range(rows):
        acc = _splitmix64(acc * _ROLL + block[:, :, r])
    return acc.view(np.int64)


# ------------------------------------------------------------------ LSH parameters
def _integrate(fn, lo: float, hi: float, steps: int = 400) -> float:
    if hi <= lo:
        return 0.0
    xs = np.linspace(lo, hi, steps + 1)
    ys = fn(xs)
    return float(np.sum((ys[1:] + ys[:-1]) * 0.5 * (xs[1] - xs[0])))


def false_positive_area(threshold: float, bands: int, rows: int) -> float:
    return _integrate(lambda s: 1 - (1 - s ** rows) ** bands, 0.0, threshold)


def false_negative_area(threshold: float, bands: int, rows: int) -> float:
    return _integrate(lambda s: (1 - s ** rows) ** bands, threshold, 1.0)


def optimal_bands_rows(threshold: float, num_perm: int, fp_weight: float = 0.5,
                       fn_weight: float = 0.5) -> tuple[int, int]:
    """(bands, rows) minimising weighted false positive + negative areas of the S-curve
    (datasketch's ``_optimal_param``, integrated with the trapezoid rule)."""
    best, best_err = (1, 1), math.inf
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            err = fp_weight * false_positive_area(threshold, b, r) + fn_weight * false_negative_area(threshold, b, r)
            if err < best_err - 1e-12:
                best, best_err = (b, r), err
    return best


def lsh_params(near_cfg: NearDedupConfig) -> tuple[int, int]:
    """Configured (bands, rows), or derived from the threshold when both are 0."""
    if near_cfg.bands and near_cfg.rows:
        return int(near_cfg.bands), int(near_cfg.rows)
    return optimal_bands_rows(near_cfg.threshold, near_cfg.num_perm)
