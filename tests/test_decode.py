"""Bytes -> text: BOM, HTTP charset, <meta> charset, UTF-8, windows-1252 fallback."""

from __future__ import annotations

import pytest

from pulpie_spark.segment.decode import decode_html, normalize_charset

TEXT = "Grüße, café – “quoted” €5"


def page(body: str, meta: str = "") -> str:
    return f"<html><head>{meta}<title>t</title></head><body><p>{body}</p></body></html>"


def test_utf8_without_declaration():
    text, enc = decode_html(page(TEXT).encode("utf-8"))
    assert enc == "utf-8" and TEXT in text


def test_cp1252_without_declaration_falls_back_to_cp1252():
    text, enc = decode_html(page(TEXT).encode("cp1252"))
    assert enc == "cp1252" and TEXT in text


def test_meta_charset_and_http_equiv():
    html = page(TEXT, '<meta charset="windows-1252">').encode("cp1252")
    assert decode_html(html) == (page(TEXT, '<meta charset="windows-1252">'), "cp1252")
    meta = '<META HTTP-EQUIV="Content-Type" CONTENT="text/html; charset=iso-8859-1">'
    text, enc = decode_html(page("café €", meta).encode("cp1252"))
    # iso-8859-1 means windows-1252 on the web (WHATWG): the euro sign survives.
    assert enc == "cp1252" and "café €" in text


def test_shift_jis_and_koi8r():
    jp = "日本語のテキスト"
    text, enc = decode_html(page(jp, '<meta charset="Shift_JIS">').encode("shift_jis"))
    assert jp in text and enc == "cp932"
    ru = "Привет, мир"
    text, enc = decode_html(page(ru).encode("koi8-r"), declared_charset="KOI8-R")
    assert ru in text and enc == "koi8-r"


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le", "utf-16-be", "utf-8-sig", "utf-32"])
def test_byte_order_marks(codec):
    data = page(TEXT).encode(codec)
    if codec in ("utf-16-le", "utf-16-be"):
        data = ("\ufeff" + page(TEXT)).encode(codec)
    text, enc = decode_html(data)
    assert TEXT in text and not text.startswith("\ufeff")


def test_http_charset_beats_meta():
    html = page("Привет", '<meta charset="iso-8859-1">').encode("cp1251")
    text, enc = decode_html(html, declared_charset="windows-1251")
    assert "Привет" in text and enc == "cp1251"


def test_lying_declarations_do_not_crash_or_garble():
    cp1252_bytes = page(TEXT, '<meta charset="utf-8">').encode("cp1252")
    text, enc = decode_html(cp1252_bytes, declared_charset="utf-8")
    assert TEXT in text and enc == "cp1252"
    # Declared latin-1 but the bytes are UTF-8 (a common server default).
    text, enc = decode_html(page(TEXT).encode("utf-8"), declared_charset="ISO-8859-1")
    assert TEXT in text and enc == "utf-8"
    # Meta says UTF-16 in an ASCII-readable page: impossible, read it as UTF-8.
    text, enc = decode_html(page(TEXT, '<meta charset="utf-16">').encode("utf-8"))
    assert TEXT in text and enc == "utf-8"


@pytest.mark.parametrize("label", ["x-no-such-charset", "", "  ", "base64", "utf-9", "\x00"])
def test_unknown_charset_names_are_ignored(label):
    text, enc = decode_html(page(TEXT).encode("utf-8"), declared_charset=label)
    assert TEXT in text and enc == "utf-8"
    html = page(TEXT, f'<meta charset="{label}">').encode("cp1252")
    text, enc = decode_html(html)
    assert TEXT in text


def test_odd_inputs():
    assert decode_html(None) == ("", "none")
    assert decode_html(b"") == ("", "utf-8")
    assert decode_html("already text") == ("already text", "str")
    assert decode_html(bytearray(b"abc")) == ("abc", "utf-8")
    text, enc = decode_html(bytes(range(256)) * 10)  # binary garbage never raises
    assert isinstance(text, str) and enc == "cp1252"


def test_normalize_charset():
    assert normalize_charset("ISO-8859-1") == "cp1252"
    assert normalize_charset("gb2312") == "gb18030"
    assert normalize_charset(b"utf8") == "utf-8"
    assert normalize_charset("nonsense") is None
