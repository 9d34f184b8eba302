"""Where a pass stage's canvas opens: where the document's canvas was, node for node."""

from __future__ import annotations


def match_document_view(window, canvas, shift: float) -> None:
    """Give the stage `canvas` the document canvas's zoom and place.

    The stages keep the loaded graph's places (moved sideways by `shift`), so the scene
    centre carries over. When the document shows groups and the stages every node, the places
    differ: a node shown on both (the selected one, else the one nearest the middle) keeps its
    spot on screen instead.
    """
    if window.show_constants or window.canvas.graph() is None:
        return  # constants as boxes: another layout, nothing to match
    centre = window.canvas.visible_scene_rect().center()
    canvas.set_zoom(window.canvas.zoom_level())
    layout = window.canvas.graph_layout()
    if layout is not None and layout.grouping is not None:
        anchor = _anchor_node(window.canvas, canvas, centre)
        if anchor is not None:
            offset = centre - window.canvas.box_rect(anchor).center()
            canvas.centerOn(canvas.box_rect(anchor).center() + offset)
            return
    centre.setX(centre.x() + shift)
    canvas.centerOn(centre)


def _anchor_node(document, canvas, centre):
    """A node on both canvases: the document's selection, else the nearest to `centre`."""
    both = [k for k in document.graph_layout().boxes
            if isinstance(k, int) and canvas.box_rect(k) is not None]
    selected = document.selected_key()
    if selected in both:
        return selected

    def distance(key) -> float:
        point = document.box_rect(key).center() - centre
        return point.x() ** 2 + point.y() ** 2
    return min(both, key=distance, default=None)
