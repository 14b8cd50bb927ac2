"""Text normalization applied before quality gates and dedup hashing.

Order matters: line endings first (so ``\\r`` is not taken for a control char),
then Unicode normalization (NFKC turns NBSP into a space and full-width letters
into ASCII, so the whitespace pass sees them), then control/invisible chars, then
whitespace. Bump NORMALIZE_VERSION whenever the output for some input changes:
it is recorded with every curated row, together with the config fingerprint.
"""

from __future__ import annotations

import re
import unicodedata
from pulpie_spark.curate.config import NormalizeConfig, config_hash, config_json

NORMALIZE_VERSION = "1"

_LINE_ENDINGS = re.compile("\r\n|[\r\u2028\u2029\u0085\u000b\u000c]")
# C0 and C1 controls except \t and \n (line endings were handled above).
_CONTROL = re.compile("[\u0000-\u0008\u000e-\u001f\u007f-\u0084\u0086-\u009f]")
# Invisible format characters that only break word matching: soft hyphen,
# zero-width space, word joiner, invisible operators, BOM. ZWJ/ZWNJ (U+200C/D) stay:
# emoji sequences and Persian/Indic orthography need them.
_INVISIBLE = re.compile("[\u00ad\u200b\u2060-\u2064\ufeff]")
_HSPACE = re.compile(r"[^\S\n]+")
_SPACE_AROUND_NEWLINE = re.compile(r" ?\n ?")


def normalize_text(text: str | None, cfg: NormalizeConfig | None = None) -> str | None:
    """Normalize one document; None stays None. ``cfg`` is the ``[normalize]`` section."""
    if text is None:
        return None
    cfg = cfg or NormalizeConfig()
    if cfg.normalize_line_endings:
        text = _LINE_ENDINGS.sub("\n", text)
    form = cfg.unicode_form
    if form != "none":
        text = unicodedata.normalize(form, text)
    if cfg.strip_control_chars:
        text = _CONTROL.sub("", text)
    if cfg.strip_invisible_chars:
        text = _INVISIBLE.sub("", text)
    if cfg.collapse_spaces:
        text = _HSPACE.sub(" ", text)
        text = _SPACE_AROUND_NEWLINE.sub("\n", text)
        text = text.strip()
    max_blank = cfg.max_blank_lines
    if max_blank is not None and max_blank >= 0:
        text = re.sub("\n{%d,}" % (max_blank + 2), "\n" * (max_blank + 1), text)
    return text


def normalization_fingerprint(cfg: NormalizeConfig | None = None) -> tuple[str, str]:
    """(hash, JSON) of version + config: what is stored with the output."""
    payload = {"version": NORMALIZE_VERSION, "config": (cfg or NormalizeConfig()).to_dict()}
    return config_hash(payload), config_json(payload)
