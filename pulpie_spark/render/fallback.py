"""The fallback extractor for pages the block model cannot serve.

Used (when the caller enables it) for a page with no blocks, a page whose primary
extraction failed, or a page whose primary result is empty (as Dripper does) or short, and for
a page the default model's gate is unsure of (the rule:
``pulpie_spark.page.fallback_reason``). Why the fallback ran is recorded per row
(``<fallback>:<why>``), so the share of fallback output stays measurable.

* ``trafilatura`` (default): the better text on those pages (leave-one-source-out, the
  292 fallback pages of default-v3's run: shingle F1 0.658 against resiliparse's 0.564).
* ``trafilatura-fast``: trafilatura with ``fast=True`` (its readability/jusText backup
  extractions skipped): about a third less CPU per page it serves; in the LOSO run (seed 13,
  page gate) -0.0002 mean shingle F1, -0.001 ROUGE-5, -0.002 non-English, and 2-3 % less
  end-to-end CPU (the gate sends one page in ten): an option, not the default.
* ``resiliparse``: DCLM's extractor, 10-14x faster than trafilatura per core (LOSO runs); on sources
  where many pages fall back it is the cheaper choice at some quality (docs/BENCHMARKS.md).
  It writes plain text only: its ``markdown`` is the same text (list items bulleted).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from pulpie_spark import reasons

FALLBACKS = ("none", "trafilatura", "trafilatura-fast", "resiliparse")
# On by default, as in Dripper: on the dev split the default model alone leaves 24 of 469
# pages empty; with the fallback ROUGE-5 F1 goes from 0.778 to 0.800 (docs/BENCHMARKS.md).
DEFAULT_FALLBACK = "trafilatura"


@dataclass(frozen=True)
class FallbackResult:
    markdown: str
    text: str
    error: str | None = None


def validate_fallback(name: str | None) -> str:
    name = (name or DEFAULT_FALLBACK).strip().lower()
    if name not in FALLBACKS:
        raise ValueError(f"fallback must be one of {FALLBACKS}, got {name!r}")
    return name


def _extract_both(html: str, links: bool, images: bool, fast: bool = False) -> tuple[str, str]:
    """(markdown, text) from one trafilatura extraction.

    ``extract`` runs the whole extraction per output format, and the fallback wants two,
    which made a fallback page cost two trafilatura runs (on the dev split: 24 pages,
    ~217 ms CPU each, 22% of the end-to-end time). One ``txt`` extraction gives the
    same text as ``extract(output_format="txt")``; its tree rendered with trafilatura's
    Markdown serializer gives the Markdown (headings, lists, tables; no emphasis, which
    the ``txt`` tree does not keep). With links or images asked for, the Markdown needs
    a tree that keeps them, so that case still extracts twice. ``fast``: trafilatura's
    own fast mode (its backup extractors skipped).
    """
    import trafilatura

    try:   # internal trafilatura 2.x functions, as its extract() composes them
        from trafilatura.core import determine_returnstring
        from trafilatura.settings import Extractor as TrafilaturaOptions
        from trafilatura.utils import normalize_unicode
        from trafilatura.xml import xmltotxt
        one_pass = not (links or images)
    except ImportError:   # a trafilatura that moved them: the public API, twice
        one_pass = False
    if not one_pass:
        markdown = trafilatura.extract(html, output_format="markdown", include_links=links, fast=fast,
                                       include_images=images, include_comments=False) or ""
        text = trafilatura.extract(html, output_format="txt", include_comments=False, fast=fast) or ""
        return markdown, text

    options = TrafilaturaOptions(output_format="txt", comments=False, fast=fast)
    document = trafilatura.bare_extraction(html, options=options)
    if document is None or getattr(document, "body", None) is None:
        return "", ""
    text = determine_returnstring(document, options) or ""
    markdown = normalize_unicode(xmltotxt(document.body, include_formatting=True)) or ""
    return markdown, text


def _as_text(html: str | bytes) -> str:
    """The page as text: bytes decoded as the segmenter decodes them (``decode_html``)."""
    if isinstance(html, (bytes, bytearray, memoryview)):
        from pulpie_spark.segment.decode import decode_html

        html, _ = decode_html(bytes(html))
    return html


def trafilatura_extract(html: str | bytes, *, links: bool = False, images: bool = False,
                        fast: bool = False) -> FallbackResult:
    """Markdown and plain text of the page's main content by trafilatura (``fast``: its fast
    mode). Never raises."""
    try:
        markdown, text = _extract_both(_as_text(html), links, images, fast)
    except Exception as exc:  # trafilatura on hostile HTML: a value, not a crash
        return FallbackResult("", "", reasons.FALLBACK_FAILED_PREFIX + reasons.exception_reason(exc))
    if not markdown.strip() and not text.strip():
        return FallbackResult("", "", reasons.FALLBACK_EMPTY)
    return FallbackResult(markdown, text)


def resiliparse_main_text(html: str) -> str:
    """resiliparse's main-content plain text, as DCLM extracts it (``extract_plain_text``
    with ``main_content=True``, its other options at their defaults)."""
    from resiliparse.extract.html2text import extract_plain_text

    return extract_plain_text(html or "", main_content=True) or ""


def resiliparse_extract(html: str | bytes, *, links: bool = False, images: bool = False) -> FallbackResult:
    """resiliparse's main-content text as both outputs (it has no Markdown writer). Never raises.

    ``links``/``images`` are accepted for the common fallback signature; plain text keeps neither."""
    try:
        text = resiliparse_main_text(_as_text(html))
    except Exception as exc:  # hostile HTML: a value, not a crash
        return FallbackResult("", "", reasons.FALLBACK_FAILED_PREFIX + reasons.exception_reason(exc))
    if not text.strip():
        return FallbackResult("", "", reasons.FALLBACK_EMPTY)
    return FallbackResult(text, text)


def fallback_extractor(name: str):
    """The extract function of a fallback name (``validate_fallback``'s names but none)."""
    extractors = {"trafilatura": trafilatura_extract, "trafilatura-fast": partial(trafilatura_extract, fast=True),
                  "resiliparse": resiliparse_extract}
    name = validate_fallback(name)
    if name not in extractors:
        raise ValueError(f"fallback {name!r} extracts nothing")
    return extractors[name]
