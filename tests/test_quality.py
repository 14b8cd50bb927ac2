"""Quality gates: every rule on crafted documents (a pass and a fail), the vectorized
n-gram repetition against a direct port of datatrove's loops, gate modes."""

from __future__ import annotations

import math
import pickle
from collections import Counter

import pytest

from helpers_data import GOOD
from pulpie_spark.curate.config import ConfigError, QualityConfig, make_config
from pulpie_spark.curate.quality import (GATE_NAMES, GATES, C4Config, FineWebConfig, GopherQualityConfig,
                                         GopherRepetitionConfig, _n_rules, c4, evaluate_quality, fineweb,
                                         gopher_quality, gopher_repetition, signal_names, word_tokenize)

QUALITY = QualityConfig()
GQ, GR, C4, FW = (QUALITY[g] for g in ("gopher_quality", "gopher_repetition", "c4", "fineweb"))
C4_DEFAULT, C4_STRICT = C4, C4.with_overrides(filter_no_terminal_punct=True)


def cfg_with(gate_cfg, **changes):
    return gate_cfg.with_overrides(**changes)


def test_good_document_passes_every_gate():
    result = evaluate_quality(GOOD)
    assert result.fails == [] and result.drop_reason is None and result.score == 1.0
    assert set(result.signals) == set(signal_names())


# ------------------------------------------------------------------ Gopher quality
@pytest.mark.parametrize("text, cfg, rule", [
    ("The cat sat with the dog.", GQ, "gopher_short_doc"),
    (GOOD, cfg_with(GQ, max_doc_words=60), "gopher_long_doc"),
    (" ".join(["a to of be an so it"] * 12) + " the and", GQ, "gopher_below_avg_threshold"),
    (" ".join(["internationalization telecommunications"] * 30) + " the and", GQ, "gopher_above_avg_threshold"),
    (GOOD + "\n" + "# " * 20, GQ, "gopher_too_many_hashes"),
    (GOOD + "\n" + "... " * 20, GQ, "gopher_too_many_ellipsis"),
    ("\n".join("\u2022 the item number %d is with that one" % i for i in range(12)), GQ, "gopher_too_many_bullets"),
    ("\n".join("the story goes on and on with that %d ..." % i for i in range(12)), GQ, "gopher_too_many_end_ellipsis"),
    (" ".join(str(1000 + i) for i in range(60)) + " the and that with of", GQ, "gopher_below_alpha_threshold"),
    (" ".join("lorem%d ipsum dolor sit amet" % i for i in range(15)), GQ, "gopher_enough_stop_words"),
])
def test_gopher_quality_rules(text, cfg, rule):
    _, fails = gopher_quality(text, cfg)
    assert rule in fails
    _, good_fails = gopher_quality(GOOD, cfg if rule != "gopher_long_doc" else GQ)
    assert good_fails == []


def test_gopher_stop_words_are_case_sensitive_like_datatrove():
    signals, _ = gopher_quality("The The The cat", GQ)
    assert signals["gq_stop_words"] == 0


# --------------------------------------------------------------- Gopher repetition
def _datatrove_top(words, n):
    grams = [" ".join(words[i:i + n]) for i in range(len(words) - n + 1)]
    gram, count = Counter(grams).most_common(1)[0]
    return len(gram) * count


def _datatrove_all_dup(words, n):
    unique, repeated, idx = set(), 0, 0
    while idx < len(words) - n + 1:
        gram = "".join(words[idx: idx + n])
        if gram in unique:
            repeated += len(gram)
            idx += n
        else:
            unique.add(gram)
            idx += 1
    return repeated


@pytest.mark.parametrize("text", [
    GOOD,
    "one two three one two three one two four five one two three six " * 5,
    "a b a b a b c d c d c d e f g h e f g h " * 3 + "x",
])
def test_ngram_signals_match_datatrove_loops(text):
    signals, _ = gopher_repetition(text, GR)
    words = word_tokenize(text)
    for n, _ in GR.top_n_grams:
        assert signals[f"gr_top_{n}_gram_frac"] == pytest.approx(_datatrove_top(words, n) / len(text))
    for n, _ in GR.dup_n_grams:
        assert signals[f"gr_dup_{n}_gram_frac"] == pytest.approx(_datatrove_all_dup(words, n) / len(text))


def test_duplicated_ngrams_compare_joined_strings_like_datatrove():
    # ("a", "bc", ...) and ("ab", "c", ...) join to the same string: a repeat for datatrove
    words = ["a", "bc", "d", "e", "f", "zz", "ab", "c", "d", "e", "f"]
    text = " ".join(words)
    signals, _ = gopher_repetition(text, GR, tokens=words)
    assert _datatrove_all_dup(words, 5) == 6
    assert signals["gr_dup_5_gram_frac"] == pytest.approx(6 / len(text))
    # a walk that skips n words after a repeat: the skipped n-grams are never seen
    words = ["x"] * 12
    assert gopher_repetition(" ".join(words), GR, tokens=words)[0]["gr_dup_5_gram_frac"] == pytest.approx(
        _datatrove_all_dup(words, 5) / len(" ".join(words)))


PARA = "This paragraph talks about the mill and the river that turns its wheel every day."


@pytest.mark.parametrize("text, rule", [
    ("\n\n".join([PARA] * 3 + ["A different closing paragraph with other words in it."]), "dup_para_frac"),
    ("\n\n".join([PARA * 4, PARA * 4, "short one here.", "another short one.", "and a third."]),
     "dup_para_char_frac"),
    ("\n".join(["the same line again"] * 3 + ["a unique line here"]), "dup_line_frac"),
    (GOOD + "\n" + "\n".join([PARA * 3] * 2), "dup_line_char_frac"),
    ("buy now " * 40, "top_2_gram"),
    ("click here now " * 40, "top_3_gram"),
    ("please click here now " * 40, "top_4_gram"),
    (GOOD + " " + " ".join(["alpha beta gamma delta epsilon zeta"] * 6), "duplicated_5_n_grams"),
])
def test_gopher_repetition_rules(text, rule):
    _, fails = gopher_repetition(text, GR)
    assert rule in fails
    assert gopher_repetition(GOOD, GR)[1] == []


# ----------------------------------------------------------------------------- C4
def test_c4_rules_and_line_filter():
    # datatrove's constructor default filter_no_terminal_punct=True (FineWeb's, our default, is False)
    C4 = C4_STRICT
    signals, fails, kept = c4(GOOD, C4)
    assert fails == [] and signals["c4_sentences"] == 7 and kept == GOOD
    assert "lorem_ipsum" in c4(GOOD + "\nLorem ipsum dolor sit amet, consectetur.", C4)[1]
    assert "curly_bracket" in c4(GOOD + "\nThe code is function() { return 1; }.", C4)[1]
    assert "too_few_sentences" in c4("\n".join(GOOD.split("\n")[:3]), C4)[1]
    noisy = GOOD + ("\nPlease enable JavaScript to view the comments."
                    "\nThis site uses cookies to improve your experience."
                    "\nMenu\nHome | About | Contact\n" + "x" * 1001 + " is a long word.")
    signals, fails, kept = c4(noisy, C4)
    assert fails == [] and kept == GOOD
    assert (signals["c4_javascript_lines"], signals["c4_policy_lines"], signals["c4_long_word_lines"]) == (1, 1, 1)
    assert signals["c4_no_terminal_punct_lines"] == 2
    # lorem/curly on a line dropped earlier (no terminal punctuation) do not count, as in datatrove
    assert c4(GOOD + "\nlorem ipsum {", C4)[1] == []
    # citations are removed before the punctuation check
    assert c4("\n".join(line + "[12]" for line in GOOD.split("\n")), C4)[1] == []


def test_c4_fineweb_default_keeps_lines_without_terminal_punct():
    assert C4_DEFAULT.filter_no_terminal_punct is False  # FineWeb: C4QualityFilter(filter_no_terminal_punct=False)
    signals, fails, kept = c4(GOOD + "\nHome | About | Contact", C4_DEFAULT)
    assert fails == [] and kept == GOOD + "\nHome | About | Contact" and signals["c4_no_terminal_punct_lines"] == 0
    # a lorem ipsum line without a full stop is now seen (datatrove with FineWeb's arguments)
    assert c4(GOOD + "\nlorem ipsum dolor sit", C4_DEFAULT)[1] == ["lorem_ipsum"]


def test_c4_rewrite_text_in_evaluate():
    cfg = QUALITY.with_overrides(c4={"rewrite_text": True}, fineweb={"mode": "off"})
    assert evaluate_quality(GOOD + "\nMenu", cfg).text == GOOD
    assert evaluate_quality(GOOD + "\nMenu").text == GOOD + "\nMenu"


# -------------------------------------------------------------------------- FineWeb
@pytest.mark.parametrize("text, rule", [
    ("\n".join(line.rstrip(".") for line in GOOD.split("\n")), "line_punct_ratio"),
    (GOOD + "\n" + "\n".join(f"Menu item {i}." for i in range(20)), "short_line_ratio"),
    (GOOD + "\n" + GOOD.split("\n")[0], "char_dup_ratio"),
    ("\n".join(f"Word {i} is long enough to pass the short line check." for i in range(3)).replace(" ", "\n"),
     "list_ratio"),
])
def test_fineweb_rules(text, rule):
    _, fails = fineweb(text, FW)
    assert rule in fails
    assert fineweb(GOOD, FW)[1] == []


def test_fineweb_exclude_zero_switch():
    no_punct = "\n".join(line.rstrip(".") for line in GOOD.split("\n"))
    assert "line_punct_ratio" not in fineweb(no_punct, cfg_with(FW, line_punct_exclude_zero=True))[1]


# ----------------------------------------------------------------------- gate modes
def test_modes_drop_tag_off():
    short = "The cat sat with the dog."
    dropped = evaluate_quality(short)
    assert dropped.drop_reason == "gopher_quality:gopher_short_doc"
    assert "gopher_quality:gopher_short_doc" in dropped.fails and 0 < dropped.score < 1
    cfg = QUALITY.with_overrides(gopher_quality={"mode": "tag"})
    tagged = evaluate_quality(short, cfg)
    assert "gopher_quality:gopher_short_doc" in tagged.fails
    assert tagged.drop_reason is not None and not tagged.drop_reason.startswith("gopher_quality")
    cfg = cfg.with_overrides(**{gate: {"mode": "off"} for gate in cfg})
    off = evaluate_quality(short, cfg)
    assert off.fails == [] and off.drop_reason is None and off.score == 1.0
    assert all(math.isnan(v) for v in off.signals.values())


def test_batch_of_texts_and_bad_input():
    results = [evaluate_quality(t) for t in [GOOD, "", "The cat.", "\x00\x00"]]
    assert len(results) == 4 and all(list(r.signals) == signal_names() for r in results)
    assert [r.drop_reason is None for r in results] == [True, False, False, False]
    assert results[1].drop_reason == "gopher_quality:gopher_short_doc"
    assert [r.text for r in results] == [GOOD, "", "The cat.", "\x00\x00"]


# ------------------------------------------------------------------ the gate registry
def test_registry_declares_every_gate_rule_and_signal():
    assert GATE_NAMES == ("gopher_quality", "gopher_repetition", "c4", "fineweb")
    assert tuple(QUALITY) == GATE_NAMES
    assert [type(QUALITY[g.name]) for g in GATES] == [GopherQualityConfig, GopherRepetitionConfig, C4Config,
                                                      FineWebConfig]
    # the rule counts of quality_score: 10, 4 + 3 top + 6 dup n-gram rules, 3, 4
    assert [_n_rules(g, QUALITY[g.name]) for g in GATES] == [10, 13, 3, 4]
    short_gr = GR.with_overrides(top_n_grams=[[2, 0.2]], dup_n_grams=[])
    assert _n_rules(GATES[1], short_gr) == 5
    # the declared signals are exactly what the gates compute, in order
    for text in (GOOD, "", "The cat.", "buy now " * 40):
        assert list(evaluate_quality(text).signals) == signal_names()
    assert signal_names(QUALITY.with_overrides(gopher_repetition={"top_n_grams": [[3, 0.1]]})).count(
        "gr_top_3_gram_frac") == 1
    # every failed rule is a declared rule of its gate
    texts = [GOOD, "The cat sat.", "buy now " * 40, "lorem ipsum {\n" * 9, "\n".join("a b c" for _ in range(50))]
    declared = {f"{g.name}:{rule}" for g in GATES for rule in g.rules(QUALITY[g.name])}
    failed = {rule for t in texts for rule in evaluate_quality(t).fails}
    assert failed and failed <= declared


def test_gate_config_overrides_are_checked_copies():
    c4_strict = C4.with_overrides(min_num_sentences=9)
    assert c4_strict.min_num_sentences == 9 and C4.min_num_sentences == 5
    per_lang = QUALITY.with_overrides(c4={"min_num_sentences": 9})
    assert per_lang["c4"] == c4_strict and per_lang["fineweb"] is QUALITY["fineweb"]
    with pytest.raises(ConfigError, match="min_num_sentences"):
        C4.with_overrides(min_num_sentences="nine")
    with pytest.raises(ConfigError, match="quality.c4.min_sentences"):
        C4.with_overrides(min_sentences=3)
    with pytest.raises(ConfigError, match="quality.klingon"):
        QUALITY.with_overrides(klingon={"mode": "drop"})
    cfg = make_config()
    assert pickle.loads(pickle.dumps(cfg)) == cfg  # shipped to executors in UDF closures
