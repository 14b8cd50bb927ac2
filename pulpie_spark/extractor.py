"""Python API: HTML in, main content out (Markdown, text, HTML, block labels).

    from pulpie_spark import Extractor
    ex = Extractor()                       # embedded default model, CPU or GPU
    result = ex.extract(html)
    print(result.markdown)

``extract_batch`` segments every page first and classifies all their blocks in one
batched model call (chunks sorted by length, padded batches under a token budget).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from pulpie_spark.fallback import DEFAULT_FALLBACK, fallback_reason, trafilatura_extract, validate_fallback


@dataclass
class Extraction:
    markdown: str = ""
    text: str = ""
    html: str = ""                           # main HTML (reconstructed from the labelled blocks)
    labels: list[int] = field(default_factory=list)   # per block, 1 main / 0 other
    n_blocks: int = 0
    n_main: int = 0
    model_id: str | None = None
    error: str | None = None                 # why the primary (model) path failed, if it did
    fallback_used: bool = False
    fallback_reason: str | None = None       # no_blocks | error | empty_output, when it ran


class Extractor:
    def __init__(self, model: str = "default", device: str | None = None, fallback: str = DEFAULT_FALLBACK,
                 links: bool = False, images: bool = False, *, classifier=None, **model_kwargs):
        """``classifier`` injects an already loaded BlockClassifier (shared between extractors);
        ``model_kwargs`` (max_tokens, batch_tokens, trust_remote_code, ...) go to the loader."""
        self.fallback = validate_fallback(fallback)
        self.links = links
        self.images = images
        if classifier is None:
            from pulpie_spark.classify.registry import load_classifier

            classifier = load_classifier(model, device=device, **model_kwargs)
        self.classifier = classifier
        self.model_id = getattr(classifier, "model_id", model)

    def extract(self, html: str | bytes) -> Extraction:
        return self.extract_batch([html])[0]

    def extract_batch(self, htmls: Sequence[str | bytes]) -> list[Extraction]:
        from pulpie_spark.guards import guard_page
        from pulpie_spark.simplify import simplify

        pages = []
        results = [Extraction(model_id=self.model_id) for _ in htmls]
        for html, result in zip(htmls, results):
            page, reason = guard_page(simplify, html)
            if page is None:
                result.error = reason
            elif page.error:
                result.error = page.error
            pages.append(page)
            if page is not None:
                result.n_blocks = len(page.blocks)

        todo = [i for i, p in enumerate(pages) if p is not None and p.blocks and not results[i].error]
        if todo:
            try:
                labels = self.classifier.predict([pages[i].blocks for i in todo],
                                                 [pages[i].paths for i in todo])
            except Exception:   # one bad model call must not lose the batch: retry per page
                labels = []
                for i in todo:
                    try:
                        labels.extend(self.classifier.predict([pages[i].blocks], [pages[i].paths]))
                    except Exception as page_exc:
                        results[i].error = f"classify_failed: {type(page_exc).__name__}: {page_exc}"[:500]
                        labels.append(None)
            for i, page_labels in zip(todo, labels):
                if page_labels is not None:
                    self._render(results[i], pages[i], list(page_labels))

        for html, result in zip(htmls, results):
            self._maybe_fallback(html, result)
        return results

    def _render(self, result: Extraction, page, labels: list[int]) -> None:
        from pulpie_spark.reconstruct import render_main

        result.labels = [int(x) for x in labels]
        result.n_main = sum(result.labels)
        try:
            result.html, result.markdown, result.text = render_main(
                page.map_html, result.labels, links=self.links, images=self.images)
        except Exception as exc:
            result.error = f"render_failed: {type(exc).__name__}: {exc}"[:500]

    def _maybe_fallback(self, html, result: Extraction) -> None:
        if self.fallback == "none" or html is None:
            return
        reason = fallback_reason(result.n_blocks, result.error, result.markdown)
        if reason is None:
            return
        from pulpie_spark.guards import guard_page

        result.fallback_reason = reason
        # Same size and time guards as segmentation: a page rejected as too large or
        # too slow is not handed to trafilatura either.
        fb, guard_reason = guard_page(trafilatura_extract, html, links=self.links, images=self.images)
        if fb is None:
            result.error = f"{result.error}; fallback_failed: {guard_reason}" if result.error \
                else f"fallback_failed: {guard_reason}"
            return
        if fb.error:
            result.error = f"{result.error}; {fb.error}" if result.error else fb.error
            return
        result.fallback_used = True
        result.markdown, result.text = fb.markdown, fb.text
