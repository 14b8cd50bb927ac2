"""Quality gates per language (FineWeb-2 values, script-aware splits) and the English
decisions at datatrove's boundaries (strict operators, blank lines, distinct stop words)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers_data import GOOD
from pulpie_spark.curate.config import QualityConfig
from pulpie_spark.curate.quality import (c4, evaluate_quality, fineweb, fineweb2_values, gopher_quality,
                                         language_overrides, language_quality)

DATA = Path(__file__).parent / "data"
DOCS = {d["lang"]: d["text"] for d in json.loads((DATA / "multilingual_docs.json").read_text(encoding="utf-8"))}
QUALITY = QualityConfig()
FW, GQ, C4 = QUALITY["fineweb"], QUALITY["gopher_quality"], QUALITY["c4"]


# ------------------------------------------------------------ English, datatrove's boundaries
def _lines(n_punct: int, n_plain: int) -> str:
    ended = [f"Line number {i} of this text is long enough to count." for i in range(n_punct)]
    plain = [f"Line number {i} of this other text has no stop mark" for i in range(n_plain)]
    return "\n".join(ended + plain)


def test_fineweb_line_punct_is_strictly_below_and_ignores_blank_lines():
    at = _lines(3, 22)   # 3/25 = 0.12 = line_punct_thr: datatrove keeps (r < thr fails)
    assert "line_punct_ratio" not in fineweb(at, FW)[1]
    assert "line_punct_ratio" in fineweb(_lines(2, 23), FW)[1]
    # blank lines are dropped before the ratios (datatrove): 3/25, not 3/40
    assert "line_punct_ratio" not in fineweb(at.replace("\n", "\n\n", 15), FW)[1]
    # stop chars are datatrove's TERMINAL_PUNCTUATION: a closing quote or an ellipsis does not count
    assert fineweb("He said \"yes.\"\n" * 3, FW)[0]["fw_line_punct_ratio"] == 0.0
    assert fineweb("Done\u3002\nDone\u0964\nDone!", FW)[0]["fw_line_punct_ratio"] == 1.0


def test_fineweb_short_lines_and_char_dups_are_strictly_above():
    long_line = "This line is clearly longer than thirty characters."
    short = "\n".join(["Short line."] * 2 + [long_line])          # 2/3 < 0.67 keeps
    assert "short_line_ratio" not in fineweb(short, FW)[1]
    signals, fails = fineweb(short, FW.with_overrides(short_line_thr=2 / 3))  # equal: keeps
    assert signals["fw_short_line_ratio"] == 2 / 3 and "short_line_ratio" not in fails
    assert "short_line_ratio" in fineweb(short, FW.with_overrides(short_line_thr=0.66))[1]
    text = "abcdefghij\nabcdefghij\n" + "x" * 80                    # 10 dup chars / 100 = 0.1
    assert "char_dup_ratio" not in fineweb(text, FW.with_overrides(char_duplicates_ratio=0.1))[1]
    assert "char_dup_ratio" in fineweb(text, FW.with_overrides(char_duplicates_ratio=0.099))[1]


def test_gopher_counts_distinct_stop_words():
    text = " ".join(["the cat sat on a mat"] * 12)    # "the" 12 times, no other stop word
    signals, fails = gopher_quality(text, GQ)
    assert signals["gq_stop_words"] == 1 and "gopher_enough_stop_words" in fails
    signals, fails = gopher_quality(text + " and", GQ)
    assert signals["gq_stop_words"] == 2 and "gopher_enough_stop_words" not in fails


def test_gopher_symbols_are_datatrove_punctuation():
    # "\u2026" and "%" are in datatrove's PUNCTUATION_SET: symbols, not words
    signals, _ = gopher_quality("word \u2026 % word", GQ)
    assert signals["gq_n_words"] == 2
    # spaCy's split: "don't" is two tokens, "U.S." one
    assert gopher_quality("I don't live in the U.S.", GQ)[0]["gq_n_words"] == 7


def test_c4_reports_the_first_of_lorem_and_curly_in_document_order():
    curly_first = GOOD + "\nThe code is function() { return 1; }.\nLorem ipsum dolor sit amet, consectetur."
    assert c4(curly_first, C4)[1][:2] == ["curly_bracket", "lorem_ipsum"]
    lorem_first = GOOD + "\nLorem ipsum dolor sit amet, consectetur.\nThe code is function() { return 1; }."
    assert c4(lorem_first, C4)[1][:2] == ["lorem_ipsum", "curly_bracket"]
    # sentences as spaCy's Sentencizer: "e.g." ends no sentence, a closing quote stays in it
    assert c4("Use e.g. this one here.\nHe stopped.\" Then he left.", C4)[0]["c4_sentences"] == 3


# ------------------------------------------------------------------- per-language values
def test_german_document_judged_with_german_stop_words():
    de = DOCS["de"]
    english = evaluate_quality(de)                      # English rules: no English stop words
    assert "gopher_quality:gopher_enough_stop_words" in english.fails
    german = evaluate_quality(de, language="deu_Latn")
    assert german.drop_reason is None and german.fails == []
    assert german.signals["gq_stop_words"] >= 5        # der, die, und, ... distinct
    # the German list, not the English one: a German text without its stop words fails
    stripped = " ".join(w for w in de.split() if w not in fineweb2_values()["deu_Latn"]["stopwords"])
    assert "gopher_quality:gopher_enough_stop_words" in evaluate_quality(stripped, language="deu_Latn").fails
    # per_language = false: English values for every language
    off = QUALITY.with_overrides(gopher_quality={"per_language": False})
    assert "gopher_quality:gopher_enough_stop_words" in evaluate_quality(de, off, language="deu_Latn").fails


def test_fineweb2_mapping_of_a_config():
    over = language_overrides("deu_Latn")
    de = fineweb2_values()["deu_Latn"]
    assert over["gopher_quality"]["stop_words"] == de["stopwords"] and over["gopher_quality"]["min_stop_words"] == 2
    assert over["gopher_repetition"]["dup_para_frac"] == 0 and over["gopher_repetition"]["dup_line_frac"] == 0.263
    assert over["fineweb"] == {"short_line_thr": 999, "char_duplicates_ratio": 0.1, "line_punct_thr": 0.0,
                               "new_line_ratio": 0.152}
    cfg = language_quality(QUALITY, "fra_Latn")["gopher_quality"]
    assert fineweb2_values()["fra_Latn"]["max_non_alpha_words_ratio"] == 0.812
    assert cfg.max_non_alpha_words_ratio == 0.78        # per_language_alpha_cap
    assert cfg.mode == "drop" and language_quality(QUALITY, "eng_Latn") is QUALITY
    assert language_quality(QUALITY, None) is QUALITY and language_quality(QUALITY, "und") is QUALITY


@pytest.mark.parametrize("lang, label", [("zh", "cmn_Hani"), ("ja", "jpn_Jpan"), ("ko", "kor_Hang"),
                                         ("ru", "rus_Cyrl"), ("ar", "arb_Arab"), ("en", "eng_Latn")])
def test_clean_documents_kept_in_their_language(lang, label):
    result = evaluate_quality(DOCS[lang], language=label)
    assert result.drop_reason is None, result.fails


def test_chinese_kept_with_the_character_rule_and_dropped_by_english_rules():
    zh = DOCS["zh"]
    result = evaluate_quality(zh, language="cmn_Hani")
    assert result.fails == []
    assert result.signals["gq_n_words"] > 150           # one word per Han character
    assert result.signals["gq_stop_words"] >= 2         # 的 在 ... are single characters
    assert result.signals["c4_sentences"] >= 5          # sentences end at 。
    assert evaluate_quality(zh).drop_reason is not None


def test_korean_stop_words_match_as_eojeol_endings():
    signals = evaluate_quality(DOCS["ko"], language="kor_Hang").signals
    assert signals["gq_stop_words"] >= 5


def test_language_without_a_config_gets_the_default():
    assert "zzz_Latn" not in fineweb2_values()
    assert language_overrides("zzz_Latn") == {"gopher_quality": {"min_stop_words": 0}, "gopher_repetition": {},
                                              "fineweb": {}}
    assert language_overrides("zzz_Latn", 0.78)["gopher_quality"] == {"min_stop_words": 0,
                                                                      "max_non_alpha_words_ratio": 0.78}
    # German text under an unknown label: no English stop words required, English thresholds otherwise
    assert evaluate_quality(DOCS["de"], language="zzz_Latn").drop_reason is None
    assert evaluate_quality("Menu\nHome\nAbout us\nContact", language="zzz_Latn").drop_reason is not None
    # an unknown Han label: word length bounds for one character per word
    assert language_overrides("zzz_Hani")["gopher_quality"] == {"min_stop_words": 0, "min_avg_word_length": 1,
                                                                "max_avg_word_length": 6,
                                                                "max_non_alpha_words_ratio": 0.76}
    assert evaluate_quality(DOCS["zh"], language="zzz_Hani").drop_reason is None


def test_spaceless_scripts_without_segmentation():
    over = language_overrides("tha_Thai")["gopher_quality"]
    assert over["min_avg_word_length"] == 0 and over["max_avg_word_length"] == 0
    assert over["stop_words"] == fineweb2_values()["tha_Thai"]["stopwords"]


def test_junk_removed_in_each_language():
    for lang, label in [("de", "deu_Latn"), ("zh", "cmn_Hani"), ("ko", "kor_Hang"), ("ru", "rus_Cyrl")]:
        words = DOCS[lang].split() if lang != "zh" else list(DOCS[lang][:60])
        stuffing = " ".join(words[i % 6] for i in range(250))
        menu = "\n".join(" ".join(words[i:i + 2]) for i in range(40))
        repeated = "\n\n".join([DOCS[lang][:300]] * 8)
        for junk in (stuffing, menu, repeated):
            assert evaluate_quality(junk, language=label).drop_reason is not None, (lang, junk[:60])
