"""The classify stage in Spark: blocks -> labels, main_probs, model_id, classify_error.

Design:
- ``mapInPandas`` over Arrow batches; the model is loaded once per Python worker
  (module-level cache keyed by model location, device and batch budget) and reused
  across batches and tasks (``spark.python.worker.reuse=true``, Spark's default).
- Executors never need the Hub: a local checkpoint directory is zipped and shipped
  with ``SparkContext.addArchive`` (found again through ``SparkFiles``); a shared
  filesystem path (``dbfs:/``, ``/dbfs``, ``/mnt``, ...) is used as given; a Hub id
  already in the driver's HF cache is shipped from there.
- With GPUs configured the stage runs under a stage-level ResourceProfile asking for
  a GPU per task (segmentation stays on CPU tasks) and each task uses the GPU Spark
  assigned to it.
- A batch that fails is retried page by page; a page that still fails gets
  ``classify_error`` and empty labels. The task never crashes on bad input.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import math
import os
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from pulpie_spark import reasons
from pulpie_spark.classify.base import MAIN_THRESHOLD, validate_main_threshold, validate_unsure_threshold
from pulpie_spark.classify.hf import resolve_compile_scope
from pulpie_spark.classify.registry import EMBEDDED_MODELS, resolve_model_name
from pulpie_spark.memory import release_freed_memory
from pulpie_spark.page import MAX_PADDED_BLOCKS, classify_error, classify_pages, is_missing, labels_from_probs

log = logging.getLogger(__name__)

OUTPUT_COLUMNS = ("labels", "main_probs", "model_id", "classify_error", "unsure_page")
SHARED_FS_PREFIXES = ("dbfs:/", "/dbfs/", "/mnt/", "/Volumes/", "/lakehouse/")


@dataclass(frozen=True)
class ModelSpec:
    """Where executors find the model; picklable and small."""

    name: str                    # what load_classifier gets on the executor ("default", hub id, path)
    model_id: str                # what the output column says
    archive: str | None = None   # SparkFiles name of a shipped checkpoint
    device: str | None = None
    batch_tokens: int | None = None
    compile: str = "auto"        # torch.compile scope of an HF encoder (hf.resolve_compile_scope)


# ---------------------------------------------------------------------------- driver side
def _dir_fingerprint(directory: Path) -> str:
    digest = hashlib.sha256()
    for f in sorted(p for p in directory.rglob("*") if p.is_file()):
        stat = f.stat()
        digest.update(f"{f.relative_to(directory)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


_SHIPPED: dict[tuple[int, str], str] = {}


_SHIP_DIR: Path | None = None


def _ship_dir() -> Path:
    """This driver process's own folder for model archives, removed when it exits."""
    global _SHIP_DIR
    if _SHIP_DIR is None:
        import atexit
        import shutil

        _SHIP_DIR = Path(tempfile.mkdtemp(prefix="pulpie-models-"))
        atexit.register(shutil.rmtree, _SHIP_DIR, True)
    return _SHIP_DIR


def ship_directory(spark, directory: Path) -> str:
    """Zip a checkpoint directory once per session and add it as a Spark archive."""
    sc = spark.sparkContext
    fingerprint = _dir_fingerprint(directory)
    key = (id(sc), fingerprint)
    if key in _SHIPPED:
        return _SHIPPED[key]
    alias = f"pulpie-model-{fingerprint}"
    # A directory private to this driver process: a shared /tmp name could be deleted or
    # rewritten by another job while Spark still serves the archive to executors.
    zip_path = _ship_dir() / f"{alias}.zip"
    if not zip_path.exists():
        # safetensors are already dense: store, don't deflate (faster, same size).
        with zipfile.ZipFile(zip_path, "w", compression=zipfile.ZIP_STORED) as zf:
            for f in sorted(p for p in directory.rglob("*") if p.is_file()):
                zf.write(f, f.relative_to(directory).as_posix())
    sc.addArchive(f"{zip_path}#{alias}")
    _SHIPPED[key] = alias
    return alias


def _local_hub_snapshot(repo_id: str) -> Path | None:
    """The driver's cached copy of a Hub model, if it has one (never downloads)."""
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo_id, local_files_only=True))
    except Exception:
        return None


def prepare_model(spark, model: str, *, device: str | None = None,
                  batch_tokens: int | None = None, compile: str = "auto") -> ModelSpec:
    resolved = resolve_model_name(model)
    runtime = dict(device=device, batch_tokens=batch_tokens, compile=compile)
    if resolved in EMBEDDED_MODELS:   # shipped inside the package on every executor
        return ModelSpec(resolved, resolved, **runtime)
    if resolved.startswith(SHARED_FS_PREFIXES):
        path = "/dbfs/" + resolved[len("dbfs:/"):].lstrip("/") if resolved.startswith("dbfs:/") else resolved
        return ModelSpec(path, resolved, **runtime)
    local = Path(resolved).expanduser()
    if local.is_dir():
        alias = ship_directory(spark, local.resolve())
        return ModelSpec(resolved, resolved, archive=alias, **runtime)
    snapshot = _local_hub_snapshot(resolved)
    if snapshot is not None:
        alias = ship_directory(spark, snapshot)
        return ModelSpec(resolved, resolved, archive=alias, **runtime)
    # Not here: executors try the Hub themselves; offline, rows get classify_error.
    return ModelSpec(resolved, resolved, **runtime)


def _conf(spark, key: str) -> str | None:
    value = spark.sparkContext.getConf().get(key, None)
    if value is None:
        try:
            value = spark.conf.get(key, None)
        except Exception:
            value = None
    return value


def resolve_gpu_amount(spark, gpu_amount: float | None) -> float:
    """GPUs per classify task: the argument, else the cluster's GPU conf, else 0 (CPU)."""
    if gpu_amount is not None:
        return max(float(gpu_amount), 0.0)
    executor_gpus = float(_conf(spark, "spark.executor.resource.gpu.amount") or 0)
    if executor_gpus <= 0:
        return 0.0
    return float(_conf(spark, "spark.task.resource.gpu.amount") or 1.0)


def gpu_profile_requests(conf: dict[str, str], gpu_amount: float) -> dict:
    """What the classify ResourceProfile asks for (pure: conf dict in, plain dict out).

    Task requests always; executor requests only under dynamic allocation (without it
    Spark accepts task-only profiles, placed on the existing GPU executors)."""
    task_cpus = int(conf.get("spark.task.cpus", "1"))
    requests: dict = {"task": {"cpus": task_cpus, "gpu": gpu_amount}, "executor": None}
    if conf.get("spark.dynamicAllocation.enabled", "false").lower() == "true":
        executor = {"gpu": int(conf.get("spark.executor.resource.gpu.amount") or math.ceil(gpu_amount))}
        if conf.get("spark.executor.cores"):
            executor["cores"] = int(conf["spark.executor.cores"])
        if conf.get("spark.executor.memory"):
            executor["memory"] = conf["spark.executor.memory"]
        executor["discoveryScript"] = conf.get("spark.executor.resource.gpu.discoveryScript", "")
        executor["vendor"] = conf.get("spark.executor.resource.gpu.vendor", "")
        requests["executor"] = executor
    return requests


def build_gpu_profile(spark, gpu_amount: float):
    """A stage-level ResourceProfile asking for ``gpu_amount`` GPUs per task, or None in
    local mode (Spark supports stage-level scheduling on standalone/YARN/K8s only)."""
    if spark.sparkContext.master.startswith("local"):
        log.warning("local master: classify runs without a GPU ResourceProfile "
                    "(stage-level scheduling needs standalone, YARN or Kubernetes)")
        return None
    conf = dict(spark.sparkContext.getConf().getAll())
    return make_profile(gpu_profile_requests(conf, gpu_amount))


def make_profile(requests: dict):
    """Turn ``gpu_profile_requests`` output into a pyspark ResourceProfile."""
    from pyspark.resource import ExecutorResourceRequests, ResourceProfileBuilder, TaskResourceRequests

    task = TaskResourceRequests().cpus(requests["task"]["cpus"]).resource("gpu", requests["task"]["gpu"])
    builder = ResourceProfileBuilder().require(task)
    spec = requests.get("executor")
    if spec:
        executor = ExecutorResourceRequests().resource("gpu", spec["gpu"], spec["discoveryScript"],
                                                       spec["vendor"])
        if "cores" in spec:
            executor = executor.cores(spec["cores"])
        if "memory" in spec:
            executor = executor.memory(spec["memory"])
        builder = builder.require(executor)
    return builder.build


def output_schema(df, prefix: str = ""):
    from pyspark.sql.types import (ArrayType, BooleanType, FloatType, IntegerType, StringType, StructField,
                                   StructType)

    outputs = {prefix + c for c in OUTPUT_COLUMNS}
    fields = [f for f in df.schema.fields if f.name not in outputs]
    return StructType(fields + [
        StructField(prefix + "labels", ArrayType(IntegerType(), containsNull=False), True),
        StructField(prefix + "main_probs", ArrayType(FloatType(), containsNull=False), True),
        StructField(prefix + "model_id", StringType(), True),
        StructField(prefix + "classify_error", StringType(), True),
        StructField(prefix + "unsure_page", BooleanType(), True),
    ])


def classify_dataframe(df, model: str = "default", *, blocks_col: str = "blocks",
                       paths_col: str = "block_paths", device: str | None = None,
                       gpu_amount: float | None = None, batch_tokens: int | None = None, prefix: str = "",
                       main_threshold: float = MAIN_THRESHOLD, unsure_threshold: float | None = None,
                       compile: str = "auto"):
    """Add ``labels``, ``main_probs``, ``model_id``, ``classify_error``, ``unsure_page`` (each
    behind ``prefix``, so a pipeline can keep input columns of those names); an input column
    of the same name is replaced. ``labels`` are 1 where ``main_probs`` >= ``main_threshold``
    and the block's path is not one the output convention leaves out (classify/conventions.py:
    captions and class-hidden blocks; boxes, bylines, captions by class, the headline and
    asides below BOX_MIN_PROB);
    ``unsure_page`` is the page gate's verdict at ``unsure_threshold`` (page.classify_pages;
    null for a model without a gate). ``compile``: torch.compile scope of a transformers
    encoder (``auto``: its layers on CUDA; hf.resolve_compile_scope)."""
    main_threshold = validate_main_threshold(main_threshold)
    unsure_threshold = validate_unsure_threshold(unsure_threshold)
    if blocks_col not in df.columns:
        raise ValueError(f"classify_dataframe: no column {blocks_col!r} in {df.columns}")
    spark = df.sparkSession
    _warn_on_unbounded_arrow_batches(spark)
    resolve_compile_scope(compile, "cpu")   # a bad choice fails here, not on the executors
    spec = prepare_model(spark, model, device=device, batch_tokens=batch_tokens, compile=compile)
    keep = [c for c in df.columns if c not in {prefix + c for c in OUTPUT_COLUMNS}]
    fn = functools.partial(classify_batches, spec=spec, blocks_col=blocks_col,
                           paths_col=paths_col if paths_col in df.columns else None, keep=keep, prefix=prefix,
                           main_threshold=main_threshold, unsure_threshold=unsure_threshold)
    schema = output_schema(df, prefix)
    gpus = resolve_gpu_amount(spark, gpu_amount)
    profile = build_gpu_profile(spark, gpus) if gpus > 0 else None
    if profile is not None:
        return df.mapInPandas(fn, schema, profile=profile)
    return df.mapInPandas(fn, schema)


def _warn_on_unbounded_arrow_batches(spark) -> None:
    """One Arrow batch is held in a worker (blocks, tokens) at once: Spark's defaults
    (10,000 records, no byte bound) are far too big for pages of web HTML."""
    records = int(_conf(spark, "spark.sql.execution.arrow.maxRecordsPerBatch") or 10000)
    byte_bound = _conf(spark, "spark.sql.execution.arrow.maxBytesPerBatch")
    if records > 2048 or byte_bound is None:
        log.warning("classify: Arrow batches of up to %d records%s; set "
                    "spark.sql.execution.arrow.maxRecordsPerBatch (e.g. 256) and "
                    "spark.sql.execution.arrow.maxBytesPerBatch (e.g. 64m) to bound worker memory",
                    records, "" if byte_bound else " with no byte bound")


# -------------------------------------------------------------------------- executor side
_MODEL_CACHE: dict[tuple, object] = {}


def task_device(requested: str | None) -> str | None:
    """The device for this task: the one asked for, else the GPU Spark assigned, else auto."""
    if requested:
        return requested
    try:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        gpus = ctx.resources().get("gpu") if ctx is not None else None
    except Exception:
        gpus = None
    if gpus is not None and gpus.addresses:
        return f"cuda:{cuda_index(gpus.addresses[0])}"
    return None


def cuda_index(address: str, visible: str | None = None) -> int:
    """Map a Spark GPU address to a torch index, honouring CUDA_VISIBLE_DEVICES
    (YARN/K8s isolation renumbers the visible devices from 0)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES") if visible is None else visible
    ids = [v.strip() for v in visible.split(",") if v.strip()] if visible else []
    if address in ids:
        return ids.index(address)
    if len(ids) == 1:
        return 0
    return int(address)


def _model_path(spec: ModelSpec) -> str:
    if spec.archive:
        from pyspark import SparkFiles

        return SparkFiles.get(spec.archive)
    return spec.name


def get_classifier(spec: ModelSpec):
    """The worker's cached classifier for ``spec`` (loaded on first use)."""
    from pulpie_spark.classify.registry import load_classifier

    path = _model_path(spec)
    device = task_device(spec.device)
    key = (path, device, spec.batch_tokens, spec.compile)
    if key not in _MODEL_CACHE:
        embedded = path in EMBEDDED_MODELS
        kwargs = {"batch_tokens": spec.batch_tokens} if spec.batch_tokens and not embedded else {}
        if not embedded:
            kwargs["model_id"] = spec.model_id
            kwargs["compile"] = spec.compile
        try:
            _MODEL_CACHE[key] = load_classifier(path, device=device, **kwargs)
        except Exception as exc:  # remembered: one failed load per worker, not one per batch
            _MODEL_CACHE[key] = exc
    return _MODEL_CACHE[key]


def _as_list(value) -> list:
    if is_missing(value):
        return []
    return [v if isinstance(v, str) else ("" if v is None else str(v)) for v in value]


def classify_frame(pdf, classifier, *, blocks_col: str, paths_col: str | None,
                   model_id: str, load_error: str | None = None,
                   max_padded_blocks: int = MAX_PADDED_BLOCKS, prefix: str = "",
                   main_threshold: float = MAIN_THRESHOLD, unsure_threshold: float | None = None):
    """One pandas batch in, ``labels``, ``main_probs``, ``model_id``, ``classify_error``, ``unsure_page`` added:
    the per-page core :func:`pulpie_spark.page.classify_pages` over the batch's pages."""
    import pandas as pd

    n = len(pdf)
    pages = [_as_list(v) for v in pdf[blocks_col]] if n else []
    paths = [_as_list(v) for v in pdf[paths_col]] if (paths_col and n) else None
    if load_error is not None:
        probs = [np.zeros(0, dtype=np.float32) for _ in range(n)]
        errors = [load_error if pages[i] else None for i in range(n)]
        unsure = [None] * n
    else:
        probs, errors, unsure = classify_pages(classifier, pages, paths, max_padded_blocks=max_padded_blocks,
                                               unsure_threshold=unsure_threshold)
    out = pdf.copy(deep=False)
    out[prefix + "labels"] = [labels_from_probs(p, main_threshold, paths[i] if paths is not None else None)
                              for i, p in enumerate(probs)]
    out[prefix + "main_probs"] = probs
    out[prefix + "model_id"] = model_id
    out[prefix + "classify_error"] = errors
    out[prefix + "unsure_page"] = pd.array(unsure, dtype="boolean")   # nullable: no gate, no blocks
    return out


def classify_batches(batches: Iterator, *, spec: ModelSpec, blocks_col: str, paths_col: str | None,
                     keep: list[str], prefix: str = "", main_threshold: float = MAIN_THRESHOLD,
                     unsure_threshold: float | None = None) -> Iterator:
    """mapInPandas body: classify each Arrow batch with the worker's cached model."""
    classifier = None
    load_error = None
    model_id = spec.model_id
    for pdf in batches:
        if classifier is None and load_error is None:
            loaded = get_classifier(spec)
            if isinstance(loaded, Exception):
                load_error = classify_error(loaded, reasons.MODEL_LOAD_FAILED_PREFIX)
            else:
                classifier = loaded
                model_id = getattr(loaded, "model_id", None) or spec.model_id
        out = classify_frame(pdf[keep], classifier, blocks_col=blocks_col, paths_col=paths_col,
                             model_id=model_id, load_error=load_error, prefix=prefix,
                             main_threshold=main_threshold, unsure_threshold=unsure_threshold)
        del pdf
        # The worker lives for the whole job: hand the batch's features and trees back.
        release_freed_memory()
        yield out
