"""Every Python code block of README.md and docs/*.md runs, as written, on small inputs.

A block gets the names it uses from ``INPUTS`` (a real fixture page for ``html_bytes``,
an extract-like table for ``df``); it runs with the repository root as working
directory, as a user who cloned it would run it. Signature sketches in the docs are
fenced as ``text``, not ``python``.
"""

from __future__ import annotations

import os
import re

import pytest
from helpers_data import DATA, GOOD, ROOT

DOCS = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def python_blocks():
    for doc in DOCS:
        for i, match in enumerate(_BLOCK.finditer(doc.read_text(encoding="utf-8"))):
            yield pytest.param(match.group(1), id=f"{doc.name}#{i}")


def _inputs(spark):
    html_bytes = (DATA / "md_wcxb_dev_0488.html").read_bytes()
    rows = [(f"d{i}", f"http://example.org/{i}", GOOD + f"\nParagraph number {i} closes the page.", None)
            for i in range(4)]
    df = spark.createDataFrame(rows, "doc_id string, url string, text string, error string")
    return {"html_bytes": html_bytes, "list_of_html": [html_bytes, b"<p>A second, tiny page.</p>"], "df": df}


def test_the_docs_have_python_blocks():
    assert len(list(python_blocks())) >= 2


@pytest.mark.parametrize("code", list(python_blocks()))
def test_python_block_runs_as_written(code, spark, monkeypatch):
    monkeypatch.chdir(ROOT)
    namespace = {"__name__": "__docs__", **_inputs(spark)}
    exec(compile(code, "<doc block>", "exec"), namespace)


def test_readme_api_names_are_what_it_says():
    """`from pulpie_spark import simplify; simplify(html)` once raised "module object is not
    callable": the lazy export had been shadowed by the submodule of the same name."""
    import pulpie_spark
    from pulpie_spark import Extraction, Extractor, SimplifiedPage, simplify

    assert callable(simplify) and isinstance(simplify(b"<p>Hello there, reader.</p>"), SimplifiedPage)
    assert isinstance(Extractor, type) and isinstance(Extraction, type)
    import pulpie_spark.segment.simplify  # noqa: F401  (a submodule import must not rebind the export)

    assert pulpie_spark.simplify is simplify and not isinstance(pulpie_spark.simplify, type(os))
