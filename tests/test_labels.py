"""Label alignment from gold text on crafted pages."""

from pulpie_spark.classify.blockmodel.labels import coverage_by_source, format_coverage, label_blocks, normalize_words

ARTICLE = [
    "Home About Contact",                                              # nav
    "Login",                                                           # short, outside content
    "How to grow tomatoes",                                            # heading just before content
    "Tomatoes need full sun and well drained soil to grow well in summer.",
    "Posted on",                                                       # short, inside content span
    "Water them deeply twice a week and mulch to keep the roots cool.",
    "Share this article on social media",                              # boilerplate
    "Copyright 2025 Garden Inc. All rights reserved.",                 # footer
]
GOLD = ("How to grow tomatoes\n\nTomatoes need full sun and well drained soil to grow well in summer. "
        "Posted on Water them deeply twice a week and mulch to keep the roots cool.\nLogin")


def test_normalize_words_casefold_and_nfkc():
    assert normalize_words("Ｔｏｍａｔｏｅｓ, GROW!") == ["tomatoes", "grow"]
    assert normalize_words(None) == []


def test_article_blocks_labelled_by_ngram_share():
    result = label_blocks(ARTICLE, GOLD)
    assert result.labels == [0, 0, 1, 1, 1, 1, 0, 0]
    assert result.kept
    # "login" is in the gold but its block is outside the content span: not recovered.
    assert 0.9 < result.gold_recall < 1.0
    assert result.main_precision == 1.0


def test_repeated_boilerplate_claims_the_gold_only_once():
    blocks = ["Subscribe to our newsletter for weekly updates today",
              "The council approved the new budget after a long debate on Tuesday night.",
              "Subscribe to our newsletter for weekly updates today"]
    gold = ("The council approved the new budget after a long debate on Tuesday night. "
            "Subscribe to our newsletter for weekly updates today")
    assert label_blocks(blocks, gold).labels == [1, 1, 0]


def test_confidence_filter_drops_pages_that_miss_the_gold():
    blocks = ["Completely unrelated navigation text block here", "Another menu list item here"]
    result = label_blocks(blocks, "A long article body that the segmentation never saw at all today.")
    assert result.labels == [0, 0]
    assert not result.kept and result.reason == "low_gold_recall"
    short = label_blocks(blocks, "too short")
    assert not short.kept and short.reason == "gold_too_short"
    assert label_blocks([], GOLD).reason == "no_blocks"


def test_partial_recall_threshold():
    blocks = ARTICLE[:4]     # the second paragraph is missing from the blocks
    result = label_blocks(blocks, GOLD, min_recall=0.7)
    assert result.labels == [0, 0, 1, 1]
    assert result.gold_recall < 0.7 and not result.kept


def test_coverage_by_source():
    rows = [{"source": "a", "kept": True, "labels": [1, 0, 0, 1], "gold_recall": 0.9},
            {"source": "a", "kept": False, "labels": [], "gold_recall": 0.2},
            {"source": "b", "kept": True, "labels": [0, 1], "gold_recall": 1.0}]
    table = coverage_by_source(rows)
    assert table[0] == {"source": "a", "pages": 2, "kept": 1, "kept_share": 0.5, "mean_gold_recall": 0.55,
                        "blocks": 4, "main_share": 0.5}
    assert table[1]["main_share"] == 0.5 and table[1]["kept_share"] == 1.0
    assert "main%" in format_coverage(table)
