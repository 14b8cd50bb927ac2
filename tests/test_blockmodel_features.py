"""Block features: the batched per-page implementation equals the per-block definition bit for bit.

The first default models were trained on features computed block by block;
``_reference_page_features`` below is that code (version 1), plus the language-independent
definitions of version 2 (CJK characters as words, Unicode punctuation and sentence ends,
the capital share among cased words), and of version 3 (version 2 and the landmark numbers
of landmarks.py, computed here block by block from the regexes on each path element),
kept here (and only here) as the definition of each version. Any difference in a token id
or in one bit of a numeric feature would silently change what a model sees, so equality
is exact, for every version.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xxhash
from selectolax.lexbor import LexborHTMLParser

from pulpie_spark.classify.blockmodel import features
from pulpie_spark.classify.blockmodel.features import MAX_TOKENS, block_texts, n_numeric, page_features
from pulpie_spark.segment.simplify import simplify

DATA = Path(__file__).resolve().parent / "data"

# ----------------------------------------------------------------------------- reference
# The per-block implementation the default model was trained with (verbatim semantics).

_ROOT_TAG_RE = re.compile(r"^\s*<([a-zA-Z][\w:-]*)([^>]*)>")
_CLASS_RE = re.compile(r"""\bclass\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""", re.I)
_ID_RE = re.compile(r"""\bid\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""", re.I)
_ELEMENT_TAG_RE = re.compile(r"[.#]")
_ELEMENT_ATTR_RE = re.compile(r"([.#])([^.#]+)")
_SPLIT_RE = re.compile(r"[^0-9a-zA-Z]+|(?<=[a-z])(?=[A-Z])")
_WORD_RE = re.compile(r"\w+", re.UNICODE)
_PUNCT_RE = re.compile(r"[.,;:!?]")
_CAP_WORD_RE = re.compile(r"(?:^|\s)[A-Z\u00c0-\u00de]")
_SENTENCE_END_RE = re.compile(r"[.!?](?:\s|$)")
_TERMINAL = (".", "!", "?", "\u3002", '"', "\u201d", ")")
_HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}
# Version 2 (written out here, not imported: this file is the definition).
_CJK = ("\u3005\u3007\u3041-\u3096\u309d-\u309f\u30a1-\u30fa\u30fc-\u30ff\u3400-\u4dbf"
        "\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9d\U00020000-\U0003134f")
_WORD_RE_V2 = re.compile(f"(?=\\w)[{_CJK}]|[^\\W{_CJK}]+")
_PUNCT_V2 = set(".,;:!?\u3001\u3002\uff0c\uff0e\uff1a\uff1b\uff01\uff1f\uff61\uff64\u060c\u061b\u061f"
                "\u06d4\u0964\u0965\u037e\u0589\u1362\u1363\u1364\u104a\u104b\u00a1\u00bf\u2026")
_SENTENCE_END_V2 = re.compile("[" + re.escape(".!?\u061f\u06d4\u0964\u0965\u037e\u0589\u1362\u104b\u2026")
                              + "](?=\\s|$)")
_SENTENCE_ANY_V2 = set("\u3002\uff01\uff1f\uff61")
_TERMINAL_V2 = _TERMINAL + ("\uff01", "\uff1f", "\uff61", "\u300d", "\u300f", "\u00bb", "\u2019",
                            "\u0964", "\u0965", "\u061f", "\u06d4", "\u2026")
_WORD_START = re.compile(r"(?s)(?:^|(?<=\s))(.)")   # first character of each whitespace-separated word


def _ref_cap_share_v2(text):
    """Capitalised words (first letter Lu/Lt) / words whose first letter has a case (Lu/Lt/Ll)."""
    firsts = [unicodedata.category(c) for c in _WORD_START.findall(text)]
    cased = sum(c in ("Lu", "Lt", "Ll") for c in firsts)
    return sum(c in ("Lu", "Lt") for c in firsts) / cased if cased else 0.0


def _ref_attr_words(attrs, regex):
    m = regex.search(attrs)
    if not m:
        return []
    value = m.group(1) or m.group(2) or m.group(3) or ""
    return [w.lower() for w in _SPLIT_RE.split(value) if w and not w.isdigit()]


def _ref_path_element(element):
    tag = _ELEMENT_TAG_RE.split(element, maxsplit=1)[0].lower()
    classes, ids = [], []
    for kind, value in _ELEMENT_ATTR_RE.findall(element):
        words = [w.lower() for w in _SPLIT_RE.split(value) if w and not w.isdigit()]
        (classes if kind == "." else ids).extend(words)
    return tag, tuple(classes), tuple(ids)


def _ref_path_parts(path):
    if not path:
        return []
    return [_ref_path_element(element) for element in (e.strip() for e in path.split(" > ")) if element]


@lru_cache(maxsize=1 << 16)
def _ref_bucket(token, n_buckets):
    return 1 + xxhash.xxh32_intdigest(token.encode("utf-8"), seed=17) % (n_buckets - 1)


def _ref_node_stats(body):
    text, link_chars, inner_tags, n_li, has_img = "", 0, set(), 0, False
    if body is None:
        return text, link_chars, inner_tags, n_li, has_img
    text = " ".join(body.text(deep=True, separator=" ").split())
    for node in body.traverse(include_text=False):
        tag = node.tag
        if tag in ("body", "x-b", "-text"):
            continue
        inner_tags.add(tag)
        if tag == "a":
            link_chars += len(" ".join(node.text(deep=True, separator=" ").split()))
        elif tag == "li":
            n_li += 1
        elif tag == "img":
            has_img = True
    return text, link_chars, inner_tags, n_li, has_img


def _ref_parsed_blocks(blocks):
    doc = "<html><body>" + "".join(f"<x-b>{b or ''}</x-b>" for b in blocks) + "</body></html>"
    body = LexborHTMLParser(doc).body
    nodes = [c for c in body.iter(include_text=False)] if body is not None else []
    if len(nodes) == len(blocks) and all(nd.tag == "x-b" for nd in nodes):
        return nodes
    return [LexborHTMLParser(b or "").body for b in blocks]


def _ref_summarize_block(block_html, node, path, version=1):
    m = _ROOT_TAG_RE.match(block_html or "")
    root_tag = m.group(1).lower() if m else "_text"
    attrs = m.group(2) if m else ""
    classes = _ref_attr_words(attrs, _CLASS_RE)
    ids = _ref_attr_words(attrs, _ID_RE)
    text, link_chars, inner_tags, n_li, has_img = _ref_node_stats(node)
    tokens = [f"t:{root_tag}"]
    tokens += [f"c:{w}" for w in classes[:6]]
    tokens += [f"i:{w}" for w in ids[:3]]
    parts = _ref_path_parts(path)
    if parts and parts[-1][0] == root_tag:
        parts = parts[:-1]
    for depth, (tag, _, _) in enumerate(reversed(parts[-4:]), start=1):
        tokens.append(f"p{depth}:{tag}")
    seen = set()
    for tag, pclasses, pids in reversed(parts):
        for w in pclasses:
            if ("pc", w) not in seen and len(seen) < 12:
                seen.add(("pc", w))
                tokens.append(f"pc:{w}")
        for w in pids:
            if ("pi", w) not in seen and len(seen) < 12:
                seen.add(("pi", w))
                tokens.append(f"pi:{w}")
    tokens += [f"h:{t}" for t in sorted(inner_tags - {root_tag})[:8]]
    words = (_WORD_RE_V2 if version >= 2 else _WORD_RE).findall(text.lower())
    tokens += [f"w{k}:{w}" if k < 2 else f"w:{w}" for k, w in enumerate(words[:8])]
    tokens += [f"wl:{w}" for w in words[-3:]]
    stats = {"text": text, "words": words, "link_chars": link_chars, "n_li": n_li,
             "has_img": has_img, "depth": len(parts), "root_tag": root_tag,
             "in_table": any(p[0] in ("table", "td", "th", "tr") for p in parts) or root_tag in ("table", "td", "th"),
             "in_list": any(p[0] in ("ul", "ol", "li", "dl") for p in parts) or root_tag in ("ul", "ol", "li", "dl")}
    return tokens, stats


# Version 3's landmarks, block by block: the rules of landmarks.py on every element of
# every block's path, each name tested with re.I.
_REF_BODY_RULES = (
    ("names", re.compile(
        r"(?:entry|article|art|post|page|text|story|news|main)[-_]?(?:content|body|text)|article__(?:content|body)"
        r"|articlebody|post[-_]?entry|body[-_]text|artibody|zhengwen|neirong|wenzhang|rich[-_]?text|^post$|^entry$",
        re.I)),
    ("tag", None),
    ("names", re.compile(
        r"^article$|^story$|fulltext|story[-_]?body|single[-_]?(?:post|content)|(?:theme|blog|section)[-_]content"
        r"|field[-_]body|^text$|^content$|content[-_]?(?:main|body)|main[-_]?content|page[-_]content", re.I)),
    ("main", re.compile(r"^main", re.I)),
)
_REF_BOILER = re.compile(
    r"^shar|share|social|sociable|viral|newsletter|syndication|cookie|consent|sidebar|side[-_]?bar|banner"
    r"|bread[-_]?crumb|footer|^nav|[-_]nav|navbar|navigation|menu|related|elated|recommend|popular|trending"
    r"|more[-_]on|next[-_]|[-_]stories|teaser|(?:^|[-_ ])ads?(?:$|[-_ ])|advert|sponsor|outbrain|taboola|criteo"
    r"|paid[-_]?content|promo|widget|byline|author|tags?(?:$|[-_])|tag[-_]list|meta(?:$|[-_])|rating|timestamp"
    r"|subscribe|signup|login|modal|overlay|popup|print|toolbar|pagination|pager|breadcrumbs?", re.I)
_REF_COMMENT = re.compile(r"comment(?!ary)|disqus|reply|respond|discussion|kommentar", re.I)


def _ref_element(element):
    tag = _ELEMENT_TAG_RE.split(element, maxsplit=1)[0].lower()
    return tag, [v for _, v in _ELEMENT_ATTR_RE.findall(element)]


def _ref_body_level(element):
    tag, names = _ref_element(element)
    for level, (kind, rule) in enumerate(_REF_BODY_RULES):
        if kind == "tag":
            hit = tag == "article"
        elif kind == "names":
            hit = tag in ("article", "div", "main", "section") and any(rule.search(x) for x in names)
        else:
            hit = tag == "main" or (tag in ("article", "div", "section") and any(rule.search(x) for x in names))
        if hit:
            return level
    return None


def _reference_landmarks(paths, n):
    out = np.zeros((n, 5), np.float64)
    if not paths:
        return out
    split = [[e.strip() for e in (p or "").split(" > ") if e.strip()] for p in paths[:n]]
    best = None
    for elements in split:
        for j, element in enumerate(elements):
            level = _ref_body_level(element)
            if level is not None and (best is None or level < best[0]):
                best = (level, " > ".join(elements[:j + 1]))
    strength = 1.0 - best[0] / 4 if best else 0.0
    for i, elements in enumerate(split):
        joined = " > ".join(elements)
        inside = best is not None and (joined == best[1] or joined.startswith(best[1] + " > "))
        out[i, 1] = strength
        out[i, 0] = strength if inside else 0.0
        for j, element in enumerate(elements):
            tag, names = _ref_element(element)
            if tag in ("html", "body"):
                continue
            if tag in ("nav", "footer", "aside") or any(_REF_BOILER.search(x) for x in names):
                out[i, 2] = 1.0
                if inside and j + 1 > len(best[1].split(" > ")):
                    out[i, 4] = 1.0
            if any(_REF_COMMENT.search(x) for x in names):
                out[i, 3] = 1.0
    return out


def _reference_page_features(blocks, paths=None, *, n_buckets=1 << 15, version=1):
    n = len(blocks)
    ids = np.zeros((n, MAX_TOKENS), dtype=np.int32)
    numeric = np.zeros((n, n_numeric(version)), dtype=np.float32)
    if n == 0:
        return ids, numeric
    nodes = _ref_parsed_blocks(blocks)
    summaries = []
    for i, block in enumerate(blocks):
        path = paths[i] if paths is not None and i < len(paths) else None
        summaries.append(_ref_summarize_block(block, nodes[i], path, version))
    text_counts = Counter(s["text"] for _, s in summaries if s["text"])
    log_n = math.log1p(n)
    char_logs = [math.log1p(len(s["text"])) for _, s in summaries]
    for i, (tokens, s) in enumerate(summaries):
        hashed = [_ref_bucket(t, n_buckets) for t in tokens[:MAX_TOKENS]]
        ids[i, :len(hashed)] = hashed
        text, words = s["text"], s["words"]
        n_chars, n_words = len(text), len(words)
        letters = sum(map(str.isalpha, text))
        v2 = version >= 2
        punct = sum(c in _PUNCT_V2 for c in text) if v2 else len(_PUNCT_RE.findall(text))
        sentences = (len(_SENTENCE_END_V2.findall(text)) + sum(c in _SENTENCE_ANY_V2 for c in text) if v2
                     else len(_SENTENCE_END_RE.findall(text)))
        numeric[i, :24] = (
            char_logs[i] / 8.0,
            math.log1p(n_words) / 6.0,
            min(1.0, s["link_chars"] / n_chars) if n_chars else 0.0,
            min(2.0, punct / n_words) if n_words else 0.0,
            sum(map(str.isdigit, text)) / n_chars if n_chars else 0.0,
            sum(map(str.isupper, text)) / letters if letters else 0.0,
            i / max(1, n - 1),
            log_n / 8.0,
            1.0 if text.rstrip().endswith(_TERMINAL_V2 if v2 else _TERMINAL) else 0.0,
            min(3.0, (sum(map(len, words)) / n_words) / 10.0) if n_words else 0.0,
            min(1.0, s["depth"] / 30.0),
            1.0 if s["has_img"] else 0.0,
            min(1.0, s["n_li"] / 10.0),
            min(1.0, (text.count("|") + text.count("\u00b7") + text.count("\u2022")) / max(1, n_words)),
            _ref_cap_share_v2(text) if v2 else len(_CAP_WORD_RE.findall(text)) / max(1, n_words),
            math.log(text_counts[text]) / 3.0 if text else 0.0,
            1.0 if text.endswith(("...", "\u2026") if v2 else "...") and n_chars >= 450 else 0.0,
            math.log1p(sentences) / 4.0,
            1.0 if s["root_tag"] in _HEADINGS else 0.0,
            1.0 if s["in_table"] else 0.0,
            1.0 if s["in_list"] else 0.0,
            1.0 if n_chars == 0 else 0.0,
            char_logs[i - 1] / 8.0 if i > 0 else 0.0,
            char_logs[i + 1] / 8.0 if i + 1 < n else 0.0,
        )
    if version >= 3:
        numeric[:, 24:] = _reference_landmarks(list(paths) if paths is not None else None, n)
    return ids, numeric


# ----------------------------------------------------------------------------- fixtures

def _fixture_pages():
    """(name, blocks, paths) of every HTML fixture and labelled fixture page, simplified."""
    pages = []
    for path in sorted(DATA.glob("*.html")):
        page = simplify(path.read_bytes())
        pages.append((path.name, page.blocks, page.paths))
    table = pd.read_parquet(DATA / "model_pages.parquet")
    for row in table.itertuples(index=False):
        page = simplify(row.html)
        pages.append((f"{row.source}_{row.page_id}", page.blocks, page.paths))
    return [p for p in pages if p[1]]


# Blocks and paths at the edges of the definition: non-ASCII case (final sigma, dotted I
# whose lowercase is two code points), CJK, lone surrogates, whitespace kinds, separators
# that overlap (" > > "), empty path elements, a block that breaks the one-document parse,
# unquoted/odd attributes, repeated texts, a long text ending in "...".
EDGE_BLOCKS = [
    '<p class="introText lead-2024" id="x9 main" _item_id="1">ΟΔΟΣ ΣΟΦΟΚΛΕΟΥΣ. İSTANBUL İyi! Ünïcödé Ñ ×Y</p>',
    '<h2 _item_id="2">第一章 概述。 「引用」 ０１２３ Ⅻ ½ ²</h2>',
    '<div class=nav-bar id=top _item_id="3"><a>Home</a> | <a>About · Us</a> • <a>Blog</a></div>',
    '<li _item_id="4">A. B! C? D... e.g. f.g. "quoted." (paren.) end\u201d</li>',
    '<td _item_id="5">\u00a0non\u2003breaking\u3000spaces\u2028and\u2029seps\x1c\x1d\x1e\x1f</td>',
    '<p _item_id="6">lone \ud800 surrogate \udfff here</p>',
    '<ul _item_id="7"><li>one</li><li><img src=x>two</li><!-- c --><li><a href=#>three</a></li></ul>',
    '<p _item_id="8">' + ("Word " * 120) + "end...</p>",
    '<p _item_id="9">repeated text</p>',
    '<p _item_id="10">repeated text</p>',
    '<span _item_id="11"></span>',
    'bare text block with no tag',
    '',
    '<pre _item_id="12">  code\n\tindented\r\n  more  </pre>',
    '<table _item_id="13"><tr><td>1</td><td>2,5</td></tr></table>',
    '<h3 _item_id="14">CamelCaseHeading <b>Bold</b><i>it</i><x-b>nested wrapper</x-b></h3>',
    # class/id values that run into the trailing _item_id (the root cache drops its digits)
    '<div class= _item_id="15">a</div>',
    '<div class= _item_id="1234">b</div>',
    '<div id=x class="open _item_id="16">c</div>',
    '<div id=x class="open _item_id="17">d</div>',
    '<div id= _item_id="18">e</div>',
    "<div class='q _item_id=\"19\">f</div>",
    '<div class="x" _item_id="a1">g</div>',
    '<br _item_id="20"/>',
    # scripts and punctuation of version 2: CJK sentence ends without spaces, full-width
    # forms, Arabic/Devanagari/Greek/Armenian marks, titlecase and caseless first letters,
    # an ellipsis character, closing CJK quotes and guillemets
    '<p _item_id="21">東京は晴れ。明日も晴れ！本当？はい｡ＡＢＣ，ｄｅｆ．カタカナーｶﾀｶﾅ々〇\ufa6e「終わり」</p>',
    '<p _item_id="22">مرحبا، كيف حالك؟ نعم. هذا نص۔ नमस्ते। यह पाठ है॥ Τι κάνεις; Բարեւ։</p>',
    '<p _item_id="23">ǅemal Ǉubljana Москва Київ ß ﬁne éclair Émile 123abc _under ¡Hola! ¿Qué?</p>',
    '<p _item_id="24">' + ("Слово " * 90) + "конец\u2026</p>",
    '<p _item_id="25">«Il a dit»  »  한국어 문장입니다. 끝」</p>',
]
EDGE_PATHS = [
    "html > body.homePage > main#content-2024 > article.post.featuredPost > p.introText",
    "html > body > div.wrapper > section#chapter-1 > h2",
    "html > body > header > nav.navBar#top > div.nav-bar",
    "html > body > div >  > ul.list > li",
    "html > body > table.data > tbody > tr > td",
    " > html > > body > p",
    "html > body > div.a.b.c.d.e.f.g.h.i.j.k.l.m.n > ul",
    "html > body > div#x > p",
    "html > body > div#x > p",
    "html > body > div#y > p",
    "html > body > div.x.x.y > span",
    "",
    "html",
    "html > body > pre",
    "html > body > div.dl > table",
    "html > body > ol > li > h3",
    "html > body > div", "html > body > div", "html > body > div", "html > body > div",
    "html > body > div", "html > body > div", "html > body > div", "html > body > br",
    "html > body > p", "html > body > p", "html > body > p", "html > body > p", "html > body > p",
]


VERSIONS = (1, 2, 3)


def _assert_identical(blocks, paths, n_buckets=1 << 15):
    for version in VERSIONS:
        ref_ids, ref_num = _reference_page_features(blocks, paths, n_buckets=n_buckets, version=version)
        ids, num = page_features(blocks, paths, n_buckets=n_buckets, version=version)
        assert ids.dtype == ref_ids.dtype and num.dtype == ref_num.dtype
        assert np.array_equal(ids, ref_ids), version
        assert num.shape == ref_num.shape and num.tobytes() == ref_num.tobytes(), version


def test_features_identical_to_reference_on_fixture_pages():
    pages = _fixture_pages()
    assert len(pages) >= 12 and sum(len(p[1]) for p in pages) > 400
    for name, blocks, paths in pages:
        _assert_identical(blocks, paths)
        _assert_identical(blocks, None)
        _assert_identical(blocks, paths[: len(paths) // 2], n_buckets=1024)   # fewer paths than blocks


def test_features_identical_to_reference_on_edge_cases():
    _assert_identical(EDGE_BLOCKS, EDGE_PATHS)
    _assert_identical(EDGE_BLOCKS[::-1], EDGE_PATHS[::-1], n_buckets=97)
    for i in range(len(EDGE_BLOCKS)):
        _assert_identical(EDGE_BLOCKS[i:i + 1], EDGE_PATHS[i:i + 1])
    # overlapping separators: rpartition would peel other elements than split does
    _assert_identical(["<p>x</p>", "<li>y</li>", "<p>z</p>"],
                      ["html > > > body > p", "a > > li", "div.x > > > p > > "])
    # a block that closes the wrapper breaks the one-document parse: block by block
    broken = ['a</x-b><div>b</div>', "<!-- top -->", '<p _item_id="2">c</p>']
    assert len(features._parse_page(broken)[0]) == 3 and not features._parse_page(broken)[1]
    _assert_identical(broken, ["html > body > p", "html > body", "html > body > p"])
    assert block_texts(broken) == [" ".join(_ref_node_stats(n)[0].split()) for n in _ref_parsed_blocks(broken)]


def test_features_identical_when_caches_are_warm_or_cleared(monkeypatch):
    name, blocks, paths = _fixture_pages()[0]
    _assert_identical(blocks, paths)
    _assert_identical(blocks, paths)               # every cache hit
    monkeypatch.setattr(features, "_CACHE_MAX", 4)  # caches cleared again and again mid-page
    monkeypatch.setattr(features, "_PAGE_CACHE_MAX", 2)
    _assert_identical(blocks, paths)
    _assert_identical(EDGE_BLOCKS, EDGE_PATHS)


@pytest.mark.parametrize("n_blocks", [1, 2, 3])
def test_features_identical_on_tiny_pages(n_blocks):
    _assert_identical(EDGE_BLOCKS[:n_blocks], EDGE_PATHS[:n_blocks])


def _long_text_blocks():
    """Blocks whose text is longer than twice features._WORD_WINDOW, so that their edge
    words come from the searched ends only, with words cut at the window edges, too few
    words in a window (long runs: CJK, URLs), and lowercasing that changes the length."""
    window = features._WORD_WINDOW
    cut_word = "x" * (window - 7) + " cutacross" + " w" * 8 + " " + "y" * 2 * window + " tail1 tail2 tail3"
    nine_words_exactly = " ".join(["ab"] * 9) + " " + "z" * (2 * window) + " e1 e2 e3 e4"
    texts = [
        cut_word,
        nine_words_exactly,
        " ".join(["ab"] * 8) + " " + "z" * (3 * window),                 # 8 words in the head window
        "one two three four five six seven eight nine " + "q" * (3 * window) + " last",  # 1 word in the tail
        "第一章概述" * window,                                             # one long word run (v1)
        "第一章概述。" * window + "abc def",                                # one word per CJK character (v2)
        "abcdefghij" * 12 + "中" + "x" * (2 * window) + "中文" + "y" * (window - 2) + "末",
        "http://example.com/" + "a/b-c_d." * window + " end of it",
        ("İSTANBUL İyi ΟΔΟΣ ΣΟΦΟΚΛΕΟΥΣ. " * 20).strip(),                # lower() lengthens İ
        "a" * (window - 1) + " " + " ".join(f"w{i}" for i in range(60)),
        " ".join(f"word{i}" for i in range(200)),
    ]
    rng = np.random.RandomState(7)
    alphabet = list("abcXYZ019_ ") + [" ", ".", ",", "-", "İ", "ß", "Σ", "\u0307", "中", "\u00a0", "\n",
                                      "。", "か", "ｶ", "！", "ǅ", "\u2026", "\u0964"]
    for length in (2 * window + 1, 2 * window + 40, 3 * window, 5 * window):
        for _ in range(6):
            texts.append("".join(rng.choice(alphabet, size=length)))
    return [f'<p _item_id="{i + 1}">{t}</p>' for i, t in enumerate(texts)]


def test_features_identical_on_long_texts():
    blocks = _long_text_blocks()
    paths = ["html > body > div.article > p"] * len(blocks)
    _assert_identical(blocks, paths)
    # edge words of the window path and of the whole text agree on each text
    for text in block_texts(blocks):
        lowered = text.lower()
        for regex in (_WORD_RE, _WORD_RE_V2):
            words = regex.findall(lowered)
            assert features._edge_words(lowered, regex) == (words[:features.N_FIRST_WORDS],
                                                            words[-features.N_LAST_WORDS:])


def test_word_counts_match_the_lowercased_texts():
    # I with a dot lowercases to i + a combining dot (not a word character): pages with it
    # count words in the lowercased texts; other pages count them from the text's own flags.
    assert not features._char_flags(ord("\u0130")) & features._F_LOWER_KEEPS_WORD
    assert features._char_flags(ord("A")) & features._F_LOWER_KEEPS_WORD
    pages = [block_texts(blocks) for _, blocks, _ in _fixture_pages()]
    pages += [block_texts(EDGE_BLOCKS), block_texts(_long_text_blocks())]
    pages += [[text] for text in block_texts(EDGE_BLOCKS + _long_text_blocks())]
    for texts in pages:
        lowered = [t.lower() for t in texts]
        for version, regex in ((1, _WORD_RE), (2, _WORD_RE_V2)):
            counts = features._char_counts(texts, lowered, version)
            words = [regex.findall(t) for t in lowered]
            assert counts["words"].tolist() == [len(w) for w in words]
            assert counts["word_chars"].tolist() == [sum(map(len, w)) for w in words]
            slow = features._word_counts(lowered, version)    # the path of pages with an expanding lowercase
            assert slow[0].tolist() == [len(w) for w in words]


def test_version_2_is_language_independent():
    """v2 counts CJK characters as words and hashes them as edge words, counts CJK and other
    scripts' punctuation and sentence ends, and gives caseless scripts a capital share of 0;
    v1 is unchanged (one "word" per CJK run, ASCII punctuation only)."""
    col = {name: i for i, name in enumerate(features.NUMERIC_NAMES)}
    blocks = ['<p _item_id="1">今日は良い天気です。明日も晴れるでしょう！</p>',
              '<p _item_id="2">Der Hund bellt. die Katze schläft.</p>']
    v1 = page_features(blocks, version=1)[1]
    v2 = page_features(blocks, version=2)[1]
    assert v1[0, col["log_words"]] == np.float32(math.log1p(2) / 6.0)         # two \w+ runs
    assert v2[0, col["log_words"]] == np.float32(math.log1p(19) / 6.0)        # 19 CJK characters
    assert v1[0, col["punct_per_word"]] == 0.0 and v2[0, col["punct_per_word"]] > 0.0
    assert v1[0, col["log_sentences"]] == 0.0
    assert v2[0, col["log_sentences"]] == np.float32(math.log1p(2) / 4.0)
    assert v2[0, col["cap_word_share"]] == 0.0                               # no cased word
    assert v2[1, col["cap_word_share"]] == np.float32(3 / 6)                 # Der, Hund, Katze of 6 cased words
    ids_v2 = set(page_features(blocks[:1], version=2)[0][0].tolist())
    assert _ref_bucket("w0:今", 1 << 15) in ids_v2 and _ref_bucket("wl:る", 1 << 15) not in ids_v2
    assert all(_ref_bucket(f"wl:{c}", 1 << 15) in ids_v2 for c in "しょう")   # the last 3 characters
    with pytest.raises(ValueError, match="v4"):
        page_features(blocks, version=4)
    assert features.FEATURE_VERSION == 3 and features.FEATURE_VERSIONS == (1, 2, 3)
