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

from pulpie_spark.classify.base import MAIN_THRESHOLD, validate_main_threshold, validate_unsure_threshold
from pulpie_spark.render.fallback import DEFAULT_FALLBACK, validate_fallback


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
    fallback_reason: str | None = None       # no_blocks | error | empty_output | short_output | model_unsure
    title: str | None = None                 # the page's title (segment/title.py), whichever path served it


class Extractor:
    def __init__(self, model: str = "default", device: str | None = None, fallback: str = DEFAULT_FALLBACK,
                 links: bool = False, images: bool = False, *, main_threshold: float = MAIN_THRESHOLD,
                 unsure_threshold: float | None = None, classifier=None, **model_kwargs):
        """``main_threshold``: P(main) at or above which a block is main (raise it for
        precision, lower it for recall; captions and class-hidden blocks are never main,
        and blocks named as share/newsletter/consent/related boxes need P(main) >= 0.9:
        classify/conventions.py); ``unsure_threshold``: page-gate score at or above
        which a page goes to the fallback (None: the model's own, as shipped; a value above
        1: never; the default model's gate is described in docs/model-card.md); ``classifier`` injects an already loaded
        BlockClassifier (shared between extractors); ``model_kwargs`` (max_tokens,
        batch_tokens, trust_remote_code, compile, ...) go to the loader."""
        self.fallback = validate_fallback(fallback)
        self.main_threshold = validate_main_threshold(main_threshold)
        self.unsure_threshold = validate_unsure_threshold(unsure_threshold)
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
        """Every page through the shared per-page core (:func:`pulpie_spark.page.extract_pages`):
        the same guards, deadlines, fallback rule and error strings as the Spark stages."""
        from pulpie_spark.page import extract_pages

        pages = extract_pages(list(htmls), self.classifier, fallback=self.fallback, links=self.links,
                              images=self.images, main_threshold=self.main_threshold,
                              unsure_threshold=self.unsure_threshold)
        return [Extraction(markdown=p["markdown"] or "", text=p["text"] or "", html=p["main_html"] or "",
                           labels=p["labels"], n_blocks=p["n_blocks"], n_main=p["n_main"], model_id=self.model_id,
                           error=p["error"], fallback_used=p["fallback_used"], fallback_reason=p["fallback_reason"],
                           title=p["title"])
                for p in pages]
