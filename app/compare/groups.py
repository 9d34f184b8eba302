"""Groups on the Compare window's canvases: opened and closed there, coloured by their insides.

A QDQ model compared with its float form would otherwise be a wall of Quantize and Dequantize
nodes on one side. Each canvas lays its graph out with groups (`views.group_layout`); a closed
group takes the colour of the most telling difference among its members, so a closed unit that
changed still shows it.
"""

from __future__ import annotations

from views.canvas import GraphCanvas
from views.compare_view import STATUS_COLORS

# Later entries win: a group holding an added node and a changed one shows "added".
SEVERITY = ("metrics", "folded", "changed", "added", "removed")


def with_groups(colors: dict, layout) -> dict:
    """`colors` (node id -> (fill, text)) and a colour for each closed group of `layout`."""
    if layout is None or layout.grouping is None:
        return colors
    rank = {STATUS_COLORS[s]: i for i, s in enumerate(SEVERITY)}
    hierarchy = layout.grouping.hierarchy
    out = dict(colors)
    for key in layout.groups:
        if key not in layout.boxes:
            continue
        inside = [colors[m] for m in hierarchy.members(key) if m in colors]
        if inside:
            out[key] = max(inside, key=lambda c: rank.get(c[0], -1))
    return out


class CanvasGroups:
    """Opens and closes one compare canvas's groups and keeps its colours on them."""

    def __init__(self, canvas: GraphCanvas):
        self.canvas = canvas
        self.colors: dict = {}
        canvas.groupToggled.connect(self.toggle)
        canvas.revealRequested.connect(self.reveal)

    def show(self, colors: dict) -> None:
        """Colour the canvas: `colors` on nodes, the most telling inside on closed groups."""
        self.colors = colors
        self.canvas.set_overlay(with_groups(colors, self.canvas.graph_layout()), {})

    def _relayout(self, expanded: frozenset) -> None:
        layout = self.canvas.graph_layout()
        if layout is None or layout.grouping is None or expanded == layout.expanded:
            return
        self.canvas.set_graph(self.canvas.graph(), layout.grouping.layout(expanded))
        self.show(self.colors)

    def expand_all(self) -> None:
        """Open every group."""
        layout = self.canvas.graph_layout()
        if layout is not None and layout.grouping is not None:
            self._relayout(frozenset(layout.grouping.hierarchy.groups))

    def toggle(self, key) -> None:
        """Open a closed group, close an open one."""
        layout = self.canvas.graph_layout()
        if layout is None or layout.grouping is None:
            return
        expanded = layout.expanded
        self._relayout(expanded - {key} if key in expanded else expanded | {key})

    def reveal(self, key) -> None:
        """Open the groups around node `key` (its counterpart was selected on the other side)."""
        layout = self.canvas.graph_layout()
        if layout is None or layout.grouping is None or key not in layout.grouping.hierarchy.parent:
            return
        self._relayout(layout.expanded | set(layout.grouping.hierarchy.ancestors(key)))
