"""Resolve a model name to a BlockClassifier.

``"default"`` is the embedded model (pulpie_spark/classify/blockmodel), ``"default-fast"`` its
first member alone (the ensemble's other two skipped: v5's speed and LOSO numbers), the ``orange-*`` names
are the published Pulpie checkpoints, a directory written by jobs/train.py is a block model
of the embedded kind, anything else is a Hub id or a local transformers checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path

from pulpie_spark.classify.base import BlockClassifier, ModelLoadError

DEFAULT_MODEL = "default"
FAST_DEFAULT_MODEL = "default-fast"
# The names of the embedded model, shipped inside the package (no archive to send to executors),
# and whether each loads the ensemble's first member only.
EMBEDDED_MODELS = {DEFAULT_MODEL: False, FAST_DEFAULT_MODEL: True}
MODEL_ALIASES = {
    "orange-small": "feyninc/pulpie-orange-small",
    "orange-base": "feyninc/pulpie-orange-base",
    "orange-large": "feyninc/pulpie-orange-large",
}


def resolve_model_name(model: str) -> str:
    """Alias -> Hub id; the embedded names in lower case; Hub ids and paths as given."""
    if not isinstance(model, str) or not model.strip():
        raise ModelLoadError(f"model must be a non-empty string, got {model!r}")
    model = model.strip()
    if model.lower() in EMBEDDED_MODELS:
        return model.lower()
    return MODEL_ALIASES.get(model.lower(), model)


def is_blockmodel_dir(model: str) -> bool:
    """A directory of jobs/train.py's layout (model.safetensors + a config.json that records
    its block feature version), as opposed to a transformers checkpoint."""
    path = Path(model)
    if not (path / "config.json").is_file() or not (path / "model.safetensors").is_file():
        return False
    try:
        return "feature_version" in json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False    # not ours; the transformers loader reports what is wrong with it


def load_classifier(model: str = DEFAULT_MODEL, device: str | None = None, **kwargs) -> BlockClassifier:
    """Load a block classifier; ``kwargs`` go to the HF loader (trust_remote_code,
    max_tokens, batch_tokens, dtype)."""
    resolved = resolve_model_name(model)
    if resolved in EMBEDDED_MODELS:
        try:
            from pulpie_spark.classify.blockmodel import load_default
        except ImportError as exc:
            raise ModelLoadError(
                "the embedded default model (pulpie_spark.classify.blockmodel.load_default) is not available "
                f"in this installation ({exc}); pass model='orange-small', a Hub id or a local "
                "checkpoint directory instead") from exc
        try:
            return load_default(device=device, first_only=EMBEDDED_MODELS[resolved])
        except (OSError, ValueError, RuntimeError) as exc:   # missing or damaged model files
            raise ModelLoadError(f"cannot load the embedded default model: {exc}") from exc
    if is_blockmodel_dir(resolved):
        from pulpie_spark.classify.blockmodel.model import load_block_classifier

        try:
            classifier = load_block_classifier(resolved, device=device)
        except (OSError, ValueError, RuntimeError) as exc:
            raise ModelLoadError(f"cannot load the block model at {resolved!r}: {exc}") from exc
        classifier.model_id = kwargs.get("model_id") or classifier.model_id   # as the HF loader names it
        return classifier
    from pulpie_spark.classify.hf import load_hf_classifier

    return load_hf_classifier(resolved, device=device, **kwargs)
