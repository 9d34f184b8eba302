"""Open and close groups on the model's canvas: clicks, keys, View menu, and revealing nodes.

The open groups are part of the shown layout (`GraphLayout.expanded`); this controller turns
requests into a new layout of the same graph from its `GroupedLayout`, which lays out only the
groups that changed, and keeps them across edits (group ids follow names and node ids).
"""

from __future__ import annotations

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QInputDialog

from app.window.actions import view_menu
from app.window.workers import Job
from compiler.hierarchy import summarize

SYNC_BOXES = 2000  # more boxes than this to show: laid out in a background job

KINDS = {"qdq": "QDQ unit (shown as its integer operator)", "separable":
         "depthwise-separable pair", "residual": "residual block", "scope": "name scope"}


class Grouping:
    """Opening, closing and revealing groups on the window's canvas."""

    def __init__(self, window):
        self.window = window
        self._job: Job | None = None
        window.canvas.groupToggled.connect(self.toggle)
        window.canvas.revealRequested.connect(self.reveal)
        menu = view_menu(window)
        menu.addSeparator()
        self.expand_all_action = self._action(menu, "&Open All Groups", self.expand_all,
                                              "Ctrl+Shift+=")
        self.collapse_all_action = self._action(menu, "&Close All Groups", self.collapse_all,
                                                "Ctrl+Shift+-")
        self.depth_action = self._action(menu, "Close Groups &Below Depth…", self.depth_dialog,
                                         None)
        window.layoutReady.connect(self._update_actions)
        self._update_actions()

    def _action(self, menu, text: str, slot, shortcut: str | None) -> QAction:
        action = QAction(text, self.window)
        if shortcut:
            action.setShortcut(QKeySequence(shortcut))
        action.triggered.connect(slot)
        menu.addAction(action)
        return action

    def _update_actions(self) -> None:
        grouped = self.grouping() is not None
        for action in (self.expand_all_action, self.collapse_all_action, self.depth_action):
            action.setEnabled(grouped)

    def grouping(self):
        """The GroupedLayout of the shown layout, or None (a flat graph).

        None too while the canvas still shows the graph before an edit (a big graph is laid
        out again in the background): its groups may hold nodes the document no longer has.
        """
        layout = self.window.layout_
        grouping = layout.grouping if layout is not None else None
        try:
            current = grouping is not None and grouping.graph is self.window.document.graph
        except ReferenceError:
            current = False
        return grouping if current else None

    def expanded(self) -> frozenset[str]:
        """The groups open now."""
        layout = self.window.layout_
        return layout.expanded if layout is not None else frozenset()

    def set_expanded(self, expanded: frozenset[str]) -> None:
        """Show the graph with exactly these groups open.

        Opening thousands of boxes at once (Open All on a big model) lays out in a background
        job with progress and Cancel; a few groups open at once.
        """
        grouping = self.grouping()
        if grouping is None or expanded == self.expanded():
            return
        if self._job is not None:
            self._job.cancel()
            self._job = None
        if grouping.hierarchy.visible_count(expanded) <= SYNC_BOXES:
            self.window.show_layout(grouping.layout(expanded))
            return
        graph = grouping.graph
        self._job = Job(lambda progress: grouping.layout(expanded), "Opening groups",
                        self.window)
        self._job.succeeded.connect(lambda layout: self._opened(graph, layout))
        self._job.failed.connect(lambda message: self.window.statusBar().showMessage(
            f"Could not open the groups: {message}", 8000))
        self.window.statusBar().showMessage("Opening groups…")
        self._job.start()

    def _opened(self, graph, layout) -> None:
        self._job = None
        if graph is self.window.document.graph:
            self.window.show_layout(layout)

    def toggle(self, key: str) -> None:
        """Open a closed group, close an open one."""
        grouping = self.grouping()
        if grouping is None or key not in grouping.hierarchy.groups:
            return
        expanded = self.expanded()
        self.set_expanded(expanded - {key} if key in expanded else expanded | {key})
        canvas = self.window.canvas
        if key in canvas.graph_layout().boxes:  # closed again: select the box
            canvas.select(key)

    def expand_all(self) -> None:
        """View > Open All Groups."""
        grouping = self.grouping()
        if grouping is not None:
            self.set_expanded(frozenset(grouping.hierarchy.groups))

    def collapse_all(self) -> None:
        """View > Close All Groups."""
        self.set_expanded(frozenset())

    def collapse_to(self, depth: int) -> None:
        """Open the groups `depth` levels deep or less, close the deeper ones."""
        grouping = self.grouping()
        if grouping is not None:
            self.set_expanded(grouping.hierarchy.to_depth(depth))

    def depth_dialog(self) -> None:
        """View > Close Groups Below Depth…: ask for the depth."""
        grouping = self.grouping()
        if grouping is None:
            return
        deepest = grouping.hierarchy.max_depth()
        depth, ok = QInputDialog.getInt(self.window, "Close Groups Below Depth",
                                        f"Levels of groups to keep open (0 to {deepest}):",
                                        1, 0, deepest)
        if ok:
            self.collapse_to(depth)

    def reveal(self, key) -> None:
        """Open the groups holding `key` (a node inside a closed group) so its box shows."""
        grouping = self.grouping()
        if grouping is None or not isinstance(key, int) or key in self.window.layout_.boxes:
            return
        if key not in grouping.hierarchy.parent:
            return
        self.set_expanded(self.expanded() | set(grouping.hierarchy.ancestors(key)))

    def shown_as(self, key):
        """The box showing `key` now: itself, or the closed group holding it."""
        grouping = self.grouping()
        if grouping is None or key in self.window.layout_.boxes:
            return key
        return grouping.hierarchy.shown_as(key, self.expanded())

    def show_properties(self, key: str) -> None:
        """A closed group selected: Properties shows its sums."""
        grouping = self.grouping()
        if grouping is None or not isinstance(key, str) or not key.startswith("group:"):
            return
        group = grouping.hierarchy.groups.get(key)
        graph = self.window.document.graph
        if group is None or graph is not grouping.graph:
            return
        summary = summarize(graph, grouping.hierarchy.members(key), self.window.macs())
        self.window.properties.show_group(graph, group.title, KINDS.get(group.kind, group.kind),
                                          summary)


def install(window) -> Grouping:
    """Add the group actions and connections to `window`."""
    return Grouping(window)


def screenshots(window, save) -> None:
    """The canvas is the main window's own screenshot; nothing more to render."""
