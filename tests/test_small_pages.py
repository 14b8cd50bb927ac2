"""Small pages cut from labelled pages (blockmodel.data.small_page_indices), the features cache rows
they give, and how training takes them (TrainConfig.small_pages, --small-pages)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pulpie_spark.classify.blockmodel.containers import container_groups
from pulpie_spark.classify.blockmodel.data import (CACHED_CONTAINER_LEVELS, SMALL_PAGE_SUFFIX, build_examples,
                                                  frame_to_examples, is_small_page, simplify_segmenter,
                                                  small_page_indices, source_page_ids)
from pulpie_spark.classify.blockmodel.features import page_features
from pulpie_spark.classify.blockmodel.model import BlockModelConfig
from pulpie_spark.classify.blockmodel.training import TrainConfig, train_from_cache, training_rows

STORY = ["The ferry leaves at dawn and returns at dusk, every day of the year.",
         "The harbour master keeps a log of every crossing since 1921.",
         "In winter storms the crossing is cancelled and the log says why.",
         "Fishermen read the log before they decide to sail out."]


def _page(i: int) -> str:
    story = "".join(f"<p>{s} Page {i}.</p>" for s in STORY)
    return (f"<html><head><title>Harbour {i}</title></head><body>"
            "<nav><ul><li><a href='/'>Home</a></li><li><a href='/about'>About us</a></li></ul></nav>"
            f"<article><h1>Harbour notes {i}</h1>{story}</article>"
            "<aside><h3>Related</h3><ul><li><a href='/a'>Storm season ahead</a></li>"
            "<li><a href='/b'>New ferry timetable</a></li></ul></aside>"
            "<footer><p>Contact the harbour office. Privacy policy.</p></footer></body></html>")


def _pages(n: int = 6) -> pd.DataFrame:
    return pd.DataFrame({"source": ["a", "b"] * (n // 2), "page_id": [f"p{i}" for i in range(n)],
                         "split": ["dev"] + ["train"] * (n - 1), "html": [_page(i) for i in range(n)],
                         "gold_text": ["\n".join(f"{s} Page {i}." for s in STORY) for i in range(n)]})


def test_a_small_page_is_a_run_of_main_blocks_and_at_most_two_others_drawn_from_the_key():
    labels = np.array([0, 0, 1, 1, 1, 1, 1, 0, 0, 0])
    seen = set()
    for k in range(60):
        cut = small_page_indices(labels, f"s/p{k}")
        assert np.array_equal(cut, small_page_indices(labels, f"s/p{k}"))    # reproducible
        assert list(cut) == sorted(cut) and len(set(cut)) == len(cut)
        main = [i for i in cut if labels[i] == 1]
        assert 1 <= len(main) <= 3 and main == list(range(main[0], main[0] + len(main)))
        assert len(cut) - len(main) <= 2
        seen.add((len(main), len(cut) - len(main)))
    assert {m for m, _ in seen} == {1, 2, 3} and {o for _, o in seen} == {0, 1, 2}
    assert small_page_indices(np.zeros(5, dtype=np.int64), "s/none") is None
    only_main = small_page_indices(np.ones(2, dtype=np.int64), "s/short")
    assert set(only_main) <= {0, 1} and len(only_main) >= 1


def test_each_kept_page_adds_the_features_of_its_small_page_to_the_cache():
    pages = _pages()
    frame = build_examples(pages, n_buckets=1024)
    small = frame[is_small_page(frame)]
    own = frame[~is_small_page(frame)]
    assert len(own) == len(pages) and len(small) == len(pages)
    assert list(small["page_id"]) == [f"p{i}{SMALL_PAGE_SUFFIX}" for i in range(len(pages))]
    assert list(source_page_ids(frame)) == list(own["page_id"]) + list(own["page_id"])
    assert list(small["split"]) == list(own["split"]) and list(small["source"]) == list(own["source"])
    # the small page's features are those of a page made of the cut blocks alone
    blocks, paths, _, _ = simplify_segmenter(pages.html[3])
    whole = frame_to_examples(own.iloc[[3]])[0]
    cut = small_page_indices(whole.labels, "b/p3")
    example = frame_to_examples(small.iloc[[3]])[0]
    ids, numeric = page_features([blocks[i] for i in cut], [paths[i] for i in cut], n_buckets=1024)
    assert np.array_equal(example.ids, ids) and np.allclose(example.numeric, numeric)
    assert np.array_equal(example.labels, whole.labels[cut])
    assert np.array_equal(example.groups, container_groups([blocks[i] for i in cut], [paths[i] for i in cut],
                                                           CACHED_CONTAINER_LEVELS))
    assert not np.allclose(example.numeric, whole.numeric[cut])   # page-relative features differ
    assert not is_small_page(build_examples(pages, n_buckets=1024, small_pages=False)).any()
    assert not is_small_page(frame.drop(columns=["small_page_of"])).any()   # caches from before


def test_training_takes_the_small_pages_of_a_share_of_its_sampled_pages_and_never_in_dev(tmp_path):
    frame = build_examples(_pages(12), n_buckets=1024)
    plain, dev = training_rows(frame, 4, 13)
    assert not is_small_page(plain).any() and not is_small_page(dev).any()
    every, dev_all = training_rows(frame, 4, 13, small_pages=1.0)
    assert dev_all.equals(dev) and not is_small_page(dev_all).any()
    cut = every[is_small_page(every)]
    assert sorted(cut["small_page_of"]) == sorted(plain["page_id"])   # the sampled pages' only
    half, _ = training_rows(frame, 4, 13, small_pages=0.5)
    assert is_small_page(half).sum() == round(len(plain) * 0.5)
    assert set(half[is_small_page(half)]["small_page_of"]) <= set(plain["page_id"])
    base = dict(epochs=1, batch_pages=4, seed=3, max_pages_per_source=4,
                model=BlockModelConfig(n_buckets=1024, hidden=16, embed_dim=8))
    _, report, train_rows, _ = train_from_cache(frame, TrainConfig(small_pages=1.0, **base), tmp_path / "m")
    assert report["train_pages"] == len(train_rows) == 2 * len(plain)
    assert report["config"]["small_pages"] == 1.0
