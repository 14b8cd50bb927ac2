"""Curation config: typed sections, TOML loading, validation and a stable fingerprint.

One frozen dataclass per section of ``conf/curate.toml`` (``NormalizeConfig``,
``QualityConfig`` holding one config per quality gate, ``ExactDedupConfig``,
``NearDedupConfig``, ``KeepConfig``, ``LanguageConfig``), gathered in ``CurateConfig``. A file or an
override dict is checked once, when it is loaded: an unknown key or a bad value raises
``ConfigError`` naming the key. The objects are picklable (they ship to Spark workers
inside UDF closures); ``to_dict()`` gives the plain nested dict that is hashed and
recorded with the output.

The quality gates, and so the tables under ``[quality]``, are declared once, in
``pulpie_spark.curate.quality.GATES`` (each gate with its config dataclass).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Iterator, Mapping

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

GATE_MODES = ("drop", "tag", "off")
_LABEL = re.compile(r"[a-z]{3}_[A-Z][a-z]{3}")  # FineWeb-2 / GlotLID: <ISO 639-3>_<ISO 15924>


class ConfigError(ValueError):
    pass


# ------------------------------------------------------------------------ checking values
def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return _is_int(v) or isinstance(v, float)


def _freeze(value: Any) -> Any:
    """Lists (TOML arrays) -> tuples, recursively: the sections are immutable."""
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


def _plain(value: Any) -> Any:
    """Tuples -> lists, sections -> dicts: the JSON-able form."""
    if isinstance(value, Section):
        return value.to_dict()
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _check_type(where: str, value: Any, hint: Any) -> None:
    """Value against a field's annotation (bool, int, float, str, tuple[...]).
    Numbers are not converted: the recorded config (and its hash) keeps them as written."""
    origin = typing.get_origin(hint)
    if hint is bool:
        ok = isinstance(value, bool)
    elif hint is int:
        ok = _is_int(value)
    elif hint is float:
        ok = _is_number(value)
    elif hint is str:
        ok = isinstance(value, str)
    elif origin is tuple:
        args = typing.get_args(hint)
        if not isinstance(value, tuple):
            raise ConfigError(f"{where} must be an array, got {_plain(value)!r}")
        if len(args) == 2 and args[1] is Ellipsis:
            for i, item in enumerate(value):
                _check_type(f"{where}[{i}]", item, args[0])
        else:
            if len(value) != len(args):
                raise ConfigError(f"{where} must be an array of {len(args)} items, got {_plain(value)!r}")
            for i, (item, arg) in enumerate(zip(value, args)):
                _check_type(f"{where}[{i}]", item, arg)
        return
    else:  # pragma: no cover - a section declared with an unsupported annotation
        raise TypeError(f"unsupported config annotation {hint!r} for {where}")
    if not ok:
        kind = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}[hint]
        raise ConfigError(f"{where} must be {kind}, got {value!r}")


@dataclass(frozen=True)
class Section:
    """Base of every config section: built from a mapping, checked once, read by attribute."""

    where: ClassVar[str] = ""  # the TOML table, for error messages

    @classmethod
    def from_mapping(cls, data: Mapping | None = None, where: str | None = None, base: "Section | None" = None):
        """``base`` (default: the defaults) updated by ``data``; unknown keys and bad values
        raise ConfigError naming the key."""
        where = cls.where if where is None else where
        data = data or {}
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where} must be a table")
        names = {f.name for f in dataclasses.fields(cls)}
        for key in data:
            if key not in names:
                raise ConfigError(f"unknown curate config key {where}.{key}" if where else
                                  f"unknown curate config key {key!r}")
        base = base if base is not None else cls()
        return base._replace_checked({k: _freeze(v) for k, v in data.items()}, where)

    def _replace_checked(self, changes: Mapping, where: str):
        hints = typing.get_type_hints(type(self))
        for key, value in changes.items():
            _check_type(f"{where}.{key}", value, hints[key])
        out = dataclasses.replace(self, **changes)
        out.validate(where)
        return out

    def with_overrides(self, **changes):
        """A checked copy with some values replaced (e.g. per-language thresholds)."""
        names = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise ConfigError(f"unknown curate config key {self.where}.{unknown[0]}")
        return self._replace_checked({k: _freeze(v) for k, v in changes.items()}, self.where)

    def validate(self, where: str) -> None:
        """Checks beyond the value types; raise ConfigError naming the key."""

    def to_dict(self) -> dict:
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}


def _one_of(where: str, value: Any, allowed: tuple) -> None:
    if value not in allowed:
        raise ConfigError(f"{where} must be one of {'|'.join(allowed)}, got {value!r}")


# ------------------------------------------------------------------------------ sections
@dataclass(frozen=True)
class NormalizeConfig(Section):
    where: ClassVar[str] = "normalize"
    unicode_form: str = "NFKC"
    normalize_line_endings: bool = True
    strip_control_chars: bool = True
    strip_invisible_chars: bool = True
    collapse_spaces: bool = True
    max_blank_lines: int = 1

    def validate(self, where: str) -> None:
        _one_of(f"{where}.unicode_form", self.unicode_form, ("NFKC", "NFC", "NFKD", "NFD", "none"))


@dataclass(frozen=True)
class GateConfig(Section):
    """Base of a quality gate's settings: every gate has a mode. Subclasses (one per gate)
    live next to the gate in ``pulpie_spark.curate.quality``."""

    mode: str = "drop"

    def validate(self, where: str) -> None:
        _one_of(f"{where}.mode", self.mode, GATE_MODES)


def _gates():
    from pulpie_spark.curate.quality import GATES  # the gate registry (it imports this module)

    return GATES


@dataclass(frozen=True)
class QualityConfig(Section):
    """One ``GateConfig`` per registered gate, by gate name, in registry order."""

    where: ClassVar[str] = "quality"
    gates: Mapping[str, GateConfig] = field(default_factory=lambda: {g.name: g.config() for g in _gates()})

    @classmethod
    def from_mapping(cls, data: Mapping | None = None, where: str | None = None,
                     base: "QualityConfig | None" = None) -> "QualityConfig":
        where = cls.where if where is None else where
        data = data or {}
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where} must be a table")
        base = base if base is not None else cls()
        registry = {g.name: g for g in _gates()}
        for name in data:
            if name not in registry:
                raise ConfigError(f"unknown curate config key {where}.{name} (gates: {', '.join(registry)})")
        gates = {name: registry[name].config.from_mapping(data[name], f"{where}.{name}", base.gates[name])
                 if name in data else cfg for name, cfg in base.gates.items()}
        return cls(gates=gates)

    def __getitem__(self, gate: str) -> GateConfig:
        return self.gates[gate]

    def __iter__(self) -> Iterator[str]:
        return iter(self.gates)

    def with_overrides(self, **gates: Mapping) -> "QualityConfig":
        """A checked copy with some gates' values replaced, e.g.
        ``with_overrides(c4={"min_num_sentences": 3})`` (the hook for per-language thresholds;
        one gate alone: ``cfg["c4"].with_overrides(min_num_sentences=3)``)."""
        return type(self).from_mapping(gates, self.where, base=self)

    def to_dict(self) -> dict:
        return {name: cfg.to_dict() for name, cfg in self.gates.items()}


@dataclass(frozen=True)
class ExactDedupConfig(Section):
    where: ClassVar[str] = "exact_dedup"
    enabled: bool = True
    # A text with more copies is joined back to its rows in slices of about this many.
    hot_text_rows: int = 100000

    def validate(self, where: str) -> None:
        if self.hot_text_rows < 1:
            raise ConfigError(f"{where}.hot_text_rows must be an integer >= 1, got {self.hot_text_rows!r}")


@dataclass(frozen=True)
class NearDedupConfig(Section):
    """FineWeb's MinHash setting: 14 bands x 8 rows of 112 permutations, 5-grams."""

    where: ClassVar[str] = "near_dedup"
    enabled: bool = True
    ngram: int = 5
    num_perm: int = 112
    bands: int = 14       # bands x rows <= num_perm; both 0: derived from threshold
    rows: int = 8
    threshold: float = 0.7
    seed: int = 1
    verify: str = "signature"
    max_bucket_size: int = 50000
    max_component_size: int = 100000
    max_cc_iterations: int = 40

    def validate(self, where: str) -> None:
        _one_of(f"{where}.verify", self.verify, ("none", "signature", "exact"))
        for key in ("ngram", "num_perm"):
            if getattr(self, key) < 1:
                raise ConfigError(f"{where}.{key} must be >= 1, got {getattr(self, key)!r}")
        if self.bands and self.rows and self.bands * self.rows > self.num_perm:
            raise ConfigError(f"{where}.bands * rows must be <= num_perm")


@dataclass(frozen=True)
class LanguageConfig(Section):
    """Language identification (curate/language.py) on the normalized text.

    ``mode``: ``drop`` removes a document whose score is under its language's minimum
    (reason ``language:low_confidence``), ``tag`` keeps it and lists that reason in
    ``quality_fails``, ``off`` does not identify (``language`` and ``language_score`` null;
    ``languages`` must then be empty). The minimum of a label is ``min_scores[label]`` when
    given, else the packaged FineWeb-2 value (``language.min_scores()``) when
    ``fineweb2_min_scores``, else ``default_min_score`` (also for labels without a value and
    for ``und``). ``languages``: keep only these labels (others: ``language:not_selected``)."""

    where: ClassVar[str] = "language"
    mode: str = "drop"
    default_min_score: float = 0.5
    fineweb2_min_scores: bool = True
    # per-label overrides; a TOML table ([language.min_scores] deu_Latn = 0.9) is stored
    # as sorted (label, score) pairs
    min_scores: tuple[tuple[str, float], ...] = ()
    languages: tuple[str, ...] = ()

    @classmethod
    def from_mapping(cls, data: Mapping | None = None, where: str | None = None, base: "Section | None" = None):
        if isinstance(data, Mapping) and isinstance(data.get("min_scores"), Mapping):
            data = {**data, "min_scores": sorted([k, v] for k, v in data["min_scores"].items())}
        return super().from_mapping(data, where, base)

    def validate(self, where: str) -> None:
        _one_of(f"{where}.mode", self.mode, GATE_MODES)
        scores = [(f"{where}.default_min_score", self.default_min_score)] + [
            (f"{where}.min_scores.{label}", score) for label, score in self.min_scores]
        for key, score in scores:
            if not 0.0 <= score <= 1.0:
                raise ConfigError(f"{key} must be between 0 and 1, got {score!r}")
        if len({label for label, _ in self.min_scores}) != len(self.min_scores):
            raise ConfigError(f"{where}.min_scores names a label twice")
        for label in (*(lab for lab, _ in self.min_scores), *self.languages):
            if not _LABEL.fullmatch(label):
                raise ConfigError(f"{where}: {label!r} is not a FineWeb-2 label like deu_Latn or cmn_Hani")
        if self.mode == "off" and self.languages:
            raise ConfigError(f"{where}.languages needs language identification ({where}.mode drop or tag)")


@dataclass(frozen=True)
class KeepConfig(Section):
    where: ClassVar[str] = "keep"
    # which document of a duplicate group survives: first by these columns, doc_id last
    order: tuple[tuple[str, str], ...] = (("quality_score", "desc"), ("warc_date", "asc"), ("doc_id", "asc"))

    def validate(self, where: str) -> None:
        for col, direction in self.order:
            if direction not in ("asc", "desc"):
                raise ConfigError(f"{where}.order direction must be asc|desc, got {direction!r} for {col}")


SECTIONS: dict[str, type[Section]] = {
    "normalize": NormalizeConfig,
    "quality": QualityConfig,
    "exact_dedup": ExactDedupConfig,
    "near_dedup": NearDedupConfig,
    "keep": KeepConfig,
    "language": LanguageConfig,
}


@dataclass(frozen=True)
class CurateConfig:
    """The whole curate config: one typed section per TOML table."""

    normalize: NormalizeConfig = field(default_factory=NormalizeConfig)
    quality: QualityConfig = field(default_factory=QualityConfig)
    exact_dedup: ExactDedupConfig = field(default_factory=ExactDedupConfig)
    near_dedup: NearDedupConfig = field(default_factory=NearDedupConfig)
    keep: KeepConfig = field(default_factory=KeepConfig)
    language: LanguageConfig = field(default_factory=LanguageConfig)

    def updated(self, overrides: Mapping | None) -> "CurateConfig":
        """A checked copy with ``overrides`` (nested dict, same shape as the TOML) applied."""
        overrides = overrides or {}
        if not isinstance(overrides, Mapping):
            raise ConfigError("curate config overrides must be a table")
        for key in overrides:
            if key not in SECTIONS:
                raise ConfigError(f"unknown curate config key {key!r}")
        return CurateConfig(**{name: SECTIONS[name].from_mapping(overrides[name], name, getattr(self, name))
                               if name in overrides else getattr(self, name) for name in SECTIONS})

    def to_dict(self) -> dict:
        return {name: getattr(self, name).to_dict() for name in SECTIONS}


def make_config(overrides: Mapping | None = None) -> CurateConfig:
    """Defaults updated by ``overrides`` (nested dict, same shape as conf/curate.toml)."""
    return CurateConfig().updated(overrides)


def load_config(path: str | Path | None = None, overrides: Mapping | None = None) -> CurateConfig:
    """Read a curate TOML file (None: defaults only), then apply ``overrides``."""
    data: dict = {}
    if path is not None:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    return CurateConfig().updated(data).updated(overrides)


def config_json(section: Any) -> str:
    """Canonical JSON (sorted keys, no spaces): the bytes the fingerprint is taken of.
    A config object is taken as its ``to_dict()``."""
    if isinstance(section, (Section, CurateConfig)):
        section = section.to_dict()
    return json.dumps(_plain(section), sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def config_hash(section: Any) -> str:
    """First 16 hex digits of the SHA-256 of the canonical JSON."""
    return hashlib.sha256(config_json(section).encode("ascii")).hexdigest()[:16]
