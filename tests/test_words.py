"""English word split and sentence count as datatrove's (spaCy's rule-based tokenizer and
Sentencizer), without spaCy: hard-coded expectations taken from spaCy 3.8.18 (run always), the
port against spaCy itself when spaCy is importable (skipped otherwise), and the per-script
splits of other languages."""

from __future__ import annotations

import pytest

from helpers_data import GOOD
from pulpie_spark.curate.words import (PUNCTUATION_SET, TERMINAL_PUNCTUATION, count_sentences, rule_tokenizer,
                                       split_words, stop_words_present)

# expected tokens: [t.text.strip() for t in spacy.blank("en").tokenizer(s) if t.text.strip()] (spaCy 3.8.18)
TRICKY = [
    ("Don't stop: it's 10km (6.2mi) to the U.S. border, e.g. via I-95!",
     ['Do', "n't", 'stop', ':', 'it', "'s", '10', 'km', '(', '6.2mi', ')', 'to', 'the', 'U.S.', 'border', ',', 'e.g.', 'via', 'I-95', '!']),
    ('Email me at jane.doe@example.com or visit https://example.com/a?b=1&c=2 :) ok?',
     ['Email', 'me', 'at', 'jane.doe@example.com', 'or', 'visit', 'https://example.com/a?b=1&c=2', ':)', 'ok', '?']),
    ('He said "wait..." and left -- then came back.',
     ['He', 'said', '"', 'wait', '...', '"', 'and', 'left', '--', 'then', 'came', 'back', '.']),
    ("Prices rose 3.5% to $1,200.50 in Q3'19; analysts weren't surprised.",
     ['Prices', 'rose', '3.5', '%', 'to', '$', '1,200.50', 'in', "Q3'19", ';', 'analysts', 'were', "n't", 'surprised', '.']),
    ('The well-known co-founder\'s plan (a.k.a. "Plan B") failed.',
     ['The', 'well', '-', 'known', 'co', '-', 'founder', "'s", 'plan', '(', 'a.k.a', '.', '"', 'Plan', 'B', '"', ')', 'failed', '.']),
    ('Mr. Smith vs. Dr. Jones: 2-1, at 5pm on Jan. 3rd.',
     ['Mr.', 'Smith', 'vs.', 'Dr.', 'Jones', ':', '2', '-', '1', ',', 'at', '5', 'pm', 'on', 'Jan.', '3rd', '.']),
    ("companion'''' and rock'n'roll, y'all",
     ['companion', "''", "'", "'", 'and', "rock'n'roll", ',', "y'", 'all']),
    ('C++ and C# are languages; 3x faster,  really?\n\nYes!!',
     ['C++', 'and', 'C', '#', 'are', 'languages', ';', '3x', 'faster', ',', 'really', '?', 'Yes', '!', '!']),
    ('Wait…what?! «Bonjour» — said Zoë.',
     ['Wait', '…', 'what', '?', '!', '«', 'Bonjour', '»', '—', 'said', 'Zoë', '.']),
    ('#hashtag @user ** bold ** [1] [edit] {x}',
     ['#', 'hashtag', '@user', '*', '*', 'bold', '*', '*', '[', '1', ']', '[', 'edit', ']', '{', 'x', '}']),
]
# expected: max(1, len(list(nlp(s).sents))) with spacy.blank("en") + sentencizer (spaCy 3.8.18)
SENTENCES = [
    ("Use e.g. this one here", 1),
    ("It is 3.5 m long. Yes.", 2),
    ('He stopped." Then he left.', 2),
    ("End.) next one", 2),
    ("One! Two? Three... four", 3),
]


@pytest.mark.parametrize("text, expected", TRICKY)
def test_english_split_matches_spacy_output(text, expected):
    assert split_words(text) == expected
    assert split_words(text, "eng_Latn") == expected


@pytest.mark.parametrize("text, expected", SENTENCES)
def test_english_sentence_count_matches_spacy_sentencizer(text, expected):
    assert count_sentences(text) == expected


def test_port_against_spacy_when_installed():
    spacy = pytest.importorskip("spacy")
    for code in ("en", "xx"):
        nlp = spacy.blank(code)
        nlp.add_pipe("sentencizer")
        port = rule_tokenizer(code)
        texts = [t for t, _ in TRICKY] + [t for t, _ in SENTENCES] + [GOOD, GOOD.replace("\n", "\n\n  ")]
        for text in texts:
            ref = [s for s in (t.text.strip() for t in nlp.tokenizer(text)) if s]
            assert port.word_tokenize(text) == ref, text
            assert [t.text for t in nlp.tokenizer(text)] == port.doc_tokens(text), text
            assert max(1, len(list(nlp(text).sents))) == max(1, port.count_sentences(port.doc_tokens(text))), text


def test_datatrove_punctuation_sets():
    # datatrove 0.10.1: PUNCTUATION (129 chars) | TERMINAL_PUNCTUATION (159) = 281 chars
    assert len(TERMINAL_PUNCTUATION) == 159 and len(PUNCTUATION_SET) == 281
    assert {".", "!", "?", "\u3002", "\uff01", "\uff1f", "\u0964", "\u061f"} <= set(TERMINAL_PUNCTUATION)
    assert '"' not in TERMINAL_PUNCTUATION and "\u2026" not in TERMINAL_PUNCTUATION
    assert {"\u2026", '"', "\uff05", "\x00"} <= PUNCTUATION_SET and "\u00bf" not in PUNCTUATION_SET


def test_han_and_kana_one_character_per_word():
    assert split_words("我们在2018年去了北京。", "cmn_Hani") == ["我", "们", "在", "2018", "年", "去", "了", "北", "京", "。"]
    assert split_words("東京へ行きました。Tokyo!", "jpn_Jpan") == ["東", "京", "へ", "行", "き", "ま", "し", "た", "。",
                                                             "Tokyo", "!"]
    assert count_sentences("今天很好。明天也好！真的吗？", "cmn_Hani") == 3
    assert count_sentences("यह अच्छा है। वह भी।", "hin_Deva") == 2


def test_stop_words_distinct_and_korean_suffixes():
    assert stop_words_present(["the", "the", "the", "cat"], ("the", "and")) == 1
    words = split_words("학교에서 친구를 만났다 .", "kor_Hang")
    assert words == ["학교에서", "친구를", "만났다", "."]
    # 에서 and 다 end eojeol; 를 is not a stop word here; English never matches suffixes
    assert stop_words_present(words, ("에서", "다", "의"), "kor_Hang") == 2
    assert stop_words_present(["cats"], ("s",), "eng_Latn") == 0
    assert stop_words_present(["ในบ้าน"], ("ใน", "ที่"), "tha_Thai") == 1
