"""Quality gates: Gopher quality, Gopher repetition, C4 and FineWeb, per language.

English (``language`` None, ``und`` or ``eng_Latn``): every rule decides as datatrove 0.10.1's
filter does (gopher_quality_filter, gopher_repetition_filter, c4_filters,
fineweb_quality_filter), its word split included: ``curate/words.py`` splits words as
``spacy.blank("en")`` does and counts C4 sentences as spaCy's ``Sentencizer``; the
punctuation sets are datatrove's, copied. Each gate is one datatrove filter run alone on
the text (not FineWeb's chain, where C4 rewrites the text the FineWeb filter sees).
Defaults are the arguments FineWeb used (docs/curation.md, "Quality gates").

Other languages take FineWeb-2's values for their label (``language_quality``; packaged
from its per-language configs, resources/quality/fineweb2_quality.json.gz) and a word split
that fits their script (``words.split_words``).

Unlike datatrove, which stops at the first failing rule, every rule is evaluated: all
signals are stored per document and every failed rule is listed (``"<gate>:<rule>"``) in
datatrove's rule order (so the first one listed is the one datatrove reports), and a gate
can be switched to ``tag`` and studied later.

Each gate is declared once, in ``GATES``: its name, its config dataclass (the
``[quality.<name>]`` table), its rules and signals, and the function that scores a text.
The config, the job's gate list and the rule counts of ``quality_score`` all read it.
"""

from __future__ import annotations

import gzip
import json
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from importlib import resources
from typing import Callable, Sequence

import numpy as np

from pulpie_spark.curate.config import GateConfig, QualityConfig
from pulpie_spark.curate.words import (CHARACTER_SCRIPTS, CJK_CHAR, PUNCTUATION_SET, SPACELESS_SCRIPTS,
                                       TERMINAL_PUNCTUATION, count_sentences, is_english, script_of, split_words,
                                       stop_words_present)

_PARAGRAPH_SPLIT = re.compile(r"\n{2,}")
_LINES_SPLIT = re.compile(r"\n+")
_CITATION = re.compile(r"\[\d*]|\[edit]|\[citation needed]")
_C4_END_PUNCT = (".", "?", "!", '"', "'")
_C4_END_PUNCT_ANY = _C4_END_PUNCT + TERMINAL_PUNCTUATION  # other languages: 。！？ । ؟ ...
_POLICY_SUBSTRINGS = ("terms of use", "privacy policy", "cookie policy", "uses cookies",
                      "use of cookies", "use cookies")
_POLICY = re.compile("|".join(map(re.escape, _POLICY_SUBSTRINGS)))  # any of them, as a substring


def word_tokenize(text: str, language: str | None = None) -> list[str]:
    """The words the gates count (``words.split_words``; English: datatrove's exactly)."""
    return split_words(text, language)


def _is_symbol(token: str) -> bool:
    """datatrove: a word is a symbol when every character is in PUNCTUATION_SET."""
    return all(ch in PUNCTUATION_SET for ch in token)


def _has_alpha(word: str) -> bool:
    return any(c.isalpha() for c in word)


def _find_duplicates(items: Sequence[str]) -> tuple[int, int]:
    """(number of repeated items, characters in the repeats), first occurrence not counted."""
    seen: set[str] = set()
    dup_items = dup_chars = 0
    for item in items:
        if item in seen:
            dup_items += 1
            dup_chars += len(item)
        else:
            seen.add(item)
    return dup_items, dup_chars


def _safe_div(num: float, den: float) -> float:
    return float(num) / den if den else 0.0


# --------------------------------------------------------------------------- gopher quality
@dataclass(frozen=True)
class GopherQualityConfig(GateConfig):
    """datatrove's GopherQualityFilter defaults (0 turns a bound off). ``per_language``: a
    document in another language takes its FineWeb-2 values (``language_quality``)."""

    min_doc_words: int = 50
    max_doc_words: int = 100000
    min_avg_word_length: float = 3
    max_avg_word_length: float = 10
    max_symbol_word_ratio: float = 0.1
    max_bullet_lines_ratio: float = 0.9
    max_ellipsis_lines_ratio: float = 0.3
    max_non_alpha_words_ratio: float = 0.8
    min_stop_words: int = 2
    stop_words: tuple[str, ...] = ("the", "be", "to", "of", "and", "that", "have", "with")
    per_language: bool = True
    # with per_language: a language's FineWeb-2 max_non_alpha_words_ratio is used up to this
    # value (0 = uncapped); docs/curation.md "Quality gates per language" has the measurement
    per_language_alpha_cap: float = 0.78


GOPHER_QUALITY_RULES = ("gopher_short_doc", "gopher_long_doc", "gopher_below_avg_threshold",
                        "gopher_above_avg_threshold", "gopher_too_many_hashes", "gopher_too_many_ellipsis",
                        "gopher_too_many_bullets", "gopher_too_many_end_ellipsis",
                        "gopher_below_alpha_threshold", "gopher_enough_stop_words")
GOPHER_QUALITY_SIGNALS = ("gq_n_words", "gq_mean_word_length", "gq_hash_ratio", "gq_ellipsis_ratio",
                          "gq_bullet_lines_ratio", "gq_end_ellipsis_lines_ratio", "gq_alpha_words_ratio",
                          "gq_stop_words")


# Han/kana characters per word of the dictionary tokenizers datatrove uses (jieba for
# cmn_Hani: 1.78, SudachiPy mode A for jpn_Jpan: 1.74; measured on 140 + 113 documents of
# the dev corpus): one character per word would inflate the alphabetic share of the words.
CJK_CHARS_PER_WORD = 1.75


def _alpha_words_ratio(words: list[str], language: str | None, counts: Counter | None = None) -> float:
    """Share of words with an alphabetic character (datatrove). Scripts split one character
    per word (Han, kana): those characters count as ``1 / CJK_CHARS_PER_WORD`` words each,
    so the share is on the scale of a dictionary word split, the one FineWeb-2's thresholds
    were set on; digits, Latin words and symbols count as one word each."""
    if not words:
        return 0.0
    if script_of(language) not in CHARACTER_SCRIPTS:
        counts = Counter(words) if counts is None else counts
        return sum(c for w, c in counts.items() if _has_alpha(w)) / len(words)
    is_char = [len(w) == 1 and w.isalpha() and CJK_CHAR.match(w) is not None for w in words]
    chars = sum(is_char)
    other = [w for w, c in zip(words, is_char) if not c]
    weighted = chars / CJK_CHARS_PER_WORD
    return (sum(1 for w in other if _has_alpha(w)) + weighted) / (len(other) + weighted)


def gopher_quality(text: str, cfg: GopherQualityConfig, tokens: list[str] | None = None,
                   language: str | None = None) -> tuple[dict, list[str]]:
    words = word_tokenize(text, language) if tokens is None else tokens
    n_tokens = len(words)  # symbols included: the denominator of the ratios
    counts = Counter(words)
    non_symbol = {w: c for w, c in counts.items() if not _is_symbol(w)}
    n_words = sum(non_symbol.values())
    mean_len = sum(len(w) * c for w, c in non_symbol.items()) / n_words if n_words else 0.0
    lines = text.splitlines() or [""]  # blank lines count here (datatrove)
    signals = {
        "gq_n_words": n_words,
        "gq_mean_word_length": mean_len,
        "gq_hash_ratio": _safe_div(text.count("#"), n_tokens),
        "gq_ellipsis_ratio": _safe_div(text.count("...") + text.count("\u2026"), n_tokens),
        "gq_bullet_lines_ratio": _safe_div(
            sum(1 for s in lines if s.lstrip().startswith(("\u2022", "-"))), len(lines)),
        "gq_end_ellipsis_lines_ratio": _safe_div(
            sum(1 for s in lines if s.rstrip().endswith(("...", "\u2026"))), len(lines)),
        "gq_alpha_words_ratio": _alpha_words_ratio(words, language, counts),
        # DISTINCT stop words present (datatrove: len(set(stop_words) & set(words)))
        "gq_stop_words": stop_words_present(words, cfg.stop_words, language),
    }
    fails = []
    if cfg.min_doc_words and n_words < cfg.min_doc_words:
        fails.append("gopher_short_doc")
    if cfg.max_doc_words and n_words > cfg.max_doc_words:
        fails.append("gopher_long_doc")
    # datatrove's mean of no words is NaN, which fails no bound
    if n_words and cfg.min_avg_word_length and mean_len < cfg.min_avg_word_length:
        fails.append("gopher_below_avg_threshold")
    if n_words and cfg.max_avg_word_length and mean_len > cfg.max_avg_word_length:
        fails.append("gopher_above_avg_threshold")
    if cfg.max_symbol_word_ratio and signals["gq_hash_ratio"] > cfg.max_symbol_word_ratio:
        fails.append("gopher_too_many_hashes")
    if cfg.max_symbol_word_ratio and signals["gq_ellipsis_ratio"] > cfg.max_symbol_word_ratio:
        fails.append("gopher_too_many_ellipsis")
    if cfg.max_bullet_lines_ratio and signals["gq_bullet_lines_ratio"] > cfg.max_bullet_lines_ratio:
        fails.append("gopher_too_many_bullets")
    if cfg.max_ellipsis_lines_ratio and signals["gq_end_ellipsis_lines_ratio"] > cfg.max_ellipsis_lines_ratio:
        fails.append("gopher_too_many_end_ellipsis")
    if cfg.max_non_alpha_words_ratio and signals["gq_alpha_words_ratio"] < cfg.max_non_alpha_words_ratio:
        fails.append("gopher_below_alpha_threshold")
    if cfg.min_stop_words and signals["gq_stop_words"] < cfg.min_stop_words:
        fails.append("gopher_enough_stop_words")
    return signals, fails


# ----------------------------------------------------------------------- gopher repetition
@dataclass(frozen=True)
class GopherRepetitionConfig(GateConfig):
    """datatrove's GopherRepetitionFilter defaults; n-gram limits are [n, fraction] pairs.
    ``per_language``: a document in another language takes its FineWeb-2 values."""

    dup_line_frac: float = 0.3
    dup_para_frac: float = 0.3
    dup_line_char_frac: float = 0.2
    dup_para_char_frac: float = 0.2
    top_n_grams: tuple[tuple[int, float], ...] = ((2, 0.2), (3, 0.18), (4, 0.16))
    dup_n_grams: tuple[tuple[int, float], ...] = ((5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10))
    per_language: bool = True


def _gopher_repetition_rules(cfg: GopherRepetitionConfig) -> tuple[str, ...]:
    return (("dup_para_frac", "dup_para_char_frac", "dup_line_frac", "dup_line_char_frac")
            + tuple(f"top_{n}_gram" for n, _ in cfg.top_n_grams)
            + tuple(f"duplicated_{n}_n_grams" for n, _ in cfg.dup_n_grams))


def _gopher_repetition_signals(cfg: GopherRepetitionConfig) -> tuple[str, ...]:
    return (("gr_dup_para_frac", "gr_dup_para_char_frac", "gr_dup_line_frac", "gr_dup_line_char_frac")
            + tuple(f"gr_top_{n}_gram_frac" for n, _ in cfg.top_n_grams)
            + tuple(f"gr_dup_{n}_gram_frac" for n, _ in cfg.dup_n_grams))


def _ngram_ids(token_ids: np.ndarray, n: int, vocab_size: int) -> np.ndarray:
    """One int64 per n-gram, equal exactly when the n-grams are equal: the n token ids as
    digits in base ``vocab_size`` when that fits in 63 bits, else the row index of
    ``np.unique`` over the n-gram rows."""
    if vocab_size ** n < 2 ** 63:
        keys = token_ids[: len(token_ids) - n + 1].copy()
        for k in range(1, n):
            keys = keys * vocab_size + token_ids[k: len(token_ids) - n + 1 + k]
        return keys
    windows = np.lib.stride_tricks.sliding_window_view(token_ids, n)
    return np.unique(windows, axis=0, return_inverse=True)[1].reshape(-1)


def _top_ngram_chars(keys: np.ndarray, window_chars: np.ndarray) -> int:
    """Characters of the most frequent n-gram (joined with spaces) times its count; ties ->
    earliest first occurrence (Counter.most_common). Tokens hold no whitespace, so equal
    space-joined strings are equal token tuples."""
    _, first, counts = np.unique(keys, return_index=True, return_counts=True)
    top = counts.max()
    pick = first[counts == top].min()
    return int(window_chars[pick]) * int(top)


_HASH_BASE = np.uint64(0x100000001B3)  # odd, so invertible modulo 2**64
_HASH_BASE_INV = np.uint64(pow(int(_HASH_BASE), -1, 2 ** 64))


class _JoinedText:
    """All words concatenated without a separator, with a position-free polynomial hash
    (mod 2**64) of any substring: equal substrings have equal hashes."""

    def __init__(self, words: list[str], offsets: np.ndarray):
        self.joined = "".join(words)
        self.offsets = offsets
        codes = np.frombuffer(self.joined.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
        with np.errstate(over="ignore"):
            powers = np.cumprod(np.full(len(codes), _HASH_BASE, dtype=np.uint64))
            self.inv_powers = np.concatenate(([np.uint64(1)], np.cumprod(
                np.full(len(codes), _HASH_BASE_INV, dtype=np.uint64))))
            self.prefix = np.concatenate(([np.uint64(0)], np.cumsum(codes * powers, dtype=np.uint64)))

    def ngram_hashes(self, n: int) -> np.ndarray:
        start, end = self.offsets[:-n], self.offsets[n:]
        with np.errstate(over="ignore"):
            return (self.prefix[end] - self.prefix[start]) * self.inv_powers[start]

    def gram(self, i: int, n: int) -> str:
        return self.joined[self.offsets[i]:self.offsets[i + n]]


def _all_duplicate_chars(text: _JoinedText, n: int) -> int:
    """datatrove's find_all_duplicate: walk left to right over n-grams joined WITHOUT a
    separator (so ("ab", "c") equals ("a", "bc")); one already seen on the walk counts its
    characters and the walk skips n words ahead.

    Only n-grams whose hash occurs more than once can ever be repeats, so the walk is replayed
    over those positions alone (the others are visited and never matter); a repeat is
    confirmed by comparing strings, so the result is the walk's, exactly, whatever the
    hashes collide on."""
    last = len(text.offsets) - n  # number of n-grams
    hashes = text.ngram_hashes(n)
    _, inverse, counts = np.unique(hashes, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    shared = np.nonzero(counts[inverse] > 1)[0]
    if not len(shared):
        return 0
    seen: dict[int, set[str]] = {}
    repeated, idx = 0, 0
    for pos, h in zip(shared.tolist(), inverse[shared].tolist()):
        if pos < idx:
            continue  # skipped over by an earlier repeat
        gram = text.gram(pos, n)
        grams = seen.get(h)
        if grams is not None and gram in grams:
            repeated += len(gram)
            idx = pos + n
        else:
            seen.setdefault(h, set()).add(gram)
            idx = pos + 1
    return repeated


def gopher_repetition(text: str, cfg: GopherRepetitionConfig, tokens: list[str] | None = None,
                      language: str | None = None) -> tuple[dict, list[str]]:
    n_chars = len(text) or 1
    paragraphs = _PARAGRAPH_SPLIT.split(text.strip())
    para_dups, para_dup_chars = _find_duplicates(paragraphs)
    lines = _LINES_SPLIT.split(text)
    line_dups, line_dup_chars = _find_duplicates(lines)
    signals = {
        "gr_dup_para_frac": _safe_div(para_dups, len(paragraphs)),
        "gr_dup_para_char_frac": para_dup_chars / n_chars,
        "gr_dup_line_frac": _safe_div(line_dups, len(lines)),
        "gr_dup_line_char_frac": line_dup_chars / n_chars,
    }
    words = word_tokenize(text, language) if tokens is None else tokens
    vocab = {w: i for i, w in enumerate(dict.fromkeys(words))}
    token_ids = np.fromiter(map(vocab.__getitem__, words), dtype=np.int64, count=len(words))
    token_len = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
    len_cumsum = np.concatenate(([0], np.cumsum(token_len)))
    for n, _ in cfg.top_n_grams:
        value = 0.0
        if len(words) >= n:
            window = len_cumsum[n:] - len_cumsum[:-n] + (n - 1)
            value = _top_ngram_chars(_ngram_ids(token_ids, n, max(2, len(vocab))), window) / n_chars
        signals[f"gr_top_{n}_gram_frac"] = value
    joined = _JoinedText(words, len_cumsum) if cfg.dup_n_grams and words else None
    for n, _ in cfg.dup_n_grams:
        value = 0.0
        if len(words) >= n:
            value = _all_duplicate_chars(joined, n) / n_chars
        signals[f"gr_dup_{n}_gram_frac"] = value
    fails = []
    if cfg.dup_para_frac and signals["gr_dup_para_frac"] > cfg.dup_para_frac:
        fails.append("dup_para_frac")
    if cfg.dup_para_char_frac and signals["gr_dup_para_char_frac"] > cfg.dup_para_char_frac:
        fails.append("dup_para_char_frac")
    if cfg.dup_line_frac and signals["gr_dup_line_frac"] > cfg.dup_line_frac:
        fails.append("dup_line_frac")
    if cfg.dup_line_char_frac and signals["gr_dup_line_char_frac"] > cfg.dup_line_char_frac:
        fails.append("dup_line_char_frac")
    for n, limit in cfg.top_n_grams:
        if signals[f"gr_top_{n}_gram_frac"] > limit:
            fails.append(f"top_{n}_gram")
    for n, limit in cfg.dup_n_grams:
        if signals[f"gr_dup_{n}_gram_frac"] > limit:
            fails.append(f"duplicated_{n}_n_grams")
    return signals, fails


# ------------------------------------------------------------------------------------- C4
@dataclass(frozen=True)
class C4Config(GateConfig):
    """datatrove's C4QualityFilter as FineWeb ran it (-1 turns a bound off): its constructor
    defaults except ``filter_no_terminal_punct`` (FineWeb: false; datatrove's default: true)."""

    filter_no_terminal_punct: bool = False
    min_num_sentences: int = 5
    min_words_per_line: int = 3
    max_word_length: int = 1000
    filter_lorem_ipsum: bool = True
    filter_javascript: bool = True
    filter_curly_bracket: bool = True
    filter_policy: bool = True
    remove_citations: bool = True
    rewrite_text: bool = False  # keep only the retained lines in the text (datatrove does)


C4_RULES = ("lorem_ipsum", "curly_bracket", "too_few_sentences")
_C4_LINE_COUNTS = ("long_word", "no_terminal_punct", "too_few_words", "javascript", "policy")
C4_SIGNALS = (("c4_lines", "c4_kept_lines", "c4_sentences", "c4_lorem_ipsum", "c4_curly_bracket")
              + tuple(f"c4_{k}_lines" for k in _C4_LINE_COUNTS))


def c4(text: str, cfg: C4Config, language: str | None = None) -> tuple[dict, list[str], str]:
    """Signals, failed rules and the text of the retained lines (C4 drops lines).

    lorem_ipsum / curly_bracket are listed in the order of their first line (datatrove stops
    there). Other languages: a line's words for ``min_words_per_line``/``max_word_length``
    are the language's words where the script has no spaces (datatrove: ``line.split()``),
    and a line may end with any sentence-final mark of TERMINAL_PUNCTUATION."""
    counts = dict.fromkeys(_C4_LINE_COUNTS, 0)
    hits: list[str] = []
    sentences = 0
    kept: list[str] = []
    lines = text.splitlines()
    spaceless = script_of(language) in CHARACTER_SCRIPTS | SPACELESS_SCRIPTS
    end_punct = _C4_END_PUNCT if is_english(language) else _C4_END_PUNCT_ANY
    for raw in lines:
        line = raw.strip()
        words = split_words(line, language) if spaceless else line.split()
        if cfg.max_word_length != -1 and max(map(len, words), default=0) > cfg.max_word_length:
            counts["long_word"] += 1
            continue
        if cfg.remove_citations:
            line = _CITATION.sub("", line)
        if cfg.filter_no_terminal_punct and (not line.endswith(end_punct) or line.endswith("...")):
            counts["no_terminal_punct"] += 1
            continue
        if len(words) < cfg.min_words_per_line:
            counts["too_few_words"] += 1
            continue
        lower = line.lower()
        if cfg.filter_lorem_ipsum and "lorem ipsum" in lower and "lorem_ipsum" not in hits:
            hits.append("lorem_ipsum")
        if cfg.filter_javascript and "javascript" in lower:
            counts["javascript"] += 1
            continue
        if cfg.filter_curly_bracket and "{" in line and "curly_bracket" not in hits:
            hits.append("curly_bracket")
        if cfg.filter_policy and _POLICY.search(lower):
            counts["policy"] += 1
            continue
        if cfg.min_num_sentences != -1:
            sentences += count_sentences(line, language)
        kept.append(line)
    signals = {
        "c4_lines": len(lines),
        "c4_kept_lines": len(kept),
        "c4_sentences": sentences,
        "c4_lorem_ipsum": int("lorem_ipsum" in hits),
        "c4_curly_bracket": int("curly_bracket" in hits),
        **{f"c4_{k}_lines": v for k, v in counts.items()},
    }
    fails = list(hits)
    if cfg.min_num_sentences != -1 and sentences < cfg.min_num_sentences:
        fails.append("too_few_sentences")
    return signals, fails, "\n".join(kept).strip()


# -------------------------------------------------------------------------------- FineWeb
@dataclass(frozen=True)
class FineWebConfig(GateConfig):
    """datatrove's FineWebQualityFilter defaults (stop chars: its TERMINAL_PUNCTUATION).
    ``per_language``: a document in another language takes its FineWeb-2 values."""

    line_punct_thr: float = 0.12
    line_punct_exclude_zero: bool = False
    short_line_thr: float = 0.67
    short_line_length: int = 30
    char_duplicates_ratio: float = 0.01
    new_line_ratio: float = 0.3
    per_language: bool = True


FINEWEB_RULES = ("line_punct_ratio", "short_line_ratio", "char_dup_ratio", "list_ratio")
FINEWEB_SIGNALS = ("fw_line_punct_ratio", "fw_short_line_ratio", "fw_char_dup_ratio", "fw_list_ratio")


def fineweb(text: str, cfg: FineWebConfig, tokens: list[str] | None = None,
            language: str | None = None) -> tuple[dict, list[str]]:
    lines = [ln for ln in text.split("\n") if ln.strip() != ""]  # blank lines dropped first (datatrove)
    punct_ratio = _safe_div(sum(1 for ln in lines if ln.endswith(TERMINAL_PUNCTUATION)), len(lines))
    short_ratio = _safe_div(sum(1 for ln in lines if len(ln) <= cfg.short_line_length), len(lines))
    dup_chars = _find_duplicates(lines)[1]
    char_dup_ratio = _safe_div(dup_chars, len(text.replace("\n", "")))
    n_words = len(word_tokenize(text, language) if tokens is None else tokens)
    list_ratio = text.count("\n") / max(1, n_words)
    signals = {
        "fw_line_punct_ratio": punct_ratio,
        "fw_short_line_ratio": short_ratio,
        "fw_char_dup_ratio": char_dup_ratio,
        "fw_list_ratio": list_ratio,
    }
    fails = []
    if punct_ratio < cfg.line_punct_thr and not (punct_ratio == 0 and cfg.line_punct_exclude_zero):
        fails.append("line_punct_ratio")
    if short_ratio > cfg.short_line_thr:
        fails.append("short_line_ratio")
    if char_dup_ratio > cfg.char_duplicates_ratio:
        fails.append("char_dup_ratio")
    if list_ratio > cfg.new_line_ratio:
        fails.append("list_ratio")
    return signals, fails


# ------------------------------------------------------------------------------ all gates
GateOutput = tuple  # (signals: dict, failed rules: list[str], rewritten text or None)


@dataclass(frozen=True)
class Gate:
    """One quality gate: the ``[quality.<name>]`` table (``config``), the rules it can fail
    and the signals it records (both may depend on its config), and ``run(text, config,
    words, language)``."""

    name: str
    config: type[GateConfig]
    rules: Callable[[GateConfig], tuple[str, ...]]
    signals: Callable[[GateConfig], tuple[str, ...]]
    run: Callable[[str, GateConfig, list[str], "str | None"], GateOutput]

    def __post_init__(self) -> None:
        self.config.where = f"quality.{self.name}"  # its TOML table, for error messages


def _fixed(names: tuple[str, ...]) -> Callable[[GateConfig], tuple[str, ...]]:
    return lambda cfg: names


def _run_c4(text: str, cfg: C4Config, tokens: list[str], language: str | None = None) -> GateOutput:
    signals, fails, kept_text = c4(text, cfg, language)
    return signals, fails, kept_text if cfg.rewrite_text else None


GATES: tuple[Gate, ...] = (
    Gate("gopher_quality", GopherQualityConfig, _fixed(GOPHER_QUALITY_RULES), _fixed(GOPHER_QUALITY_SIGNALS),
         lambda text, cfg, tokens, language=None: (*gopher_quality(text, cfg, tokens, language), None)),
    Gate("gopher_repetition", GopherRepetitionConfig, _gopher_repetition_rules, _gopher_repetition_signals,
         lambda text, cfg, tokens, language=None: (*gopher_repetition(text, cfg, tokens, language), None)),
    Gate("c4", C4Config, _fixed(C4_RULES), _fixed(C4_SIGNALS), _run_c4),
    Gate("fineweb", FineWebConfig, _fixed(FINEWEB_RULES), _fixed(FINEWEB_SIGNALS),
         lambda text, cfg, tokens, language=None: (*fineweb(text, cfg, tokens, language), None)),
)
GATE_NAMES = tuple(g.name for g in GATES)


# ------------------------------------------------------------------- per-language values
_FINEWEB2: dict | None = None
_FINEWEB2_LOCK = threading.Lock()


def fineweb2_values() -> dict[str, dict]:
    """FineWeb-2's per-language filter values, by label (package data, read once)."""
    global _FINEWEB2
    if _FINEWEB2 is None:
        with _FINEWEB2_LOCK:
            if _FINEWEB2 is None:
                path = resources.files("pulpie_spark.resources").joinpath("quality", "fineweb2_quality.json.gz")
                with path.open("rb") as fh:
                    _FINEWEB2 = json.loads(gzip.decompress(fh.read()).decode("utf-8"))["languages"]
    return _FINEWEB2


_ENGLISH_ALPHA = GopherQualityConfig.max_non_alpha_words_ratio


def _capped(value: float, cap: float) -> float:
    return min(value, cap) if cap else value


def language_overrides(language: str | None, alpha_cap: float = 0.0) -> dict[str, dict]:
    """The per-gate values a document in ``language`` is judged with, over the configured ones.

    * English (None, ``und``, ``eng_Latn``): none (the configured values, FineWeb's).
    * A label with a FineWeb-2 config: fineweb-2-pipeline.py's arguments: Gopher quality takes
      its stop words (at least 2 distinct), average word length bounds and alpha-word ratio
      (at most ``alpha_cap`` when given: gopher_quality.per_language_alpha_cap);
      Gopher repetition its dup_line_frac and n-gram limits, with the paragraph and
      character-fraction rules off (0); FineWeb its line_punct_thr and new_line_ratio, with
      short_line_thr 999 (off) and char_duplicates_ratio 0.1.
    * Any other label: the configured values without English stop words (min_stop_words 0),
      the alpha-word ratio at most ``alpha_cap``; in Han/kana script average word length
      1..6 and alpha-word ratio 0.76 (FineWeb-2's Han and Japanese configs: 1..2-6 and
      0.714-0.826, median 0.762).
    * Scripts without spaces that are not segmented here (Thai, Lao, Khmer, Myanmar,
      Tibetan): average word length off, with or without a config.
    """
    if is_english(language):
        return {}
    values = fineweb2_values().get(language)
    script = script_of(language)
    if values is None:
        out = {"gopher_quality": {"min_stop_words": 0}, "gopher_repetition": {}, "fineweb": {}}
        if alpha_cap:
            out["gopher_quality"]["max_non_alpha_words_ratio"] = _capped(_ENGLISH_ALPHA, alpha_cap)
        if script in CHARACTER_SCRIPTS:
            # FineWeb-2's six Han/Japanese configs: word length 1..2-6, alpha ratio 0.714-0.826 (median 0.762)
            out["gopher_quality"].update(min_avg_word_length=1, max_avg_word_length=6,
                                         max_non_alpha_words_ratio=_capped(0.76, alpha_cap))
    else:
        out = {
            "gopher_quality": {"max_avg_word_length": values["max_avg_word_length"],
                               "min_avg_word_length": values["min_avg_word_length"],
                               "stop_words": list(values["stopwords"]),
                               "max_non_alpha_words_ratio": _capped(values["max_non_alpha_words_ratio"],
                                                                    alpha_cap),
                               "min_stop_words": 2},
            "gopher_repetition": {"dup_para_frac": 0, "dup_line_char_frac": 0, "dup_para_char_frac": 0,
                                  "dup_line_frac": values["dup_line_frac"],
                                  "top_n_grams": values["top_n_grams"], "dup_n_grams": values["dup_n_grams"]},
            "fineweb": {"short_line_thr": 999, "char_duplicates_ratio": 0.1,
                        "line_punct_thr": values["line_punct_thr"], "new_line_ratio": values["new_line_ratio"]},
        }
    if script in SPACELESS_SCRIPTS:
        out["gopher_quality"].update(min_avg_word_length=0, max_avg_word_length=0)
    return out


_LANG_CACHE: dict[tuple[int, str], tuple[QualityConfig, QualityConfig]] = {}


def language_quality(qcfg: QualityConfig, language: str | None) -> QualityConfig:
    """``qcfg`` with ``language``'s values (``language_overrides``) on the gates whose
    ``per_language`` is true; the gate modes and every other value stay as configured."""
    if is_english(language):
        return qcfg
    key = (id(qcfg), language)
    hit = _LANG_CACHE.get(key)
    if hit is not None and hit[0] is qcfg:
        return hit[1]
    alpha_cap = getattr(qcfg["gopher_quality"], "per_language_alpha_cap", 0.0)
    changes = {gate: values for gate, values in language_overrides(language, alpha_cap).items()
               if values and getattr(qcfg[gate], "per_language", False)}
    out = qcfg.with_overrides(**changes) if changes else qcfg
    if len(_LANG_CACHE) > 4096:
        _LANG_CACHE.clear()
    _LANG_CACHE[key] = (qcfg, out)
    return out


@dataclass
class QualityResult:
    signals: dict = field(default_factory=dict)
    fails: list[str] = field(default_factory=list)   # "<gate>:<rule>", every failed rule
    drop_reason: str | None = None                    # first failed rule of a gate in drop mode
    score: float = 1.0                                # share of evaluated rules passed
    text: str = ""                                    # C4-rewritten when c4.rewrite_text


def signal_names(qcfg: QualityConfig | None = None) -> list[str]:
    """Signal columns in a fixed order for this config (Spark needs the schema up front)."""
    qcfg = qcfg or QualityConfig()
    return list(dict.fromkeys(name for gate in GATES for name in gate.signals(qcfg[gate.name])))


def _n_rules(gate: Gate, cfg: GateConfig) -> int:
    return len(gate.rules(cfg))


def evaluate_quality(text: str, qcfg: QualityConfig | None = None, language: str | None = None) -> QualityResult:
    """Run every enabled gate on one (normalized) text.

    ``language`` is the document's FineWeb-2 label (``deu_Latn``, ``cmn_Hani``...);
    None, ``und`` and ``eng_Latn`` mean English (the configured values, datatrove's
    decisions). Other labels: ``language_quality`` and ``words.split_words``.
    Signals of disabled gates are NaN so the column set never depends on the data.
    """
    qcfg = qcfg or QualityConfig()
    lang_cfg = language_quality(qcfg, language)
    text = text or ""
    tokens = split_words(text, language)
    result = QualityResult(text=text)
    n_rules = n_failed = 0
    for gate in GATES:
        cfg = lang_cfg[gate.name]
        signals, fails, rewritten = gate.run(text, cfg, tokens, language)
        if cfg.mode == "off":
            signals = {k: float("nan") for k in signals}
            fails = []
        else:
            if rewritten is not None:
                result.text = rewritten
            n_rules += _n_rules(gate, cfg)
            n_failed += len(fails)
        result.signals.update({k: float(v) for k, v in signals.items()})
        result.fails.extend(f"{gate.name}:{rule}" for rule in fails)
        if fails and cfg.mode == "drop" and result.drop_reason is None:
            result.drop_reason = f"{gate.name}:{fails[0]}"
    result.score = 1.0 - n_failed / n_rules if n_rules else 1.0
    return result
