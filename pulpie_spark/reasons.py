"""Every reason a row can be rejected, removed, fall back or carry an error: one vocabulary.

A ``reason`` in a rejects table, a curate ``reason``, a ``seg_error``/``error`` column and a
``fallback`` column all use these names; nothing else in the package spells them. A reason
with a detail is written ``<prefix><detail>`` (``error:ValueError: bad``,
``quality:gopher_quality:gopher_short_document``). docs/reliability.md lists them all
(tests/test_reasons.py checks that every name below is documented there).
"""

from __future__ import annotations

# --- the page guards (pulpie_spark.guards): any stage that handles a raw page
HTML_NULL = "html_null"                       # the html column is null
HTML_EMPTY = "html_empty"                     # zero bytes
HTML_TOO_LARGE = "html_too_large"             # over PULPIE_MAX_HTML_BYTES (or the WARC ingest's own limit)
HTML_TOO_DEEP = "html_too_deep"               # element nesting over PULPIE_MAX_HTML_DEPTH
HTML_TOO_MANY_ATTRIBUTES = "html_too_many_attributes"
TIMEOUT = "timeout"                           # a per-page step ran past PULPIE_PAGE_TIMEOUT_S
OUT_OF_MEMORY = "out_of_memory"
RECURSION_LIMIT = "recursion_limit"
ERROR_PREFIX = "error:"                       # error:<ExceptionType>: <message>

# --- segment / classify / render (the extract job's stages)
NO_BLOCKS = "no_blocks"                       # the page parsed but holds no text block
CLASSIFY_PREFIX = "classify:"                 # classify:error:<Type>: <message> (a failed model call)
MODEL_LOAD_FAILED_PREFIX = "model_load_failed:"  # classify:model_load_failed:error:... (the worker's model)
RENDER_PREFIX = "render:"                     # render:<guard reason or error:...>

# --- why the fallback extractor ran (the ``fallback`` column: <trafilatura|resiliparse>:<why>)
FALLBACK_NO_BLOCKS = NO_BLOCKS
FALLBACK_ERROR = "error"                      # the model path failed (segment, classify or render)
FALLBACK_EMPTY_OUTPUT = "empty_output"        # the model marked nothing main, or it rendered empty
FALLBACK_SHORT_OUTPUT = "short_output"        # the model's text has under page.SHORT_OUTPUT_CHARS non-space characters
FALLBACK_UNSURE = "model_unsure"              # the model's page gate says the fallback does better here
# ... and how the fallback itself can fail (in ``error`` of the output row or the reject)
FALLBACK_FAILED_PREFIX = "fallback_failed:"   # fallback_failed:<guard reason or error>
FALLBACK_EMPTY = "fallback_empty"             # the fallback found nothing either

# --- extract job: rows the ingest marked (prefixes of the ingest's own error/skip_reason)
INGEST_PREFIX = "ingest:"                     # ingest:<WARC error below>
SKIPPED_PREFIX = "skipped:"                   # skipped:<skip reason below>
WARC_TRUNCATED = "truncated_record"
WARC_BAD_GZIP = "bad_gzip_member"
WARC_BAD_RECORD = "bad_warc_record"
WARC_CONTENT_DECODING = "content_decoding"    # content_decoding: <Type>: <message>
WARC_OPEN_FAILED = "open_failed"
SKIP_NON_HTML = "non_html"
SKIP_HTTP_STATUS = "http_status"

# --- curate job (``reason`` of the removed table)
EXTRACT_ERROR = "extract_error"               # the extract row had an error and no text
EMPTY_TEXT = "empty_text"                     # nothing left after normalization
QUALITY_PREFIX = "quality:"                   # quality:<gate>:<rule> (gates and rules: curate/quality.py)
EXACT_DUPLICATE = "exact_duplicate"
NEAR_DUPLICATE = "near_duplicate"
LANGUAGE_LOW_CONFIDENCE = "language:low_confidence"
LANGUAGE_NOT_SELECTED = "language:not_selected"

# Stages named in the ``stage`` / ``removed_stage`` columns.
STAGES = ("ingest", "segment", "classify", "render", "quality", "language", "exact_dedup", "near_dedup")

# Every name and prefix above, for the documentation check.
ALL = {name: value for name, value in globals().items()
       if name.isupper() and isinstance(value, str) and name != "STAGES"}


def prefixed(prefix: str, detail: str) -> str:
    """``prefix`` + ``detail``, without doubling a prefix the detail already carries."""
    return detail if detail.startswith(prefix) else prefix + detail


def exception_reason(exc: BaseException, limit: int = 200) -> str:
    """``error:<Type>: <message>`` (message whitespace-folded, at most ``limit`` characters)."""
    message = " ".join(str(exc).split())[:limit]
    return f"{ERROR_PREFIX}{type(exc).__name__}: {message}" if message else f"{ERROR_PREFIX}{type(exc).__name__}"
