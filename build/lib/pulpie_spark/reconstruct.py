"""Main HTML from the map HTML and block labels.

Keeps the elements whose ``_item_id`` is labelled main with their whole subtree, their
ancestors (so the page's structure around the content survives), and a ``<br>`` right
before or after kept content; everything else goes, together with the text that follows
it (lxml's tail semantics, which the reference reconstruction has). ``cc-alg-uc-text``
run wrappers are unwrapped and ``_item_id`` attributes removed.
"""

from __future__ import annotations

from collections.abc import Sequence

from selectolax.lexbor import LexborHTMLParser

__all__ = ["main_html", "ITEM_ID_ATTR", "WRAPPER_TAG"]

ITEM_ID_ATTR = "_item_id"
WRAPPER_TAG = "cc-alg-uc-text"


def _is_main(label) -> bool:
    try:
        return int(label) == 1
    except (TypeError, ValueError):
        return False


def main_html(map_html: str, labels: Sequence[int]) -> str:
    """HTML of the blocks labelled main; ``labels[i]`` is the label of ``_item_id == i + 1``.

    Returns "" when nothing is main or the map is empty. Never raises on odd input.
    """
    if not map_html or labels is None:
        return ""
    main_ids = {str(i + 1) for i, label in enumerate(labels) if _is_main(label)}
    if not main_ids:
        return ""
    doc = LexborHTMLParser(map_html)
    root = doc.root
    if root is None:
        return ""

    # First element per id, in document order (as the reference looks ids up).
    firsts = {}
    for node in doc.css("[%s]" % ITEM_ID_ATTR):
        iid = node.attributes.get(ITEM_ID_ATTR)
        if iid in main_ids and iid not in firsts:
            firsts[iid] = node
    if not firsts:
        return ""

    whole: set[int] = set()      # inside a main element (kept with everything in it)
    ancestors: set[int] = set()  # on the path to a main element (kept, children filtered)
    for node in firsts.values():
        if node.mem_id in whole:
            continue
        for inner in node.traverse(include_text=False):
            whole.add(inner.mem_id)
        up = node.parent
        while up is not None and up.mem_id not in ancestors:
            ancestors.add(up.mem_id)
            up = up.parent

    # A <br> right before or after kept (non-br) content is kept too, in document order.
    previous = None
    for node in root.traverse(include_text=False):
        if previous is not None:
            mid, pid = node.mem_id, previous.mem_id
            if node.tag == "br" and previous.tag != "br" and (pid in whole or pid in ancestors):
                whole.add(mid)
            elif previous.tag == "br" and node.tag != "br" and (mid in whole or mid in ancestors):
                whole.add(pid)
        previous = node

    # Remove what is not kept, walking down only through ancestor elements (no recursion).
    doomed = []
    stack = [root]
    while stack:
        node = stack.pop()
        after_removed = False
        for child in node.iter(include_text=True):
            if child.is_element_node:
                cid = child.mem_id
                if cid in whole:
                    after_removed = False
                elif cid in ancestors:
                    after_removed = False
                    stack.append(child)
                else:
                    doomed.append(child)
                    after_removed = True
            elif child.is_comment_node or (after_removed and child.is_text_node):
                doomed.append(child)
    for node in doomed:
        node.decompose()

    for node in root.css("[%s]" % ITEM_ID_ATTR):
        del node.attrs[ITEM_ID_ATTR]
    root.unwrap_tags([WRAPPER_TAG])
    return root.html or ""
