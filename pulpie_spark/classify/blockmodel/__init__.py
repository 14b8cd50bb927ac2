"""The embedded default block model (CPU-cheap, no hub): features, model, training.

``load_default(device=None)`` returns the shipped model from
``pulpie_spark/models/default/`` as a BlockClassifier.
"""

from __future__ import annotations

from pathlib import Path

DEFAULT_MODEL_DIR = Path(__file__).resolve().parents[2] / "models" / "default"


def load_default(device: str | None = None):
    """The shipped default model as a BlockClassifier (safetensors + JSON config)."""
    from pulpie_spark.classify.blockmodel.model import load_block_classifier

    if not (DEFAULT_MODEL_DIR / "model.safetensors").is_file():
        raise FileNotFoundError(f"the default model weights are missing from {DEFAULT_MODEL_DIR}; "
                                "reinstall pulpie-spark or train one with jobs/train.py")
    return load_block_classifier(DEFAULT_MODEL_DIR, device=device)


__all__ = ["DEFAULT_MODEL_DIR", "load_default"]
