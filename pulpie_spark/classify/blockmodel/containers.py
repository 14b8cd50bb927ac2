"""Which blocks of a page share an ancestor element: the groups the model pools over.

A heuristic extractor scores a container (readability adds its paragraphs' scores to
their parent and grandparent); the block model gets the same structure as data: for
each block and each level L (1 = the element holding the block, 2 = that element's
parent, ...) the page-local id of that ancestor. Ids are shared across levels: an
element is one group whichever level it is found at, and its members are the blocks
that have it among their ``levels`` nearest ancestors (its subtree, that deep). The
model averages its block vectors per group (``BlockSequenceModel``,
``container_levels``), so an article paragraph inside an unfamiliar wrapper
(``div.paywall``) is read together with the paragraphs next to the wrapper instead of
on its class names alone.

Ancestors come from ``SimplifiedPage.paths`` (``html > body > div.main#content > p``,
the innermost ``MAX_PATH_DEPTH`` elements, ending with the block's own element when the
block is one). The absolute depth of a cut path is unknown, so an ancestor is keyed by
its own innermost ``KEY_ELEMENTS`` path elements: siblings at different depths under a
deep ancestor still meet, and two distinct ancestors merge only when their last
``KEY_ELEMENTS`` tags, classes and ids are equal (repeated template items, which the
model may as well read together). Pure Python, no parse: string splits of the paths.
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from pulpie_spark.classify.blockmodel.features import _ELEMENT_TAG_RE   # "div.a#b" -> tag before . or #

KEY_ELEMENTS = 8          # innermost path elements that name an ancestor (paths keep 12)
_ROOT_TAG_RE = re.compile(r"^\s*<([a-zA-Z][\w:-]*)")


def _ancestors(root_tag: str | None, path: str | None) -> list[str]:
    """Path elements above a block whose own tag is ``root_tag`` (outermost first): the path
    without the block's own element."""
    elements = [e.strip() for e in (path or "").split(" > ")]
    elements = [e for e in elements if e]
    if elements and root_tag and _ELEMENT_TAG_RE.split(elements[-1], maxsplit=1)[0].lower() == root_tag:
        elements.pop()
    return elements


def container_groups(blocks: Sequence[str], paths: Sequence[str] | None, levels: int) -> np.ndarray:
    """int32 [n, levels]: per block, the page-local id of its level-L ancestor (one id per
    ancestor element across levels, from 0 in order of first appearance). A block without
    such an ancestor (short or missing path) is a group of its own at that level."""
    n = len(blocks)
    out = np.zeros((n, levels), dtype=np.int32)
    if n == 0 or levels <= 0:
        return out
    paths = list(paths) if paths is not None else []
    ids: dict[tuple, int] = {}
    keys_of: dict[tuple, tuple] = {}   # (path, root tag) -> ancestor keys: siblings share paths
    for i in range(n):
        path = paths[i] if i < len(paths) else None
        m = _ROOT_TAG_RE.match(blocks[i] or "")
        cache_key = (path, m.group(1).lower() if m else None)
        keys = keys_of.get(cache_key)
        if keys is None:
            elements = _ancestors(cache_key[1], path)
            keys = keys_of[cache_key] = tuple(
                " > ".join(elements[max(0, len(elements) - level - KEY_ELEMENTS):len(elements) - level])
                if len(elements) > level else None for level in range(levels))
        for level in range(levels):
            key: tuple = ("a", keys[level]) if keys[level] is not None else ("b", i, level)
            value = ids.get(key)
            if value is None:
                value = ids[key] = len(ids)
            out[i, level] = value
    return out


__all__ = ["container_groups", "KEY_ELEMENTS"]
