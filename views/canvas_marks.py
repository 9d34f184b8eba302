"""What the canvas marks on its boxes: problems, search matches, a pass's diff, overlays.

A mixin of `views.canvas.GraphCanvas`: it works on the canvas's boxes, frames and edges.
"""

from __future__ import annotations

from collections.abc import Iterable
from html import escape

from PySide6.QtCore import QRectF
from PySide6.QtWidgets import QGraphicsItem

from views import style
from views.graph_items import ghost_item
from views.layout import Box, Key, NodeLabel

FADED_OPACITY = 0.45  # boxes of nodes a pass left unused (pass stepping)


class CanvasMarks:
    """Problems, highlights, diff, overlay, related and faded marks of a GraphCanvas."""

    # -- problems and highlights ------------------------------------------------------------

    def set_problems(self, problems: dict[int, str]) -> None:
        """Mark nodes invalid (red, reason in the tooltip); other nodes go back to normal."""
        self._problems = dict(problems)
        self._apply_problems()
        self.overviewChanged.emit()

    def _apply_problems(self) -> None:
        if self._graph is None:
            return
        nodes = {n.id: n for n in self._graph.nodes}
        values = None
        grouped = {}  # a closed group holding an invalid node shows its first problem
        grouping = self._layout.grouping if self._layout is not None else None
        if grouping is not None:
            for node_id, problem in self._problems.items():
                if node_id in grouping.hierarchy.parent:
                    shown = grouping.hierarchy.shown_as(node_id, self._layout.expanded)
                    if shown != node_id:
                        grouped.setdefault(shown, f"inside: {problem}")
        for key, item in self._boxes.items():
            if item.kind == "group":
                item.set_state(problem=grouped.get(key))
                continue
            if item.kind != "node":
                continue
            problem = self._problems.get(key)
            if problem != item.problem:
                values = values or {v.name: v for v in self._graph.values()}
                item.set_state(problem=problem)
                item.setToolTip(self._box_tip(key, nodes, values))

    def problems(self) -> dict[int, str]:
        """The problems shown."""
        return dict(self._problems)

    def set_highlight(self, keys: Iterable[Key]) -> None:
        """Highlight search matches (a yellow halo, visible at every zoom)."""
        self._highlight_asked = set(keys)
        self._highlight = self._shown_highlight()
        for key, item in self._boxes.items():
            item.set_state(highlighted=key in self._highlight)
        for key, frame in self._frames.items():
            frame.set_state(highlighted=key in self._highlight)
        self.overviewChanged.emit()

    def _shown_highlight(self) -> set[Key]:
        """The keys asked to be highlighted, and the closed groups holding any of them."""
        keys = set(self._highlight_asked)
        grouping = self._layout.grouping if self._layout is not None else None
        if grouping is not None:
            keys |= {grouping.hierarchy.shown_as(k, self._layout.expanded)
                     for k in keys if isinstance(k, int) and k in grouping.hierarchy.parent}
        return keys

    def highlighted(self) -> set[Key]:
        """Keys highlighted now (those shown)."""
        return self._highlight & (set(self._boxes) | set(self._frames))

    # -- pass stepping: what a pass changed ----------------------------------------------

    def set_diff(self, added: Iterable[Key] = (), modified: Iterable[Key] = (),
                 ghosts: dict[Key, tuple[Box, NodeLabel, str]] | None = None) -> None:
        """Outline added (green) and modified (amber) boxes; draw removed nodes as red ghosts.

        `ghosts` maps a removed node's id to its box, label and operator. Replaces any
        previous diff; set_graph clears it.
        """
        added, modified = set(added), set(modified)
        for key, item in self._boxes.items():
            item.set_state(diff="added" if key in added else
                           "modified" if key in modified else None)
        for item in self._ghosts.values():
            self.scene().removeItem(item)
        self._ghosts = {}
        for key, (box, label, op) in (ghosts or {}).items():
            item = ghost_item(key, box, label, style.category_of(op))
            item.setToolTip(f"<b>{escape(label.title)}</b><br>removed by this pass")
            item.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache if self._cached
                              else QGraphicsItem.CacheMode.NoCache)
            self.scene().addItem(item)
            self._ghosts[key] = item
        if self._layout is not None:
            rect = QRectF(0, 0, self._layout.width, self._layout.height)
            for item in self._ghosts.values():
                rect = rect.united(item.sceneBoundingRect())
            self.scene().setSceneRect(rect)
        self.overviewChanged.emit()

    def set_overlay(self, colors: dict[Key, tuple[str, str]], notes: dict[str, str],
                    labels: dict[str, str] | None = None) -> None:
        """Fill boxes with (fill, text) colours; notes go in edge tips, labels on the edges.

        `labels` (value name -> text) is written on one edge of each value. ({}, {}) ends it.
        """
        for key, item in self._boxes.items():
            item.set_state(overlay=colors.get(key))
        labelled: set[str] = set()  # a value read by several nodes is labelled once
        for item in self._edges:
            base, note = item.toolTip().split("<br><i>")[0], notes.get(item.value)
            item.setToolTip(f"{base}<br><i>{note}</i>" if note else base)
            label = (labels or {}).get(item.value, "") if item.value not in labelled else ""
            item.set_label(label)
            if label:
                labelled.add(item.value)
        self.overviewChanged.emit()

    def edge_labels(self) -> dict[str, str]:
        """The text written on the edges, by value name."""
        return {item.value: item.label for item in self._edges if item.label}

    def overlay(self) -> dict[Key, tuple[str, str]]:
        """The overlay colours shown, by key."""
        return {key: item.overlay for key, item in self._boxes.items() if item.overlay}

    def set_related(self, keys: Iterable[Key]) -> None:
        """Mark the nodes that share a source with the selected one (a purple halo)."""
        related = set(keys)
        for key, item in self._boxes.items():
            item.set_state(related=key in related)
        self.overviewChanged.emit()

    def related(self) -> set[Key]:
        """Keys marked as related now."""
        return {key for key, item in self._boxes.items() if item.related}

    def set_faded(self, keys: Iterable[Key]) -> None:
        """Draw these boxes faded (nodes no output uses any more, waiting for a dce)."""
        faded = set(keys)
        for key, item in self._boxes.items():
            item.setOpacity(FADED_OPACITY if key in faded else 1.0)

    def faded(self) -> set[Key]:
        """Keys drawn faded now."""
        return {key for key, item in self._boxes.items() if item.opacity() < 1.0}

    def diff_state(self) -> dict[Key, str]:
        """What the shown diff marks: key -> "added", "modified" or "removed" (ghosts)."""
        out = {key: item.diff for key, item in self._boxes.items() if item.diff}
        out.update({key: "removed" for key in self._ghosts})
        return out

