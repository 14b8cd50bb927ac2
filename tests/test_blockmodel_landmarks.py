"""Landmark features (feature version 3): the page's body container, boilerplate and comment
ancestors, from the blocks' paths. Exact equality with a block-by-block definition is in
test_blockmodel_features.py; here, what each number means on small pages."""

from __future__ import annotations

import numpy as np

from pulpie_spark.classify.blockmodel import landmarks
from pulpie_spark.classify.blockmodel.landmarks import LANDMARK_NAMES, page_landmarks

COL = {name: i for i, name in enumerate(LANDMARK_NAMES)}
NEWS_PATHS = [
    "html > body.single-post.comments-open > header.site-header > nav.main-nav > ul",    # 0 menu
    "html > body.single-post.comments-open > article.story > h1",                       # 1 <article>
    "html > body.single-post.comments-open > article.story > div.article-body > p",     # 2 body
    "html > body.single-post.comments-open > article.story > div.article-body > p",     # 3 body
    "html > body.single-post.comments-open > article.story > div.article-body > div.share-bar",   # 4
    "html > body.single-post.comments-open > article.story > div.article-body > aside > ul",      # 5
    "html > body.single-post.comments-open > section#comments > ol.commentlist > li",   # 6 comments
    "html > body.single-post.comments-open > footer > p",                               # 7 footer
]


def test_the_strongest_body_rule_names_the_body_container():
    got = page_landmarks(NEWS_PATHS, len(NEWS_PATHS))
    assert got.shape == (8, 5) and got.dtype == np.float64
    # div.article-body (an articleBody-like class, the strongest rule) wins over the
    # <article> around it: the h1 outside that div is not in the body
    assert got[:, COL["in_body"]].tolist() == [0, 0, 1, 1, 1, 1, 0, 0]
    assert got[:, COL["page_body"]].tolist() == [1.0] * 8
    # an <article> alone (the second rule of four) gives a weaker body
    weaker = page_landmarks(["html > body > article > p", "html > body > div.menu > a"], 2)
    assert weaker[:, COL["in_body"]].tolist() == [0.75, 0.0] and weaker[:, COL["page_body"]].tolist() == [0.75] * 2
    # of two containers of the same rule, the first in block order
    two = page_landmarks(["html > body > div.teaser-list > div.post-content > p",
                          "html > body > main > div.entry-content > p"], 2)
    assert two[:, COL["in_body"]].tolist() == [1.0, 0.0]


def test_boilerplate_and_comment_ancestors():
    got = page_landmarks(NEWS_PATHS, len(NEWS_PATHS))
    assert got[:, COL["boiler"]].tolist() == [1, 0, 0, 0, 1, 1, 0, 1]          # nav, share bar, aside, footer
    assert got[:, COL["boiler_in_body"]].tolist() == [0, 0, 0, 0, 1, 1, 0, 0]  # inside div.article-body
    assert got[:, COL["comment"]].tolist() == [0, 0, 0, 0, 0, 0, 1, 0]
    # the classes of <html> and <body> are page-wide ("single-post", "comments-open") and mark nothing
    assert got[1, COL["comment"]] == 0.0
    # "commentary" is an article genre, not a comment section
    assert page_landmarks(["html > body > div.commentary > p"], 1)[0, COL["comment"]] == 0.0


def test_names_match_whatever_their_case_and_script():
    paths = ["html > body > div.SHARE-BAR > a",          # ASCII, upper case
             "html > body > div#ÜBER-KOMMENTAR > p",      # non-ASCII: matched with re.I
             "html > body > div.\u212aommentar > p",      # KELVIN SIGN folds to k under re.I
             "html > body > div.Inhalt > p"]
    got = page_landmarks(paths, 4)
    assert got[:, COL["boiler"]].tolist() == [1, 0, 0, 0]
    assert got[:, COL["comment"]].tolist() == [0, 1, 1, 0]


def test_pages_without_paths_or_landmarks_give_zeros():
    assert not page_landmarks(None, 3).any() and page_landmarks(None, 3).shape == (3, 5)
    assert page_landmarks([], 0).shape == (0, 5)
    plain = page_landmarks(["html > body > p", "html > body > table > tr > td", ""], 3)
    assert not plain.any()
    # fewer paths than blocks: the blocks without a path get zeros
    short = page_landmarks(["html > body > article > p"], 3)
    assert short[0, COL["in_body"]] == 0.75 and not short[1:].any()


def test_caches_do_not_change_a_result():
    first = page_landmarks(NEWS_PATHS, len(NEWS_PATHS))
    landmarks._NAME_CACHE.clear()
    landmarks._ELEMENT_CACHE.clear()
    assert np.array_equal(first, page_landmarks(NEWS_PATHS, len(NEWS_PATHS)))
    assert np.array_equal(first, page_landmarks(NEWS_PATHS, len(NEWS_PATHS)))
