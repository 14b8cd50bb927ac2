"""Export spaCy's rule-based tokenizer rules (MIT-licensed data) to JSON for the pure-Python
port in pulpie_spark/curate/words.py, so the package splits words as spaCy does without
importing spaCy. Run where spaCy is installed (the benchmark env of
benchmarks/gates_vs_datatrove.py has it):

    benchmarks/.venv-datatrove/bin/python benchmarks/tools/export_spacy_rules.py en
    benchmarks/.venv-datatrove/bin/python benchmarks/tools/export_spacy_rules.py xx

writes pulpie_spark/resources/quality/spacy_<lang>_rules.json. The shipped files were made
with spaCy 3.8.18: the rules are spaCy-version specific; re-export and re-run
tests/test_words.py (which compares the port with spaCy when it is importable) on a new one.
"""
import json
import sys
from pathlib import Path

import spacy
from spacy.pipeline.sentencizer import Sentencizer
from spacy.symbols import ORTH
from spacy.tokenizer import Tokenizer

OUT = Path(__file__).resolve().parents[2] / "pulpie_spark" / "resources" / "quality"

lang = sys.argv[1] if len(sys.argv) > 1 else "en"
nlp = spacy.blank(lang)
tok = nlp.tokenizer
pat = lambda f: None if f is None else [f.__self__.pattern, int(f.__self__.flags)]  # noqa: E731
rules = {orth: [d[ORTH] if isinstance(d.get(ORTH), str) else nlp.vocab.strings[d[ORTH]] for d in toks]
         for orth, toks in tok.rules.items()}
# special cases that go through spaCy's special-case matcher (they contain affixes or spaces)
matcher_keys = [k for k in rules if tok.find_prefix(k) or tok.find_infix(k) or tok.find_suffix(k) or " " in k]
plain = Tokenizer(nlp.vocab, rules={}, prefix_search=tok.prefix_search, suffix_search=tok.suffix_search,
                  infix_finditer=tok.infix_finditer, token_match=tok.token_match, url_match=tok.url_match)
matcher_patterns = {k: [t.text for t in plain(k)] for k in matcher_keys}
out = dict(spacy_version=spacy.__version__, lang=lang,
           prefix=pat(tok.prefix_search), suffix=pat(tok.suffix_search), infix=pat(tok.infix_finditer),
           token_match=pat(tok.token_match), url_match=pat(tok.url_match),
           rules=rules, matcher_patterns=matcher_patterns,
           sentencizer_punct_chars=sorted(Sentencizer.default_punct_chars))
path = OUT / f"spacy_{lang}_rules.json"
path.write_text(json.dumps(out, ensure_ascii=False), encoding="utf-8")
print(lang, spacy.__version__, len(rules), "rules", len(matcher_patterns), "matcher patterns ->", path)
