"""Exact and near dedup on Spark: keep policy, connected components, planted
near-duplicates (recall / false positives), giant-component guard, and identical
results with 1, 4 and 16 partitions."""

from __future__ import annotations

import random

import pytest
from pyspark.sql import functions as F

from pulpie_spark.curate import minhash
from pulpie_spark.curate.config import make_config
from pulpie_spark.curate.exact_dedup import exact_dedup, text_sha256
from pulpie_spark.curate.keep import pick_representative
from pulpie_spark.curate.near_dedup import connected_components, near_dedup
from helpers_data import edit_to_jaccard, random_doc

SCHEMA = "doc_id string, text string, quality_score double, warc_date string"


def test_exact_dedup_keep_policy(spark):
    rows = [
        ("d1", "same text", 0.5, "2020-01-02"),
        ("d2", "same text", 0.9, "2021-01-01"),   # best quality wins
        ("d3", "same text", 0.9, "2022-01-01"),
        ("d4", "other", 0.7, "2020-05-01"),
        ("d5", "other", 0.7, "2019-05-01"),       # same quality: earliest crawl wins
        ("d6", "tie", 1.0, None),
        ("d7", "tie", 1.0, None),                 # same quality, no date: smallest id wins
        ("d8", "alone", 1.0, None),
    ]
    df = spark.createDataFrame(rows, SCHEMA)
    out = {r["doc_id"]: r for r in exact_dedup(df, make_config().keep.order).collect()}
    assert {k: v["exact_duplicate_of"] for k, v in out.items()} == {
        "d1": "d2", "d2": None, "d3": "d2", "d4": "d5", "d5": None, "d6": None, "d7": "d6", "d8": None}
    assert out["d1"]["exact_group_size"] == 3 and out["d8"]["exact_group_size"] == 1
    assert out["d4"]["text_sha256"] == text_sha256("other")
    # the pure reference agrees
    group = [dict(zip(("doc_id", "text", "quality_score", "warc_date"), r)) for r in rows[:3]]
    assert pick_representative(group)["doc_id"] == "d2"


def _exact_rows(df, **kwargs):
    return sorted((tuple(r) for r in exact_dedup(df, make_config().keep.order, **kwargs).collect()),
                  key=lambda r: tuple("" if v is None else str(v) for v in r))


def test_exact_dedup_full_ties_keep_exactly_one_whatever_the_partitioning(spark):
    schema = "doc_id string, text string, quality_score double, warc_date string, source_file string"
    rows = [
        ("r1", "record ingested twice", 0.8, "2024-01-01", "a.warc"),
        ("r1", "record ingested twice", 0.8, "2024-01-01", "a.warc"),   # identical copy
        ("r2", "same id, two files", 0.8, "2024-01-01", "x.warc"),
        ("r2", "same id, two files", 0.8, "2024-01-01", "y.warc"),      # ties on every policy key
        ("r3", "same id, two files", 0.1, "2024-01-01", "z.warc"),
        ("r4", "alone", None, None, "b.warc"),
    ]
    df = spark.createDataFrame(rows * 3, schema)  # every group three times over: more ties
    outputs = [_exact_rows(df.repartition(n)) for n in (1, 7)]
    outputs.append(_exact_rows(spark.createDataFrame(list(reversed(rows * 3)), schema).repartition(3)))
    outputs.append(_exact_rows(df.repartition(5), hot_text_rows=2))  # every group cut in slices
    assert outputs[0] == outputs[1] == outputs[2] == outputs[3]
    kept = [r for r in outputs[0] if r[-1] is None]
    assert sorted((r[0], r[1]) for r in kept) == [
        ("r1", "record ingested twice"), ("r2", "same id, two files"), ("r4", "alone")]
    by_text = {r[1]: r for r in kept}
    assert by_text["same id, two files"][4] in ("x.warc", "y.warc") and by_text["same id, two files"][6] == 9
    removed = [r for r in outputs[0] if r[-1] is not None]
    assert len(removed) == 18 - 3 and {r[-1] for r in removed} == {"r1", "r2", "r4"}


@pytest.mark.parametrize("hot_text_rows", [100_000, 700])  # one join key; 8 slices
def test_exact_dedup_hot_key(spark, hot_text_rows):
    rng = random.Random(5)
    hot = "We use cookies. Accept all | Manage preferences"
    rows = [(f"h{i:05d}", hot, rng.choice([0.2, 0.5, 0.9, None]), rng.choice(["2023-01-01", "2022-06-01", None]))
            for i in range(5000)]
    rows += [(f"u{i:03d}", f"unique page {i}", 0.5, "2024-01-01") for i in range(300)]
    rng.shuffle(rows)
    out = exact_dedup(spark.createDataFrame(rows, SCHEMA).repartition(6), make_config().keep.order,
                      hot_text_rows=hot_text_rows)
    got = {r["doc_id"]: (r["exact_group_size"], r["exact_duplicate_of"]) for r in out.collect()}
    assert len(got) == 5300
    expected_rep = pick_representative([dict(zip(("doc_id", "text", "quality_score", "warc_date"), r))
                                        for r in rows if r[1] == hot])["doc_id"]
    assert got[expected_rep] == (5000, None)
    assert all(v == (5000, expected_rep) for k, v in got.items() if k.startswith("h") and k != expected_rep)
    assert all(v == (1, None) for k, v in got.items() if k.startswith("u"))


KEY_SCHEMA = "doc_id string, text string, flag boolean, title string, n long, score double, day date"


def _key_rows(seed):
    import datetime

    rng = random.Random(seed)
    values = {
        "flag": [True, False, None],
        "title": ["", "a", "ab", "ab\x00", "ab\x00c", "abc", "b", "\u00e9t\u00e9", "\U0001f600", None],
        "n": [-(2 ** 63), -1, 0, 7, 2 ** 63 - 1, None],
        "score": [float("nan"), float("-inf"), -0.0, 0.0, 1.5, float("inf"), None],
        "day": [datetime.date(1969, 12, 31), datetime.date(2024, 2, 29), datetime.date(9999, 1, 1), None],
    }
    return [(f"d{i:04d}", f"text {rng.randrange(40)}", *(rng.choice(v) for v in values.values()))
            for i in range(400)]


@pytest.mark.parametrize("order", [
    [["flag", "desc"], ["title", "desc"], ["n", "desc"], ["score", "desc"], ["day", "desc"]],
    [["score", "desc"], ["day", "asc"], ["title", "asc"], ["n", "desc"], ["flag", "asc"]],
    [["title", "desc"], ["doc_id", "desc"]],          # doc_id is always asc, last: the policy skips it
])
def test_exact_dedup_representative_follows_spark_order(spark, order):
    """The rank struct's minimum is the first row in spark_order (Spark's own sort), for
    every type and direction the encoding handles: nulls, NaN, -0.0, extreme longs,
    prefixes, NUL and non-ASCII characters."""
    from pulpie_spark.curate.keep import spark_order

    df = spark.createDataFrame(_key_rows(len(order)), KEY_SCHEMA)
    first = {}
    for r in df.orderBy(*spark_order(order, df.columns)).collect():
        first.setdefault(r["text"], r["doc_id"])
    got = {r["doc_id"]: r["exact_duplicate_of"] for r in exact_dedup(df, order).collect()}
    kept = {d for d, dup in got.items() if dup is None}
    assert kept == set(first.values())
    text_of = {r["doc_id"]: r["text"] for r in df.collect()}
    assert all(dup == first[text_of[d]] for d, dup in got.items() if dup is not None)


def _union_find(edges):
    parent = {}

    def find(x):
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return {n: find(n) for n in parent}


def test_connected_components_match_union_find(spark):
    rng = random.Random(4)
    chain = [f"c{i:02d}" for i in range(12)]
    rng.shuffle(chain)  # a long path with ids in random order needs several rounds
    edges = list(zip(chain, chain[1:]))
    edges += [("s0", f"s{i}") for i in range(1, 6)] + [("p1", "p2"), ("p2", "p1"), ("q9", "q1")]
    df = spark.createDataFrame(edges, "src string, dst string")
    comps, iterations = connected_components(df)
    got = {r["node"]: r["root"] for r in comps.collect()}
    assert got == _union_find(edges)
    assert iterations >= 2


def _planted_docs():
    """20 pairs at J ~0.9-0.95, 10 pairs at J ~0.3-0.45, a chain of 6 docs, 10 singletons."""
    rng = random.Random(11)
    docs, high, low = [], [], []
    for i in range(30):
        base = random_doc(rng, 250)
        level = (0.95, 0.9)[i % 2] if i < 20 else (0.45, 0.3)[i % 2]
        a, b = f"p{i:02d}a", f"p{i:02d}b"
        docs += [(a, " ".join(base)), (b, " ".join(edit_to_jaccard(base, level, rng)))]
        (high if i < 20 else low).append((a, b))
    words = random_doc(rng, 250)
    for k in range(6):  # each link J ~0.9; the ends are far apart: a transitive chain
        docs.append((f"chain{k}", " ".join(words)))
        words = edit_to_jaccard(words, 0.9, rng)
    docs += [(f"single{i:02d}", " ".join(random_doc(rng, 250))) for i in range(10)]
    return docs, high, low


NEAR_CFG = make_config({"near_dedup": {"max_component_size": 4}}).near_dedup


def _run_near(spark, docs, partitions):
    df = spark.createDataFrame([(d, t, 1.0, None) for d, t in docs], SCHEMA).repartition(partitions)
    out, stats = near_dedup(df, NEAR_CFG, [["quality_score", "desc"], ["doc_id", "asc"]])
    rows = sorted((r["doc_id"], r["near_component"], r["near_component_size"], r["near_component_too_large"],
                   r["near_duplicate_of"]) for r in out.collect())
    return rows, stats


@pytest.fixture(scope="module")
def planted(spark):
    docs, high, low = _planted_docs()
    rows, stats = _run_near(spark, docs, 4)
    return docs, high, low, rows, stats


def test_planted_near_duplicates_recall_and_false_positives(planted):
    docs, high, low, rows, stats = planted
    text = dict(docs)
    for a, b in high:
        assert true_j(text[a], text[b]) >= 0.88
    for a, b in low:
        assert true_j(text[a], text[b]) < 0.5
    comp = {r[0]: r[1] for r in rows}
    found_high = sum(comp[a] is not None and comp[a] == comp[b] for a, b in high)
    found_low = sum(comp[a] is not None and comp[a] == comp[b] for a, b in low)
    assert found_high / len(high) >= 0.95
    assert found_low / len(low) <= 0.05
    dup_of = {r[0]: r[4] for r in rows}
    for a, b in high:  # same quality: the smaller doc_id is the representative
        if comp[a] == comp[b]:
            assert dup_of[a] is None and dup_of[b] == a
    assert all(dup_of[f"single{i:02d}"] is None and comp[f"single{i:02d}"] is None for i in range(10))
    assert stats["verified_edges"] >= found_high and stats["bands"] == 14


def true_j(a, b):
    return minhash.jaccard(minhash.shingle_set(a), minhash.shingle_set(b))


def test_giant_component_is_flagged_not_collapsed(planted):
    _, _, _, rows, stats = planted
    chain = [r for r in rows if r[0].startswith("chain")]
    assert len({r[1] for r in chain}) == 1 and chain[0][2] == 6
    assert all(r[3] is True and r[4] is None for r in chain)
    assert stats["components_over_limit"] == 1 and stats["component_size_histogram"][6] == 1


def test_same_result_with_1_4_16_partitions(spark, planted):
    docs, _, _, rows4, _ = planted
    previous = spark.conf.get("spark.sql.shuffle.partitions")
    try:
        for partitions in (1, 16):
            spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
            rows, _ = _run_near(spark, docs, partitions)
            assert rows == rows4, f"{partitions} partitions differ from 4"
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", previous)


def test_hot_bucket_guard_and_exact_verification(spark):
    rng = random.Random(2)
    base = random_doc(rng, 120)
    docs = [(f"h{i}", " ".join(base)) for i in range(5)]
    docs.append(("z0", " ".join(random_doc(rng, 120))))
    df = spark.createDataFrame([(d, t, 1.0, None) for d, t in docs], SCHEMA)
    capped = make_config({"near_dedup": {"max_bucket_size": 4, "verify": "exact"}}).near_dedup
    out, stats = near_dedup(df, capped)
    assert stats["buckets_over_limit"] == 14 and stats["candidate_edges"] == 0
    assert out.where(F.col("near_duplicate_of").isNotNull()).count() == 0
    exact = make_config({"near_dedup": {"verify": "exact"}}).near_dedup
    out, stats = near_dedup(df, exact)
    dup_of = {r["doc_id"]: r["near_duplicate_of"] for r in out.collect()}
    assert dup_of == {"h0": None, "h1": "h0", "h2": "h0", "h3": "h0", "h4": "h0", "z0": None}
