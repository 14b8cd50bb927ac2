"""Thin Spark adapters (Pandas UDFs) over the pure curation cores.

Only the columns a UDF needs travel to Python (``pandas_udf`` over ``text``), so wide
input rows (HTML, markdown) are not serialized to the Python workers.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulpie_spark.curate import minhash
from pulpie_spark.curate.normalize import normalize_text
from pulpie_spark.curate.quality import evaluate_quality, signal_names


def quality_schema(qcfg: Mapping) -> T.StructType:
    return T.StructType([
        T.StructField("text", T.StringType()),
        T.StructField("signals", T.StructType([T.StructField(n, T.DoubleType()) for n in signal_names(qcfg)])),
        T.StructField("fails", T.ArrayType(T.StringType())),
        T.StructField("drop_reason", T.StringType()),
        T.StructField("score", T.DoubleType()),
    ])


def normalize_and_score_udf(cfg: Mapping):
    """pandas_udf: raw text -> struct(text normalized [C4-rewritten], signals, fails,
    drop_reason, score). Null or empty-after-normalization text gives text = null."""
    norm_cfg, qcfg = dict(cfg["normalize"]), dict(cfg["quality"])
    names = signal_names(qcfg)
    schema = quality_schema(qcfg)

    @F.pandas_udf(schema)
    def normalize_and_score(texts: pd.Series) -> pd.DataFrame:
        out_text, signals, fails, reasons, scores = [], [], [], [], []
        for raw in texts:
            text = normalize_text(raw, norm_cfg) if isinstance(raw, str) else None
            if not text:
                out_text.append(None)
                signals.append({n: None for n in names})
                fails.append([])
                reasons.append(None)
                scores.append(None)
                continue
            result = evaluate_quality(text, qcfg)
            out_text.append(result.text)
            signals.append(result.signals)
            fails.append(result.fails)
            reasons.append(result.drop_reason)
            scores.append(result.score)
        return pd.DataFrame({"text": out_text, "signals": signals, "fails": fails,
                             "drop_reason": reasons, "score": scores})

    return normalize_and_score


def signature_udf(near_cfg: Mapping, bands: int, rows: int):
    """pandas_udf: text -> struct(signature binary [num_perm x uint32 LE], bands array<long>);
    null for a text without words. Whole Arrow batch in one vectorized call."""
    ngram, num_perm, seed = int(near_cfg["ngram"]), int(near_cfg["num_perm"]), int(near_cfg["seed"])
    schema = T.StructType([T.StructField("signature", T.BinaryType()),
                           T.StructField("bands", T.ArrayType(T.LongType()))])

    @F.pandas_udf(schema)
    def minhash_signature(texts: pd.Series) -> pd.DataFrame:
        sigs = minhash.signatures([t if isinstance(t, str) else None for t in texts], ngram, num_perm, seed)
        band_vals = minhash.band_hashes(sigs, bands, rows)
        # A text without shingles gets the all-0xFFFFFFFF signature (minhash._EMPTY).
        has_words = (sigs != np.uint32(0xFFFFFFFF)).any(axis=1).tolist()
        le = sigs.astype("<u4", copy=False)
        return pd.DataFrame({
            "signature": [le[i].tobytes() if ok else None for i, ok in enumerate(has_words)],
            "bands": [band_vals[i].tolist() if ok else None for i, ok in enumerate(has_words)],
        })

    return minhash_signature


@F.pandas_udf(T.DoubleType())
def signature_similarity(sig_a: pd.Series, sig_b: pd.Series) -> pd.Series:
    """Estimated Jaccard: share of equal MinHash positions."""
    out = np.full(len(sig_a), np.nan)
    for i, (a, b) in enumerate(zip(sig_a, sig_b)):
        if a is not None and b is not None and len(a) == len(b):
            out[i] = minhash.estimate_jaccard(np.frombuffer(a, "<u4"), np.frombuffer(b, "<u4"))
    return pd.Series(out)


def exact_similarity_udf(ngram: int, seed: int):
    @F.pandas_udf(T.DoubleType())
    def shingle_jaccard(text_a: pd.Series, text_b: pd.Series) -> pd.Series:
        return pd.Series([minhash.jaccard(minhash.shingle_set(a, ngram, seed), minhash.shingle_set(b, ngram, seed))
                          for a, b in zip(text_a, text_b)], dtype="float64")

    return shingle_jaccard


def text_sha256(col: str | Column) -> Column:
    """SHA-256 hex of the UTF-8 bytes of a string column (same as hashlib on str.encode())."""
    return F.sha2(F.col(col) if isinstance(col, str) else col, 256)
