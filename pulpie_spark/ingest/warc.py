"""WARC -> response records (pure core: no Spark).

``iter_warc_records(open_at, source_file)`` streams one WARC / WARC.gz file with
fastwarc and yields one dict per HTTP response record (see ``RECORD_FIELDS``). It never
raises for bad input; damage becomes rows with ``error`` set:

* ``truncated_record``: the file ends inside a record (a clipped download); the
  bytes that were there are kept in ``html``.
* ``bad_gzip_member`` / ``bad_warc_record``: a gzip member or record that does not
  decode. Reading resumes at the next gzip member (or ``WARC/`` line for an
  uncompressed file), so one bad member costs one row, not the rest of the file.
* ``html_too_large``: the body is above ``guards.max_html_bytes()``; it is not read.
* ``content_decoding``: a ``Content-Encoding`` / chunked body that does not decode.
* ``open_failed``: the file cannot be opened at all.

Rows that are fine but not pages carry ``skip_reason`` (``non_html`` or
``http_status``); callers keep or drop them by option. Memory per file is one
record at a time (bounded by ``max_html_bytes``), never the whole file.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import re
import zlib
from typing import IO, Callable, Iterator

from pulpie_spark import reasons

log = logging.getLogger(__name__)

RECORD_FIELDS = ("record_id", "url", "warc_date", "http_status", "content_type", "declared_charset",
                 "html", "source_file", "offset", "doc_id", "error", "skip_reason")

# This stage's error and skip names (spelled once, in pulpie_spark.reasons).
ERR_TRUNCATED = reasons.WARC_TRUNCATED
ERR_BAD_GZIP = reasons.WARC_BAD_GZIP
ERR_BAD_RECORD = reasons.WARC_BAD_RECORD
ERR_TOO_LARGE = reasons.HTML_TOO_LARGE
ERR_DECODING = reasons.WARC_CONTENT_DECODING
ERR_OPEN = reasons.WARC_OPEN_FAILED
SKIP_NON_HTML = reasons.SKIP_NON_HTML
SKIP_STATUS = reasons.SKIP_HTTP_STATUS

HTML_MIME_TYPES = frozenset({"text/html", "application/xhtml+xml", "application/xml+xhtml"})
_GZIP_MAGIC = b"\x1f\x8b\x08"
_WARC_MAGIC = b"WARC/"
_SCAN_CHUNK = 1 << 20
_CHARSET_RE = re.compile(r"""charset\s*=\s*["']?([^"';\s,]+)""", re.I)
_HTML_SNIFF_RE = re.compile(rb"<(!doctype\s+html|html|head|body|title|meta|div|p)[\s>/]", re.I)


def parse_content_type(value: str | None) -> tuple[str | None, str | None]:
    """``"text/html; charset=UTF-8"`` -> ``("text/html", "utf-8")``; missing parts are None."""
    if not value:
        return None, None
    mime = value.split(";", 1)[0].strip().lower() or None
    match = _CHARSET_RE.search(value)
    charset = match.group(1).strip().lower() if match else None
    return mime, charset


def looks_like_html(body: bytes | None) -> bool:
    """A cheap sniff for bodies served without a Content-Type (e.g. ClueWeb records)."""
    return bool(body) and _HTML_SNIFF_RE.search(body[:2048]) is not None


def strip_angle(value: str | None) -> str | None:
    """WARC 1.0's grammar put ``<...>`` around URIs and ids; some writers still do."""
    if value is None:
        return None
    value = value.strip()
    return value[1:-1].strip() if value.startswith("<") and value.endswith(">") else value


def doc_id_for(record_id: str | None, url: str | None, html: bytes | None) -> str:
    """Stable id: the WARC record id when present, else sha256(url NUL html) in hex."""
    if record_id:
        return strip_angle(record_id)
    digest = hashlib.sha256()
    digest.update((url or "").encode("utf-8", "surrogatepass"))
    digest.update(b"\x00")
    digest.update(html or b"")
    return digest.hexdigest()


def _error_doc_id(source_file: str, offset: int) -> str:
    return hashlib.sha256(f"{source_file}\x00{offset}".encode("utf-8", "surrogatepass")).hexdigest()


def decode_chunked(body: bytes) -> bytes:
    """HTTP/1.1 chunked transfer coding -> payload. Raises ValueError when malformed."""
    out, pos = bytearray(), 0
    while True:
        end = body.find(b"\r\n", pos)
        if end < 0:
            raise ValueError("chunk size line missing")
        size = int(body[pos:end].split(b";", 1)[0].strip() or b"x", 16)
        if size == 0:
            return bytes(out)
        start = end + 2
        if start + size > len(body):
            raise ValueError("chunk runs past the body")
        out += body[start:start + size]
        pos = start + size + 2


def decode_content(body: bytes, content_encoding: str | None, transfer_encoding: str | None,
                   limit: int) -> bytes:
    """Undo transfer and content codings (chunked, gzip, deflate, br) of a stored body."""
    if transfer_encoding and "chunked" in transfer_encoding.lower():
        body = decode_chunked(body)
    for coding in reversed([c.strip().lower() for c in (content_encoding or "").split(",") if c.strip()]):
        if coding in ("identity", "none"):
            continue
        if coding in ("gzip", "x-gzip", "deflate"):
            wbits = 47 if coding != "deflate" else (15 if body[:1] == b"\x78" else -15)
            decompressor = zlib.decompressobj(wbits)
            body = decompressor.decompress(body, limit + 1)
        elif coding == "br":
            from fastwarc.stream_io import BrotliReader  # noqa: F401  (fastwarc ships brotli)
            import io

            body = BrotliReader(io.BytesIO(body)).read(limit + 1)
        else:
            raise ValueError(f"unsupported content-encoding {coding!r}")
    return body


def _find_magic(stream: IO[bytes], start: int, magic: bytes) -> int | None:
    """Offset of the next ``magic`` at or after ``start``, reading forward in chunks."""
    stream.seek(start)
    pos, carry = start, b""
    while True:
        chunk = stream.read(_SCAN_CHUNK)
        if not chunk:
            return None
        data = carry + chunk
        hit = data.find(magic)
        if hit >= 0:
            return pos - len(carry) + hit
        carry = data[-(len(magic) - 1):]
        pos += len(chunk)


def _base_row(source_file: str, offset: int) -> dict:
    row = dict.fromkeys(RECORD_FIELDS)
    row["source_file"] = source_file
    row["offset"] = offset
    return row


def error_row(source_file: str, offset: int, error: str) -> dict:
    row = _base_row(source_file, offset)
    row["error"] = error
    row["doc_id"] = _error_doc_id(source_file, offset)
    return row


def _record_row(record, source_file: str, offset: int, max_bytes: int) -> dict:
    row = _base_row(source_file, offset)
    headers = record.headers
    row["record_id"] = headers.get("WARC-Record-ID")
    row["url"] = strip_angle(headers.get("WARC-Target-URI"))
    date = record.record_date
    if date is not None:
        row["warc_date"] = date.astimezone(dt.timezone.utc) if date.tzinfo else date.replace(tzinfo=dt.timezone.utc)
    http = record.http_headers if record.is_http else None
    content_type = http.get("Content-Type") if http is not None else None
    row["http_status"] = http.status_code if http is not None else None
    row["content_type"] = content_type
    mime, row["declared_charset"] = parse_content_type(content_type)

    expected = record.content_length  # the HTTP body length once headers are parsed
    if expected > max_bytes:
        row["error"] = ERR_TOO_LARGE
    else:
        body = record.reader.read(expected + 1) if expected >= 0 else record.reader.read(max_bytes + 1)
        if len(body) < expected:
            row["error"] = ERR_TRUNCATED
        if http is not None and (http.get("Content-Encoding") or http.get("Transfer-Encoding")):
            try:
                body = decode_content(body, http.get("Content-Encoding"), http.get("Transfer-Encoding"),
                                      max_bytes)
            except Exception as exc:  # a body we cannot decode is an error row, not a crash
                row["error"] = row["error"] or f"{ERR_DECODING}: {type(exc).__name__}: {exc}"[:200]
        if len(body) > max_bytes:
            row["error"] = ERR_TOO_LARGE
            body = None
        row["html"] = body

    if row["http_status"] is not None and row["http_status"] != 200:
        row["skip_reason"] = SKIP_STATUS
    elif mime is not None and mime not in HTML_MIME_TYPES:
        row["skip_reason"] = SKIP_NON_HTML
    elif mime is None and row["html"] is not None and not looks_like_html(row["html"]):
        row["skip_reason"] = SKIP_NON_HTML
    row["doc_id"] = doc_id_for(row["record_id"], row["url"], row["html"])
    return row


def iter_warc_records(open_at: Callable[[], IO[bytes]], source_file: str, *,
                      keep_non_html: bool = False, keep_non_200: bool = False,
                      max_bytes: int | None = None) -> Iterator[dict]:
    """Yield one row per response record of one WARC file (see module docstring).

    ``open_at()`` returns a new seekable binary stream of the file (called once;
    the stream is re-positioned to resume after damage). Error rows are always
    yielded; rows with a ``skip_reason`` only when the matching ``keep_*`` is set.
    """
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    from pulpie_spark.guards import max_html_bytes

    limit = max_html_bytes() if max_bytes is None else int(max_bytes)
    try:
        stream = open_at()
        head = stream.read(3)
    except Exception as exc:
        yield error_row(source_file, 0, f"{ERR_OPEN}: {type(exc).__name__}: {exc}"[:300])
        return
    try:
        magic = _GZIP_MAGIC if head == _GZIP_MAGIC else _WARC_MAGIC
        bad_kind = ERR_BAD_GZIP if magic == _GZIP_MAGIC else ERR_BAD_RECORD

        def wanted(row: dict) -> bool:
            if row["error"]:
                return True
            if row["skip_reason"] == SKIP_STATUS:
                return keep_non_200
            if row["skip_reason"] == SKIP_NON_HTML:
                return keep_non_html
            return True

        start = 0
        while start is not None:
            stream.seek(start)
            last_good = None  # absolute offset of the last record read completely
            try:
                # Every record type, so that `last_good` tracks each member; only
                # responses become rows. stream_pos is the absolute offset in the file.
                # HTTP headers are parsed for responses only (requests/metadata are skipped unread).
                iterator = ArchiveIterator(stream, record_types=WarcRecordType.any_type, parse_http=False)
                for record in iterator:
                    offset = record.stream_pos
                    row = None
                    if record.record_type == WarcRecordType.response:
                        record.parse_http()
                        row = _record_row(record, source_file, offset, limit)
                    last_good = offset
                    if row is not None and wanted(row):
                        yield row
                start = None  # clean end of file
            except Exception as exc:
                # Damage. With no complete record since `start`, the member at `start` is
                # bad; otherwise the first member after the last good record is. Report it
                # once, then resume at the member after it.
                if last_good is None:
                    bad_at = start
                else:
                    bad_at = _find_magic(stream, last_good + 1, magic)
                    bad_at = last_good + 1 if bad_at is None else bad_at
                yield error_row(source_file, bad_at, f"{bad_kind}: {exc}"[:300])
                start = _find_magic(stream, bad_at + 1, magic)
    finally:
        try:
            stream.close()
        except Exception:
            pass


def open_local(path: str) -> Callable[[], IO[bytes]]:
    return lambda: open(path, "rb")


def read_warc_file(path: str, **options) -> list[dict]:
    """All rows of one local WARC file (tests, notebooks, small files)."""
    return list(iter_warc_records(open_local(path), path, **options))
