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


# Undeclared East Asian pages (no HTTP charset, no <meta>): uchardet (resiliparse) names the
# multi-byte encoding; before, they fell through to windows-1252 and became mojibake.
# Texts: ZH and ZH_TW written for these tests; JA the opening of Natsume Soseki's "I Am a Cat"
# (1905, public domain); KO articles 1 and 10 of the Constitution of the Republic of Korea
# (an official text, not copyrightable).
ZH = ("在极端条件下，夸克可能会解禁并以自由粒子的形式存在。这种物质相态被称为夸克胶子等离子体，"
      "它在宇宙大爆炸之后的几微秒内充满了早期宇宙，随后夸克被束缚成质子和中子。")
JA = ("吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。何でも薄暗いじめじめした所で"
      "ニャーニャー泣いていた事だけは記憶している。吾輩はここで始めて人間というものを見た。")
KO = "대한민국은 민주공화국이다. 대한민국의 주권은 국민에게 있고, 모든 권력은 국민으로부터 나온다. 국가는 개인이 가지는 불가침의 기본적 인권을 확인하고 이를 보장할 의무를 진다."
ZH_TW = "臺灣位於東亞，是一個島嶼。這裡的人們說國語和臺語，也有許多原住民族的語言。臺北是最大的城市，也是政治與經濟的中心。"


@pytest.mark.parametrize("body, codec, expected", [
    (ZH, "gbk", "gb18030"), (ZH, "gb18030", "gb18030"), (JA, "shift_jis", "cp932"),
    (JA, "euc_jp", "euc_jp"), (KO, "euc_kr", "cp949"), (ZH_TW, "big5", "big5hkscs"),
])
def test_undeclared_east_asian_pages_are_detected(body, codec, expected):
    text, enc = decode_html(page(body * 3).encode(codec))
    assert enc == expected and body in text


def test_declared_gbk_with_a_stray_byte_keeps_the_declaration():
    # Strict gb18030 fails on the cut sequence; browsers decode the declared charset with one
    # U+FFFD, and so does this (before: windows-1252 for the whole page).
    html = page(ZH * 3, '<meta charset="gb2312">').encode("gbk")
    cut = html.replace(b"</p>", b"\x81</p>")   # a lead byte followed by "<" cannot pair
    text, enc = decode_html(cut)
    assert enc == "gb18030" and ZH[:20] in text and text.count("\ufffd") == 1


def test_undeclared_latin_pages_stay_windows_1252():
    # uchardet guesses windows-1250 or ISO-8859-2 for pages like this one; only its multi-byte
    # guesses are taken, so the euro sign and curly quotes survive.
    body = ("Größe und Gewicht: “Café” kostet 5 € – très naïve façade, señor. " * 20)
    text, enc = decode_html(page(body).encode("cp1252"))
    assert enc == "cp1252" and body in text


@pytest.mark.parametrize("label", ["ISO-8859-15", "windows-1256", "koi8-r", "iso-8859-2"])
def test_utf8_bytes_under_a_single_byte_declaration_are_utf8(label):
    # A CMS template's old <meta> (or HTTP header) on UTF-8 output: valid multi-byte UTF-8 is
    # read as UTF-8, as for iso-8859-1 (fundus' ElMundo page: "desdeÃ±ar" before).
    body = "El Congreso desdeña el veto del Senado; “Qatar’s” oldest"
    text, enc = decode_html(page(body, f'<meta charset="{label}">').encode("utf-8"))
    assert enc == "utf-8" and body in text
    text, enc = decode_html(page(body).encode("utf-8"), declared_charset=label)
    assert enc == "utf-8" and body in text


def test_single_byte_declarations_still_decode_their_own_bytes():
    ru = "Привет, мир: съешь же ещё этих мягких французских булок"
    text, enc = decode_html(page(ru, '<meta charset="windows-1251">').encode("cp1251"))
    assert enc == "cp1251" and ru in text
    es = "El Congreso desdeña el veto del Senado €"
    text, enc = decode_html(page(es, '<meta charset="iso-8859-15">').encode("iso8859-15"))
    assert enc == "iso8859-15" and es in text


def test_utf8_with_more_damaged_sequences_than_good_ones_is_still_utf8():
    # cleaneval-final/222: curly quotes whose last byte an old tool replaced by '"' (70 bad
    # sequences, 41 good ones); windows-1252 would garble every good one into "â€™".
    body = ("Sun signs’ traits — " + 'signs\xe2\x80"Libra ' * 3).encode("utf-8").replace(
        "\u00e2\u0080".encode("utf-8"), b"\xe2\x80")
    text, enc = decode_html(page("x").encode("utf-8").replace(b"x", body))
    assert enc == "utf-8" and "Sun signs’ traits —" in text and text.count("\ufffd") == 3
    # A windows-1252 page has no valid multi-byte sequences at all: it stays windows-1252.
    text, enc = decode_html(page("Ça coûte 5 € – “très” cher").encode("cp1252"))
    assert enc == "cp1252" and "Ça coûte 5 € – “très” cher" in text
