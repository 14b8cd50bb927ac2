"""Several models of one recipe, averaged where the first one is unsure (a cascade).

The block model of one seed wanders: with the shipped recipe's two short epochs, one fold's
leave-one-source-out shingle F1 moved by up to 0.036 between seeds (training.py). The mean
P(main) of models of seeds s, s+1, ... is steadier, and most of its gain sits on the pages
where the first model hesitates: asking the other members only where at least ``min_share``
of the page's characters are in blocks the first model scores between ``low`` and ``high``
kept the whole gain of averaging three models on half of the pages (docs/BENCHMARKS.md,
"Three fold models of other seeds, averaged"). ``min_share`` 0 averages every page.

On disk the first member is the model directory itself (model.safetensors, config.json:
what a loader of one model reads), the others are its sub-directories ``member-1``,
``member-2``, ..., named in ``ensemble.json`` with the cascade's settings. The members share
one feature configuration, so a page's features are computed once for all of them.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

ENSEMBLE_FILE = "ensemble.json"
MEMBER_PREFIX = "member-"


@dataclass(frozen=True)
class Cascade:
    """Which pages the members after the first are run on."""

    low: float = 0.3
    high: float = 0.7
    min_share: float = 0.05   # of the page's characters in unsure blocks; 0: every page

    def __post_init__(self):
        if not 0.0 <= self.low < self.high <= 1.0:
            raise ValueError(f"cascade needs 0 <= low < high <= 1, got {self.low} and {self.high}")
        if not 0.0 <= self.min_share <= 1.0:
            raise ValueError(f"cascade min_share must be in [0, 1], got {self.min_share}")

    def wants_members(self, probs: np.ndarray, chars: np.ndarray) -> bool:
        """Whether a page with the first member's ``probs`` and ``chars`` per block gets the others."""
        return len(probs) > 0 and unsure_char_share(probs, chars, self.low, self.high) >= self.min_share


def unsure_char_share(probs: np.ndarray, chars: np.ndarray, low: float, high: float) -> float:
    """The share of a page's characters in blocks whose P(main) is strictly between ``low`` and ``high``."""
    probs = np.asarray(probs, dtype=np.float64)
    chars = np.asarray(chars, dtype=np.float64)
    unsure = (probs > low) & (probs < high)
    return float(chars[unsure].sum() / max(float(chars.sum()), 1.0))


def member_dir(directory: str | Path, k: int) -> Path:
    """Where member ``k`` >= 1 of the ensemble at ``directory`` lives."""
    return Path(directory) / f"{MEMBER_PREFIX}{k}"


def save_ensemble(directory: str | Path, n_members: int, cascade: Cascade) -> Path:
    """Write ensemble.json naming members 1 .. n_members - 1 (already saved by ``member_dir``)."""
    names = [member_dir(directory, k).name for k in range(1, n_members)]
    missing = [n for n in names if not (Path(directory) / n).is_dir()]
    if missing:
        raise FileNotFoundError(f"ensemble members {missing} are not in {directory}")
    path = Path(directory) / ENSEMBLE_FILE
    path.write_text(json.dumps({"members": names, "cascade": asdict(cascade)}, indent=1, sort_keys=True) + "\n")
    return path


def clear_ensemble(directory: str | Path) -> None:
    """Remove ensemble.json and the member directories it names (a model saved over an
    ensemble must not load with the old members); nothing else in ``directory`` is touched."""
    old = load_ensemble(directory)
    if old is None:
        return
    for member in old[0]:
        shutil.rmtree(member, ignore_errors=True)
    (Path(directory) / ENSEMBLE_FILE).unlink()


def load_ensemble(directory: str | Path) -> tuple[list[Path], Cascade] | None:
    """(member directories after the first, cascade) of the model at ``directory``, or None
    for a single model."""
    path = Path(directory) / ENSEMBLE_FILE
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    members = [Path(directory) / str(name) for name in data.get("members", [])]
    for member in members:
        if member.resolve().parent != Path(directory).resolve():
            raise ValueError(f"{path}: member {member.name!r} is not a sub-directory of the model")
    return members, Cascade(**data.get("cascade", {}))
