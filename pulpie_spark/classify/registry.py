"""Resolve a model name to a BlockClassifier.

``"default"`` is the embedded model (pulpie_spark/classify/blockmodel), the ``orange-*`` names
are the published Pulpie checkpoints, anything else is a Hub id or a local directory.
"""

from __future__ import annotations

from pulpie_spark.classify.base import BlockClassifier, ModelLoadError

DEFAULT_MODEL = "default"
MODEL_ALIASES = {
    "orange-small": "feyninc/pulpie-orange-small",
    "orange-base": "feyninc/pulpie-orange-base",
    "orange-large": "feyninc/pulpie-orange-large",
}


def resolve_model_name(model: str) -> str:
    """Alias -> Hub id; ``default``, Hub ids and paths are returned as given."""
    if not isinstance(model, str) or not model.strip():
        raise ModelLoadError(f"model must be a non-empty string, got {model!r}")
    model = model.strip()
    return MODEL_ALIASES.get(model.lower(), model)


def load_classifier(model: str = DEFAULT_MODEL, device: str | None = None, **kwargs) -> BlockClassifier:
    """Load a block classifier; ``kwargs`` go to the HF loader (trust_remote_code,
    max_tokens, batch_tokens, dtype)."""
    resolved = resolve_model_name(model)
    if resolved == DEFAULT_MODEL:
        try:
            from pulpie_spark.classify.blockmodel import load_default
        except ImportError as exc:
            raise ModelLoadError(
                "the embedded default model (pulpie_spark.classify.blockmodel.load_default) is not available "
                f"in this installation ({exc}); pass model='orange-small', a Hub id or a local "
                "checkpoint directory instead") from exc
        try:
            return load_default(device=device)
        except (OSError, ValueError, RuntimeError) as exc:   # missing or damaged model files
            raise ModelLoadError(f"cannot load the embedded default model: {exc}") from exc
    from pulpie_spark.classify.hf import load_hf_classifier

    return load_hf_classifier(resolved, device=device, **kwargs)
