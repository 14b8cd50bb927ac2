"""Thin Spark adapters (Pandas UDFs) over the pure curation cores.

Only the columns a UDF needs travel to Python (``pandas_udf`` over ``text``), so wide
input rows (HTML, markdown) are not serialized to the Python workers.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulpie_spark import reasons
from pulpie_spark.curate import minhash
from pulpie_spark.curate.config import CurateConfig, NearDedupConfig, NormalizeConfig, QualityConfig
from pulpie_spark.curate.language import UND, LanguageDecision, identify
from pulpie_spark.curate.normalize import normalize_text
from pulpie_spark.curate.quality import evaluate_quality, signal_names
from pulpie_spark.guards import call_with_deadline, page_seconds, reason_for_exception


def quality_schema(qcfg: QualityConfig) -> T.StructType:
    return T.StructType([
        T.StructField("text", T.StringType()),
        T.StructField("language", T.StringType()),
        T.StructField("language_score", T.DoubleType()),
        T.StructField("language_reason", T.StringType()),
        T.StructField("signals", T.StructType([T.StructField(n, T.DoubleType()) for n in signal_names(qcfg)])),
        T.StructField("fails", T.ArrayType(T.StringType())),
        T.StructField("drop_reason", T.StringType()),
        T.StructField("score", T.DoubleType()),
        T.StructField("failure", T.StringType()),
    ])


def normalize_and_score(raw, norm_cfg: NormalizeConfig, qcfg: QualityConfig,
                        lang: LanguageDecision | None = None) -> dict:
    """One row: normalized (C4-rewritten) text, language + score, language_reason,
    signals, fails, drop_reason, score. The language is identified on the normalized text,
    before the quality gates, which get it (``language=``). A row removed by the language
    stage (``language_reason``: not selected, or low confidence in drop mode) is not
    scored. Null or empty-after-normalization text gives text = None and no signals."""
    text = normalize_text(raw, norm_cfg) if isinstance(raw, str) else None
    identifying = lang is not None and lang.mode != "off"
    if not text:
        return {"text": None, "language": UND if identifying else None, "language_score": 0.0 if identifying else None,
                "language_reason": None, "signals": None, "fails": [], "drop_reason": None, "score": None}
    label, lang_score, lang_reason, tagged = None, None, None, []
    if identifying:
        label, lang_score = identify(text)
        lang_reason = lang.reason(label, lang_score)
        if lang_reason == reasons.LANGUAGE_LOW_CONFIDENCE and lang.mode == "tag":
            lang_reason, tagged = None, [reasons.LANGUAGE_LOW_CONFIDENCE]
    if lang_reason is not None:
        return {"text": text, "language": label, "language_score": lang_score, "language_reason": lang_reason,
                "signals": None, "fails": [], "drop_reason": None, "score": None}
    result = evaluate_quality(text, qcfg, language=label)
    return {"text": result.text, "language": label, "language_score": lang_score, "language_reason": None,
            "signals": result.signals, "fails": tagged + list(result.fails),
            "drop_reason": result.drop_reason, "score": result.score}


def guarded_normalize_and_score(raw, norm_cfg: NormalizeConfig, qcfg: QualityConfig, seconds: float | None,
                                lang: LanguageDecision | None = None) -> dict:
    """``normalize_and_score`` under the per-row deadline (``guards.page_seconds``).

    A row that runs over it (or fails) keeps its raw text and gets ``failure``
    (``timeout``, ``out_of_memory``, ``error:<Type>: ...``): the curate job removes it
    with that reason instead of hanging or killing the task."""
    try:
        row = call_with_deadline(normalize_and_score, raw, norm_cfg, qcfg, lang, seconds=seconds)
    except Exception as exc:  # DeadlineExceeded, MemoryError, RecursionError, a bug on one row
        return {"text": raw if isinstance(raw, str) else None, "language": None, "language_score": None,
                "language_reason": None, "signals": None, "fails": [],
                "drop_reason": None, "score": None, "failure": reason_for_exception(exc)}
    row["failure"] = None
    return row


def normalize_and_score_udf(cfg: CurateConfig):
    """pandas_udf: raw text -> struct(text normalized [C4-rewritten], language,
    language_score, language_reason, signals, fails, drop_reason, score, failure). Null or
    empty-after-normalization text gives text = null; a row over the per-row deadline
    gives ``failure`` = ``timeout``."""
    norm_cfg, qcfg = cfg.normalize, cfg.quality
    lang = LanguageDecision(cfg.language)
    names = signal_names(qcfg)
    schema = quality_schema(qcfg)
    columns = [f.name for f in schema.fields]

    @F.pandas_udf(schema)
    def normalize_and_score_rows(texts: pd.Series) -> pd.DataFrame:
        seconds = page_seconds()  # read on the executor: spark.executorEnv.PULPIE_PAGE_TIMEOUT_S
        rows = [guarded_normalize_and_score(raw, norm_cfg, qcfg, seconds, lang) for raw in texts]
        for row in rows:
            if row["signals"] is None:
                row["signals"] = {n: None for n in names}
        return pd.DataFrame(rows, columns=columns)

    return normalize_and_score_rows


def signature_udf(near_cfg: NearDedupConfig, bands: int, rows: int):
    """pandas_udf: text -> struct(signature binary [num_perm x uint32 LE], bands array<long>);
    null for a text without words. Whole Arrow batch in one vectorized call."""
    ngram, num_perm, seed = near_cfg.ngram, near_cfg.num_perm, near_cfg.seed
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
