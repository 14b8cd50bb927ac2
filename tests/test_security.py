"""Security: nothing in a checkpoint or in the data is executed, fetched or used as a path.

* model weights load from safetensors only: a pickle ``.bin`` checkpoint is refused and
  its payload never runs;
* no remote code unless asked: a checkpoint whose config maps to custom code
  (``auto_map``) is not executed with the default ``trust_remote_code=False``;
* no URL found in a page is fetched (a local HTTP server sees zero requests; with
  ``socket.connect`` disabled, pure extraction still works);
* no output path is derived from data (``url``/``doc_id`` with ``..`` or ``/``).
"""

from __future__ import annotations

import http.server
import pickle
import socket
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from helpers_data import ROOT, load_job
import pytest



class Payload:
    """Unpickling this creates ``marker``: proof that pickle code ran."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def write_config(directory: Path, **extra) -> None:
    import json

    config = {"model_type": "bert", "architectures": ["BertForTokenClassification"], "vocab_size": 32,
              "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 1, "intermediate_size": 8,
              "num_labels": 2, **extra}
    (directory / "config.json").write_text(json.dumps(config))


# --- checkpoints ------------------------------------------------------------------

def test_pickle_only_checkpoint_is_refused_and_never_unpickled(tmp_path):
    from pulpie_spark.classify.base import ModelLoadError
    from pulpie_spark.classify.registry import load_classifier

    checkpoint = tmp_path / "pickle-model"
    checkpoint.mkdir()
    marker = tmp_path / "pickle-payload-ran"
    write_config(checkpoint)
    (checkpoint / "pytorch_model.bin").write_bytes(pickle.dumps({"weight": Payload(marker)}))
    with pytest.raises(ModelLoadError, match="safetensors"):
        load_classifier(str(checkpoint), device="cpu")
    assert not marker.exists(), "the pickle payload was executed"
    pickle.loads((checkpoint / "pytorch_model.bin").read_bytes())  # control: unpickling runs it
    assert marker.exists()


def test_pickle_next_to_safetensors_is_ignored(tmp_path):
    from helpers_models import save_tiny_classifier

    from pulpie_spark.classify.registry import load_classifier

    checkpoint = save_tiny_classifier(tmp_path / "tiny")
    marker = tmp_path / "pickle-payload-ran"
    (checkpoint / "pytorch_model.bin").write_bytes(pickle.dumps({"weight": Payload(marker)}))
    classifier = load_classifier(str(checkpoint), device="cpu")
    probs = classifier.predict_proba([["<p>hello world</p>", "<p>text MAIN</p>"]])
    assert len(probs) == 1 and len(probs[0]) == 2
    assert not marker.exists(), "the pickle next to the safetensors was unpickled"


def test_remote_code_in_checkpoint_is_not_executed_by_default(tmp_path):
    from helpers_models import save_tiny_classifier

    from pulpie_spark.classify.registry import load_classifier

    checkpoint = save_tiny_classifier(tmp_path / "remote-code")
    marker = tmp_path / "remote-code-ran"
    evil = f"open({str(marker)!r}, 'w').close()\n"
    for module in ("configuration_evil", "modeling_evil"):
        (checkpoint / f"{module}.py").write_text(
            evil + "from transformers import PretrainedConfig, PreTrainedModel\n"
            "class EvilConfig(PretrainedConfig):\n    model_type = 'evil'\n"
            "class EvilModel(PreTrainedModel):\n    config_class = EvilConfig\n")
    import json

    config = json.loads((checkpoint / "config.json").read_text())
    config["auto_map"] = {"AutoConfig": "configuration_evil.EvilConfig",
                          "AutoModelForTokenClassification": "modeling_evil.EvilModel"}
    (checkpoint / "config.json").write_text(json.dumps(config))
    try:
        load_classifier(str(checkpoint), device="cpu")
    except Exception:  # noqa: BLE001 - refusing is fine; running the code is not
        pass
    assert not marker.exists(), "custom code from the checkpoint ran without trust_remote_code"
    # Control: asked for explicitly, the same checkpoint's code does run (so the marker
    # above would have shown it).
    try:
        load_classifier(str(checkpoint), device="cpu", trust_remote_code=True)
    except Exception:  # noqa: BLE001 - the evil model is not a working model
        pass
    assert marker.exists()


# --- no fetching ------------------------------------------------------------------

class CountingHandler(http.server.BaseHTTPRequestHandler):
    requests: list[str] = []

    def do_GET(self):  # noqa: N802 - http.server API
        CountingHandler.requests.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(b"<p>fetched</p>")

    do_HEAD = do_GET
    do_POST = do_GET

    def log_message(self, *args):
        pass


@pytest.fixture()
def trap_server():
    CountingHandler.requests = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), CountingHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def pages_pointing_at(base: str) -> list[str]:
    article = ("<article><h1>Harbour notes</h1><p>The ferry leaves at dawn and returns at dusk; "
               "the harbour master keeps a log of every crossing since 1921.</p></article>")
    return [
        f"<html><head><base href='{base}/base/'><link rel=stylesheet href='{base}/style.css'>"
        f"<link rel=preload href='{base}/preload.js'><script src='{base}/script.js'></script>"
        f"<meta http-equiv=refresh content='0; url={base}/refresh'>"
        f"<style>@import url({base}/import.css); body {{ background: url({base}/bg.png) }}</style></head>"
        f"<body>{article}<img src='{base}/img.png' srcset='{base}/img-2x.png 2x' alt='harbour'>"
        f"<iframe src='{base}/frame'></iframe><object data='{base}/object'></object>"
        f"<video poster='{base}/poster.jpg'><source src='{base}/video.mp4'></video>"
        f"<a href='{base}/link'>next crossing</a><form action='{base}/form'><input></form>"
        f"<svg><image href='{base}/svg.png'/></svg></body></html>",
        f"<html><body><p style=\"background-image:url('{base}/inline.png')\">{article}</p>"
        f"<img src='//127.0.0.1:{base.rsplit(':', 1)[1]}/protocol-relative.png'></body></html>",
    ]


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    """A local safetensors checkpoint: the extraction path without the embedded model."""
    from helpers_models import save_tiny_classifier

    return save_tiny_classifier(tmp_path_factory.mktemp("tiny-model") / "tiny")


def test_extractor_fetches_no_url_found_in_pages(trap_server, tiny_checkpoint):
    from pulpie_spark.extractor import Extractor

    extractor = Extractor(str(tiny_checkpoint), device="cpu", links=True, images=True)
    results = extractor.extract_batch(pages_pointing_at(trap_server))
    assert all(r.error is None for r in results), [r.error for r in results]
    assert all(r.n_blocks > 0 for r in results)
    assert CountingHandler.requests == [], f"fetched: {CountingHandler.requests}"
    # Control: the trap does count a request when one is made.
    import urllib.request

    urllib.request.urlopen(f"{trap_server}/control", timeout=10).read()
    assert CountingHandler.requests == ["/control"]


def disable_network(monkeypatch) -> list:
    attempts: list = []

    def refuse(*args, **kwargs):
        attempts.append(args[1:] if len(args) > 1 else args)
        raise OSError("network disabled by test_security")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    return attempts


def test_pure_extraction_with_local_checkpoint_works_with_network_disabled(monkeypatch, trap_server,
                                                                          tiny_checkpoint):
    """Loading a local checkpoint (transformers), segmentation, classification,
    rendering: no socket is opened, not even to ask a hub."""
    pages = pages_pointing_at(trap_server)
    attempts = disable_network(monkeypatch)
    from pulpie_spark.extractor import Extractor

    extractor = Extractor(str(tiny_checkpoint), device="cpu", links=True, images=True)
    result = extractor.extract(pages[0])
    assert result.error is None and result.n_blocks > 0
    assert attempts == [], f"connection attempts: {attempts}"


def test_default_model_extraction_works_with_network_disabled(monkeypatch, trap_server):
    pages = pages_pointing_at(trap_server)
    attempts = disable_network(monkeypatch)
    from pulpie_spark.extractor import Extractor

    result = Extractor(links=True, images=True).extract(pages[0])
    assert result.error is None and "harbour master" in result.text
    assert attempts == [], f"connection attempts: {attempts}"
    assert CountingHandler.requests == []


def files_under(directory: Path) -> set[Path]:
    return {p for p in directory.rglob("*") if p.is_file()}


def test_spark_extract_fetches_nothing_and_writes_only_under_output(spark, trap_server, tmp_path):
    """Urls and doc_ids that look like paths never become paths; no URL is fetched."""
    workspace = tmp_path / "workspace"
    deep = workspace / "a" / "b" / "c"  # ../../ from the output lands inside workspace
    deep.mkdir(parents=True)
    pages = pages_pointing_at(trap_server)
    table = pa.table({
        "doc_id": ["../../escape-doc", "/tmp/absolute-doc", "nested/dir/doc", None],
        "url": ["../../etc/escape-url", "/etc/passwd", "file:///etc/shadow", "https://ok.test/x/../../y"],
        "html": pa.array([p.encode() for p in pages] + [pages[0].encode(), pages[1].encode()], pa.binary()),
    })
    source = deep / "pages.parquet"
    pq.write_table(table, source)
    output = deep / "out"
    before = files_under(workspace)

    job = next(v for v in vars(load_job("extract")).values() if isinstance(v, type) and v.__name__ == "ExtractJob")
    assert job().main(["--input", str(source), "--output", str(output), "--links", "--show", "0",
                       "--log-level", "ERROR"]) == 0

    new_files = files_under(workspace) - before
    rejects = Path(str(output) + "_rejects")
    outside = [p for p in new_files if not (p.is_relative_to(output) or p.is_relative_to(rejects))]
    assert outside == [], f"files written outside --output: {outside}"
    assert not Path("/tmp/absolute-doc").exists() and not (workspace / "escape-doc").exists()
    from pulpie_spark.io import read_table

    rows = read_table(spark, str(output)).collect() + read_table(spark, str(rejects)).collect()
    assert len(rows) == 4
    assert CountingHandler.requests == [], f"fetched: {CountingHandler.requests}"


def test_ingest_writes_only_under_output_for_hostile_warc_uris(spark, tmp_path):
    from adversarial import build_warcs

    workspace = tmp_path / "workspace"
    warcs = workspace / "a" / "b" / "warc"
    build_warcs(warcs)
    output = workspace / "a" / "b" / "records"
    before = files_under(workspace)
    job = next(v for v in vars(load_job("ingest_warc")).values()
               if isinstance(v, type) and v.__name__ == "IngestWarcJob")
    assert job().main(["--input", str(warcs / "synthetic.warc.gz"), "--output", str(output),
                       "--log-level", "ERROR"]) == 0
    new_files = files_under(workspace) - before
    rejects = Path(str(output) + "_rejects")   # the filtered records, named from --output
    outside = [p for p in new_files if not (p.is_relative_to(output) or p.is_relative_to(rejects))]
    assert outside == [], f"files written outside --output: {outside}"
    assert not (workspace / "etc").exists() and not (workspace / "a" / "etc").exists()
