"""Normalization: each step on crafted strings, config switches, fingerprint."""

from __future__ import annotations

import pytest

from pulpie_spark.curate.config import ConfigError, NormalizeConfig, load_config, make_config
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
    cfg = NormalizeConfig().with_overrides(unicode_form="none", collapse_spaces=False, max_blank_lines=-1,
                                           strip_invisible_chars=False)
    raw = "\uff21  b\u200b\n\n\n\nc "
    assert normalize_text(raw, cfg) == raw
    assert normalize_text(None) is None
    assert normalize_text("") == ""


def test_idempotent():
    raw = "A\u00a0 b\r\n\r\n\r\n c\u0301\x1f  \u3000d"
    once = normalize_text(raw)
    assert normalize_text(once) == once


def test_config_dict_and_hash_are_the_recorded_form():
    from pulpie_spark.curate.config import config_hash

    cfg = make_config()
    plain = cfg.to_dict()
    assert plain["keep"]["order"] == [["quality_score", "desc"], ["warc_date", "asc"], ["doc_id", "asc"]]
    assert plain["quality"]["gopher_repetition"]["top_n_grams"] == [[2, 0.2], [3, 0.18], [4, 0.16]]
    assert config_hash(cfg) == config_hash(plain)
    # The recorded form of the shipped defaults: a change here changes curate decisions and
    # must be deliberate (issue 14 changed it: [language], per-language gate switches and the
    # datatrove-exact FineWeb defaults; before it, dd18cfa729d723ce).
    assert config_hash(plain) == "683120a25eb95f3e"
    assert make_config(plain) == cfg


def test_fingerprint_changes_with_config_and_is_stable():
    h1, js = normalization_fingerprint()
    h2, _ = normalization_fingerprint(NormalizeConfig())
    h3, _ = normalization_fingerprint(NormalizeConfig(unicode_form="NFC"))
    assert h1 == h2 != h3 and len(h1) == 16
    assert f'"version":"{NORMALIZE_VERSION}"' in js


def test_config_file_and_errors(tmp_path):
    from pathlib import Path

    shipped = load_config(Path(__file__).resolve().parents[1] / "conf" / "curate.toml")
    assert shipped == make_config()  # the shipped TOML states the defaults
    path = tmp_path / "c.toml"
    path.write_text('[quality.c4]\nmode = "tag"\n[near_dedup]\nbands = 0\nrows = 0\n', encoding="utf-8")
    cfg = load_config(path)
    assert cfg.quality["c4"].mode == "tag" and cfg.quality["fineweb"].mode == "drop"
    assert (cfg.near_dedup.bands, cfg.near_dedup.rows) == (0, 0)
    with pytest.raises(ConfigError, match="quality.c4.mode"):
        make_config({"quality": {"c4": {"mode": "maybe"}}})
    with pytest.raises(ConfigError, match="near_dedup.bandz"):
        make_config({"near_dedup": {"bandz": 3}})
    with pytest.raises(ConfigError, match="unknown curate config key 'neardedup'"):
        make_config({"neardedup": {}})
    with pytest.raises(ConfigError, match="quality.fineweb.short_line_thr"):
        make_config({"quality": {"fineweb": {"short_line_thr": "high"}}})
    with pytest.raises(ConfigError, match="normalize.unicode_form"):
        make_config({"normalize": {"unicode_form": "NFX"}})
    with pytest.raises(ConfigError, match="keep.order"):
        make_config({"keep": {"order": [["doc_id", "up"]]}})
    with pytest.raises(ConfigError, match="near_dedup.bands"):
        make_config({"near_dedup": {"bands": 20, "rows": 8}})
    bad = tmp_path / "bad.toml"
    bad.write_text('[quality.gopher_quality]\nmin_doc_words = "fifty"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="quality.gopher_quality.min_doc_words"):
        load_config(bad)
    for bad in (0, 2.5, True, "100"):
        with pytest.raises(ConfigError, match="hot_text_rows"):
            make_config({"exact_dedup": {"hot_text_rows": bad}})
