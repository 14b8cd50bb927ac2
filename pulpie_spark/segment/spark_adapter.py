"""Spark adapter of the segment stage: html -> blocks, block_paths, map_html, encoding, title, seg_error.

A Pandas UDF over :func:`pulpie_spark.page.segment_page`: every page goes through the
page guards, so a page above ``PULPIE_MAX_HTML_BYTES`` or one that runs past the
per-page deadline gets ``seg_error`` (``html_too_large``, ``timeout``, ...) and empty
blocks; the task never hangs or dies on it.
"""

from __future__ import annotations

import pandas as pd  # module level: pandas_udf resolves the type hints from globals

from pulpie_spark.page import SEGMENT_FIELDS, segment_page

SEGMENT_DDL = ("blocks array<string>, block_paths array<string>, map_html string, "
               "encoding string, title string, seg_error string")


def segment_series(html, charset):
    """Pandas core of the UDF: two Series in, a DataFrame of SEGMENT_FIELDS out."""
    rows = [segment_page(h, c) for h, c in zip(html, charset)]
    return pd.DataFrame(rows, columns=list(SEGMENT_FIELDS), index=html.index)


def segment_column(html_col, charset_col):
    """The Spark Column (a struct of SEGMENT_FIELDS) for ``html_col``/``charset_col``."""
    from pyspark.sql.functions import pandas_udf

    from pulpie_spark.memory import releasing_memory

    @pandas_udf(SEGMENT_DDL)
    @releasing_memory
    def pulpie_segment(html: pd.Series, charset: pd.Series) -> pd.DataFrame:
        return segment_series(html, charset)

    return pulpie_segment(html_col, charset_col)
