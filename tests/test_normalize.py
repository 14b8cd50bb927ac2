"""Normalization: each step on crafted strings, config switches, fingerprint."""

from __future__ import annotations

import pytest

from pulpie_spark.curate.config import ConfigError, DEFAULTS, load_config, make_config
from pulpie_spark.curate.normalize import NORMALIZE_VERSION, normalization_fingerprint, normalize_text


def test_line_endings_controls_and_invisibles():
    raw = "Caf\u0065\u0301 line\r\nnext\rthird\u2028fourth\x00\x07 end\u200b\u00adx\ufeff"
    assert normalize_text(raw) == "Caf\u00e9 line\nnext\nthird\nfourth endx"


def test_nfkc_and_whitespace():
    raw = "  \uff21\uff22\uff23\u00a0\u00a0 \ufb01ne\t\ttab  \n\n\n\n  indented  \n"
    assert normalize_text(raw) == "ABC fine tab\n\nindented"


def test_zero_width_joiners_survive():
    family = "\U0001F468\u200d\U0001F469\u200d\U0001F467"
    persian = "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"
    assert normalize_text(family) == family
    assert normalize_text(persian) == persian


def test_switches_turn_steps_off():
    cfg = dict(DEFAULTS["normalize"], unicode_form="none", collapse_spaces=False, max_blank_lines=-1,
               strip_invisible_chars=False)
    raw = "\uff21  b\u200b\n\n\n\nc "
    assert normalize_text(raw, cfg) == raw
    assert normalize_text(None) is None
    assert normalize_text("") == ""


def test_idempotent():
    raw = "A\u00a0 b\r\n\r\n\r\n c\u0301\x1f  \u3000d"
    once = normalize_text(raw)
    assert normalize_text(once) == once


def test_fingerprint_changes_with_config_and_is_stable():
    h1, js = normalization_fingerprint()
    h2, _ = normalization_fingerprint(dict(DEFAULTS["normalize"]))
    h3, _ = normalization_fingerprint(dict(DEFAULTS["normalize"], unicode_form="NFC"))
    assert h1 == h2 != h3 and len(h1) == 16
    assert f'"version":"{NORMALIZE_VERSION}"' in js


def test_config_file_and_errors(tmp_path):
    from pathlib import Path

    shipped = load_config(Path(__file__).resolve().parents[1] / "conf" / "curate.toml")
    assert shipped == make_config()  # the shipped TOML states the defaults
    path = tmp_path / "c.toml"
    path.write_text('[quality.c4]\nmode = "tag"\n[near_dedup]\nbands = 0\nrows = 0\n', encoding="utf-8")
    cfg = load_config(path)
    assert cfg["quality"]["c4"]["mode"] == "tag" and cfg["quality"]["fineweb"]["mode"] == "drop"
    with pytest.raises(ConfigError):
        make_config({"quality": {"c4": {"mode": "maybe"}}})
    with pytest.raises(ConfigError):
        make_config({"near_dedup": {"bandz": 3}})
    for bad in (0, 2.5, True, "100"):
        with pytest.raises(ConfigError, match="hot_text_rows"):
            make_config({"exact_dedup": {"hot_text_rows": bad}})
