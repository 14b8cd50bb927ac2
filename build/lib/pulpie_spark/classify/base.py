"""The interface every block classifier implements (docs/architecture.md)."""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np

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
        """Per page, 1 (main) or 0 (other) per block: P(main) >= 0.5."""
        ...


def probs_to_labels(probs: Sequence[np.ndarray]) -> list[list[int]]:
    return [(np.asarray(p) >= MAIN_THRESHOLD).astype(np.int64).tolist() for p in probs]
