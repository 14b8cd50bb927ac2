"""WARC ingest on real files: the pure core per file, then the Spark adapter once."""

from __future__ import annotations

import gzip
import io
import shutil

import pytest

from pulpie_spark.ingest import warc as core

WARCS = ["warc_resiliparse_warcfile.warc.gz", "warc_resiliparse_clipped.warc.gz",
         "warc_resiliparse_clueweb-quirk.warc.gz", "warc_dolma_sample-0001.warc.gz"]


def _rows(data_dir, name, **options):
    return core.read_warc_file(str(data_dir / name), **options)


def test_response_records_and_fields(data_dir):
    rows = _rows(data_dir, "warc_resiliparse_warcfile.warc.gz", keep_non_html=True, keep_non_200=True)
    assert len(rows) == 16  # the file's 16 response records; request/metadata/warcinfo are not rows
    assert [r["offset"] for r in rows] == sorted(r["offset"] for r in rows)
    first = rows[0]
    assert first["url"] == "http://003338.cn/l41/481397.html"
    assert first["record_id"] == "<urn:uuid:c4c112a5-3503-4483-abf8-51a0dd86dd53>"
    assert first["doc_id"] == "urn:uuid:c4c112a5-3503-4483-abf8-51a0dd86dd53"
    assert first["http_status"] == 200 and first["content_type"] == "text/html"
    assert first["html"].startswith(b"<html>") and first["html"].endswith(b"</html>")
    assert len(first["html"]) == 36331  # the HTTP body exactly: WARC Content-Length minus HTTP headers
    assert first["warc_date"].isoformat() == "2020-08-08T17:27:41+00:00"
    charsets = {r["declared_charset"] for r in rows}
    assert {"windows-1251", "utf-8", "gb2312"} <= charsets
    assert all(r["error"] is None for r in rows)
    assert len({r["doc_id"] for r in rows}) == len(rows)


def test_filters_flag_non_html_and_non_200(data_dir):
    every = _rows(data_dir, "warc_dolma_sample-0001.warc.gz", keep_non_html=True, keep_non_200=True)
    default = _rows(data_dir, "warc_dolma_sample-0001.warc.gz")
    skipped = [r for r in every if r["skip_reason"]]
    assert len(default) == len(every) - len(skipped)
    assert all(r["skip_reason"] is None for r in default)
    for r in skipped:
        if r["skip_reason"] == core.SKIP_STATUS:
            assert r["http_status"] != 200
        else:
            assert r["skip_reason"] == core.SKIP_NON_HTML
    # dolma writes WARC 1.0's `<uri>` form: the brackets are not part of the URL.
    assert all(r["url"].startswith("http") and not r["url"].endswith(">") for r in every)


def test_clueweb_records_without_content_type_are_sniffed_as_html(data_dir):
    rows = _rows(data_dir, "warc_resiliparse_clueweb-quirk.warc.gz")
    assert len(rows) == 29
    assert all(r["content_type"] is None and r["skip_reason"] is None for r in rows)


def test_clipped_file_gives_a_truncated_row(data_dir):
    rows = _rows(data_dir, "warc_resiliparse_clipped.warc.gz")
    assert len(rows) == 1
    assert rows[0]["error"] == core.ERR_TRUNCATED
    assert 0 < len(rows[0]["html"]) < 88038  # the bytes that are there, not the declared length


def test_bad_gzip_member_costs_one_row(data_dir):
    data = (data_dir / "warc_resiliparse_warcfile.warc.gz").read_bytes()
    good = core.read_warc_file(str(data_dir / "warc_resiliparse_warcfile.warc.gz"))
    damaged_offset = good[1]["offset"]
    bad = bytearray(data)
    for i in range(damaged_offset + 30, damaged_offset + 60):
        bad[i] ^= 0xFF
    rows = list(core.iter_warc_records(lambda: io.BytesIO(bytes(bad)), "bad.warc.gz"))
    errors = [r for r in rows if r["error"]]
    assert [(r["offset"], r["error"].split(":")[0]) for r in errors] == [(damaged_offset, core.ERR_BAD_GZIP)]
    # Every other record is read after resynchronising, with the same bytes.
    fine = [(r["offset"], r["html"]) for r in rows if not r["error"]]
    assert fine == [(r["offset"], r["html"]) for r in good if r["offset"] != damaged_offset]


def test_garbage_missing_and_uncompressed_files(data_dir, tmp_path):
    junk = list(core.iter_warc_records(lambda: io.BytesIO(b"no warc here\n" * 10), "junk"))
    assert len(junk) == 1 and junk[0]["error"].startswith(core.ERR_BAD_RECORD)
    missing = core.read_warc_file(str(tmp_path / "missing.warc.gz"))
    assert len(missing) == 1 and missing[0]["error"].startswith(core.ERR_OPEN)
    plain = tmp_path / "plain.warc"
    with gzip.open(data_dir / "warc_resiliparse_warcfile.warc.gz") as src, open(plain, "wb") as dst:
        shutil.copyfileobj(src, dst)
    gz_rows = _rows(data_dir, "warc_resiliparse_warcfile.warc.gz")
    plain_rows = core.read_warc_file(str(plain))
    assert [r["html"] for r in plain_rows] == [r["html"] for r in gz_rows]


def test_oversized_body_is_an_error_row_not_read(data_dir):
    rows = _rows(data_dir, "warc_resiliparse_warcfile.warc.gz", max_bytes=20_000)
    big = [r for r in rows if r["error"] == core.ERR_TOO_LARGE]
    assert big and all(r["html"] is None and r["url"] for r in big)


@pytest.mark.parametrize("value,expected", [
    ("text/html; charset=UTF-8", ("text/html", "utf-8")),
    ('text/html;charset="windows-1251"', ("text/html", "windows-1251")),
    ("TEXT/HTML", ("text/html", None)),
    (None, (None, None)),
])
def test_parse_content_type(value, expected):
    assert core.parse_content_type(value) == expected


def test_decode_content_codings():
    import zlib

    body = b"<html><body>hello</body></html>"
    assert core.decode_content(gzip.compress(body), "gzip", None, 1 << 20) == body
    assert core.decode_content(zlib.compress(body), "deflate", None, 1 << 20) == body
    chunked = b"5\r\n<html\r\n" + f"{len(body) - 5:x}".encode() + b"\r\n" + body[5:] + b"\r\n0\r\n\r\n"
    assert core.decode_content(chunked, None, "chunked", 1 << 20) == body


def test_read_warc_in_spark_matches_core(spark, data_dir, tmp_path):
    from pulpie_spark.ingest.spark_adapter import list_warc_files, read_warc

    for name in WARCS:
        shutil.copy(data_dir / name, tmp_path / name)
    files = list_warc_files(spark, str(tmp_path))
    assert [f.rsplit("/", 1)[1] for f in files] == sorted(WARCS)
    df = read_warc(spark, str(tmp_path))
    assert df.rdd.getNumPartitions() == len(WARCS)  # one task per file
    got = sorted((r.source_file.rsplit("/", 1)[1], r.offset, r.doc_id, r.error, len(r.html or b""))
                 for r in df.collect())
    expected = sorted((name, r["offset"], r["doc_id"], r["error"], len(r["html"] or b""))
                      for name in WARCS for r in _rows(data_dir, name))
    assert got == expected
    assert df.schema["warc_date"].dataType.simpleString() == "timestamp"
