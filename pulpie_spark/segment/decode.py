"""Bytes -> text for crawled HTML.

Order: byte-order mark, the charset declared by HTTP, the charset declared in the first
bytes of the page (``<meta charset>`` / ``<meta http-equiv="content-type">`` / ``<?xml
encoding>``), strict UTF-8, UTF-8 with a few bad bytes, an East Asian multi-byte
encoding (declared, or detected by uchardet through resiliparse), then windows-1252
(which never fails). Charset labels are resolved the way browsers do (WHATWG):
``iso-8859-1`` and ``ascii`` mean windows-1252, ``gb2312`` means gb18030, and so on,
because that is what the pages were written for.

A declared charset is only used when the bytes decode under it without error; a page
that says UTF-8 but holds windows-1252 bytes (common in old crawls) falls through to the
next candidate instead of turning into replacement characters or raising. Two exceptions:
a declared single-byte code page is tried after UTF-8 (valid multi-byte UTF-8 under an
ISO-8859-x label is a template's stale <meta>), and a declared East Asian multi-byte charset
that fails on a stray byte is still used, with U+FFFD there, as browsers do.
"""

from __future__ import annotations

import codecs
import functools
import importlib
import re

__all__ = ["decode_html", "normalize_charset"]

# How far into the page a charset declaration is looked for (browsers use 1024 bytes;
# old pages often put a long <title> or comments first, so look a little further).
_SNIFF_BYTES = 4096

# WHATWG encoding labels whose Python codec differs from the label's literal meaning.
_WHATWG_ALIASES = {
    "iso-8859-1": "cp1252", "iso8859-1": "cp1252", "iso_8859-1": "cp1252", "latin1": "cp1252",
    "latin-1": "cp1252", "l1": "cp1252", "us-ascii": "cp1252", "ascii": "cp1252",
    "ansi_x3.4-1968": "cp1252", "windows-1252": "cp1252", "x-cp1252": "cp1252",
    "cp819": "cp1252", "ibm819": "cp1252", "iso-ir-100": "cp1252",
    "iso-8859-9": "cp1254", "iso8859-9": "cp1254", "latin5": "cp1254", "windows-1254": "cp1254",
    "iso-8859-11": "cp874", "tis-620": "cp874", "windows-874": "cp874",
    "gb2312": "gb18030", "gbk": "gb18030", "x-gbk": "gb18030", "gb_2312-80": "gb18030",
    "chinese": "gb18030", "csgb2312": "gb18030", "euc-cn": "gb18030",
    "shift_jis": "cp932", "shift-jis": "cp932", "sjis": "cp932", "x-sjis": "cp932",
    "ms_kanji": "cp932", "windows-31j": "cp932", "csshiftjis": "cp932",
    "euc-kr": "cp949", "ks_c_5601-1987": "cp949", "windows-949": "cp949", "korean": "cp949",
    "big5": "big5hkscs", "big5-hkscs": "big5hkscs", "x-x-big5": "big5hkscs",
    "utf8": "utf-8", "unicode-1-1-utf-8": "utf-8", "x-unicode20utf8": "utf-8",
    "unicode": "utf-16-le", "utf-16": "utf-16-le", "ucs-2": "utf-16-le",
    "x-mac-roman": "mac-roman", "macintosh": "mac-roman",
}

# A page cannot really be UTF-16/32 if the declaration was readable as ASCII (WHATWG).
_ASCII_INCOMPATIBLE = {"utf-16-le", "utf-16-be", "utf-16", "utf-32", "utf-32-le", "utf-32-be"}

_META_CHARSET = re.compile(
    rb"""<meta[^>]+?charset\s*=\s*["']?\s*([a-zA-Z0-9_.:()+-]{2,40})""", re.IGNORECASE
)
_XML_ENCODING = re.compile(rb"""<\?xml[^>]+encoding\s*=\s*["']([a-zA-Z0-9_.:()+-]{2,40})""")

_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF32_LE, "utf-32-le"),  # before UTF-16 LE: it starts with the same bytes
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)

_codec_cache: dict[str, str | None] = {}

# East Asian multi-byte encodings (Python codec names, after normalize_charset). Their byte
# patterns are distinctive, so uchardet names them reliably; its guesses among single-byte code
# pages are not (on cleaneval's undeclared English windows-1252 pages it says windows-1250,
# ISO-8859-2/-3, windows-1258 ...), so only these are taken from the detector. Why at all: an
# undeclared GBK page read as windows-1252 is mojibake for every later stage (10 of the 69
# chinese_wce pages, docs/BENCHMARKS.md "Undeclared GBK pages").
_MULTIBYTE_CJK = {"gb18030", "big5hkscs", "cp932", "euc_jp", "cp949"}
# A multi-byte decoding is kept with at most one replacement character per this many
# non-ASCII characters (a cut sequence, a stray byte); more means the guess is wrong.
_CJK_CHARS_PER_REPLACEMENT = 100


def normalize_charset(label: str | bytes | None) -> str | None:
    """The Python codec name for a charset label, or None when the label is unknown."""
    if label is None:
        return None
    if isinstance(label, bytes):
        label = label.decode("ascii", "ignore")
    key = label.strip().strip("\"'").lower()
    if not key:
        return None
    if key in _codec_cache:
        return _codec_cache[key]
    name = _WHATWG_ALIASES.get(key, key)
    try:
        codec = codecs.lookup(name).name
    except (LookupError, ValueError):
        codec = None
    # A charset that is not a text encoding (e.g. "base64", "rot13") is not a charset.
    if codec is not None and codec in {"base64", "hex", "rot-13", "uu", "zlib", "bz2", "quopri"}:
        codec = None
    if codec == "iso8859-1" or codec == "latin-1":
        codec = "cp1252"
    _codec_cache[key] = codec
    return codec


@functools.lru_cache(maxsize=None)
def _is_single_byte(codec: str) -> bool:
    """Whether ``codec`` maps each byte to one character (windows-125x, ISO-8859-x, KOI8, ...):
    Python's single-byte codecs are charmap codecs with a 256-entry ``decoding_table``."""
    try:
        module = importlib.import_module(f"encodings.{codecs.lookup(codec).name.replace('-', '_')}")
    except (ImportError, LookupError):
        return False
    return len(getattr(module, "decoding_table", "")) == 256


def _try_decode(data: bytes, codec: str) -> str | None:
    try:
        return data.decode(codec)
    except (UnicodeDecodeError, LookupError):
        return None


def _sniff_declared(head: bytes) -> str | None:
    match = _META_CHARSET.search(head) or _XML_ENCODING.search(head)
    if match is None:
        return None
    codec = normalize_charset(match.group(1))
    if codec in _ASCII_INCOMPATIBLE:
        # The declaration was readable as ASCII, so the bytes are not UTF-16/32.
        return "utf-8"
    return codec


def _detected_charset(data: bytes) -> str | None:
    """uchardet's guess (resiliparse), as a codec name, or None."""
    from resiliparse.parse.encoding import detect_encoding

    # uchardet's own names: the WHATWG remapping turns some (CP949) into its UTF-8 default.
    return normalize_charset(detect_encoding(data, html5_compatible=False))


def _replacements_and_non_ascii(text: str) -> tuple[int, int]:
    """(U+FFFD count, other non-ASCII characters) of a lenient decoding."""
    bad = text.count("\ufffd")
    return bad, len(text) - len(text.encode("ascii", "ignore")) - bad


def _multibyte_cjk_codecs(data: bytes, declared: list[str]):
    """The declared East Asian multi-byte charsets, then uchardet's guess if it is one too;
    lazily, so the detector only runs when no declared one fits."""
    tried = [c for c in declared if c in _MULTIBYTE_CJK]
    yield from tried
    detected = _detected_charset(data)
    if detected in _MULTIBYTE_CJK and detected not in tried:
        yield detected


def _decode_multibyte_cjk(data: bytes, codecs_to_try) -> tuple[str, str] | None:
    """The first of ``codecs_to_try`` that reads ``data`` with few replacement characters."""
    for codec in codecs_to_try:
        text = data.decode(codec, "replace")
        bad, non_ascii = _replacements_and_non_ascii(text)
        if non_ascii > 0 and bad * _CJK_CHARS_PER_REPLACEMENT <= non_ascii:
            return text, codec
    return None


def decode_html(data: bytes | str | None, declared_charset: str | None = None) -> tuple[str, str]:
    """Decode crawled HTML bytes to text; returns ``(text, encoding used)``. Never raises.

    ``str`` input is returned as is (encoding ``"str"``); ``None`` gives ``("", "none")``.
    """
    if data is None:
        return "", "none"
    if isinstance(data, str):
        return data, "str"
    if isinstance(data, (bytearray, memoryview)):
        data = bytes(data)
    if not isinstance(data, bytes):
        return "", "none"
    if not data:
        return "", "utf-8"

    for bom, codec in _BOMS:
        if data.startswith(bom):
            text = data[len(bom):].decode(codec, "replace")
            return text, codec

    candidates: list[str] = []
    http_codec = normalize_charset(declared_charset)
    if http_codec is not None:
        candidates.append(http_codec)
    meta_codec = _sniff_declared(data[:_SNIFF_BYTES])
    if meta_codec is not None and meta_codec not in candidates:
        candidates.append(meta_codec)

    utf8_text: str | None = None
    utf8_tried = False
    for codec in candidates:
        if _is_single_byte(codec) and not utf8_tried and not data.isascii():
            # Servers often default to "iso-8859-1" for pages that are really UTF-8, and CMSs
            # copy an old template's ISO-8859-15 or windows-1256 <meta> onto UTF-8 output; bytes
            # that are valid UTF-8 with multi-byte sequences are almost never text in a
            # single-byte code page ("desdeÃ±ar" for "desdeñar" otherwise).
            utf8_tried = True
            utf8_text = _try_decode(data, "utf-8")
            if utf8_text is not None:
                return utf8_text, "utf-8"
        text = _try_decode(data, codec)
        if text is not None:
            return text, codec

    if not utf8_tried:
        utf8_text = _try_decode(data, "utf-8")
        if utf8_text is not None:
            return utf8_text, "utf-8"
    # A UTF-8 page with a stray byte (a cut multi-byte sequence, a pasted cp1252 quote)
    # is still UTF-8: browsers decode it with a U+FFFD per bad sequence. Decoding all of it
    # as cp1252 would garble every other non-ASCII character. A real cp1252 page decoded as
    # UTF-8 gives (almost) no valid multi-byte characters, so the ratio tells them apart: of
    # the labelled pages that reach this line, every windows-1252 one has none, and the three
    # with any are UTF-8 with damaged sequences (valid : bad = 0.59, 1.18, 1.50).
    lenient = data.decode("utf-8", "replace")
    bad, valid_non_ascii = _replacements_and_non_ascii(lenient)
    if 2 * valid_non_ascii >= bad:
        return lenient, "utf-8"
    # A declared East Asian encoding with a stray byte (browsers decode it with U+FFFD), else
    # one uchardet detects: without this an undeclared GBK or Shift_JIS page became windows-1252.
    decoded = _decode_multibyte_cjk(data, _multibyte_cjk_codecs(data, candidates))
    if decoded is not None:
        return decoded
    # windows-1252 leaves five bytes undefined; those become U+FFFD rather than an error.
    return data.decode("cp1252", "replace"), "cp1252"
