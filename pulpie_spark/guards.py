"""Per-page guards: bound the time and the bytes one page may cost.

One pathological page (a 50 MB table, 100,000 nested divs, a regex that
backtracks) must become a *reject row with a reason*, never a hung or killed
Spark task. Per-page work in UDFs therefore goes through these helpers::

    reason = check_html_size(html)                 # "html_too_large" or None
    if reason is None:
        try:
            page = call_with_deadline(simplify, html, seconds=page_seconds())
        except DeadlineExceeded:
            reason = reasons.TIMEOUT

or, in one call (size, structure and time), ``result, reason = guard_page(simplify, html)``.

Time bound (``call_with_deadline``)
    * In the main thread of a POSIX process (the PySpark 4 Python worker runs
      UDFs, mapInPandas and pandas UDFs in its main thread) a ``SIGALRM`` timer
      (``signal.setitimer``) interrupts the call. Nesting is supported: an outer
      timer is saved, and re-armed with its remaining time afterwards.
    * Elsewhere (a non-main thread, e.g. with
      ``spark.sql.execution.pythonUDF.arrow.concurrency.level`` > 0, or no
      SIGALRM) a watchdog thread raises the exception asynchronously in the
      calling thread (``PyThreadState_SetAsyncExc``), so the runaway work stops
      instead of leaking a thread that keeps burning CPU.
    * Both interrupt Python code between bytecodes. A single long call into C
      (one ``selectolax`` parse of a huge document, one regex match) is only
      interrupted when it returns to Python: that is why page *size* is bounded
      too, before any parsing.
    * The interrupt is a ``BaseException`` inside the call, so a library's broad
      ``except Exception`` cannot swallow it; the caller sees ``DeadlineExceeded``
      (an ``Exception``, a ``TimeoutError``).

Size bound (``MAX_HTML_BYTES``, ``check_html_size``)
    Pages above the limit are rejected with ``"html_too_large"`` and never
    parsed. The default (10 MiB, far above the ~2.5 MB 99.9th percentile of
    crawled HTML) is configurable with the environment variable
    ``PULPIE_MAX_HTML_BYTES``; on a cluster set it for executors with
    ``spark.executorEnv.PULPIE_MAX_HTML_BYTES``. The per-page time default
    (``PULPIE_PAGE_TIMEOUT_S``, 30 s) is set the same way.

Structure bound (``check_html_structure``, part of ``guard_page``)
    The HTML parser (lexbor, in C) is quadratic in nesting depth and in attributes
    per tag, and a deadline cannot interrupt C code. A linear scan estimates both
    and rejects ``"html_too_deep"`` (over ``PULPIE_MAX_HTML_DEPTH``, default 10,000)
    or ``"html_too_many_attributes"`` (over 5,000 on one tag) before parsing.

Memory bound
    Spark's own ``spark.executor.pyspark.memory`` caps the address space of each
    Python worker (``RLIMIT_AS``); an allocation above it raises ``MemoryError``
    in the page's call, which ``reason_for_exception`` turns into
    ``"out_of_memory"``. ``peak_rss_bytes`` reports what a worker used
    (docs/reliability.md has the measured numbers).
"""

from __future__ import annotations

import ctypes
import math
import os
import re
import resource
import signal
import sys
import threading
import time
from typing import Any, Callable, TypeVar

from pulpie_spark import reasons

T = TypeVar("T")

DEFAULT_MAX_HTML_BYTES = 10 * 1024 * 1024
DEFAULT_PAGE_SECONDS = 30.0
# lexbor (selectolax) checks element scope by walking the open-element stack, so its
# parse time grows with depth squared: measured 0.8 s of CPU at 16,000 nested divs,
# about a minute at 100,000 -- inside C, where no deadline can interrupt it. Browsers
# stop nesting at 512 (Blink); 10,000 keeps a worst-case parse near 0.3 s.
DEFAULT_MAX_HTML_DEPTH = 10_000
# Duplicate-attribute checks are quadratic too: 20,000 attributes on one tag take 1 s.
DEFAULT_MAX_ATTRIBUTES = 5_000

ENV_MAX_HTML_BYTES = "PULPIE_MAX_HTML_BYTES"
ENV_PAGE_SECONDS = "PULPIE_PAGE_TIMEOUT_S"
ENV_MAX_HTML_DEPTH = "PULPIE_MAX_HTML_DEPTH"


class DeadlineExceeded(TimeoutError):
    """A guarded call ran longer than its deadline and was interrupted."""

    def __init__(self, seconds: float, fn: Callable[..., Any] | None = None):
        name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
        super().__init__(f"{name} exceeded its deadline of {seconds:g} s")
        self.seconds = seconds


class _Interrupt(BaseException):
    """Raised *inside* the guarded call. A BaseException so that a library's
    ``except Exception`` does not swallow it; converted to DeadlineExceeded outside."""


def _env_number(name: str, default: float, cast: Callable[[str], float]) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = cast(raw)
    except ValueError as exc:
        raise ValueError(f"{name} must be a number, got {raw!r}") from exc
    if value <= 0:
        raise ValueError(f"{name} must be > 0, got {raw!r}")
    return value


def max_html_bytes() -> int:
    """The byte limit now: ``PULPIE_MAX_HTML_BYTES`` if set, else 10 MiB.

    Read at call time so executors see ``spark.executorEnv`` settings."""
    return int(_env_number(ENV_MAX_HTML_BYTES, DEFAULT_MAX_HTML_BYTES, int))


def page_seconds() -> float:
    """The per-page time limit now: ``PULPIE_PAGE_TIMEOUT_S`` if set, else 30 s."""
    return float(_env_number(ENV_PAGE_SECONDS, DEFAULT_PAGE_SECONDS, float))


def max_html_depth() -> int:
    """The nesting limit now: ``PULPIE_MAX_HTML_DEPTH`` if set, else 10,000."""
    return int(_env_number(ENV_MAX_HTML_DEPTH, DEFAULT_MAX_HTML_DEPTH, int))


# The limit as configured when the module was imported (the contract's constant).
MAX_HTML_BYTES: int = max_html_bytes()


def html_num_bytes(html: bytes | bytearray | memoryview | str | None) -> int:
    """Size of a page in bytes (UTF-8 for text), without copying large strings when
    the answer is already known from the character count."""
    if html is None:
        return 0
    if isinstance(html, (bytes, bytearray)):
        return len(html)
    if isinstance(html, memoryview):
        return html.nbytes
    if isinstance(html, str):
        if html.isascii():
            return len(html)
        return len(html.encode("utf-8", "surrogatepass"))
    raise TypeError(f"html must be bytes or str, got {type(html).__name__}")


def check_html_size(html: bytes | bytearray | memoryview | str | None,
                    max_bytes: int | None = None) -> str | None:
    """``"html_too_large"`` when the page is above the limit, else None.

    ``max_bytes`` defaults to :func:`max_html_bytes`. A None page is not a size
    problem (None is returned); stages report it as ``"html_null"``. A str is
    measured as UTF-8 bytes; a cheap character-count bound decides first, so a
    50 MB string is never encoded just to be measured."""
    limit = max_html_bytes() if max_bytes is None else int(max_bytes)
    if html is None:
        return None
    if isinstance(html, str):
        if len(html) > limit:  # every character is at least one byte
            return reasons.HTML_TOO_LARGE
        if 4 * len(html) <= limit:  # and at most four
            return None
    return reasons.HTML_TOO_LARGE if html_num_bytes(html) > limit else None


# Elements that never stay open (void) or that the parser closes implicitly when a
# sibling starts (p, li, td, ...): they do not deepen the open-element stack.
_NO_DEPTH = frozenset(
    "area base br col embed hr img input link meta param source track wbr keygen basefont bgsound "
    "frame image isindex spacer "
    "p li dt dd option optgroup tr td th tbody thead tfoot colgroup caption rb rt rtc rp html head body".split())
# Comments and raw-text elements are skipped whole (their "<x" is not markup);
# an unclosed one runs to the end of the page, as in a browser.
_NO_DEPTH_BYTES = frozenset(t.encode() for t in _NO_DEPTH)
_MARKUP = (r"<!--.*?(?:-->|\Z)"
           r"|<(script|style|textarea|title|xmp|plaintext|noembed|noframes)\b[^>]*>.*?(?:</\1\s*>|\Z)"
           r"|<(/?)([a-zA-Z][a-zA-Z0-9:_-]*)([^>]*)")
_MARKUP_STR = re.compile(_MARKUP, re.S | re.I)
_MARKUP_BYTES = re.compile(_MARKUP.encode(), re.S | re.I)
# One attribute: a name, optionally = and a quoted or bare value.
_ATTRIBUTE = r"""[^\s"'=<>/]+(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s>]*))?"""
_ATTRIBUTE_STR = re.compile(_ATTRIBUTE)
_ATTRIBUTE_BYTES = re.compile(_ATTRIBUTE.encode())


def _long_tag(min_chars: int, is_bytes: bool):
    pattern = r"</?[a-zA-Z][^>]{%d,}" % min_chars
    return re.compile(pattern.encode() if is_bytes else pattern)


def _most_attributes_in_long_tags(html, tag_chars: int, is_bytes: bool) -> int:
    """The most attributes html_structure counts on one tag whose body is over ``tag_chars``
    characters, or more: each long tag is read as html_structure reads it at that "<", also
    where its scan would not get there (inside a comment or a script). One regex search per
    long tag instead of the whole page's tags: a long tag that is one long value (a data:
    URI, an inline style) does not cost the full scan."""
    markup, attribute = (_MARKUP_BYTES, _ATTRIBUTE_BYTES) if is_bytes else (_MARKUP_STR, _ATTRIBUTE_STR)
    most = 0
    for long_tag in _long_tag(tag_chars, is_bytes).finditer(html):
        tag = markup.match(html, long_tag.start())
        if tag is None or tag.group(3) is None:  # a raw-text element: its attributes are not counted
            continue
        body = tag.group(4)
        if len(body) > tag_chars:
            most = max(most, sum(1 for _ in attribute.finditer(body)))
    return most


def html_structure(html: bytes | bytearray | memoryview | str | None,
                   attribute_tags_over: int = 0) -> tuple[int, int]:
    """(maximum nesting depth, most attributes on one tag), estimated in one linear scan.

    Simulates the parser's stack of open elements by tag name: a start tag pushes
    (except void and implicitly closed elements), an end tag pops up to its matching
    element, a stray end tag is ignored. Comments, scripts and styles are skipped.
    Attributes are counted only in tags longer than ``attribute_tags_over`` chars.
    Works on bytes without decoding (tags are ASCII in every charset we read)."""
    if html is None:
        return 0, 0
    if isinstance(html, (bytearray, memoryview)):
        html = bytes(html)
    if isinstance(html, bytes):
        markup, attribute, no_depth, slash = _MARKUP_BYTES, _ATTRIBUTE_BYTES, _NO_DEPTH_BYTES, b"/"
    else:
        markup, attribute, no_depth, slash = _MARKUP_STR, _ATTRIBUTE_STR, _NO_DEPTH, "/"
    stack: list = []
    open_count: dict = {}
    max_depth = 0
    max_attrs = 0
    for match in markup.finditer(html):
        name = match.group(3)
        if name is None:  # a comment or a raw-text element
            continue
        name = name.lower()
        body = match.group(4)
        if len(body) > attribute_tags_over:
            max_attrs = max(max_attrs, sum(1 for _ in attribute.finditer(body)))
        if name in no_depth:
            continue
        if match.group(2) == slash:
            if open_count.get(name):
                while stack:
                    top = stack.pop()
                    open_count[top] -= 1
                    if top == name:
                        break
        else:
            stack.append(name)
            open_count[name] = open_count.get(name, 0) + 1
            if len(stack) > max_depth:
                max_depth = len(stack)
    return max_depth, max_attrs


def check_html_structure(html, max_depth: int | None = None,
                         max_attributes: int | None = None) -> str | None:
    """``"html_too_deep"`` / ``"html_too_many_attributes"`` when the page would make
    the HTML parser run for minutes in C code (beyond any deadline), else None.
    ``max_depth`` defaults to :func:`max_html_depth`."""
    depth_limit = max_html_depth() if max_depth is None else int(max_depth)
    attr_limit = DEFAULT_MAX_ATTRIBUTES if max_attributes is None else int(max_attributes)
    if html is None:
        return None
    if isinstance(html, memoryview):
        html = bytes(html)
    # Cheap tests first: a page with no more "<" than the depth limit cannot be deeper,
    # and a tag needs at least 2 characters per attribute (name and separator).
    is_bytes = isinstance(html, (bytes, bytearray))
    deep_possible = html.count(b"<" if is_bytes else "<") > depth_limit
    long_tag_over = 2 * attr_limit
    many_attrs_possible = _most_attributes_in_long_tags(html, long_tag_over, is_bytes) > attr_limit
    if not deep_possible and not many_attrs_possible:
        return None
    depth, attrs = html_structure(html, attribute_tags_over=long_tag_over)
    if depth > depth_limit:
        return reasons.HTML_TOO_DEEP
    if attrs > attr_limit:
        return reasons.HTML_TOO_MANY_ATTRIBUTES
    return None


def deadline_mechanism() -> str:
    """How ``call_with_deadline`` would bound a call made from here:
    ``"signal"`` (SIGALRM timer) or ``"thread"`` (watchdog thread)."""
    if hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread():
        return "signal"
    return "thread"


def call_with_deadline(fn: Callable[..., T], *args: Any, seconds: float | None, **kwargs: Any) -> T:
    """Call ``fn(*args, **kwargs)``; raise :class:`DeadlineExceeded` if it runs longer
    than ``seconds``. ``seconds`` None, 0 or inf means no limit.

    The result (or the exception) of ``fn`` is passed through unchanged."""
    if seconds is None or seconds <= 0 or math.isinf(seconds):
        return fn(*args, **kwargs)
    if deadline_mechanism() == "signal":
        return _call_with_signal(fn, args, kwargs, float(seconds))
    return _call_with_watchdog(fn, args, kwargs, float(seconds))


# An interrupt raised while the garbage collector runs a finalizer (a __del__ or weakref
# callback: py4j's JavaObject has one) inside the guarded call is printed and dropped by
# Python ("Exception ignored in ..."), and the call would run on unbounded: the alarm fires
# again after this long until an interrupt reaches the call's own frames.
_REDELIVER_SECONDS = 0.01


def _call_with_signal(fn, args, kwargs, seconds: float):
    token = object()
    state = {"cleanup": False}

    def on_alarm(signum, frame):
        if state["cleanup"]:    # the call is over; our finally block is restoring the timer
            return
        signal.setitimer(signal.ITIMER_REAL, _REDELIVER_SECONDS)
        raise _Interrupt(token)

    outer_remaining, outer_interval = signal.getitimer(signal.ITIMER_REAL)
    if outer_remaining and outer_remaining <= seconds:
        # An enclosing deadline (ours or the caller's) fires first anyway: leave it alone.
        return fn(*args, **kwargs)
    outer_handler = signal.signal(signal.SIGALRM, on_alarm)
    started = time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        try:
            return fn(*args, **kwargs)
        finally:
            state["cleanup"] = True
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, outer_handler)
            if outer_remaining:
                left = outer_remaining - (time.monotonic() - started)
                # An outer deadline that passed meanwhile fires right away.
                signal.setitimer(signal.ITIMER_REAL, max(left, 1e-6), outer_interval)
    except _Interrupt as interrupt:
        if interrupt.args and interrupt.args[0] is token:
            raise DeadlineExceeded(seconds, fn) from None
        raise


# Own prototypes (not ctypes.pythonapi's shared attribute, whose argtypes other code may set).
# The second one passes NULL, which clears a pending asynchronous exception.
_raise_in_thread = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.py_object)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi))
_clear_in_thread = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi))


def _call_with_watchdog(fn, args, kwargs, seconds: float):
    caller = threading.get_ident()
    # A class of its own per call: nested watchdogs each recognise only their interrupt.
    interrupt_type = type("_WatchdogInterrupt", (_Interrupt,), {})
    lock = threading.Lock()
    state = {"done": False, "fired": False}

    def fire():
        with lock:
            if state["done"]:
                return
            state["fired"] = True
            _raise_in_thread(caller, interrupt_type)

    watchdog = threading.Timer(seconds, fire)
    watchdog.daemon = True
    watchdog.name = "pulpie-deadline-watchdog"
    try:
        try:
            # Started inside the try: a tiny deadline may fire before start() returns.
            watchdog.start()
            return fn(*args, **kwargs)
        finally:
            with lock:
                state["done"] = True
            watchdog.cancel()
            if state["fired"]:
                # fn may have returned between the injection and its delivery:
                # clear a still-pending interrupt so it cannot hit the caller later.
                _clear_in_thread(caller, None)
    except interrupt_type:
        raise DeadlineExceeded(seconds, fn) from None


def reason_for_exception(exc: BaseException) -> str:
    """A short, stable reject reason for an exception raised by per-page work."""
    if isinstance(exc, DeadlineExceeded):
        return reasons.TIMEOUT
    if isinstance(exc, MemoryError):
        return reasons.OUT_OF_MEMORY
    if isinstance(exc, RecursionError):
        return reasons.RECURSION_LIMIT
    return reasons.exception_reason(exc)


def guard_page(fn: Callable[..., T], html: Any, *args: Any, seconds: float | None = None,
               max_bytes: int | None = None, max_depth: int | None = None,
               **kwargs: Any) -> tuple[T | None, str | None]:
    """Run ``fn(html, *args, **kwargs)`` under the size, structure and time guards.

    Returns ``(result, None)`` or ``(None, reason)``: ``"html_null"``,
    ``"html_too_large"``, ``"html_too_deep"``, ``"html_too_many_attributes"``,
    ``"timeout"``, ``"out_of_memory"``, ``"recursion_limit"`` or
    ``"error:<Type>: <message>"``. Never raises an ``Exception``.
    ``seconds`` defaults to :func:`page_seconds` and covers the structure scan too."""
    if html is None:
        return None, reasons.HTML_NULL
    reason = check_html_size(html, max_bytes)
    if reason is not None:
        return None, reason
    rejected: list[str] = []

    def checked_call():
        why = check_html_structure(html, max_depth)
        if why is not None:
            rejected.append(why)
            return None
        return fn(html, *args, **kwargs)

    try:
        limit = page_seconds() if seconds is None else seconds
        result = call_with_deadline(checked_call, seconds=limit)
    except Exception as exc:  # MemoryError and RecursionError are Exceptions too
        return None, reason_for_exception(exc)
    if rejected:
        return None, rejected[0]
    return result, None


def peak_rss_bytes() -> int:
    """Peak resident set size of this process so far, in bytes (Linux/macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def current_rss_bytes() -> int:
    """Resident set size of this process now, in bytes (0 where unknown)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


__all__ = [
    "DeadlineExceeded", "MAX_HTML_BYTES", "DEFAULT_MAX_HTML_BYTES", "DEFAULT_PAGE_SECONDS",
    "DEFAULT_MAX_HTML_DEPTH",
    "call_with_deadline", "check_html_size", "check_html_structure", "deadline_mechanism", "html_structure",
    "max_html_depth",
    "guard_page", "html_num_bytes", "max_html_bytes", "page_seconds", "peak_rss_bytes",
    "current_rss_bytes", "reason_for_exception",
]
