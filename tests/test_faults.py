"""Fault tolerance on a real Spark standalone cluster (localhost only).

A master and two workers (1 core each) are started from the pyspark package's own
jars (``spark-class``), bound to 127.0.0.1. ``jobs/extract.py`` runs against them as
a separate driver process (the tests' shared local session cannot change master):

1. a clean run is the reference;
2. a run where one worker (with its executor and Python workers) is killed after the
   first tasks finished gives the same rows as the reference;
3. a run whose driver is killed mid-job, then restarted with the same command,
   completes with no duplicates and no gaps, and writes the same part files as the
   reference, byte for byte (``file_bytes``); so does the run that lost a worker.

Every process is started in its own process group and killed in a finalizer.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from helpers_data import ROOT
import pytest

pytestmark = pytest.mark.slow

PAGES_PER_FILE = 4
INPUT_FILES = 6
# Generous: on an idle 2-core machine a run takes ~30 s; a shared one can be 10x slower.
START_TIMEOUT_S = int(os.environ.get("PULPIE_FAULT_START_TIMEOUT_S", "180"))
JOB_TIMEOUT_S = int(os.environ.get("PULPIE_FAULT_JOB_TIMEOUT_S", "600"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def cluster_env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    conf_dir = tmp / "conf"
    conf_dir.mkdir(exist_ok=True)
    private_tmp = tmp / "tmp"
    private_tmp.mkdir(exist_ok=True)
    env.update({
        # The classify stage zips a local checkpoint into the temp dir and serves it to the
        # executors from there for the whole job: keep other processes' /tmp cleanups away.
        "TMPDIR": str(private_tmp),
        "SPARK_HOME": str(spark_home()),
        "SPARK_CONF_DIR": str(conf_dir),  # empty: no site spark-defaults leak in
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_DIRS": str(tmp / "local"),
        "SPARK_LOG_DIR": str(tmp / "logs"),
        "SPARK_DAEMON_MEMORY": "256m",
        # No REST submission server (it would take the fixed port 6066).
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
        "SPARK_NO_DAEMONIZE": "1",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "OMP_NUM_THREADS": "1",
    })
    return env


class Cluster:
    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.env = cluster_env(tmp)
        self.port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.procs: dict[str, subprocess.Popen] = {}

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen:
        log = open(self.tmp / f"{name}.log", "wb")
        proc = subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *args], env=self.env,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs[name] = proc
        return proc

    def start_master(self) -> None:
        self._spawn("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(self.port), "--webui-port", str(free_port())])

    def start_worker(self, name: str) -> None:
        work = self.tmp / f"work-{name}"
        work.mkdir(exist_ok=True)
        self._spawn(name, ["org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1",
                           "--cores", "1", "--memory", "1536m", "--webui-port", str(free_port()),
                           "--work-dir", str(work)])

    def wait_for_log(self, name: str, needle: str, timeout: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        path = self.tmp / f"{name}.log"
        while time.monotonic() < deadline:
            if needle in path.read_text(errors="replace"):
                return
            if self.procs[name].poll() is not None:
                break
            time.sleep(0.5)
        raise AssertionError(f"{name} did not log {needle!r}:\n{path.read_text(errors='replace')[-3000:]}")

    def kill(self, name: str) -> None:
        proc = self.procs.pop(name, None)
        if proc is not None:
            kill_group(proc)

    def stop(self) -> None:
        for name in list(self.procs):
            self.kill(name)


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL a process group started with start_new_session (JVM, executor, Python workers)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass


def finished_tasks(cluster: Cluster) -> int:
    """Tasks finished so far, counted from the executors' logs in the workers' work dirs."""
    total = 0
    for stderr in cluster.tmp.glob("work-*/app-*/*/stderr"):
        total += stderr.read_text(errors="replace").count("Finished task")
    return total


def write_input(directory: Path) -> Path:
    """INPUT_FILES parquet files of pages (several tasks), a few bad pages among them."""
    import random

    rng = random.Random(7)
    words = ("river salmon mill weir valley bridge harbour market winter summer village "
             "railway station church meadow forest granite quarry ferry lighthouse").split()
    directory.mkdir(parents=True)
    n = 0
    for f in range(INPUT_FILES):
        urls, htmls = [], []
        for _ in range(PAGES_PER_FILE):
            n += 1
            title = " ".join(rng.choice(words) for _ in range(4)).title()
            paras = "".join("<p>" + " ".join(rng.choice(words) for _ in range(60)) + ".</p>" for _ in range(5))
            html = (f"<html><head><title>{title}</title></head><body><nav><a href='/'>Home</a></nav>"
                    f"<article><h1>{title}</h1>{paras}</article><footer>Contact</footer></body></html>")
            if n % 17 == 0:
                html = None  # a reject in the mix
            elif n % 13 == 0:
                html = "<div>" * 20_000
            urls.append(f"https://fault.test/page/{n}")
            htmls.append(None if html is None else html.encode())
        pq.write_table(pa.table({"url": urls, "html": pa.array(htmls, pa.binary())}),
                       directory / f"part-{f:02d}.parquet")
    return directory


def table_files(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*.parquet") if "_temporary" not in p.parts)


def canonical_rows(path: Path) -> tuple[int, str, list[str]]:
    """(row count, sha256 of all rows sorted by doc_id, doc_ids) of a written table."""
    rows = []
    for file in table_files(path):
        rows.extend(pq.read_table(file).to_pylist())
    rows.sort(key=lambda r: r["doc_id"])
    digest = hashlib.sha256()
    for row in rows:
        digest.update(json.dumps(row, sort_keys=True, default=lambda v: v.hex() if isinstance(v, bytes) else str(v))
                      .encode())
    return len(rows), digest.hexdigest(), [r["doc_id"] for r in rows]


def file_bytes(path: Path) -> list[tuple[str, int, str]]:
    """(part number, size, sha256 of the whole file) of each data file. The rest of a
    part file's name is a UUID of the write job; everything inside must be the same
    (pulpie_spark.io writes Parquet whose bytes do not depend on the JVM)."""
    out = []
    for file in table_files(path):
        part = file.name.split("-")[1] if file.name.startswith("part-") else file.name
        data = file.read_bytes()
        out.append((part, len(data), hashlib.sha256(data).hexdigest()))
    return sorted(out)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("standalone")
    cluster = Cluster(tmp)
    try:
        cluster.start_master()
        cluster.wait_for_log("master", "I have been elected leader")
        for name in ("worker-1", "worker-2"):
            cluster.start_worker(name)
        for name in ("worker-1", "worker-2"):
            cluster.wait_for_log(name, "Successfully registered with master")
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A tiny local safetensors checkpoint (tests/helpers_models.py): the real HF model
    path on the executors, independent of the embedded default model."""
    from helpers_models import save_tiny_classifier

    return save_tiny_classifier(tmp_path_factory.mktemp("fault-model") / "tiny")


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    return write_input(tmp_path_factory.mktemp("fault-input") / "pages")


def extract_command(cluster: Cluster, pages: Path, output: Path, model: Path) -> list[str]:
    conf = {
        "spark.executor.memory": "768m",
        "spark.executor.cores": "1",
        "spark.cores.max": "2",
        "spark.default.parallelism": "2",
        "spark.driver.memory": "768m",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.sql.shuffle.partitions": "2",
        # One file per partition whatever the cores at planning time (the open cost of a
        # file fills a whole split): same partitions, same part files, every run.
        "spark.sql.files.maxPartitionBytes": str(128 * 1024 * 1024),
        "spark.sql.files.openCostInBytes": str(128 * 1024 * 1024),
        "spark.task.maxFailures": "4",
        "spark.executorEnv.OMP_NUM_THREADS": "1",
    }
    cmd = [sys.executable, str(ROOT / "jobs" / "extract.py"), "--master", cluster.url,
           "--input", str(pages), "--output", str(output), "--model", str(model), "--device", "cpu",
           "--show", "0", "--log-level", "WARN"]
    for key, value in conf.items():
        cmd += ["--spark-conf", f"{key}={value}"]
    return cmd


def run_driver(cluster: Cluster, cmd: list[str], log: Path, *, on_progress=None) -> int:
    """Run a driver to completion (or until on_progress kills it); return its exit code."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, env=cluster.env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + JOB_TIMEOUT_S
        while proc.poll() is None:
            if time.monotonic() > deadline:
                raise AssertionError(f"driver ran over {JOB_TIMEOUT_S}s:\n{log.read_text(errors='replace')[-3000:]}")
            if on_progress is not None and on_progress(proc):
                on_progress = None
            time.sleep(0.5)
        return proc.returncode
    finally:
        kill_group(proc)


def require_extract_job():
    if not (ROOT / "jobs" / "extract.py").exists():
        pytest.fail("jobs/extract.py does not exist yet")


def test_worker_loss_and_driver_restart_give_the_reference_output(cluster, pages, model_dir, tmp_path):
    require_extract_job()

    # 1. Reference run.
    reference = tmp_path / "reference"
    rc = run_driver(cluster, extract_command(cluster, pages, reference, model_dir), tmp_path / "reference.log")
    assert rc == 0, (tmp_path / "reference.log").read_text(errors="replace")[-4000:]
    ref_rows, ref_hash, ref_ids = canonical_rows(reference)
    ref_rej_rows, ref_rej_hash, ref_rej_ids = canonical_rows(Path(str(reference) + "_rejects"))
    assert ref_rows + ref_rej_rows == INPUT_FILES * PAGES_PER_FILE
    assert ref_rej_rows > 0 and ref_rows > 0
    assert len(set(ref_ids + ref_rej_ids)) == INPUT_FILES * PAGES_PER_FILE

    # 2. Kill one worker (its executor and Python workers with it) after the first tasks finished.
    before = finished_tasks(cluster)
    killed = {}

    # The job's first stage is one task (listing the input); two finished tasks means
    # the main stage has finished tasks on some executor and has more to run.
    def kill_worker_after_first_tasks(_driver):
        if finished_tasks(cluster) - before >= 2:
            cluster.kill("worker-1")
            killed["at_tasks"] = finished_tasks(cluster) - before
            return True
        return False

    lost_worker = tmp_path / "lost-worker"
    rc = run_driver(cluster, extract_command(cluster, pages, lost_worker, model_dir), tmp_path / "lost-worker.log",
                    on_progress=kill_worker_after_first_tasks)
    assert killed, "the job finished before a worker could be killed"
    assert rc == 0, (tmp_path / "lost-worker.log").read_text(errors="replace")[-4000:]
    assert canonical_rows(lost_worker)[:2] == (ref_rows, ref_hash)
    assert canonical_rows(Path(str(lost_worker) + "_rejects"))[:2] == (ref_rej_rows, ref_rej_hash)
    # Tasks re-run on the other worker's executor (another JVM) write the same bytes.
    assert file_bytes(lost_worker) == file_bytes(reference)
    assert file_bytes(Path(str(lost_worker) + "_rejects")) == file_bytes(Path(str(reference) + "_rejects"))

    # Bring the cluster back to two workers: same slots, same partitioning as the reference.
    cluster.start_worker("worker-3")
    cluster.wait_for_log("worker-3", "Successfully registered with master")

    # 3. Kill the driver mid-job, then run the same command again.
    restarted = tmp_path / "restarted"
    before = finished_tasks(cluster)

    def kill_driver_after_first_tasks(driver):
        if finished_tasks(cluster) - before >= 2:
            kill_group(driver)
            return True
        return False

    command = extract_command(cluster, pages, restarted, model_dir)
    rc = run_driver(cluster, command, tmp_path / "killed-driver.log", on_progress=kill_driver_after_first_tasks)
    assert rc != 0, "the driver was not killed mid-job"
    rc = run_driver(cluster, command, tmp_path / "restarted.log")
    assert rc == 0, (tmp_path / "restarted.log").read_text(errors="replace")[-4000:]
    rows, digest, ids = canonical_rows(restarted)
    rej_rows, rej_digest, rej_ids = canonical_rows(Path(str(restarted) + "_rejects"))
    assert len(ids) == len(set(ids)) and not set(ids) & set(rej_ids), "duplicates after restart"
    assert (rows, digest) == (ref_rows, ref_hash), "output after restart differs from the reference"
    assert (rej_rows, rej_digest) == (ref_rej_rows, ref_rej_hash)
    # Same input and config, another driver and other executors: byte-identical files.
    assert file_bytes(restarted) == file_bytes(reference)
    assert file_bytes(Path(str(restarted) + "_rejects")) == file_bytes(Path(str(reference) + "_rejects"))
    assert not list(restarted.rglob("_temporary")), "leftovers of the killed run"
