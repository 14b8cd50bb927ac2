"""Spark adapter of the render stage: Pandas UDFs over the per-page core (pulpie_spark.page).

    render_column    map_html + labels -> main_html, markdown, text, n_main, render_error
    fallback_column  html -> the fallback extractor's markdown and text (only for the rows that need
                     it: the caller passes ``html`` as null for the others, so they cost nothing)
"""

from __future__ import annotations

import pandas as pd  # module level: pandas_udf resolves the type hints from globals

from pulpie_spark.page import FALLBACK_FIELDS, RENDER_FIELDS, fallback_page, render_page

RENDER_DDL = "main_html string, markdown string, text string, n_main int, render_error string"
FALLBACK_DDL = "markdown string, text string, fallback string, fallback_error string"


def render_series(map_html, labels, *, links: bool = False, images: bool = False):
    rows = [render_page(m, l, links=links, images=images) for m, l in zip(map_html, labels)]
    return pd.DataFrame(rows, columns=list(RENDER_FIELDS), index=map_html.index)


def render_column(map_html_col, labels_col, *, links: bool = False, images: bool = False):
    from pyspark.sql.functions import pandas_udf

    from pulpie_spark.memory import releasing_memory

    @pandas_udf(RENDER_DDL)
    @releasing_memory
    def pulpie_render(map_html: pd.Series, labels: pd.Series) -> pd.DataFrame:
        return render_series(map_html, labels, links=links, images=images)

    return pulpie_render(map_html_col, labels_col)


def fallback_series(html, charset, *, links: bool = False, images: bool = False, fallback: str = "trafilatura"):
    rows = [fallback_page(h, c, links=links, images=images, fallback=fallback) for h, c in zip(html, charset)]
    return pd.DataFrame(rows, columns=list(FALLBACK_FIELDS), index=html.index)


def fallback_column(html_col, charset_col, *, links: bool = False, images: bool = False,
                    fallback: str = "trafilatura"):
    from pyspark.sql.functions import pandas_udf

    from pulpie_spark.memory import releasing_memory

    @pandas_udf(FALLBACK_DDL)
    @releasing_memory
    def pulpie_fallback(html: pd.Series, charset: pd.Series) -> pd.DataFrame:
        return fallback_series(html, charset, links=links, images=images, fallback=fallback)

    return pulpie_fallback(html_col, charset_col)
