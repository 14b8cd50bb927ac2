"""Curation config: defaults, TOML loading, validation and a stable fingerprint.

The config is a plain nested dict (picklable, JSON-serialisable) so it ships to
Spark workers inside closures and is recorded verbatim with the output.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any, Mapping

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

GATE_MODES = ("drop", "tag", "off")

# datatrove's defaults (gopher_quality_filter, gopher_repetition_filter, c4_filters,
# fineweb_quality_filter) and FineWeb's MinHash setting (14 bands x 8 rows).
DEFAULTS: dict[str, Any] = {
    "normalize": {
        "unicode_form": "NFKC",
        "normalize_line_endings": True,
        "strip_control_chars": True,
        "strip_invisible_chars": True,
        "collapse_spaces": True,
        "max_blank_lines": 1,
    },
    "quality": {
        "gopher_quality": {
            "mode": "drop",
            "min_doc_words": 50,
            "max_doc_words": 100000,
            "min_avg_word_length": 3,
            "max_avg_word_length": 10,
            "max_symbol_word_ratio": 0.1,
            "max_bullet_lines_ratio": 0.9,
            "max_ellipsis_lines_ratio": 0.3,
            "max_non_alpha_words_ratio": 0.8,
            "min_stop_words": 2,
            "stop_words": ["the", "be", "to", "of", "and", "that", "have", "with"],
        },
        "gopher_repetition": {
            "mode": "drop",
            "dup_line_frac": 0.3,
            "dup_para_frac": 0.3,
            "dup_line_char_frac": 0.2,
            "dup_para_char_frac": 0.2,
            "top_n_grams": [[2, 0.2], [3, 0.18], [4, 0.16]],
            "dup_n_grams": [[5, 0.15], [6, 0.14], [7, 0.13], [8, 0.12], [9, 0.11], [10, 0.10]],
        },
        "c4": {
            "mode": "drop",
            "filter_no_terminal_punct": True,
            "min_num_sentences": 5,
            "min_words_per_line": 3,
            "max_word_length": 1000,
            "filter_lorem_ipsum": True,
            "filter_javascript": True,
            "filter_curly_bracket": True,
            "filter_policy": True,
            "remove_citations": True,
            "rewrite_text": False,
        },
        "fineweb": {
            "mode": "drop",
            "line_punct_thr": 0.12,
            "line_punct_exclude_zero": False,
            "short_line_thr": 0.67,
            "short_line_length": 30,
            "char_duplicates_ratio": 0.01,
            "new_line_ratio": 0.3,
        },
    },
    # A text with more copies is joined back to its rows in slices of about this many.
    "exact_dedup": {"enabled": True, "hot_text_rows": 100000},
    "near_dedup": {
        "enabled": True,
        "ngram": 5,
        "num_perm": 112,
        "bands": 14,
        "rows": 8,
        "threshold": 0.7,
        "seed": 1,
        "verify": "signature",
        "max_bucket_size": 50000,
        "max_component_size": 100000,
        "max_cc_iterations": 40,
    },
    "keep": {"order": [["quality_score", "desc"], ["warc_date", "asc"], ["doc_id", "asc"]]},
}


class ConfigError(ValueError):
    pass


def _merge(base: dict, override: Mapping, where: str) -> dict:
    out = copy.deepcopy(base)
    for key, value in override.items():
        if key not in base:
            raise ConfigError(f"unknown curate config key {where}{key!r}")
        if isinstance(base[key], dict):
            if not isinstance(value, Mapping):
                raise ConfigError(f"{where}{key} must be a table")
            out[key] = _merge(base[key], value, f"{where}{key}.")
        else:
            out[key] = copy.deepcopy(value)
    return out


def _validate(cfg: dict) -> None:
    for gate, gate_cfg in cfg["quality"].items():
        if gate_cfg["mode"] not in GATE_MODES:
            raise ConfigError(f"quality.{gate}.mode must be one of {GATE_MODES}, got {gate_cfg['mode']!r}")
    hot = cfg["exact_dedup"]["hot_text_rows"]
    if isinstance(hot, bool) or not isinstance(hot, int) or hot < 1:
        raise ConfigError(f"exact_dedup.hot_text_rows must be an integer >= 1, got {hot!r}")
    near = cfg["near_dedup"]
    if near["verify"] not in ("none", "signature", "exact"):
        raise ConfigError(f"near_dedup.verify must be none|signature|exact, got {near['verify']!r}")
    if near["bands"] and near["rows"] and near["bands"] * near["rows"] > near["num_perm"]:
        raise ConfigError("near_dedup.bands * rows must be <= num_perm")
    if cfg["normalize"]["unicode_form"] not in ("NFKC", "NFC", "NFKD", "NFD", "none"):
        raise ConfigError("normalize.unicode_form must be NFKC|NFC|NFKD|NFD|none")
    for col, direction in cfg["keep"]["order"]:
        if direction not in ("asc", "desc"):
            raise ConfigError(f"keep.order direction must be asc|desc, got {direction!r} for {col}")


def make_config(overrides: Mapping | None = None) -> dict:
    """Defaults updated by ``overrides`` (nested dict, same shape as DEFAULTS)."""
    cfg = _merge(DEFAULTS, overrides or {}, "")
    _validate(cfg)
    return cfg


def load_config(path: str | Path | None = None, overrides: Mapping | None = None) -> dict:
    """Read a curate TOML file (None: defaults only), then apply ``overrides``."""
    data: dict = {}
    if path is not None:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    cfg = _merge(DEFAULTS, data, "")
    cfg = _merge(cfg, overrides or {}, "")
    _validate(cfg)
    return cfg


def config_json(section: Any) -> str:
    """Canonical JSON (sorted keys, no spaces): the bytes the fingerprint is taken of."""
    return json.dumps(section, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def config_hash(section: Any) -> str:
    """First 16 hex digits of the SHA-256 of the canonical JSON."""
    return hashlib.sha256(config_json(section).encode("ascii")).hexdigest()[:16]
