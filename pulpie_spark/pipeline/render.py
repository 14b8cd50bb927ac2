"""Render stage: map_html + labels -> main_html, markdown, text, n_main (Pandas UDF)."""

from __future__ import annotations

import pandas as pd  # module level: pandas_udf resolves the type hints from globals

RENDER_FIELDS = ("main_html", "markdown", "text", "n_main", "render_error")
RENDER_DDL = "main_html string, markdown string, text string, n_main int, render_error string"


def render_page(map_html, labels, *, links: bool = False, images: bool = False) -> dict:
    """One page's main HTML, Markdown and text from its map HTML and block labels. Never raises."""
    from pulpie_spark.guards import call_with_deadline, page_seconds, reason_for_exception
    from pulpie_spark.reconstruct import render_main

    out = {"main_html": None, "markdown": None, "text": None, "n_main": None, "render_error": None}
    if map_html is None or labels is None or (isinstance(map_html, float)):
        return out
    labels = [int(v) for v in labels]
    out["n_main"] = int(sum(1 for v in labels if v == 1))
    try:
        # One deadline for the page's three steps, like one page in segmentation.
        seconds = page_seconds()

        out["main_html"], out["markdown"], out["text"] = call_with_deadline(
            lambda: render_main(map_html, labels, links=links, images=images), seconds=seconds)
    except Exception as exc:
        out["render_error"] = "render:" + reason_for_exception(exc)
    return out


def render_series(map_html, labels, *, links: bool = False, images: bool = False):
    rows = [render_page(m, l, links=links, images=images) for m, l in zip(map_html, labels)]
    return pd.DataFrame(rows, columns=list(RENDER_FIELDS), index=map_html.index)


def render_column(map_html_col, labels_col, *, links: bool = False, images: bool = False):
    from pyspark.sql.functions import pandas_udf

    @pandas_udf(RENDER_DDL)
    def pulpie_render(map_html: pd.Series, labels: pd.Series) -> pd.DataFrame:
        return render_series(map_html, labels, links=links, images=images)

    return pulpie_render(map_html_col, labels_col)
