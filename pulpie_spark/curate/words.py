"""Word and sentence splitting for the quality gates, per language.

English (``eng_Latn``, and ``None``/``und``) splits words exactly as datatrove 0.10.1 does
(``split_into_words(text, "eng")`` = ``spacy.blank("en")``'s rule-based tokenizer, each token
stripped, empty ones dropped), and counts C4 sentences as spaCy's rule-based ``Sentencizer``
does. Both run here without spaCy: ``RuleTokenizer`` is a pure-Python port of spaCy 3.8's
``Tokenizer.__call__`` (whitespace handling, ``_split_affixes``/``_attach_tokens``, the
special-case matcher pass) driven by the rules spaCy itself holds, exported once to
``pulpie_spark/resources/quality/spacy_en_rules.json`` (spaCy 3.8.18, MIT licence, see resources/quality/SOURCES.md) by
``benchmarks/tools/export_spacy_rules.py``. Why a port and not spaCy: docs/curation.md
("English word split"). It is checked against spaCy in tests/test_words.py when spaCy is
installed.

Other languages (FineWeb-2 labels ``<iso639-3>_<Script>``), chosen by script:

* scripts written with spaces: spaCy's multilingual ``xx`` rules (``spacy_xx_rules.json``,
  what datatrove uses for most of its 1,760 spaCy languages); Korean eojeol stay whole
  (stop words are then matched as eojeol suffixes, see ``stop_words_present``);
* Han and Japanese kana (``*_Hani``, ``*_Hans``, ``*_Hant``, ``*_Jpan``): every Han or kana
  character is a word (FineWeb-2's zh/ja stop words are all single characters), other runs
  (Latin, digits, Hangul) as the ``xx`` rules split them;
* Thai, Lao, Khmer, Myanmar, Tibetan (no spaces, no dictionary here): the ``xx`` split, stop
  words matched as substrings, word-length bounds off (``SPACELESS_SCRIPTS``).
"""

from __future__ import annotations

import json
import re
import unicodedata
from functools import lru_cache
from itertools import chain, compress
from importlib import resources

# datatrove 0.10.1 datatrove/utils/text.py (Apache-2.0), copied verbatim: PUNCTUATION and
# TERMINAL_PUNCTUATION (the latter sorted here; it is a set there). Non-symbol words of the
# Gopher quality filter are the ones with a character outside their union (PUNCTUATION_SET);
# FineWeb's line_punct_ratio counts lines ending with a TERMINAL_PUNCTUATION character.
PUNCTUATION = (
    "!/\u2014\u201d:\uff05\uff11\u3008&(\u3001\u2501\x5c\u3010#%\u300c\u300d\uff0c\u3011"
    "\uff1b+^]~\u201c\u300a\u201e';\u2019{|\u2236\xb4[=-`*\uff0e\uff08\u2013\uff1f\uff01"
    "\uff1a$\uff5e\xab\u3009,><\u300b)?\uff09\u3002\u2026@_.\x22}\u25ba\xbb\x00\x01\x02\x03"
    "\x04\x05\x06\x07\x08\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b"
    "\x1c\x1d\x1e\x1f\x7f\x80\x81\x82\x83\x84\x85\x86\x87\x88\x89\x8a\x8b\x8c\x8d\x8e\x8f\x90"
    "\x91\x92\x93\x94\x95\x96\x97\x98\x99\x9a\x9b\x9c\x9d\x9e\x9f"
)
_TERMINAL = (
    "!.?\u0589\u061d\u061e\u061f\u06d4\u0700\u0701\u0702\u07f9\u0837\u0839\u083d\u083e\u0964"
    "\u0965\u104a\u104b\u1362\u1367\u1368\u166e\u1735\u1736\u17d4\u17d5\u17d6\u17d9\u17da"
    "\u1803\u1809\u1944\u1945\u1aa8\u1aa9\u1aaa\u1aab\u1b5a\u1b5b\u1b5e\u1b5f\u1b7d\u1b7e"
    "\u1c3b\u1c3c\u1c7e\u1c7f\u203c\u203d\u2047\u2048\u2049\u2e2e\u2e3c\u2e53\u2e54\u3002"
    "\ua4ff\ua60e\ua60f\ua6f3\ua6f7\ua876\ua877\ua8ce\ua8cf\ua92f\ua9c8\ua9c9\uaa5d\uaa5e"
    "\uaa5f\uaaf0\uaaf1\uabeb\ufe52\ufe56\ufe57\uff01\uff0e\uff1f\uff61\U00010a56\U00010a57"
    "\U00010f55\U00010f56\U00010f57\U00010f58\U00010f59\U00010f86\U00010f87\U00010f88"
    "\U00010f89\U00011047\U00011048\U000110be\U000110bf\U000110c0\U000110c1\U00011141"
    "\U00011142\U00011143\U000111c5\U000111c6\U000111cd\U000111de\U000111df\U00011238"
    "\U00011239\U0001123b\U0001123c\U000112a9\U0001144b\U0001144c\U000115c2\U000115c3"
    "\U000115c9\U000115ca\U000115cb\U000115cc\U000115cd\U000115ce\U000115cf\U000115d0"
    "\U000115d1\U000115d2\U000115d3\U000115d4\U000115d5\U000115d6\U000115d7\U00011641"
    "\U00011642\U0001173c\U0001173d\U0001173e\U00011944\U00011946\U00011a42\U00011a43"
    "\U00011a9b\U00011a9c\U00011c41\U00011c42\U00011ef7\U00011ef8\U00011f43\U00011f44"
    "\U00016a6e\U00016a6f\U00016af5\U00016b37\U00016b38\U00016b44\U00016e98\U0001bc9f"
    "\U0001da88"
)
TERMINAL_PUNCTUATION = tuple(_TERMINAL)
PUNCTUATION_SET = frozenset(PUNCTUATION) | frozenset(_TERMINAL)

_NEVER = re.compile("a^")
_WS_RUN = re.compile(r"\s+")

# how each script is split (the script is the label's suffix: cmn_Hani -> Hani)
CHARACTER_SCRIPTS = frozenset({"Hani", "Hans", "Hant", "Jpan", "Hira", "Kana"})
SPACELESS_SCRIPTS = frozenset({"Thai", "Laoo", "Khmr", "Mymr", "Tibt"})
SUFFIX_SCRIPTS = frozenset({"Hang", "Kore"})
# Han ideographs (+ extensions, compatibility), hiragana, katakana (+ halfwidth), iteration marks;
# in Han/kana text each is one word
CJK_CHAR = re.compile("([\u3005\u3006\u3007\u3021-\u3029\u3038-\u303b\u3041-\u3096\u309d-\u309f"
                       "\u30a1-\u30fa\u30fc-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
                       "\uff66-\uff9f\U00020000-\U0003134f"
                       # CJK and fullwidth punctuation: its own word, as the dictionary splits give it
                       "\u3000-\u3004\u3008-\u3020\u3030\u303d\u30fb\uff01-\uff0f\uff1a-\uff20"
                       "\uff3b-\uff40\uff5b-\uff65])")


class RuleTokenizer:
    """spaCy's rule-based ``Tokenizer`` (spaCy 3.8, tokenizer.pyx), ported to Python and
    driven by rules exported from spaCy (affix and URL regexes, special cases, the
    special-case matcher patterns, the Sentencizer's punctuation)."""

    def __init__(self, rules: dict):
        compile_ = lambda p: _NEVER if p is None else re.compile(p[0], p[1])  # noqa: E731
        self.prefix_search = compile_(rules["prefix"]).search
        self.suffix_search = compile_(rules["suffix"]).search
        self.infix_finditer = compile_(rules["infix"]).finditer
        self.token_match = compile_(rules["token_match"]).match
        self.url_match = compile_(rules["url_match"]).match
        self.specials: dict[str, list[str]] = rules["rules"]
        self.patterns: dict[tuple, str] = {}
        self.max_pattern = 1
        for orth, toks in rules["matcher_patterns"].items():
            if orth.isspace():
                continue
            self.patterns[tuple(toks)] = orth
            self.max_pattern = max(self.max_pattern, len(toks))
        self.first_tokens = frozenset(k[0] for k in self.patterns)
        # patterns whose special case gives back the very same tokens ("it's" -> it 's): a
        # match changes nothing (no special case holds a space, so a match across chunks
        # changes nothing either)
        self.harmless = frozenset(p for p, orth in self.patterns.items() if self.specials.get(orth) == list(p))
        harmful = [p for p in self.patterns if p not in self.harmless]
        self.harmful_singles = frozenset(p[0] for p in harmful if len(p) == 1)
        self.harmful_pairs = frozenset(p[:2] for p in harmful if len(p) > 1)
        self.harmful_firsts = frozenset(p[0] for p in self.harmful_pairs)
        self.punct_chars = frozenset(rules["sentencizer_punct_chars"])
        self._cache: dict[str, tuple[str, ...]] = {}

    # one whitespace-free chunk: Tokenizer._split_affixes + _attach_tokens
    def _chunk(self, string: str) -> list[str]:
        specials = self.specials
        if string in specials:
            return list(specials[string])
        ps, ss, tm = self.prefix_search, self.suffix_search, self.token_match
        prefixes: list[str] = []
        suffixes: list[str] = []
        last_size = 0
        while string and len(string) != last_size:
            if tm(string) or string in specials:
                break
            last_size = len(string)
            m = ps(string)
            pre_len = m.end() - m.start() if m else 0
            if pre_len:
                prefix = string[:pre_len]
                minus_pre = string[pre_len:]
                if minus_pre and minus_pre in specials:
                    string = minus_pre
                    prefixes.append(prefix)
                    break
            m = ss(string[pre_len:])
            suf_len = m.end() - m.start() if m else 0
            if suf_len:
                suffix = string[-suf_len:]
                minus_suf = string[:-suf_len]
                if minus_suf and minus_suf in specials:
                    string = minus_suf
                    suffixes.append(suffix)
                    break
            if pre_len and suf_len and (pre_len + suf_len) <= len(string):
                string = string[pre_len:-suf_len]
                prefixes.append(prefix)
                suffixes.append(suffix)
            elif pre_len:
                string = minus_pre
                prefixes.append(prefix)
            elif suf_len:
                string = minus_suf
                suffixes.append(suffix)
        tokens = prefixes
        if string:
            if string in specials:
                tokens.extend(specials[string])
            elif tm(string) or self.url_match(string):
                tokens.append(string)
            else:
                start = 0
                for m in self.infix_finditer(string):
                    a, b = m.start(), m.end()
                    if a == 0:
                        continue
                    if a != start:
                        tokens.append(string[start:a])
                    if a != b:
                        tokens.append(string[a:b])
                    start = b
                if string[start:]:
                    tokens.append(string[start:])
        tokens.extend(reversed(suffixes))
        return tokens

    def chunk_tokens(self, chunk: str) -> tuple[str, ...]:
        toks = self._cache.get(chunk)
        if toks is None:
            toks = tuple(self._chunk(chunk))
            if len(self._cache) < 200_000:
                self._cache[chunk] = toks
        return toks

    def _matcher_spans(self, toks: list[str]) -> list[tuple[int, int]]:
        """Every (start, end) where a special-case matcher pattern matches ``toks``."""
        spans = []
        firsts, patterns = self.first_tokens, self.patterns
        for i, t in enumerate(toks):
            if t not in firsts:
                continue
            for n in range(1, min(self.max_pattern, len(toks) - i) + 1):
                if tuple(toks[i:i + n]) in patterns:
                    spans.append((i, i + n))
        return spans

    def _apply_matcher(self, toks: list[str], spaces: list[bool]) -> list[str]:
        """spaCy's special-case matcher pass (special cases that contain affixes): longest,
        then earliest match first; a span is taken when neither its first nor last token was
        seen; a taken span whose text is a special case becomes that case's tokens."""
        spans = self._matcher_spans(toks)
        if not spans:
            return toks
        spans.sort(key=lambda s: (s[0] - s[1], s[0]))
        seen: set[int] = set()
        chosen: dict[int, int] = {}
        for s, e in spans:
            if s not in seen and (e - 1) not in seen:
                chosen[s] = e
            seen.update(range(s, e))
        out: list[str] = []
        i = 0
        while i < len(toks):
            e = chosen.get(i)
            if e is None:
                out.append(toks[i])
                i += 1
                continue
            text = "".join(toks[j] + (" " if spaces[j] else "") for j in range(i, e - 1)) + toks[e - 1]
            rule = self.specials.get(text)
            out.extend(rule if rule is not None else toks[i:e])
            i = e
        return out

    def doc_tokens(self, text: str) -> list[str]:
        """Token texts as spaCy's ``Tokenizer.__call__`` makes them, whitespace tokens included
        (a whitespace run that is exactly one " " is no token; a run starting with " " gives
        that space to the previous token)."""
        toks: list[str] = []
        spaces: list[bool] = []
        pos = 0
        for m in _WS_RUN.finditer(text):
            a, b = m.span()
            if a > pos:
                t = self.chunk_tokens(text[pos:a])
                toks.extend(t)
                spaces.extend([False] * len(t))
            if a == 0:
                toks.append(text[a:b])
                spaces.append(False)
            elif text[a] == " ":
                spaces[-1] = True
                if b - a > 1:
                    toks.append(text[a + 1:b])
                    spaces.append(False)
            else:
                toks.append(text[a:b])
                spaces.append(False)
            pos = b
        if pos < len(text):
            t = self.chunk_tokens(text[pos:])
            toks.extend(t)
            spaces.extend([False] * len(t))
        if not self.first_tokens.isdisjoint(toks):
            toks = self._apply_matcher(toks, spaces)
        return toks

    def _chunks_tokens(self, text: str) -> list[str]:
        chunks = text.split()
        parts = list(map(self._cache.get, chunks))
        if None in parts:
            parts = [p if p is not None else self.chunk_tokens(c) for p, c in zip(parts, chunks)]
        return list(chain.from_iterable(parts))

    def _needs_matcher(self, toks: list[str]) -> bool:
        # a matcher pattern never holds a whitespace token, so a match in the full token list
        # is also a match in the list without whitespace tokens: none that changes tokens
        # here -> the matcher pass is a no-op there (a blocked span changes nothing either)
        # every match that changes tokens starts with a harmful single token or pair
        if self.harmful_singles.isdisjoint(toks) and (self.harmful_firsts.isdisjoint(toks) or
                                                      self.harmful_pairs.isdisjoint(zip(toks, toks[1:]))):
            return False
        harmless = self.harmless
        return any(tuple(toks[a:b]) not in harmless for a, b in self._matcher_spans(toks))

    def word_tokenize(self, text: str) -> list[str]:
        """datatrove's ``SpaCyTokenizer.word_tokenize``: token texts, stripped, empty ones dropped.
        Without a special-case matcher match this is the chunk tokens of ``text.split()``."""
        out = self._chunks_tokens(text)
        if not self._needs_matcher(out):
            return out
        return [s for s in (t.strip() for t in self.doc_tokens(text)) if s]

    def sentence_tokens(self, line: str) -> list[str]:
        """``doc_tokens(line)``; a line whose only whitespace is single spaces has no
        whitespace tokens, so its chunk tokens are the same when no matcher pattern matches."""
        out = self._chunks_tokens(line)
        if (len(out) and " ".join(line.split()) == line) and not self._needs_matcher(out):
            return out
        return self.doc_tokens(line)

    def count_sentences(self, tokens: list[str]) -> int:
        """Sentences of spaCy's ``Sentencizer`` over ``tokens`` (whitespace tokens included):
        a sentence starts at the first token after a sentence-final mark that is neither such
        a mark nor punctuation (every character of Unicode category P*). Only the tokens
        after a sentence-final mark are looked at."""
        if not tokens:
            return 0
        ends = list(map(self.punct_chars.__contains__, tokens))
        n, resume, size = 1, 0, len(tokens)
        for pos in compress(range(size), ends):
            if pos < resume:
                continue
            j = pos + 1
            while j < size and (ends[j] or _is_punct(tokens[j])):
                j += 1
            if j >= size:
                break
            n += 1
            resume = j
        return n

@lru_cache(maxsize=65536)
def _is_punct(token: str) -> bool:
    return all(unicodedata.category(c).startswith("P") for c in token)


@lru_cache(maxsize=None)
def rule_tokenizer(code: str = "en") -> RuleTokenizer:
    """The port with spaCy's ``en`` or ``xx`` rules (package data, loaded once per process)."""
    with resources.files("pulpie_spark.resources").joinpath("quality", f"spacy_{code}_rules.json").open(
            encoding="utf-8") as fh:
        return RuleTokenizer(json.load(fh))


def script_of(language: str | None) -> str:
    """The ISO 15924 script of a FineWeb-2 label (``cmn_Hani`` -> ``Hani``); ``Latn`` for
    None/``und``/labels without one."""
    if not language or "_" not in language:
        return "Latn"
    return language.rsplit("_", 1)[1]


def is_english(language: str | None) -> bool:
    return language in (None, "", "und", "eng_Latn", "eng", "en")


def split_words(text: str, language: str | None = None) -> list[str]:
    """The words of ``text`` as the quality gates count them for ``language``."""
    if is_english(language):
        return rule_tokenizer("en").word_tokenize(text)
    words = rule_tokenizer("xx").word_tokenize(text)
    if script_of(language) in CHARACTER_SCRIPTS:
        out: list[str] = []
        for w in words:
            if CJK_CHAR.search(w):
                out.extend(p for p in CJK_CHAR.split(w) if p)
            else:
                out.append(w)
        return out
    return words


def count_sentences(line: str, language: str | None = None) -> int:
    """datatrove's ``len(split_into_sentences(line, language))`` for one C4 line: at least 1.
    English: spaCy's Sentencizer over the exact English tokens; other languages: the same
    Sentencizer (its sentence-final marks cover 。！？ । ؟ and more) over the language's split."""
    if is_english(language):
        tok = rule_tokenizer("en")
        return max(1, tok.count_sentences(tok.sentence_tokens(line)))
    tok = rule_tokenizer("xx")
    if script_of(language) in CHARACTER_SCRIPTS:
        return max(1, tok.count_sentences(split_words(line, language)))
    return max(1, tok.count_sentences(tok.sentence_tokens(line)))


def stop_words_present(words: list[str], stop_words, language: str | None = None) -> int:
    """Number of DISTINCT stop words among ``words`` (datatrove: ``len(set(stop) & set(words))``).
    Korean (Hangul): a stop word (a particle or ending such as 는, 에서, 다) also counts when
    an eojeol ends with it, since whitespace keeps them attached; Thai, Lao, Khmer, Myanmar,
    Tibetan: when it occurs inside a word (no dictionary segmentation here)."""
    stop = set(stop_words)
    present = stop.intersection(words)
    script = script_of(language)
    if len(present) == len(stop) or is_english(language):
        return len(present)
    if script in SUFFIX_SCRIPTS:
        rest = stop - present
        for w in set(words):
            for s in rest:
                if w.endswith(s):
                    present.add(s)
            rest = stop - present
            if not rest:
                break
    elif script in SPACELESS_SCRIPTS:
        joined = "\n".join(set(words))
        present.update(s for s in stop if s in joined)
    return len(present)
