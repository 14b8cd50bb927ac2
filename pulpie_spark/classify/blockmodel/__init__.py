"""The embedded default block model (CPU-cheap, no hub): features, model, training.

``load_default(device=None)`` returns the shipped model from
``pulpie_spark/models/default/`` as a BlockClassifier; ``first_only=True`` its first member
alone (model "default-fast": the ensemble's other members skipped, about 15 % faster end to end).
"""

from __future__ import annotations

from pathlib import Path

DEFAULT_MODEL_DIR = Path(__file__).resolve().parents[2] / "models" / "default"


def load_default(device: str | None = None, first_only: bool = False):
    """The shipped default model as a BlockClassifier (safetensors + JSON config)."""
    from pulpie_spark.classify.blockmodel.model import load_block_classifier

    if not (DEFAULT_MODEL_DIR / "model.safetensors").is_file():
        raise FileNotFoundError(f"the default model weights are missing from {DEFAULT_MODEL_DIR}; "
                                "reinstall pulpie-spark or train one with jobs/train.py")
    return load_block_classifier(DEFAULT_MODEL_DIR, device=device, first_only=first_only)


__all__ = ["DEFAULT_MODEL_DIR", "load_default"]
