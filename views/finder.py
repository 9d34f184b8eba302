"""Find (Ctrl+F) and the canvas on screen: the model's, or a pass stage's while one is shown.

Search, the minimap, the zoom actions and the zoom readout act on whichever canvas is on
screen, so a pass stage is explored like the model: its own nodes are found, selected and
framed. The search bar (`views.search.SearchBar`) only asks; this answers it.
"""

from __future__ import annotations

from PySide6.QtCore import QObject

from compiler.errors import KilnError
from compiler.search import find_nodes
from views.canvas import GraphCanvas


class Finder(QObject):
    """Answers the window's search bar on the canvas on screen, and follows which one it is."""

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.bar = window.search_bar
        self.shown: GraphCanvas = window.canvas
        self.query: tuple[str, bool] = ("", False)
        self.bar.queryChanged.connect(self.search)
        self.bar.currentChanged.connect(self.select)
        self.bar.closed.connect(self._closed)

    def show_canvas(self, canvas: GraphCanvas) -> None:
        """`canvas` is on screen (or shows another graph): move there, search it again."""
        window = self.window
        if canvas is not self.shown:
            self.shown.viewportChanged.disconnect(window.update_zoom)
            canvas.viewportChanged.connect(window.update_zoom)
            self.shown.set_highlight([])  # the highlight moves with the search
            self.shown = canvas
            window.minimap.set_canvas(canvas)
        self.refresh()
        window.update_zoom()

    def refresh(self) -> None:
        """Search the shown graph again for the open query, without moving (it changed)."""
        if self.bar.isVisible() and self.query[0]:
            self.search(*self.query, move=False)

    def search(self, text: str, regex: bool, move: bool = True) -> None:
        """Highlight the matches of a query; with `move`, go to the first."""
        self.query = (text, regex)
        canvas = self.shown
        graph = self.window.document.graph if canvas is self.window.canvas else canvas.graph()
        if graph is None:
            return
        try:
            ids = find_nodes(graph, text, regex=regex)
        except KilnError as exc:
            self.bar.set_error(str(exc))
            canvas.set_highlight([])
            return
        canvas.set_highlight(ids)
        if move:
            self.bar.set_matches(ids)
        else:
            self.bar.refresh_matches(ids)

    def select(self, key) -> None:
        """Select and centre a box of the canvas on screen (a match, a navigation)."""
        if self.shown is self.window.canvas:
            self.window.select_and_center(key)
        else:
            self.shown.select(key)
            self.shown.center_on(key)

    def _closed(self) -> None:
        self.query = ("", False)
        self.shown.set_highlight([])
        self.shown.setFocus()
