"""Segment stage: html -> blocks, block_paths, map_html, encoding, seg_error (Pandas UDF).

Every page goes through ``guards.guard_page``: a page above ``MAX_HTML_BYTES`` or one
that runs past the per-page deadline gets ``seg_error`` (``html_too_large``,
``timeout``, ...) and empty blocks; the task never hangs or dies on it.
"""

from __future__ import annotations

import pandas as pd  # module level: pandas_udf resolves the type hints from globals

SEGMENT_FIELDS = ("blocks", "block_paths", "map_html", "encoding", "seg_error")
SEGMENT_DDL = ("blocks array<string>, block_paths array<string>, map_html string, "
               "encoding string, seg_error string")
NO_BLOCKS = "no_blocks"


def _is_missing(value) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def segment_page(html, declared_charset: str | None = None) -> dict:
    """One page -> the stage's fields. Never raises."""
    from pulpie_spark.guards import REASON_EMPTY, REASON_NULL, guard_page
    from pulpie_spark.simplify import simplify

    empty = {"blocks": [], "block_paths": [], "map_html": None, "encoding": None, "seg_error": None}
    if _is_missing(html):
        return {**empty, "seg_error": REASON_NULL}
    if isinstance(html, (bytearray, memoryview)):
        html = bytes(html)
    if len(html) == 0:
        return {**empty, "seg_error": REASON_EMPTY}
    charset = None if _is_missing(declared_charset) else declared_charset
    page, reason = guard_page(simplify, html, declared_charset=charset)
    if reason is not None:
        return {**empty, "seg_error": reason}
    if page.error:
        return {**empty, "encoding": page.encoding, "seg_error": page.error}
    if not page.blocks:
        return {**empty, "encoding": page.encoding, "seg_error": NO_BLOCKS}
    return {"blocks": list(page.blocks), "block_paths": list(page.paths), "map_html": page.map_html,
            "encoding": page.encoding, "seg_error": None}


def segment_series(html, charset):
    """Pandas core of the UDF: two Series in, a DataFrame of SEGMENT_FIELDS out."""
    rows = [segment_page(h, c) for h, c in zip(html, charset)]
    return pd.DataFrame(rows, columns=list(SEGMENT_FIELDS), index=html.index)


def segment_column(html_col, charset_col):
    """The Spark Column (a struct of SEGMENT_FIELDS) for ``html_col``/``charset_col``."""
    from pyspark.sql.functions import pandas_udf

    @pandas_udf(SEGMENT_DDL)
    def pulpie_segment(html: pd.Series, charset: pd.Series) -> pd.DataFrame:
        return segment_series(html, charset)

    return pulpie_segment(html_col, charset_col)
