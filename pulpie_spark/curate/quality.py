"""Quality gates: Gopher quality, Gopher repetition, C4 and FineWeb.

Definitions follow datatrove's filters (gopher_quality_filter, gopher_repetition_filter,
c4_filters, fineweb_quality_filter) rule by rule, with two documented differences:

* words come from a regex tokenizer (``\\w+`` runs, apostrophe contractions kept
  whole, punctuation runs as separate symbol tokens) instead of NLTK's
  ``word_tokenize``; counts differ slightly on contractions and quotes;
* C4 counts sentences per kept line with a terminal-punctuation regex instead
  of NLTK's punkt ``sent_tokenize`` (punkt also ends sentences at ``.`` + space).

Unlike datatrove, which stops at the first failing rule, every rule is evaluated:
all signals are stored per document and every failed rule is listed
(``"<gate>:<rule>"``), so a gate can be switched to ``tag`` and studied later.

Each gate is declared once, in ``GATES``: its name, its config dataclass (the
``[quality.<name>]`` table), its rules and signals, and the function that scores a text.
The config, the job's gate list and the rule counts of ``quality_score`` all read it.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from pulpie_spark.curate.config import GateConfig, QualityConfig

_TOKEN = re.compile(r"\w+(?:['\u2019]\w+)*|[^\w\s]+")
_PUNCT = frozenset(string.punctuation) | frozenset("\u2018\u2019\u201c\u201d\u2026\u2013\u2014\u00ab\u00bb\u00bf\u00a1")
_PARAGRAPH_SPLIT = re.compile(r"\n{2,}")
_LINES_SPLIT = re.compile(r"\n+")
_CITATION = re.compile(r"\[\d*]|\[edit]|\[citation needed]")
_SENTENCE_END = re.compile(r"[.!?]+[\"'\u201d\u2019)\]]*(?=\s|$)")
_C4_END_PUNCT = (".", "?", "!", '"', "'")
_FINEWEB_STOP_CHARS = (".", "'", '"', "!", "?")
_POLICY_SUBSTRINGS = ("terms of use", "privacy policy", "cookie policy", "uses cookies",
                      "use of cookies", "use cookies")
_MIX = np.uint64(0x9E3779B97F4A7C15)


def word_tokenize(text: str) -> list[str]:
    """Words and symbol runs, in order (the stand-in for NLTK's word_tokenize)."""
    return _TOKEN.findall(text)


def _is_symbol(token: str) -> bool:
    return all(ch in _PUNCT for ch in token)


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
    """datatrove's gopher_quality_filter defaults (0 turns a bound off)."""

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


GOPHER_QUALITY_RULES = ("gopher_short_doc", "gopher_long_doc", "gopher_below_avg_threshold",
                        "gopher_above_avg_threshold", "gopher_too_many_hashes", "gopher_too_many_ellipsis",
                        "gopher_too_many_bullets", "gopher_too_many_end_ellipsis",
                        "gopher_below_alpha_threshold", "gopher_enough_stop_words")
GOPHER_QUALITY_SIGNALS = ("gq_n_words", "gq_mean_word_length", "gq_hash_ratio", "gq_ellipsis_ratio",
                          "gq_bullet_lines_ratio", "gq_end_ellipsis_lines_ratio", "gq_alpha_words_ratio",
                          "gq_stop_words")


def gopher_quality(text: str, cfg: GopherQualityConfig, tokens: list[str] | None = None) -> tuple[dict, list[str]]:
    words = word_tokenize(text) if tokens is None else tokens
    n_tokens = len(words)
    non_symbol = [w for w in words if not _is_symbol(w)]
    n_words = len(non_symbol)
    mean_len = float(np.mean([len(w) for w in non_symbol])) if non_symbol else 0.0
    lines = text.splitlines() or [""]
    stop_words = set(cfg.stop_words)
    signals = {
        "gq_n_words": n_words,
        "gq_mean_word_length": mean_len,
        "gq_hash_ratio": _safe_div(text.count("#"), n_tokens),
        "gq_ellipsis_ratio": _safe_div(text.count("...") + text.count("\u2026"), n_tokens),
        "gq_bullet_lines_ratio": _safe_div(
            sum(1 for s in lines if s.lstrip().startswith(("\u2022", "-"))), len(lines)),
        "gq_end_ellipsis_lines_ratio": _safe_div(
            sum(1 for s in lines if s.rstrip().endswith(("...", "\u2026"))), len(lines)),
        "gq_alpha_words_ratio": _safe_div(sum(1 for w in words if any(c.isalpha() for c in w)), n_tokens),
        "gq_stop_words": sum(1 for w in words if w in stop_words),
    }
    fails = []
    if cfg.min_doc_words and n_words < cfg.min_doc_words:
        fails.append("gopher_short_doc")
    if cfg.max_doc_words and n_words > cfg.max_doc_words:
        fails.append("gopher_long_doc")
    if cfg.min_avg_word_length and mean_len < cfg.min_avg_word_length:
        fails.append("gopher_below_avg_threshold")
    if cfg.max_avg_word_length and mean_len > cfg.max_avg_word_length:
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
    """datatrove's gopher_repetition_filter defaults; n-gram limits are [n, fraction] pairs."""

    dup_line_frac: float = 0.3
    dup_para_frac: float = 0.3
    dup_line_char_frac: float = 0.2
    dup_para_char_frac: float = 0.2
    top_n_grams: tuple[tuple[int, float], ...] = ((2, 0.2), (3, 0.18), (4, 0.16))
    dup_n_grams: tuple[tuple[int, float], ...] = ((5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10))


def _gopher_repetition_rules(cfg: GopherRepetitionConfig) -> tuple[str, ...]:
    return (("dup_para_frac", "dup_para_char_frac", "dup_line_frac", "dup_line_char_frac")
            + tuple(f"top_{n}_gram" for n, _ in cfg.top_n_grams)
            + tuple(f"duplicated_{n}_n_grams" for n, _ in cfg.dup_n_grams))


def _gopher_repetition_signals(cfg: GopherRepetitionConfig) -> tuple[str, ...]:
    return (("gr_dup_para_frac", "gr_dup_para_char_frac", "gr_dup_line_frac", "gr_dup_line_char_frac")
            + tuple(f"gr_top_{n}_gram_frac" for n, _ in cfg.top_n_grams)
            + tuple(f"gr_dup_{n}_gram_frac" for n, _ in cfg.dup_n_grams))


def _ngram_keys(token_ids: np.ndarray, n: int) -> np.ndarray:
    """One uint64 key per n-gram of token ids (polynomial rolling hash, wraps mod 2^64)."""
    keys = token_ids[: len(token_ids) - n + 1].copy()
    for k in range(1, n):
        keys = keys * _MIX + token_ids[k: len(token_ids) - n + 1 + k]
    return keys


def _top_ngram_chars(keys: np.ndarray, window_chars: np.ndarray) -> int:
    """Characters of the most frequent n-gram times its count; ties -> earliest first
    occurrence (what Counter.most_common returns)."""
    uniq, first, counts = np.unique(keys, return_index=True, return_counts=True)
    top = counts.max()
    pick = first[counts == top].min()
    return int(window_chars[pick]) * int(top)


def _all_duplicate_chars(keys: np.ndarray, window_chars: np.ndarray, n: int) -> int:
    """datatrove's find_all_duplicate: walk left to right; a repeated n-gram counts its
    characters (tokens concatenated without spaces) and skips n tokens ahead."""
    seen: set[int] = set()
    repeated, idx, last = 0, 0, len(keys)
    key_list = keys.tolist()
    while idx < last:
        key = key_list[idx]
        if key in seen:
            repeated += int(window_chars[idx])
            idx += n
        else:
            seen.add(key)
            idx += 1
    return repeated


def gopher_repetition(text: str, cfg: GopherRepetitionConfig, tokens: list[str] | None = None) -> tuple[dict, list[str]]:
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
    words = word_tokenize(text) if tokens is None else tokens
    vocab: dict[str, int] = {}
    token_ids = np.fromiter((vocab.setdefault(w, len(vocab) + 1) for w in words), dtype=np.uint64,
                            count=len(words))
    token_len = np.fromiter((len(w) for w in words), dtype=np.int64, count=len(words))
    len_cumsum = np.concatenate(([0], np.cumsum(token_len)))
    for n, _ in cfg.top_n_grams:
        value = 0.0
        if len(words) >= n:
            # top n-grams are joined with spaces: chars = token chars + (n - 1)
            window = len_cumsum[n:] - len_cumsum[:-n] + (n - 1)
            value = _top_ngram_chars(_ngram_keys(token_ids, n), window) / n_chars
        signals[f"gr_top_{n}_gram_frac"] = value
    for n, _ in cfg.dup_n_grams:
        value = 0.0
        if len(words) >= n:
            window = len_cumsum[n:] - len_cumsum[:-n]
            value = _all_duplicate_chars(_ngram_keys(token_ids, n), window, n) / n_chars
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
    """datatrove's c4_filters defaults (-1 turns a bound off)."""

    filter_no_terminal_punct: bool = True
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


def c4(text: str, cfg: C4Config) -> tuple[dict, list[str], str]:
    """Signals, failed rules and the text of the retained lines (C4 drops lines)."""
    counts = dict.fromkeys(_C4_LINE_COUNTS, 0)
    lorem = curly = False
    sentences = 0
    kept: list[str] = []
    lines = text.splitlines()
    for raw in lines:
        line = raw.strip()
        words = line.split()
        if cfg.max_word_length != -1 and any(len(w) > cfg.max_word_length for w in words):
            counts["long_word"] += 1
            continue
        if cfg.remove_citations:
            line = _CITATION.sub("", line)
        if cfg.filter_no_terminal_punct and (not line.endswith(_C4_END_PUNCT) or line.endswith("...")):
            counts["no_terminal_punct"] += 1
            continue
        if len(words) < cfg.min_words_per_line:
            counts["too_few_words"] += 1
            continue
        lower = line.lower()
        if cfg.filter_lorem_ipsum and "lorem ipsum" in lower:
            lorem = True
        if cfg.filter_javascript and "javascript" in lower:
            counts["javascript"] += 1
            continue
        if cfg.filter_curly_bracket and "{" in line:
            curly = True
        if cfg.filter_policy and any(p in lower for p in _POLICY_SUBSTRINGS):
            counts["policy"] += 1
            continue
        sentences += max(1, len(_SENTENCE_END.findall(line)))
        kept.append(line)
    signals = {
        "c4_lines": len(lines),
        "c4_kept_lines": len(kept),
        "c4_sentences": sentences,
        "c4_lorem_ipsum": int(lorem),
        "c4_curly_bracket": int(curly),
        **{f"c4_{k}_lines": v for k, v in counts.items()},
    }
    fails = []
    if lorem:
        fails.append("lorem_ipsum")
    if curly:
        fails.append("curly_bracket")
    if cfg.min_num_sentences != -1 and sentences < cfg.min_num_sentences:
        fails.append("too_few_sentences")
    return signals, fails, "\n".join(kept).strip()


# -------------------------------------------------------------------------------- FineWeb
@dataclass(frozen=True)
class FineWebConfig(GateConfig):
    """datatrove's fineweb_quality_filter defaults."""

    line_punct_thr: float = 0.12
    line_punct_exclude_zero: bool = False
    short_line_thr: float = 0.67
    short_line_length: int = 30
    char_duplicates_ratio: float = 0.01
    new_line_ratio: float = 0.3


FINEWEB_RULES = ("line_punct_ratio", "short_line_ratio", "char_dup_ratio", "list_ratio")
FINEWEB_SIGNALS = ("fw_line_punct_ratio", "fw_short_line_ratio", "fw_char_dup_ratio", "fw_list_ratio")


def fineweb(text: str, cfg: FineWebConfig, tokens: list[str] | None = None) -> tuple[dict, list[str]]:
    lines = text.split("\n")
    punct_ratio = sum(1 for ln in lines if ln.endswith(_FINEWEB_STOP_CHARS)) / len(lines)
    short_ratio = sum(1 for ln in lines if len(ln) <= cfg.short_line_length) / len(lines)
    non_empty = [ln for ln in lines if ln.strip() != ""]
    dup_chars = _find_duplicates(non_empty)[1]
    char_dup_ratio = _safe_div(dup_chars, len(text.replace("\n", "")))
    n_words = len(word_tokenize(text) if tokens is None else tokens)
    list_ratio = text.count("\n") / max(1, n_words)
    signals = {
        "fw_line_punct_ratio": punct_ratio,
        "fw_short_line_ratio": short_ratio,
        "fw_char_dup_ratio": char_dup_ratio,
        "fw_list_ratio": list_ratio,
    }
    fails = []
    if punct_ratio <= cfg.line_punct_thr and not (punct_ratio == 0 and cfg.line_punct_exclude_zero):
        fails.append("line_punct_ratio")
    if short_ratio >= cfg.short_line_thr:
        fails.append("short_line_ratio")
    if char_dup_ratio >= cfg.char_duplicates_ratio:
        fails.append("char_dup_ratio")
    if list_ratio > cfg.new_line_ratio:
        fails.append("list_ratio")
    return signals, fails


# ------------------------------------------------------------------------------ all gates
GateOutput = tuple  # (signals: dict, failed rules: list[str], rewritten text or None)


@dataclass(frozen=True)
class Gate:
    """One quality gate: the ``[quality.<name>]`` table (``config``), the rules it can fail
    and the signals it records (both may depend on its config), and ``run``."""

    name: str
    config: type[GateConfig]
    rules: Callable[[GateConfig], tuple[str, ...]]
    signals: Callable[[GateConfig], tuple[str, ...]]
    run: Callable[[str, GateConfig, list[str]], GateOutput]

    def __post_init__(self) -> None:
        self.config.where = f"quality.{self.name}"  # its TOML table, for error messages


def _fixed(names: tuple[str, ...]) -> Callable[[GateConfig], tuple[str, ...]]:
    return lambda cfg: names


def _run_c4(text: str, cfg: C4Config, tokens: list[str]) -> GateOutput:
    signals, fails, kept_text = c4(text, cfg)
    return signals, fails, kept_text if cfg.rewrite_text else None


GATES: tuple[Gate, ...] = (
    Gate("gopher_quality", GopherQualityConfig, _fixed(GOPHER_QUALITY_RULES), _fixed(GOPHER_QUALITY_SIGNALS),
         lambda text, cfg, tokens: (*gopher_quality(text, cfg, tokens), None)),
    Gate("gopher_repetition", GopherRepetitionConfig, _gopher_repetition_rules, _gopher_repetition_signals,
         lambda text, cfg, tokens: (*gopher_repetition(text, cfg, tokens), None)),
    Gate("c4", C4Config, _fixed(C4_RULES), _fixed(C4_SIGNALS), _run_c4),
    Gate("fineweb", FineWebConfig, _fixed(FINEWEB_RULES), _fixed(FINEWEB_SIGNALS),
         lambda text, cfg, tokens: (*fineweb(text, cfg, tokens), None)),
)
GATE_NAMES = tuple(g.name for g in GATES)


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
    None, ``und`` and ``eng_Latn`` mean English (the configured thresholds as they are).

    Signals of disabled gates are NaN so the column set never depends on the data.
    """
    qcfg = qcfg or QualityConfig()
    text = text or ""
    tokens = word_tokenize(text)
    result = QualityResult(text=text)
    n_rules = n_failed = 0
    for gate in GATES:
        cfg = qcfg[gate.name]
        signals, fails, rewritten = gate.run(text, cfg, tokens)
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
