"""pulpie-spark: web crawls -> pretraining-ready text with Pulpie block encoders on Spark."""

from __future__ import annotations

__version__ = "0.1.0"

# Lazy exports keep `import pulpie_spark` cheap on executors (no torch unless used).
_EXPORTS = {
    "simplify": ("pulpie_spark.segment.simplify", "simplify"),
    "SimplifiedPage": ("pulpie_spark.segment.simplify", "SimplifiedPage"),
    "Extractor": ("pulpie_spark.extractor", "Extractor"),
    "Extraction": ("pulpie_spark.extractor", "Extraction"),
}


def __getattr__(name: str):
    if name in _EXPORTS:
        import importlib

        module_name, attr = _EXPORTS[name]
        value = getattr(importlib.import_module(module_name), attr)
        # Bound once here: a later submodule import can then never shadow the export
        # (none of the exported names is a submodule of this package).
        globals()[name] = value
        return value
    raise AttributeError(f"module 'pulpie_spark' has no attribute {name!r}")


__all__ = sorted(_EXPORTS) + ["__version__"]
