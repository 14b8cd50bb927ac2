"""Adversarial corpus: the pages and WARC files a billion-page crawl will contain.

``build_corpus(directory)`` writes, deterministically (same bytes every run):

* ``pages.parquet``: one row per case, columns ``doc_id`` (``"adv-<case>"``, the key
  the reliability tests account rows by), ``url``, ``html`` (binary),
  ``declared_charset``, ``content_type``;
* ``warc/``: WARC files with HTML, non-HTML, malformed, truncated and non-WARC
  content, plus a real WARC (tests/data/warc_resiliparse_warcfile.warc.gz) cut in
  the middle of a gzip member;
* a :class:`Corpus` describing what was written (case names, the WARC response
  record ids each file holds in full).

Nothing large is committed: the 50 MB page and friends are generated into a temp
dir by the tests. Run ``python tests/adversarial.py DIR`` to write a corpus by hand.
"""

from __future__ import annotations

import gzip
import io
import random
import sys
import uuid
import zlib
from dataclasses import dataclass, field
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
REAL_WARC = DATA / "warc_resiliparse_warcfile.warc.gz"  # shared with the ingest tests

MB = 1024 * 1024
DEEP = 100_000  # nesting depth of the deep pages
SEED = 20260601


def _page(body: str, head: str = "<title>t</title>") -> str:
    return f"<!DOCTYPE html><html><head>{head}</head><body>{body}</body></html>"


ARTICLE = (
    "<article><h1>Rivers of the north</h1>"
    "<p>The river rises in the hills above the town and runs for ninety kilometres "
    "before it meets the sea. Salmon return to it every autumn.</p>"
    "<p>In the nineteenth century mills lined both banks; today the old weirs are "
    "being removed so that fish can pass again.</p></article>"
)
CHROME = "<nav><a href='/'>Home</a> | <a href='/about'>About</a></nav><footer>(c) 2026 Example</footer>"
NORMAL_PAGE = _page(CHROME + ARTICLE + CHROME)


def _png_bytes() -> bytes:
    """A real, valid 1x1 PNG."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return len(data).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")

    header = (1).to_bytes(4, "big") + (1).to_bytes(4, "big") + bytes([8, 2, 0, 0, 0])
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


PDF_BYTES = (
    b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n"
    b"2 0 obj<</Type/Pages/Kids[]/Count 0>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n"
)


def page_cases() -> list[tuple[str, str | None, bytes | None, str | None, str | None]]:
    """(case, url, html bytes, declared_charset, content_type) for every page case."""
    rng = random.Random(SEED)
    utf8 = "utf-8"
    html_ct = "text/html"
    cases: list[tuple[str, str | None, bytes | None, str | None, str | None]] = []

    def add(case, html, charset=utf8, content_type=html_ct, url=None):
        if isinstance(html, str):
            html = html.encode(charset if charset and charset != "x-no-such-charset" else "utf-8",
                               "surrogatepass")
        cases.append((case, url if url is not None else f"https://adversarial.test/{case}",
                      html, charset, content_type))

    # Ordinary pages: the jobs must still produce real output next to the bad ones.
    add("normal-1", NORMAL_PAGE)
    add("normal-2", _page(CHROME + ARTICLE.replace("Rivers", "Lakes").replace("river", "lake")))
    # The Latin-1 words sit inside the article's paragraph: the check is the decoding, not
    # whether a model keeps a loose one-line paragraph outside it (default-v3 does not).
    add("normal-latin1", _page(ARTICLE.replace(
        "every autumn.", "every autumn; the caf\u00e9 by the weir serves cr\u00e8me br\u00fbl\u00e9e, "
        "na\u00efve gar\u00e7on.")), charset="iso-8859-1")

    # Malformed markup.
    add("malformed-unclosed", "<html><body><div><p>open paragraph <b>bold <i>both "
        "<table><tr><td>cell<div><span>never closed <a href='x>broken attr")
    add("malformed-mismatched", "<div><p>a</div></p></span></table><li>stray</li></ul>" * 50
        + "<<<>>><//p></></ <p <div class=>" + ARTICLE)
    add("unclosed-comment", "<html><body>" + ARTICLE + "<!-- this comment never ends " + "x " * 5000)
    add("unclosed-script", "<html><body><p>before</p><script>var s = '" + "a" * 20000)
    add("cdata-pi-xml", "<?xml version='1.0' encoding='utf-8'?><?php echo 1; ?>"
        "<html><body><![CDATA[ raw <p> ]]>" + ARTICLE + "</body></html>")
    add("nul-bytes", ("<p>nul\x00inside\x00text</p>" * 20 + ARTICLE).replace("<article>", "<art\x00icle>"))
    add("fake-item-ids", _page('<div _item_id="1"><p _item_id="7">spoofed ids</p></div>'
                               '<cc-alg-uc-text _item_id="2">spoofed run</cc-alg-uc-text>' + ARTICLE))
    add("attribute-explosion", _page("<div " + " ".join(f"a{i}='{i}'" for i in range(20000)) + ">x</div>"
                                     + f"<p class='{'c' * 200000}'>long class</p>" + ARTICLE))

    # Depth: 100,000 nested elements (recursion must not be used to walk them).
    add("deep-nesting-closed", _page("<div>" * DEEP + "deep text" + "</div>" * DEEP))
    add("deep-nesting-unclosed", "<html><body>" + "<div><span>" * DEEP + "bottom")
    add("deep-nesting-tables", _page("<table><tr><td>" * 5000 + "cell" + "</td></tr></table>" * 5000))
    add("deep-nesting-lists", _page("<ul><li>" * 20000 + "item" + "</li></ul>" * 20000))

    # Size: a 50 MB page (above MAX_HTML_BYTES: rejected unparsed), a huge table,
    # a 1M-character single block, many blocks.
    paragraph = "<p>" + "All work and no play makes a dull page. " * 20 + "</p>\n"
    add("huge-50mb", _page(paragraph * (50 * MB // len(paragraph) + 1)))
    add("huge-table", _page("<table>" + "".join(
        "<tr>" + "".join(f"<td>r{r}c{c}</td>" for c in range(10)) + "</tr>" for r in range(20000)) + "</table>"))
    add("single-block-1m-words", _page("<p>" + "word " * 200_000 + "</p>"))
    add("single-block-1m-nospace", _page("<p>" + "a" * 1_000_000 + "</p>"))
    add("many-blocks-50k", _page("".join(f"<p>block {i}</p>" for i in range(50000))))
    add("long-line-regex-bait", _page("<p>" + "a" * 100_000 + "!" + " " * 100_000 + ".,;" * 30_000 + "</p>"))

    # Not HTML at all, or not decoded: random bytes, gzip bytes, images, PDF.
    add("binary-random", bytes(rng.getrandbits(8) for _ in range(64 * 1024)))
    add("gzip-bytes", gzip.compress(NORMAL_PAGE.encode(), mtime=0))
    add("png-bytes-as-html", _png_bytes(), charset=None, content_type="image/png")
    add("pdf-bytes-as-html", PDF_BYTES, charset=None, content_type="application/pdf")
    add("utf16-bom", "\ufeff" + NORMAL_PAGE, charset="utf-16-le")
    add("utf16-no-bom-ascii-odd", NORMAL_PAGE.encode("utf-16-le")[:-1], charset="utf-16")

    # Declared charsets that lie.
    add("charset-lie-utf8-is-cp1252", _page("<p>Stra\u00dfe \u2013 \u201cquoted\u201d \u20ac5</p>" + ARTICLE)
        .encode("cp1252"), charset="utf-8")
    add("charset-lie-latin1-is-utf8", _page("<p>\u65e5\u672c\u8a9e\u306e\u30da\u30fc\u30b8 "
                                            "\u043f\u0440\u0438\u0432\u0435\u0442</p>" + ARTICLE)
        .encode("utf-8"), charset="iso-8859-1")
    add("charset-lie-meta-sjis-is-utf8", _page("<p>\u00fcber \u00e9t\u00e9 \u2603</p>" + ARTICLE,
                                               head="<meta charset='shift_jis'>").encode("utf-8"), charset=None)
    add("charset-unknown-name", _page(ARTICLE), charset="x-no-such-charset")
    add("charset-invalid-utf8", b"<p>bad \xff\xfe\xc3\x28 \xe2\x82 \xf0\x28\x8c\xbc end</p>" + ARTICLE.encode(),
        charset="utf-8")
    add("lone-surrogates", _page("<p>half \ud800 pair \udfff</p>" + ARTICLE))
    add("unicode-zoo", _page("<p dir='rtl'>\u05e9\u05dc\u05d5\u05dd \u200b\u200d\u2066 "
                             "e\u0301\u0301\u0301 \U0001f600\U0001f468\u200d\U0001f469 \ufeff</p>" + ARTICLE))

    # Empty, null and content-free pages.
    add("empty-bytes", b"")
    add("null-html", None)
    add("whitespace-only", b" \n\t\r\n " * 100)
    add("only-scripts", "<html><head><script>var a=1;</script><style>p{}</style></head><body>"
        + "<script>document.write('<p>generated</p>')</script>" * 200
        + "<noscript><style>x{}</style></noscript><template><p>t</p></template></body></html>")
    add("only-hidden", _page("<div style='display:none'>" + ARTICLE + "</div>"
                             "<p style='visibility:hidden'>hidden</p>"))
    add("text-no-tags", ("Plain text crawled as HTML. " * 200).encode())

    # Data in unusual places: urls and doc ids that must never become paths or fetches.
    add("url-traversal", NORMAL_PAGE, url="../../etc/adversarial-escape")
    add("url-null", NORMAL_PAGE.replace("Rivers", "Streams"), url="")
    add("url-newlines", NORMAL_PAGE.replace("Rivers", "Brooks"), url="https://a.test/x\r\nSet-Cookie: y")
    add("url-very-long", NORMAL_PAGE.replace("Rivers", "Creeks"), url="https://a.test/" + "p/" * 50000)
    add("duplicate-a", NORMAL_PAGE, url="https://adversarial.test/duplicate")
    add("duplicate-b", NORMAL_PAGE, url="https://adversarial.test/duplicate")
    return cases


NULL_URL_CASE = "url-null"  # its url is written as a null, not ""


@dataclass
class WarcFile:
    path: Path
    complete_responses: list[str] = field(default_factory=list)  # WARC-Record-IDs held in full
    description: str = ""


@dataclass
class Corpus:
    root: Path
    pages: Path
    cases: list[str]
    warcs: list[WarcFile]

    @property
    def doc_ids(self) -> list[str]:
        return [f"adv-{case}" for case in self.cases]


def _record_id(label: str) -> str:
    return f"<urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, 'pulpie-adversarial/' + label)}>"


def _warc_record(warc_type: str, label: str, uri: str | None, payload: bytes,
                 content_type: str = "application/http; msgtype=response",
                 extra: dict[str, str] | None = None, declared_length: int | None = None) -> bytes:
    headers = {
        "WARC-Type": warc_type,
        "WARC-Record-ID": _record_id(label),
        "WARC-Date": "2026-06-01T00:00:00Z",
    }
    if uri is not None:
        headers["WARC-Target-URI"] = uri
    headers["Content-Type"] = content_type
    headers.update(extra or {})
    headers["Content-Length"] = str(len(payload) if declared_length is None else declared_length)
    head = "WARC/1.0\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    return head.encode("utf-8") + payload + b"\r\n\r\n"


def _http(status: str, content_type: str | None, body: bytes, extra: str = "") -> bytes:
    lines = [f"HTTP/1.1 {status}"]
    if content_type:
        lines.append(f"Content-Type: {content_type}")
    lines.append(f"Content-Length: {len(body)}")
    if extra:
        lines.append(extra)
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def warc_records() -> list[tuple[str, str, bytes]]:
    """(label, warc type, record bytes) of the synthetic WARC, in file order."""
    html = NORMAL_PAGE.encode()
    chunked_body = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (html[:100], html[100:])) + b"0\r\n\r\n"
    records = [
        ("warcinfo", "warcinfo", _warc_record("warcinfo", "warcinfo", None, b"software: adversarial\r\n",
                                               content_type="application/warc-fields")),
        ("request", "request", _warc_record("request", "request", "https://w.test/a",
                                             b"GET /a HTTP/1.1\r\nHost: w.test\r\n\r\n",
                                             content_type="application/http; msgtype=request")),
        ("html-utf8", "response", _warc_record("response", "html-utf8", "https://w.test/a",
                                               _http("200 OK", "text/html; charset=utf-8", html))),
        ("html-charset-lie", "response", _warc_record(
            "response", "html-charset-lie", "https://w.test/lie",
            _http("200 OK", "text/html; charset=utf-8", "<p>Stra\u00dfe \u20ac</p>".encode("cp1252") + html))),
        ("image-png", "response", _warc_record("response", "image-png", "https://w.test/i.png",
                                               _http("200 OK", "image/png", _png_bytes()))),
        ("application-pdf", "response", _warc_record("response", "application-pdf", "https://w.test/d.pdf",
                                                     _http("200 OK", "application/pdf", PDF_BYTES))),
        ("not-found", "response", _warc_record("response", "not-found", "https://w.test/404",
                                               _http("404 Not Found", "text/html", b"<h1>Not found</h1>"))),
        ("redirect", "response", _warc_record("response", "redirect", "https://w.test/old",
                                              _http("301 Moved Permanently", None, b"",
                                                    "Location: https://w.test/new"))),
        ("gzip-encoded", "response", _warc_record(
            "response", "gzip-encoded", "https://w.test/gz",
            _http("200 OK", "text/html", gzip.compress(html, mtime=0), "Content-Encoding: gzip"))),
        ("chunked", "response", _warc_record(
            "response", "chunked", "https://w.test/chunked",
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked_body)),
        ("no-http-headers", "response", _warc_record("response", "no-http-headers", "https://w.test/raw",
                                                     b"<html>no status line, no headers</html>")),
        ("empty-body", "response", _warc_record("response", "empty-body", "https://w.test/empty",
                                                _http("200 OK", "text/html", b""))),
        ("traversal-uri", "response", _warc_record("response", "traversal-uri", "../../etc/warc-escape",
                                                   _http("200 OK", "text/html", html))),
        ("no-target-uri", "response", _warc_record("response", "no-target-uri", None,
                                                   _http("200 OK", "text/html", html))),
        ("revisit", "revisit", _warc_record("revisit", "revisit", "https://w.test/a",
                                            b"HTTP/1.1 304 Not Modified\r\n\r\n",
                                            extra={"WARC-Profile": "http://netpreserve.org/warc/1.0/revisit/"
                                                                   "identical-payload-digest"})),
        ("metadata", "metadata", _warc_record("metadata", "metadata", "https://w.test/a",
                                              b"fetchTimeMs: 12\r\n", content_type="application/warc-fields")),
        ("html-after-junk", "response", _warc_record("response", "html-after-junk", "https://w.test/last",
                                                     _http("200 OK", "text/html", html))),
    ]
    return records


def _write_gzip_members(path: Path, records: list[bytes]) -> None:
    """One gzip member per record, as crawlers write (mtime 0: deterministic bytes)."""
    with open(path, "wb") as out:
        for record in records:
            buffer = io.BytesIO()
            with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as member:
                member.write(record)
            out.write(buffer.getvalue())


def _real_response_ids(path: Path, limit_bytes: int | None = None) -> list[str]:
    """Response record ids of a WARC, counting only records whose gzip member ends
    before ``limit_bytes`` (the file's cut)."""
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    ids = []
    with open(path, "rb") as stream:
        records = list(ArchiveIterator(stream, record_types=WarcRecordType.response, parse_http=False))
    for record, following in zip(records, records[1:] + [None]):
        end = following.stream_pos if following is not None else path.stat().st_size
        if limit_bytes is None or end <= limit_bytes:
            ids.append(record.record_id)
    return ids


def build_warcs(directory: Path) -> list[WarcFile]:
    directory.mkdir(parents=True, exist_ok=True)
    records = warc_records()
    response_ids = [_record_id(label) for label, kind, _ in records if kind == "response"]
    files: list[WarcFile] = []

    gz = directory / "synthetic.warc.gz"
    _write_gzip_members(gz, [data for _, _, data in records])
    files.append(WarcFile(gz, list(response_ids), "HTML, non-HTML, malformed HTTP, one gzip member per record"))

    plain = directory / "synthetic-uncompressed.warc"
    plain.write_bytes(b"".join(data for _, _, data in records))
    files.append(WarcFile(plain, list(response_ids), "the same records, not compressed"))

    # A record whose Content-Length claims more than the file holds: a truncated crawl.
    body = records[2][2]
    clipped_plain = directory / "clipped-synthetic.warc"
    clipped_plain.write_bytes(records[0][2] + body + body[: len(body) // 2].replace(
        _record_id("html-utf8").encode(), _record_id("clipped-half").encode()))
    files.append(WarcFile(clipped_plain, [_record_id("html-utf8")], "last record cut in half"))

    # A real Common Crawl-style WARC cut in the middle of a gzip member.
    real = REAL_WARC.read_bytes()
    cut = len(real) * 3 // 5
    clipped_real = directory / "clipped-real.warc.gz"
    clipped_real.write_bytes(real[:cut])
    files.append(WarcFile(clipped_real, _real_response_ids(REAL_WARC, cut),
                          "tests/data/warc_resiliparse_warcfile.warc.gz cut at 60% (mid gzip member)"))

    # Records with lying lengths in the middle of a file: a parser must resync or stop, not hang.
    liar = directory / "lying-length.warc"
    liar.write_bytes(_warc_record("response", "liar", "https://w.test/liar", _http("200 OK", "text/html", b"<p>x</p>"),
                                  declared_length=10**12) + records[2][2])
    files.append(WarcFile(liar, [], "Content-Length of 1 TB on the first record"))

    not_warc = directory / "not-a-warc.warc.gz"
    not_warc.write_bytes(gzip.compress(b"this is not a WARC file\n" * 100, mtime=0))
    files.append(WarcFile(not_warc, [], "valid gzip, no WARC inside"))

    garbage = directory / "garbage.warc.gz"
    rng = random.Random(SEED + 1)
    garbage.write_bytes(b"\x1f\x8b" + bytes(rng.getrandbits(8) for _ in range(4096)))
    files.append(WarcFile(garbage, [], "gzip magic followed by random bytes"))

    empty = directory / "empty.warc.gz"
    empty.write_bytes(b"")
    files.append(WarcFile(empty, [], "zero bytes"))
    return files


def write_pages(path: Path, cases=None) -> list[str]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    cases = page_cases() if cases is None else cases
    names = [c[0] for c in cases]
    table = pa.table({
        "doc_id": pa.array([f"adv-{c[0]}" for c in cases], pa.string()),
        "url": pa.array([None if c[0] == NULL_URL_CASE else c[1] for c in cases], pa.string()),
        "html": pa.array([c[2] for c in cases], pa.binary()),
        "declared_charset": pa.array([c[3] for c in cases], pa.string()),
        "content_type": pa.array([c[4] for c in cases], pa.string()),
    })
    path.parent.mkdir(parents=True, exist_ok=True)
    # Several small row groups so Spark reads the file as more than one task.
    pq.write_table(table, path, compression="zstd", row_group_size=8)
    return names


def build_corpus(directory: str | Path) -> Corpus:
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    pages = root / "pages.parquet"
    cases = write_pages(pages)
    warcs = build_warcs(root / "warc")
    return Corpus(root=root, pages=pages, cases=cases, warcs=warcs)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python tests/adversarial.py OUTPUT_DIR")
    corpus = build_corpus(sys.argv[1])
    print(f"{len(corpus.cases)} pages -> {corpus.pages}")
    for warc in corpus.warcs:
        print(f"{warc.path}: {len(warc.complete_responses)} complete responses; {warc.description}")
