"""Build the bundled sample pulpie_spark/resources/sample/sample.warc.gz (run once by a developer).

    .venv/bin/python benchmarks/build_sample.py [--shared ../shared]

Takes licensed pages from ../shared/data/extraction: WCXB dev (CC-BY-4.0) and Mozilla
Readability's test pages (Apache-2.0), wraps each HTML body as it was crawled in a WARC
response record (one gzip member per record, like Common Crawl), and adds one record
with an empty body so that a demo run shows the rejects table. Deterministic: same
inputs -> byte-identical file (fixed dates, uuid5 record ids, gzip mtime 0).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import uuid
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "pulpie_spark" / "resources" / "sample" / "sample.warc.gz"
WARC_DATE = "2025-06-01T00:00:00Z"
N_WCXB = 48
N_READABILITY = 12
MAX_HTML_BYTES = 120_000


def record(rtype: str, headers: dict, block: bytes) -> bytes:
    head = [b"WARC/1.0", f"WARC-Type: {rtype}".encode()]
    head += [f"{k}: {v}".encode() for k, v in headers.items()]
    head += [f"Content-Length: {len(block)}".encode()]
    raw = b"\r\n".join(head) + b"\r\n\r\n" + block + b"\r\n\r\n"
    return gzip.compress(raw, compresslevel=9, mtime=0)


def response(url: str, html: bytes, key: str) -> bytes:
    http = (b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
            + f"Content-Length: {len(html)}\r\n\r\n".encode() + html)
    rid = uuid.uuid5(uuid.NAMESPACE_URL, key)
    return record("response", {
        "WARC-Record-ID": f"<urn:uuid:{rid}>", "WARC-Date": WARC_DATE, "WARC-Target-URI": url,
        "Content-Type": "application/http; msgtype=response",
        "WARC-Payload-Digest": "sha256:" + hashlib.sha256(html).hexdigest(),
    }, http)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shared", default=str(ROOT.parent / "shared"))
    args = parser.parse_args()
    data = Path(args.shared) / "data" / "extraction"
    pages = []
    wcxb = pd.read_parquet(data / "wcxb_dev.parquet", columns=["page_id", "url", "html"])
    wcxb = wcxb[wcxb.html.map(len).between(8_000, MAX_HTML_BYTES)].sort_values("page_id")
    wcxb["host"] = wcxb.url.str.extract(r"^https?://([^/]+)")[0]
    wcxb = wcxb.drop_duplicates("host").head(N_WCXB)
    pages += [(r.url, bytes(r.html), f"wcxb:{r.page_id}") for r in wcxb.itertuples()]
    mozilla = pd.read_parquet(data / "mozilla_readability.parquet", columns=["page_id", "html"])
    mozilla = mozilla[mozilla.html.map(len).between(3_000, MAX_HTML_BYTES)].sort_values("page_id").head(N_READABILITY)
    # Readability's test pages have no URL; its test suite serves them from http://fakehost/.
    pages += [(f"http://fakehost/test/{r.page_id}/", bytes(r.html), f"readability:{r.page_id}")
              for r in mozilla.itertuples()]
    pages.append(("http://fakehost/empty-page/", b"", "sample:empty"))

    info = b"software: pulpie-spark benchmarks/build_sample.py\r\nformat: WARC File Format 1.0\r\n"
    with open(OUT, "wb") as out:
        out.write(record("warcinfo", {
            "WARC-Record-ID": f"<urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, 'pulpie-spark-sample')}>",
            "WARC-Date": WARC_DATE, "WARC-Filename": OUT.name, "Content-Type": "application/warc-fields"}, info))
        for url, html, key in pages:
            out.write(response(url, html, key))
    print(f"{OUT}: {len(pages)} response records, {OUT.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
