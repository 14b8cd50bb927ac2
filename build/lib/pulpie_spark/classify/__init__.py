"""Block classification: the BlockClassifier protocol, model loading and the Spark stage.

Submodules import torch/transformers lazily so that importing this package on a
CPU-only executor stays cheap.
"""

from __future__ import annotations

from pulpie_spark.classify.base import BlockClassifier, ModelLoadError, probs_to_labels
from pulpie_spark.classify.registry import MODEL_ALIASES, load_classifier, resolve_model_name

__all__ = ["BlockClassifier", "ModelLoadError", "probs_to_labels", "MODEL_ALIASES",
           "load_classifier", "resolve_model_name"]
