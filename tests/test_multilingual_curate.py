"""Language-aware curation through the whole curate pipeline (issue 14), on clean
paragraphs in 7 languages (tests/data/multilingual_docs.json, UD treebanks, CC BY-SA)
and junk made from each language's own words; character shingles for Chinese and
Japanese near-copies; the --languages filter; language:low_confidence."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers_data import DATA
from pulpie_spark import reasons
from pulpie_spark.curate import minhash

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "jobs"))

DOCS = {d["lang"]: d for d in json.loads((DATA / "multilingual_docs.json").read_text(encoding="utf-8"))}
LABEL = {"en": "eng_Latn", "de": "deu_Latn", "ru": "rus_Cyrl", "ar": "arb_Arab",
         "zh": "cmn_Hani", "ja": "jpn_Jpan", "ko": "kor_Hang"}
NO_SPACES = ("zh", "ja")


def _tokens(lang: str) -> list[str]:
    """The language's own words: whitespace words, or 2-character pieces of zh/ja letters."""
    text = DOCS[lang]["text"]
    if lang in NO_SPACES:
        letters = [c for c in text if c.isalpha()]
        return ["".join(letters[i:i + 2]) for i in range(0, len(letters) - 1, 2)]
    return [w.strip(".,;:!?()\"'«»„“”") for w in text.split() if any(c.isalpha() for c in w)]


def junk(lang: str, kind: str, seed: int = 0) -> str:
    """Three kinds of junk from one language's words (the issue's list). Expected catcher
    (per-language gates, curate/quality.py):
      stuffing:  one long line of keywords -> gopher_repetition (top n-grams) and c4
                 (too few sentences / no terminal punctuation);
      menu:      40 lines of 1-3 words -> fineweb (short lines) and c4 (lines under
                 min_words_per_line, too few sentences);
      repeated:  one paragraph 8 times -> gopher_repetition (duplicate paragraphs/lines)."""
    rng = random.Random(f"{lang}-{kind}-{seed}")
    words = _tokens(lang)
    if kind == "stuffing":
        keys = rng.sample(words, 6)
        return " ".join(rng.choice(keys) for _ in range(250))
    if kind == "menu":
        return "\n".join(" ".join(rng.sample(words, rng.randint(1, 3))) for _ in range(40))
    para = DOCS[lang]["text"].split("\n\n")[0][:300]
    return "\n\n".join([para] * 8)


JUNK_KINDS = ("stuffing", "menu", "repeated")


def replace_share(text: str, share: float, rng: random.Random, pool: str) -> str:
    """``text`` with ``share`` of its letters replaced by other characters of ``pool``."""
    chars = list(text)
    letters = [i for i, c in enumerate(chars) if c.isalpha()]
    for i in rng.sample(letters, max(1, round(share * len(letters)))):
        chars[i] = rng.choice([c for c in pool if c != chars[i]])
    return "".join(chars)


# ---------------------------------------------------------------- shingles without spaces
def test_scripts_without_spaces_shingle_by_character():
    assert minhash.words("東京は日本の首都です。Tokyo is big") == \
        ["東", "京", "は", "日", "本", "の", "首", "都", "で", "す", "tokyo", "is", "big"]
    assert minhash.words("ภาษาไทย") == list("ภาษาไทย")  # vowel marks count as characters
    assert minhash.words("Hello, World_1 naïve") == ["hello", "world_1", "naïve"]
    for lang in NO_SPACES:
        text = DOCS[lang]["text"]
        assert len(minhash.shingle_hashes(text)) == len(minhash.words(text)) - 4


@pytest.mark.parametrize("lang", NO_SPACES)
def test_one_percent_changed_characters_keep_zh_ja_copies_similar(lang):
    rng = random.Random(1)
    text = DOCS[lang]["text"]
    copy = replace_share(text, 0.01, rng, pool=text)
    exact = minhash.jaccard(minhash.shingle_set(text), minhash.shingle_set(copy))
    sig = minhash.signatures([text, copy])
    assert exact > 0.8 and minhash.estimate_jaccard(sig[0], sig[1]) > 0.7
    other = DOCS["ja" if lang == "zh" else "zh"]["text"]
    assert minhash.jaccard(minhash.shingle_set(text), minhash.shingle_set(other)) < 0.05


# ------------------------------------------------------------------- the whole pipeline
@pytest.fixture(scope="module")
def curated(spark):
    from pulpie_spark.curate.config import load_config
    from pulpie_spark.curate.pipeline import curate

    rows = [(f"clean-{lang}", d["text"]) for lang, d in DOCS.items()]
    rows += [(f"junk-{kind}-{lang}", junk(lang, kind)) for lang in DOCS for kind in JUNK_KINDS]
    rows.append(("letters-none", "2024-01-01 12:00 | 3.14 % 42 +++ 17 / 99 = 0.5\n" * 5))
    rows.append(("mixed", "Der Hund. The dog. Le chien. El perro. Il cane. O cão. De hond. Hunden. Koira."))
    df = spark.createDataFrame(rows, "doc_id string, text string")
    result = curate(df, load_config(Path(__file__).resolve().parents[1] / "conf" / "curate.toml"))
    out = {r["doc_id"]: r.asDict() for r in result.annotated.collect()}
    result.annotated.unpersist()
    return out


@pytest.mark.parametrize("lang", sorted(DOCS))
def test_language_column_on_every_row(curated, lang):
    assert curated[f"clean-{lang}"]["language"] == LABEL[lang]
    assert 0.0 < curated[f"clean-{lang}"]["language_score"] <= 1.0
    for kind in JUNK_KINDS:  # removed rows carry the language too
        assert curated[f"junk-{kind}-{lang}"]["language"] is not None


@pytest.mark.parametrize("lang", sorted(DOCS))
def test_clean_paragraphs_kept(curated, lang):
    """Needs the per-language gates of curate/quality.py (English rules remove most
    non-English text: issue 14's measurement)."""
    row = curated[f"clean-{lang}"]
    assert row["reason"] is None, (row["reason"], row["quality_fails"])


@pytest.mark.parametrize("kind", JUNK_KINDS)
@pytest.mark.parametrize("lang", sorted(DOCS))
def test_junk_removed(curated, lang, kind):
    row = curated[f"junk-{kind}-{lang}"]
    assert row["reason"] is not None and row["removed_stage"] in ("language", "quality"), row["quality_fails"]


def test_low_confidence_removed_with_its_reason(curated):
    for doc_id in ("letters-none", "mixed"):
        row = curated[doc_id]
        assert row["reason"] == reasons.LANGUAGE_LOW_CONFIDENCE and row["removed_stage"] == "language"
    assert curated["letters-none"]["language"] == "und" and curated["letters-none"]["language_score"] == 0.0
    assert curated["mixed"]["language_score"] < 0.5


def test_near_dedup_finds_planted_zh_ja_copies(spark):
    """MinHash LSH + connected components on character shingles: copies with 1% of the
    characters replaced are linked, distinct documents are not."""
    from pulpie_spark.curate.config import NearDedupConfig
    from pulpie_spark.curate.near_dedup import near_dedup

    rng = random.Random(5)
    rows = [(f"orig-{lang}", DOCS[lang]["text"]) for lang in DOCS]
    for lang in NO_SPACES:
        for k in range(2):
            rows.append((f"copy{k}-{lang}", replace_share(DOCS[lang]["text"], 0.01, rng, DOCS[lang]["text"])))
    df = spark.createDataFrame(rows, "doc_id string, text string")
    out, stats = near_dedup(df, NearDedupConfig(), None)
    got = {r["doc_id"]: r["near_duplicate_of"] for r in out.collect()}
    for lang in NO_SPACES:  # each planted group collapses to one kept representative
        group = [f"orig-{lang}", f"copy0-{lang}", f"copy1-{lang}"]
        assert sum(got[d] is None for d in group) == 1
        rep = next(d for d in group if got[d] is None)
        assert all(got[d] == rep for d in group if d != rep)
    for lang in DOCS:
        if lang not in NO_SPACES:
            assert got[f"orig-{lang}"] is None
    assert stats["component_size_histogram"] == {3: 2}


def test_languages_filter_in_the_job(spark, tmp_path):
    from curate import CurateJob

    rows = [(f"clean-{lang}", d["text"]) for lang, d in DOCS.items()]
    path = tmp_path / "in"
    spark.createDataFrame(rows, "doc_id string, text string").write.parquet(str(path))
    out = tmp_path / "out"
    code = CurateJob().main(["--input", str(path), "--output", str(out), "--languages", "deu_Latn,cmn_Hani",
                             "--tag-only", "--log-level", "ERROR"])
    assert code == 0
    kept = {r["doc_id"]: r["language"] for r in spark.read.parquet(str(out)).collect()}
    removed = {r["doc_id"]: (r["reason"], r["removed_stage"], r["language"])
               for r in spark.read.parquet(str(out) + "_removed").collect()}
    assert kept == {"clean-de": "deu_Latn", "clean-zh": "cmn_Hani"}
    assert removed == {f"clean-{lang}": (reasons.LANGUAGE_NOT_SELECTED, "language", LABEL[lang])
                       for lang in DOCS if lang not in ("de", "zh")}
    report = json.loads((Path(str(out) + "_report") / "report.json").read_text())
    assert report["removed_by_reason"] == {reasons.LANGUAGE_NOT_SELECTED: 5}


def test_report_has_per_language_funnel_and_scores(spark, curated, tmp_path):
    from pulpie_spark.curate.report import collect_report, write_report

    cols = ("doc_id", "reason", "removed_stage", "language", "language_score", "quality_fails")
    rows = [tuple(r[c] for c in cols) + ((r["quality_score"],),) for r in curated.values()]
    df = spark.createDataFrame(rows, "doc_id string, reason string, removed_stage string, language string, "
                                     "language_score double, quality_fails array<string>, quality struct<score:double>")
    report = collect_report(df, {})
    langs = report["languages"]
    assert sum(v["rows"] for v in langs.values()) == len(curated)
    de = langs["deu_Latn"]
    expected_de = [r for r in curated.values() if r["language"] == "deu_Latn"]
    assert de["rows"] == len(expected_de) and de["kept"] == sum(r["reason"] is None for r in expected_de)
    assert sum(de["removed_by_reason"].values()) == de["rows"] - de["kept"]
    assert sum(de["score"]["histogram"]) == de["rows"] and 0 < de["score"]["p50"] <= 1
    assert langs["und"]["score"]["histogram"][0] == 1 and langs["und"]["removed_by_reason"] == {
        reasons.LANGUAGE_LOW_CONFIDENCE: 1}
    json_path, html_path = write_report(report, tmp_path)
    assert json.loads(json_path.read_text())["languages"]["deu_Latn"]["rows"] == de["rows"]
    html = html_path.read_text()
    assert "<h2>Languages</h2>" in html and "deu_Latn" in html and html.count("data:image/png;base64,") >= 2
