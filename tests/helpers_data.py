"""Fixtures shared by several test modules (imported as ``from helpers_data import ...``;
pytest puts tests/ on sys.path). Test modules never import each other."""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"

# A small page with navigation, a sidebar, an article and a footer (test_simplify's blocks).
EXAMPLE = """<nav><a href="/">Home</a></nav>
<div class="sidebar"><ul><li><a href="/a">A</a></li><li>B</li><li>C</li><li>D</li></ul></div>
<article id="post"><h1>Hello</h1><p style="color:red" data-x="1">Some <b>bold</b> text here.</p>
loose tail text <span>span</span><br>more
<table><tr><td>1</td><td>2</td></tr></table>
<img src="http://x/y.png?a=1&amp;b=2" alt="pic" width="300">
<div style="display:none">hidden</div></article>
<footer>(c) 2025</footer>
"""

# Clean English prose that every quality gate keeps.
GOOD = "\n".join([
    "The river flows quietly through the valley and feeds the old mill with water.",
    "Farmers have worked these fields for generations, planting wheat and barley.",
    "In spring the meadows turn green, and children walk to school along the banks.",
    "A small museum explains how the mill was built and why it mattered to the town.",
    "Visitors often stop at the bakery that still uses flour ground on the stones.",
    "Local historians say that the first wooden wheel was replaced with iron in 1870.",
    "Today the building is maintained by volunteers who repair the roof each summer.",
])


def random_doc(rng: random.Random, n_words: int) -> list[str]:
    return [f"w{rng.randrange(10**7)}" for _ in range(n_words)]


def edit_to_jaccard(words: list[str], target: float, rng: random.Random, ngram: int = 5) -> list[str]:
    """Copy of ``words`` with tokens replaced at positions >= ngram apart, so that each
    edit replaces exactly ``ngram`` shingles: J = (m - 5k) / (m + 5k)."""
    m = len(words) - ngram + 1
    k = round(m * (1 - target) / (ngram * (1 + target)))
    positions = list(range(ngram - 1, len(words) - ngram + 1, ngram))
    out = list(words)
    for pos in sorted(rng.sample(positions, k)):
        out[pos] = f"x{rng.randrange(10**9)}"
    return out


def load_job(name: str):
    """The module of jobs/<name>.py, loaded from its file as spark-submit runs it (the jobs
    import the installed package; nothing is put on sys.path)."""
    path = ROOT / "jobs" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"pulpie_job_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
