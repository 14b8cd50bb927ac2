"""Main HTML from the map HTML and block labels.

Keeps the elements whose ``_item_id`` is labelled main with their whole subtree, their
ancestors (so the page's structure around the content survives), and a ``<br>`` right
before or after kept content; everything else goes, together with the text that follows
it (lxml's tail semantics, which the reference reconstruction has). ``cc-alg-uc-text``
run wrappers are unwrapped and ``_item_id`` attributes removed.

``render_main`` also renders the Markdown and text of that main HTML from the tree it was
cut from (one parse of the map HTML per page, none of the main HTML).
"""

from __future__ import annotations

from collections.abc import Sequence

from selectolax.lexbor import LexborHTMLParser

from pulpie_spark.render.markdown import hides_by_style, node_to_markdown, node_to_text

__all__ = ["main_html", "render_main", "ITEM_ID_ATTR", "WRAPPER_TAG"]

ITEM_ID_ATTR = "_item_id"
WRAPPER_TAG = "cc-alg-uc-text"
_ITEM_ID_SELECTOR = f"[{ITEM_ID_ATTR}]"


def _is_main(label) -> bool:
    try:
        return int(label) == 1
    except (TypeError, ValueError):
        return False


def _previous_non_text(node):
    """The non-text node right before ``node`` in document order: the last non-text
    descendant of its previous non-text sibling, else its parent."""
    sibling = node.prev
    while sibling is not None and sibling.is_text_node:
        sibling = sibling.prev
    if sibling is None:
        return node.parent
    while True:  # descend to the last non-text node inside the sibling
        child = sibling.last_child
        while child is not None and child.is_text_node:
            child = child.prev
        if child is None:
            return sibling
        sibling = child


def _next_non_text(node, root_id: int):
    """The non-text node right after ``node`` (which has no children: a <br>) in document
    order, within the root: the next non-text sibling of it or of its nearest ancestor
    below the root that has one."""
    while node is not None and node.mem_id != root_id:
        sibling = node.next
        while sibling is not None and sibling.is_text_node:
            sibling = sibling.next
        if sibling is not None:
            return sibling
        node = node.parent
    return None


def main_html(map_html: str, labels: Sequence[int]) -> str:
    """HTML of the blocks labelled main; ``labels[i]`` is the label of ``_item_id == i + 1``.

    Returns "" when nothing is main or the map is empty. Never raises on odd input.
    """
    doc = _main_document(map_html, labels)
    return "" if doc is None else doc.root.html or ""


def render_main(map_html: str, labels: Sequence[int], *, links: bool = False,
                images: bool = False) -> tuple[str, str, str]:
    """(main HTML, Markdown, text) of the blocks labelled main: ``main_html`` and
    ``html_to_markdown`` / ``html_to_text`` of it, with the Markdown and text rendered
    from the main document already in memory instead of a parse of its HTML string
    (adjacent text nodes are merged first, so the tree is the one the parse would give:
    tests/test_reconstruct.py checks both ways agree)."""
    doc = _main_document(map_html, labels)
    if doc is None:
        return "", "", ""
    html = doc.root.html or ""
    if not html.strip():
        return html, "", ""
    doc.root.merge_text_nodes()
    root = doc.body or doc.root
    return html, node_to_markdown(root, links=links, images=images), node_to_text(root)


def _main_document(map_html: str, labels: Sequence[int]):
    """The parsed map HTML cut down to the main blocks, or None when nothing is main."""
    if not map_html or labels is None:
        return None
    main_ids = {str(i + 1) for i, label in enumerate(labels) if _is_main(label)}
    if not main_ids:
        return None
    doc = LexborHTMLParser(map_html)
    root = doc.root
    if root is None:
        return None

    # First element per id, in document order (as the reference looks ids up).
    firsts = {}
    for node in root.css(_ITEM_ID_SELECTOR):
        iid = node.attrs.get(ITEM_ID_ATTR)
        if iid in main_ids and iid not in firsts:
            firsts[iid] = node
    if not firsts:
        return None

    whole: set[int] = set()      # inside a main element (kept with everything in it)
    ancestors: set[int] = set()  # on the path to a main element (kept, children filtered)
    frame = []                   # the main elements and their ancestors
    for node in firsts.values():
        if node.mem_id in whole:
            continue
        frame.append(node)
        for inner in node.traverse(include_text=False):
            whole.add(inner.mem_id)
        up = node.parent
        while up is not None and up.mem_id not in ancestors:
            ancestors.add(up.mem_id)
            frame.append(up)
            up = up.parent

    # A <br> right before or after kept (non-br) content is kept too. "Before" and "after"
    # are the neighbours in document order among non-text nodes (what a walk over every
    # element would pair up); only the brs are visited, not the whole page. Whether a br
    # is kept depends only on its non-br neighbour, which this step never changes, so the
    # brs can be looked at in any order.
    def is_kept_content(node) -> bool:
        return node is not None and node.tag != "br" and (node.mem_id in whole or node.mem_id in ancestors)

    for br in doc.tags("br"):
        if is_kept_content(_previous_non_text(br)) or is_kept_content(_next_non_text(br, root.mem_id)):
            whole.add(br.mem_id)

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
    # A block the classifier labelled main is rendered even when it or a container around
    # it is marked hidden: the segmenter keeps such elements (block-format rule 2 removes
    # inline-style-hidden ones only), and a page that hides its article body until a
    # script runs (a paywall's ``<div class="paywall" hidden>``) still carries the article.
    # Hidden elements inside a main block keep their markers and stay unrendered.
    for node in frame:
        if not node.is_element_node:   # the document node above <html>
            continue
        attrs = node.attrs
        if "hidden" in attrs:
            del attrs["hidden"]
        if hides_by_style(attrs.get("style")):
            del attrs["style"]

    for node in root.css(_ITEM_ID_SELECTOR):
        del node.attrs[ITEM_ID_ATTR]
    root.unwrap_tags([WRAPPER_TAG])
    return doc
