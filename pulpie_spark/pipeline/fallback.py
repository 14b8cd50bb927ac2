"""Fallback stage: trafilatura for pages the block model could not serve (Pandas UDF).

The core decision and extraction live in :mod:`pulpie_spark.fallback` (shared with
``Extractor``); this adapter only runs them over a batch. The caller passes ``html`` as
null for rows that need no fallback, so those rows cost nothing here.
"""

from __future__ import annotations

import pandas as pd  # module level: pandas_udf resolves the type hints from globals

FALLBACK_FIELDS = ("markdown", "text", "fallback", "fallback_error")
FALLBACK_DDL = "markdown string, text string, fallback string, fallback_error string"


def fallback_page(html, declared_charset, *, links: bool = False, images: bool = False) -> dict:
    """trafilatura's Markdown and text for one page, under the page guards. Never raises."""
    from pulpie_spark.decode import decode_html
    from pulpie_spark.fallback import trafilatura_extract
    from pulpie_spark.guards import guard_page

    out = {"markdown": None, "text": None, "fallback": None, "fallback_error": None}
    if html is None or (isinstance(html, float) and html != html):
        return out
    if isinstance(html, (bytes, bytearray, memoryview)):
        charset = declared_charset if isinstance(declared_charset, str) else None
        html, _ = decode_html(bytes(html), charset)
    result, guard_reason = guard_page(trafilatura_extract, html, links=links, images=images)
    if guard_reason is not None:
        out["fallback_error"] = f"fallback_failed: {guard_reason}"
    elif result.error:
        out["fallback_error"] = result.error
    else:
        out.update(markdown=result.markdown, text=result.text, fallback="trafilatura")
    return out


def fallback_series(html, charset, *, links: bool = False, images: bool = False):
    rows = [fallback_page(h, c, links=links, images=images) for h, c in zip(html, charset)]
    return pd.DataFrame(rows, columns=list(FALLBACK_FIELDS), index=html.index)


def fallback_column(html_col, charset_col, *, links: bool = False, images: bool = False):
    from pyspark.sql.functions import pandas_udf

    @pandas_udf(FALLBACK_DDL)
    def pulpie_fallback(html: pd.Series, charset: pd.Series) -> pd.DataFrame:
        return fallback_series(html, charset, links=links, images=images)

    return pulpie_fallback(html_col, charset_col)
