"""The output convention: captions and text hidden by a class are never main, whatever the model says."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pulpie_spark.classify import spark_adapter as cls_spark
from pulpie_spark.classify.conventions import BOX_MIN_PROB, box_blocks, consent_blocks, never_main_blocks
from pulpie_spark.extractor import Extractor
from pulpie_spark.page import labels_from_probs, segment_page

PAGE = """<html><body><article class="story"><h1>Quarks set free</h1>
<p>Under extreme conditions quarks may become deconfined and exist as free particles.</p>
<figure><img src="plasma.jpg"><figcaption>A caption under the picture of the collider.</figcaption></figure>
<div class="visually-hidden">Article content</div>
<p class="sr-only">Screen reader note on the story.</p>
<div class="d-none d-md-block"><p>A paragraph shown on desktop screens only.</p></div>
<div class="overflow-hidden"><p>A paragraph in a clipped box that readers see.</p></div>
<p>This phase of matter is called quark-gluon plasma.</p></article></body></html>"""


class EverythingIsMain:
    model_id = "test/everything"

    def predict_proba(self, pages, paths=None):
        return [np.full(len(p), 0.9, dtype=np.float32) for p in pages]


@pytest.mark.parametrize("path, excluded", [
    ("html > body > article.story > p", False),
    ("html > body > article > figure > figcaption", True),
    ("html > body > article > figure > figcaption.image-caption > p", True),
    ("html > body > FIGCAPTION#credit", True),
    ("html > body > div.visually-hidden", True),
    ("html > body > div.intro-body.hidden > p", True),
    ("html > body > p.sr-only", True),
    ("html > body > span.screen-reader-text", True),
    ("html > body > div.invisible > p", True),
    ("html > body > span.show-for-sr", True),              # Foundation's screen-reader class
    ("html > body > div.Visually-Hidden > p", True),        # class names in any case
    ("html > body > div.d-none.d-md-block > p", False),     # shown from medium screens up
    ("html > body > div.hidden.md:flex", False),             # Tailwind: the same
    ("html > body > div.d-none.d-print-block > p", True),    # shown on paper only
    ("html > body > div.hidden-xs > p", False),              # hidden on phones only
    ("html > body > div.md:hidden > p", False),
    ("html > body > div.overflow-hidden > p", False),        # a clipping box, not a hidden one
    ("html > body > div.hidden-content-toggle > p", False),  # a name, not the class
    ("html > body > div#hidden > p", False),                 # an id carries no CSS of a framework
    ("", False),
    (None, False),
])
def test_never_main_blocks_by_path(path, excluded):
    assert never_main_blocks([path], 1).tolist() == [excluded]


def test_never_main_blocks_without_paths_or_with_too_few():
    assert never_main_blocks(None, 3).tolist() == [False] * 3
    assert never_main_blocks([], 2).tolist() == [False] * 2
    # paths shorter than the blocks: the blocks past the end are not excluded
    assert never_main_blocks(["html > body > figcaption"], 3).tolist() == [True, False, False]
    assert never_main_blocks(["html > body > figcaption", "html > body > p"], 1).tolist() == [True]


def test_labels_from_probs_applies_the_convention_only_with_paths():
    probs = np.array([0.9, 0.9, 0.2, 0.7], dtype=np.float32)
    paths = ["html > body > p", "html > body > figure > figcaption", "html > body > p.sr-only",
             "html > body > div.hidden > p"]
    assert labels_from_probs(probs, 0.5).tolist() == [1, 1, 0, 1]
    assert labels_from_probs(probs, 0.5, paths).tolist() == [1, 0, 0, 0]
    assert labels_from_probs(probs, 0.8, paths).tolist() == [1, 0, 0, 0]
    assert labels_from_probs(np.zeros(0, dtype=np.float32), 0.5, []).tolist() == []


@pytest.mark.parametrize("path, box", [
    ("html > body > article > div.newsletter-widget > p", True),
    ("html > body > article > section.NewsletterBox_root__rh9I2", True),        # any case
    ("html > body > article > div.sourcepoint__social-placeholder > p", True),   # the parent
    ("html > body > article > div#related-stories > ul", True),                 # an id too
    ("html > body > article > div.group-[.has-consent]:hidden > div.pt-3", True),
    ("html > body > article > section.teaser-list > div > p", False),  # the grandparent: not read
    ("html > body > div.share-page > main > article > p", False),    # a page-wide wrapper
    ("html > body > article.story > p", False),
    ("html > body > p.shared", True),
    ("html > body > related > p", False),                             # a tag, not a name
    ("", False),
    (None, False),
])
def test_box_blocks_by_path(path, box):
    assert box_blocks([path], 1).tolist() == [box]


@pytest.mark.parametrize("path, box", [
    # the headline: the block's own element an <h1>; not an <h2>, not a block further inside
    ("html > body > article > header > h1.story-lead-headline", True),
    ("html > body > main > H1", True),
    ("html > body > article > h2", False),
    ("html > body > h1 > span.kicker > p", False),          # the <h1> is not the block's own element
    # bylines and dates, by the block's own or its parent's class/id
    ("html > body > article > div.byline > p", True),
    ("html > body > article > div.story-meta > div.screen-only", True),
    ("html > body > article > p.author-name", True),
    ("html > body > article > time.published-date", True),
    ("html > body > article > div#dateline", True),
    ("html > body > article > p.update-notice", False),      # "date" inside "update" is no date
    ("html > body > article > p.validated", False),
    # captions and picture credits outside <figcaption>
    ("html > body > article > figure > footer.credit", True),
    ("html > body > article > div.image-caption > p", True),
    ("html > body > article > span.Copyright", True),
    ("html > body > article > p.legende", True),
    # an <aside> up to six elements out, not further
    ("html > body > article > aside.linkcard > a > div.linkcard-texts > h3.linkcard-title", True),
    ("html > body > aside > div > div > div > div > p", True),
    ("html > body > aside > div > div > div > div > div > p", False),
    ("html > body > article > p", False),
])
def test_headlines_bylines_captions_and_asides_are_boxes(path, box):
    assert box_blocks([path], 1).tolist() == [box]


def test_a_headline_stays_main_when_the_model_is_sure():
    paths = ["html > body > article > h1", "html > body > article > p", "html > body > article > div.byline > p"]
    assert labels_from_probs(np.array([0.95, 0.6, 0.95], dtype=np.float32), 0.5, paths).tolist() == [1, 1, 1]
    assert labels_from_probs(np.array([0.85, 0.6, 0.85], dtype=np.float32), 0.5, paths).tolist() == [0, 1, 0]


def test_a_box_block_needs_box_min_prob():
    probs = np.array([0.6, 0.6, BOX_MIN_PROB, 0.95, 0.3], dtype=np.float32)
    paths = ["html > body > article > p", "html > body > article > div.newsletter > p",
             "html > body > article > div.newsletter > p", "html > body > div.related-links > p",
             "html > body > div.share > p"]
    assert labels_from_probs(probs, 0.5, paths).tolist() == [1, 0, 1, 1, 0]
    assert labels_from_probs(probs, 0.5).tolist() == [1, 1, 1, 1, 0]      # no paths: no convention
    # a main threshold above BOX_MIN_PROB applies to every block alike
    assert labels_from_probs(probs, 0.92, paths).tolist() == [0, 0, 0, 1, 0]
    assert box_blocks(None, 2).tolist() == [False, False]
    assert box_blocks(paths[1:2], 3).tolist() == [True, False, False]


def test_extractor_leaves_captions_and_hidden_text_out():
    result = Extractor(classifier=EverythingIsMain(), fallback="none").extract(PAGE)
    for kept in ("Quarks set free", "deconfined", "quark-gluon plasma", "shown on desktop", "clipped box"):
        assert kept in result.text and kept in result.markdown
    for dropped in ("caption under the picture", "Article content", "Screen reader note"):
        assert dropped not in result.text and dropped not in result.markdown and dropped not in result.html
    seg = segment_page(PAGE)
    assert result.labels == [0 if e else 1 for e in never_main_blocks(seg["block_paths"], len(seg["blocks"]))]
    assert result.n_main == sum(result.labels) < len(result.labels)


def test_spark_classify_frame_labels_equal_the_api():
    seg = segment_page(PAGE)
    pdf = pd.DataFrame({"blocks": [np.array(seg["blocks"], dtype=object)],
                        "block_paths": [np.array(seg["block_paths"], dtype=object)]})
    out = cls_spark.classify_frame(pdf, EverythingIsMain(), blocks_col="blocks", paths_col="block_paths",
                                   model_id="test/everything")
    api = Extractor(classifier=EverythingIsMain(), fallback="none").extract(PAGE)
    assert list(out["labels"][0]) == api.labels
    assert np.allclose(out["main_probs"][0], 0.9)   # the probabilities stay the model's
    # without a paths column the convention cannot be applied: the threshold alone decides
    bare = cls_spark.classify_frame(pdf[["blocks"]], EverythingIsMain(), blocks_col="blocks", paths_col=None,
                                    model_id="test/everything")
    assert list(bare["labels"][0]) == [1] * len(seg["blocks"])


def test_a_page_of_captions_only_falls_back():
    page = "<html><body><figure><figcaption>Only a caption here, nothing else on the page.</figcaption></figure></body></html>"
    result = Extractor(classifier=EverythingIsMain(), fallback="trafilatura").extract(page)
    assert result.n_main == 0 and result.fallback_reason is not None


def test_every_hiding_class_passes_the_prefilter():
    """The substring prefilter (``_MAYBE``) must not skip a path that the element test would match."""
    from pulpie_spark.classify import conventions

    names = ("hidden", "is-hidden", "u-hidden", "visually-hidden", "visuallyhidden", "sr-only",
             "screen-reader-text", "screen-reader-only", "screenreader-text", "screenreader", "d-none",
             "element-invisible", "invisible", "hide", "a11y-hidden", "offscreen", "show-for-sr")
    for name in names:
        assert conventions._HIDING_CLASS.fullmatch(name), name
        assert never_main_blocks([f"html > body > div.{name.upper()} > p"], 1).tolist() == [True], name


@pytest.mark.parametrize("path, in_dialog", [
    # consent-management platforms' own names, at any depth of the path
    ("html > body > div#onetrust-consent-sdk > div#onetrust-banner-sdk > div.ot-sdk-container > p#onetrust-policy-text",
     True),
    ("html > body > div.qc-cmp2-container > div.qc-cmp2-summary-section > div.qc-cmp2-consent-info > div > p", True),
    ("html > body > div#fides-overlay > div.fides-modal-container > div.fides-modal-content > div > div > div > p",
     True),
    ("html > body > div#sp_message_container_1054812 > div > div > p", True),
    ("html > body > div#CybotCookiebotDialog > div > div > h2", True),
    ("html > body > div#didomi-host > div.didomi-popup-container > p", True),
    ("html > body > div.osano-cm-window > div.osano-cm-dialog > p", True),
    # generic cookie-banner names
    ("html > body > div#cookie-law-info-bar > span", True),
    ("html > body > div.CookieNotice_root > p", True),
    ("html > body > div.cookiebanner > p", True),
    ("html > body > div.cc-window.cc-banner > span", True),
    ("html > body > div.wp-gdpr-box > p", True),
    # not a dialog: page-wide state classes, a docs section about cookies, the cookie policy's
    # own page, words that contain a vendor's letters
    ("html.didomi-consent-given > body > main > article > p", False),
    ("html > body.consent-given > main > article > p", False),
    ("html > body > div.document > section#cookies > p", False),
    ("html > body > main > div.cookie-policy > p", False),
    ("html > body > div.trusted-partners > p", False),
    ("html > body > div.sticky-header > p", False),
    ("html > body > div.virtuosanos > p", False),
    ("html > body > article > p", False),
    ("", False),
    (None, False),
])
def test_consent_blocks_by_path(path, in_dialog):
    # with more blocks than the one tested, so the wrapper guard (more than half) stays out
    paths = [path, "html > body > main > p", "html > body > main > p"]
    assert consent_blocks(paths, 3).tolist() == [in_dialog, False, False]


def test_consent_names_on_most_of_the_page_are_a_wrapper_not_a_dialog():
    dialog = "html > body > div.cookie-banner > p"
    assert consent_blocks([dialog, "html > body > p", "html > body > p"], 3).tolist() == [True, False, False]
    assert consent_blocks([dialog, dialog, "html > body > p"], 3).tolist() == [False, False, False]
    assert consent_blocks([dialog, "html > body > p"], 2).tolist() == [True, False]   # half: still a dialog
    assert consent_blocks(None, 2).tolist() == [False, False]
    assert consent_blocks([], 0).tolist() == []


def test_a_consent_dialog_is_not_main_however_sure_the_model_is():
    probs = np.array([0.99, 0.8, 0.7, 0.99], dtype=np.float32)
    paths = ["html > body > div#onetrust-banner-sdk > div > p", "html > body > main > p", "html > body > main > p",
             "html > body > main > p"]
    assert labels_from_probs(probs, 0.5, paths).tolist() == [0, 1, 1, 1]
    assert labels_from_probs(probs, 0.5).tolist() == [1, 1, 1, 1]   # no paths: no convention


CONSENT_PAGE = """<html><body>
<div id="onetrust-consent-sdk"><div id="onetrust-banner-sdk"><div class="ot-sdk-container">
<p id="onetrust-policy-text">We and our partners store and access information on your device, such as
cookies, and process personal data for personalised advertising and content measurement.</p></div></div></div>
<main><h2>Quark matter</h2>
<p>Under extreme conditions quarks may become deconfined and exist as free particles.</p>
<p>This phase of matter is called quark-gluon plasma, and colliders recreate it for an instant.</p>
</main></body></html>"""


def test_extractor_leaves_a_consent_banner_out():
    result = Extractor(classifier=EverythingIsMain(), fallback="none").extract(CONSENT_PAGE)
    assert "deconfined" in result.text and "quark-gluon plasma" in result.markdown
    assert "personalised advertising" not in result.text and "personalised advertising" not in result.html


@pytest.mark.parametrize("among", [[0], [1, 2], [3], [0, 1, 2, 3], []])
def test_consent_blocks_among_some_blocks_is_the_whole_page_answer_for_them(among):
    # The label step asks about the main blocks only; the answer must be the page-wide one
    # (the more-than-half check counts every block of the page).
    paths = ["html > body > div#onetrust-banner-sdk > p", "html > body > div.qc-cmp2-summary > p",
             "html > body > main > p", "html > body > main > p"]
    whole = consent_blocks(paths, len(paths))
    assert whole.tolist() == [True, True, False, False]
    assert consent_blocks(paths, len(paths), among=among).tolist() == whole[among].tolist()
    wrapper = paths[:2] + ["html > body > div.consent-wrapper > p"] * 2
    assert not consent_blocks(wrapper, len(wrapper), among=among).any()
