"""The interface every block classifier implements (docs/architecture.md)."""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np

# P(main) at or above which a block is main. A caller may raise it to trade recall for
# precision (pretraining pipelines often prefer that: datatrove runs trafilatura with
# favour_precision), or lower it for recall; docs/model-card.md measures the trade per source.
MAIN_THRESHOLD = 0.5


class ModelLoadError(RuntimeError):
    """A model could not be resolved or loaded; the message says what to do."""


@runtime_checkable
class BlockClassifier(Protocol):
    model_id: str

    def predict_proba(self, pages: Sequence[Sequence[str]],
                      paths: Sequence[Sequence[str]] | None = None) -> list[np.ndarray]:
        """Per page, a float32 array of P(main) per block (len == n_blocks)."""
        ...

    def predict(self, pages: Sequence[Sequence[str]],
                paths: Sequence[Sequence[str]] | None = None) -> list[list[int]]:
        """Per page, 1 (main) or 0 (other) per block: P(main) >= MAIN_THRESHOLD."""
        ...


def validate_main_threshold(value) -> float:
    """``value`` as a main threshold: a number strictly between 0 and 1 (0 or 1 would keep
    every block or none, which no caller means)."""
    try:
        threshold = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"main threshold must be a number between 0 and 1, got {value!r}") from None
    if not 0.0 < threshold < 1.0:   # also false for NaN
        raise ValueError(f"main threshold must be strictly between 0 and 1, got {value!r}")
    return threshold


def validate_unsure_threshold(value) -> float | None:
    """``value`` as a page-gate threshold: None (the model's own), or a number >= 0 (a page
    goes to the fallback when its gate score is at least this; above 1, never)."""
    if value is None:
        return None
    try:
        threshold = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"unsure threshold must be a number >= 0 or None, got {value!r}") from None
    if not threshold >= 0.0:   # also false for NaN
        raise ValueError(f"unsure threshold must be a number >= 0 or None, got {value!r}")
    return threshold


def probs_to_labels(probs: Sequence[np.ndarray], threshold: float = MAIN_THRESHOLD) -> list[list[int]]:
    return [(np.asarray(p) >= threshold).astype(np.int64).tolist() for p in probs]
