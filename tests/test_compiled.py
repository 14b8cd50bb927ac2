"""The Cython-compiled hot modules (setup.py's COMPILED_MODULES) against their source.

Each listed module is plain Python; ``pip install -e .`` / ``./build.sh`` compile it (with
the types of the ``.pxd`` next to it) into an extension module that ``import`` prefers.
These tests load the same ``.py`` as pure Python under another name and check that both
give the same output on the fixtures and the adversarial pages, and that the extension is
built from the current source (a stale one would silently shadow an edited ``.py``).
"""

from __future__ import annotations

import ast
import importlib
import importlib.machinery
import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
from helpers_data import DATA, ROOT
import pytest

from adversarial import page_cases
from pulpie_spark.segment.decode import decode_html



def _compiled_module_names() -> list[str]:
    """COMPILED_MODULES as setup.py lists them (read, not imported: setup.py runs setup())."""
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "COMPILED_MODULES" for t in node.targets
        ):
            return list(ast.literal_eval(node.value))
    raise AssertionError("setup.py has no COMPILED_MODULES")


COMPILED = _compiled_module_names()


def _source(name: str) -> Path:
    return ROOT / (name.replace(".", "/") + ".py")


def _extension(name: str) -> Path | None:
    source = _source(name)
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = source.with_name(source.stem + suffix)
        if candidate.exists():
            return candidate
    return None


def _pure(name: str):
    """The module's source loaded as plain Python, next to the (maybe compiled) original."""
    pure_name = "pure_" + name.replace(".", "_")
    if pure_name in sys.modules:
        return sys.modules[pure_name]
    spec = importlib.util.spec_from_file_location(pure_name, _source(name))
    module = importlib.util.module_from_spec(spec)
    sys.modules[pure_name] = module  # dataclasses look their module up while it executes
    spec.loader.exec_module(module)
    return module


def _expect_compiled() -> bool:
    pure = os.environ.get("PULPIE_PURE_PYTHON", "") not in ("", "0")
    return not pure and shutil.which("cc") is not None


@pytest.mark.parametrize("name", COMPILED)
def test_extension_is_built_from_current_source(name):
    extension = _extension(name)
    if extension is None:
        if _expect_compiled():
            pytest.fail(f"{name} is not compiled although a C compiler is here: run ./build.sh setup")
        pytest.skip(f"{name} runs as pure Python (no C compiler or PULPIE_PURE_PYTHON set)")
    built = extension.stat().st_mtime
    for source in (_source(name), _source(name).with_suffix(".pxd")):
        if source.exists():
            assert built >= source.stat().st_mtime, (
                f"{extension.name} is older than {source.name}: run ./build.sh setup to recompile"
            )
    assert importlib.import_module(name).__file__ == str(extension)


# Pages aimed at the compiled build's own fast paths in simplify (C string searches, the
# printable-ASCII text test, URI escaping, the one-copy map splice in 1-, 2- and 4-byte
# strings, end tags inside removed elements, paths deeper than MAX_PATH_DEPTH).
_EDGE_PAGES = {
    "edge-text": "<p>tab\there  two  spaces &amp; &lt;tag&gt; del\x7fchar ~tilde</p>"
                 "<p>caf\u00e9 \u00a0nbsp\u2003em space\u2028line</p><p> lead and trail </p>",
    "edge-uri": '<p><img src="a b/\u00e9\U0001F600.png?q=1&amp;r=2" alt=" x "> text'
                '<img src=" data:image/png;base64,xx " alt="y"><img src="/plain.png"></p>',
    "edge-wide": '<div class="x" id="top"><p>\U0001F600 smile</p><p>\u4e2d\u6587 more</p>'
                 "<ul><li>a</li><li>b</li><li>c</li></ul></div>",
    "edge-skip": '<div style="display:none"><svg><linearGradient><stop/></linearGradient>'
                 "<clipPath></clipPath></svg><div><p>hidden</p></div></div><p>after</p>"
                 "<nav><ul><li><a>x</a></li></ul></nav>tail<p>visible</p>"
                 "<details><summary>s</summary><div>closed</div></details>",
    "edge-deep-path": "".join('<div class="c%d a b c d" id="i%d">' % (i, i) for i in range(16))
                      + "<p>deep</p>" + "</div>" * 16,
}


def _fixture_pages() -> list[tuple[str, bytes | str, str | None]]:
    pages: list[tuple[str, bytes | str, str | None]] = list((case, html, None) for case, html in _EDGE_PAGES.items())
    for path in sorted(DATA.glob("*.html")):
        pages.append((path.name, path.read_bytes(), None))
    cases = json.loads((DATA / "seg_reference_cases.json").read_text(encoding="utf-8"))
    for case, value in sorted(cases.items()):
        pages.append((case, value["html"], None))
    for case, _url, html, charset, _content_type in page_cases():
        if html is not None and len(html) <= 2_000_000:  # the multi-MB cases add time, not paths
            pages.append(("adv-" + case, html, charset))
    return pages


def _without_large(pages):
    """The pages but the multi-100-KB adversarial ones (they only repeat structure here)."""
    return [page for page in pages if len(page[1]) <= 300_000]


@pytest.fixture(scope="module")
def fixture_pages():
    return _fixture_pages()


def _compiled_and_pure(name: str):
    """(the module as imported, i.e. the extension; its source as pure Python)."""
    if _extension(name) is None:
        pytest.skip(f"{name} is not compiled here")
    return importlib.import_module(name), _pure(name)


def test_simplify_compiled_equals_pure(fixture_pages):
    compiled, pure = _compiled_and_pure("pulpie_spark.segment.simplify")
    for case, html, charset in fixture_pages:
        got = compiled.simplify(html, declared_charset=charset)
        want = pure.simplify(html, declared_charset=charset)
        for field in ("blocks", "paths", "simplified_html", "map_html", "encoding", "error"):
            assert getattr(got, field) == getattr(want, field), (case, field)
    # The cut path (blocks over the cut length) on a small cut length.
    for case, html, charset in fixture_pages[:12]:
        got = compiled.simplify(html, declared_charset=charset, cutoff_length=40)
        want = pure.simplify(html, declared_charset=charset, cutoff_length=40)
        assert got.blocks == want.blocks, case


def test_features_compiled_equal_pure(fixture_pages):
    from pulpie_spark.segment.simplify import simplify

    compiled, pure = _compiled_and_pure("pulpie_spark.classify.blockmodel.features")
    checked = 0
    for case, html, charset in fixture_pages:
        page = simplify(html, declared_charset=charset)
        if not page.blocks:
            continue
        got_ids, got_numeric = compiled.page_features(page.blocks, page.paths)
        want_ids, want_numeric = pure.page_features(page.blocks, page.paths)
        assert np.array_equal(got_ids, want_ids), case
        # Bitwise: the shipped model was trained on these exact values.
        assert got_numeric.tobytes() == want_numeric.tobytes(), case
        checked += 1
    assert checked >= 10


def test_reconstruct_compiled_equals_pure(fixture_pages):
    from pulpie_spark.segment.simplify import simplify

    compiled, pure = _compiled_and_pure("pulpie_spark.render.reconstruct")
    checked = 0
    for case, html, charset in _without_large(fixture_pages):
        page = simplify(html, declared_charset=charset)
        if not page.blocks:
            continue
        n = len(page.blocks)
        for labels, options in (([1] * n, {}), ([i % 2 for i in range(n)], {"links": True, "images": True}),
                                ([int(i % 3 == 0) for i in range(n)], {})):
            got = compiled.render_main(page.map_html, labels, **options)
            assert got == pure.render_main(page.map_html, labels, **options), case
        checked += 1
    assert checked >= 10


def test_markdown_compiled_equals_pure(fixture_pages):
    compiled, pure = _compiled_and_pure("pulpie_spark.render.markdown")
    checked = 0
    for case, html, charset in _without_large(fixture_pages):
        text = decode_html(html, charset)[0] if isinstance(html, bytes) else html
        for options in ({}, {"links": True, "images": True}):
            assert compiled.html_to_markdown(text, **options) == pure.html_to_markdown(text, **options), case
        assert compiled.html_to_text(text) == pure.html_to_text(text), case
        checked += 1
    assert checked >= 10
    # Cython 3.1 folded the pipe table's separator row into a constant (one column).
    table = "<table><tr><th>a</th><th>b</th><th>c</th></tr><tr><td>1</td><td>2</td><td>3</td></tr></table>"
    assert compiled.html_to_markdown(table) == pure.html_to_markdown(table)
    assert "| --- | --- | --- |" in compiled.html_to_markdown(table)


def test_simplify_source_runs_without_cython(monkeypatch):
    """A pure install (no compiler, no Cython) imports simplify.py with its ``cython`` stub."""
    monkeypatch.setitem(sys.modules, "cython", None)  # "import cython" raises ImportError
    spec = importlib.util.spec_from_file_location("simplify_without_cython", _source("pulpie_spark.segment.simplify"))
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "simplify_without_cython", module)
    spec.loader.exec_module(module)
    assert module.cython.compiled is False
    page = module.simplify("<div><p>Hello  <b>world</b> &amp; more</p><p>caf\u00e9\tbar</p></div>")
    assert page.blocks == ['<p _item_id="1">Hello <b>world</b> &amp; more</p>', '<p _item_id="2">caf\u00e9 bar</p>']
