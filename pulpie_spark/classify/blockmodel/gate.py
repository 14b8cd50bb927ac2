"""The page gate: from the block model's own output on a page, is the fallback likely better?

The block model's errors are not spread evenly: most of its loss to trafilatura on pages it
never saw sits on pages where its probabilities are unsure (many blocks near 0.5), where it
keeps a sliver of the page's text, or where main text comes in many separate runs. A
logistic regression over a dozen such page statistics (``GATE_FEATURES``), fitted on the
leave-one-source-out pages of the model's recipe (each page scored by a model that never
saw its source), says when to hand the page to the fallback extractor instead
(fallback reason ``model_unsure``). Pure numpy; fitted by Newton's method, so a fit is
deterministic.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

GATE_FILE = "page_gate.json"
# An ensemble's gate is fitted on the ensemble's output; its first member run alone
# (load_block_classifier(first_only=True), model "default-fast") needs the gate fitted on
# that member's own output, saved beside it under this name.
FIRST_MEMBER_GATE_FILE = "page_gate.first.json"
# The target of a fit: trafilatura's text beats the model's on the page by more than this
# shingle F1 (smaller margins teach the gate pages where the two are about even).
GATE_MARGIN = 0.1
GATE_FEATURES = ("log_blocks", "main_share", "main_char_share", "log_main_chars", "log_chars", "mean_p",
                 "wmean_p", "unsure", "wunsure", "wmargin", "near", "runs")
# A block counts as main at 0.5 in the statistics whatever the extractor's main_threshold:
# the gate sees the model's output, not the user's cut of it.
_MAIN = 0.5


def page_gate_features(probs: np.ndarray, n_chars: np.ndarray) -> np.ndarray:
    """GATE_FEATURES of one page from P(main) per block and characters per block (float64)."""
    p = np.asarray(probs, dtype=np.float64)
    n = np.asarray(n_chars, dtype=np.float64)
    if len(p) == 0:
        return np.zeros(len(GATE_FEATURES), dtype=np.float64)
    main = p >= _MAIN
    total = max(float(n.sum()), 1.0)
    main_chars = float(n[main].sum())
    unsure = (p > 0.2) & (p < 0.8)
    runs = int(np.count_nonzero(main[1:] & ~main[:-1])) + int(main[0])
    return np.array([
        math.log1p(len(p)),
        float(main.mean()),
        main_chars / total,
        math.log1p(main_chars),
        math.log1p(float(n.sum())),
        float(p.mean()),
        float((p * n).sum()) / total,
        float(unsure.mean()),
        float(n[unsure].sum()) / total,
        float((n * np.abs(p - 0.5)).sum()) / total,
        float(n[(p > 0.35) & (p < _MAIN)].sum()) / total,
        math.log1p(runs),
    ], dtype=np.float64)


def chars_from_features(numeric: np.ndarray) -> np.ndarray:
    """Characters per block from the block features (column 0 is log1p(characters) / 8 in
    every feature version), so the gate needs no second pass over the blocks' text."""
    return np.expm1(8.0 * np.asarray(numeric, dtype=np.float64)[:, 0])


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


@dataclass(frozen=True)
class PageGate:
    """Logistic regression over standardized GATE_FEATURES; a page goes to the fallback
    when its score is at least ``threshold``."""

    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float
    threshold: float
    features: tuple[str, ...] = GATE_FEATURES
    fitted_on: str = ""

    def score(self, features: np.ndarray) -> np.ndarray:
        """Scores of one page's features [F] or of many [N, F]."""
        x = (np.asarray(features, dtype=np.float64) - np.asarray(self.mean)) / np.asarray(self.scale)
        return _sigmoid(x @ np.asarray(self.weights) + self.bias)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "PageGate":
        features = tuple(data.get("features", GATE_FEATURES))
        if features != GATE_FEATURES:
            raise ValueError(f"page gate computed from {features}, this code computes {GATE_FEATURES}")
        return cls(mean=tuple(data["mean"]), scale=tuple(data["scale"]), weights=tuple(data["weights"]),
                   bias=float(data["bias"]), threshold=float(data["threshold"]), features=features,
                   fitted_on=str(data.get("fitted_on", "")))

    def save(self, directory: str | Path, name: str = GATE_FILE) -> Path:
        path = Path(directory) / name
        path.write_text(json.dumps(self.to_dict(), indent=1) + "\n")
        return path


def load_page_gate(directory: str | Path, name: str = GATE_FILE) -> PageGate | None:
    """The gate saved next to a model (``name``: GATE_FILE or FIRST_MEMBER_GATE_FILE), or None
    when the model has none."""
    path = Path(directory) / name
    if not path.exists():
        return None
    return PageGate.from_dict(json.loads(path.read_text()))


def fit_page_gate(features: np.ndarray, better: np.ndarray, *, threshold: float, l2: float = 1e-2,
                  fitted_on: str = "") -> PageGate:
    """Fit P(fallback better) on page features [N, F] and 0/1 targets [N] (mean log loss +
    ``l2`` * |w|^2, bias unpenalized) by Newton's method."""
    x = np.asarray(features, dtype=np.float64)
    y = np.asarray(better, dtype=np.float64)
    if x.ndim != 2 or len(x) != len(y) or len(x) == 0:
        raise ValueError(f"need features [N, F] and N targets, got {x.shape} and {y.shape}")
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-12] = 1.0
    a = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])
    penalty = np.full(a.shape[1], 2.0 * l2)
    penalty[-1] = 0.0
    w = np.zeros(a.shape[1])
    for _ in range(100):
        p = _sigmoid(a @ w)
        grad = a.T @ (p - y) / len(y) + penalty * w
        hess = (a * (p * (1.0 - p))[:, None]).T @ a / len(y) + np.diag(penalty) + 1e-9 * np.eye(a.shape[1])
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-10:
            break
    return PageGate(mean=tuple(mean.tolist()), scale=tuple(scale.tolist()), weights=tuple(w[:-1].tolist()),
                    bias=float(w[-1]), threshold=float(threshold), fitted_on=fitted_on)
