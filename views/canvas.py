"""The graph canvas: a zoomable, navigable picture of a graph laid out by views.layout."""

from __future__ import annotations

from html import escape

from PySide6.QtCore import QPoint, QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QKeyEvent, QMouseEvent, QPainter, QWheelEvent
from PySide6.QtWidgets import QGraphicsItem, QGraphicsScene, QGraphicsView, QWidget

from compiler.ir.graph import Graph
from views import style
from views.canvas_marks import CanvasMarks
from views.graph_items import BoxItem, EdgeItem
from views.group_items import FrameItem
from views.labels import edge_tip, type_text
from views.layout import GraphLayout, Key
from views.navigation import neighbour

MIN_ZOOM = 0.005
MAX_ZOOM = 4.0
ZOOM_STEP = 1.25
CLICK_SLOP = 4  # pixels a press may move and still count as a click, not a drag
READABLE_ZOOM = 0.8  # zoom that search and keyboard navigation bring a far-out view to


def _kind(key: Key) -> str:
    if isinstance(key, int):
        return "node"
    return key.split(":", 1)[0]


def _category(kind: str, key: Key, nodes: dict, layout: GraphLayout) -> str:
    """The colour family of a box: its operator's, a group's operator's, or its kind."""
    if kind == "node":
        return style.category_of(nodes[key].op)
    if kind == "group":
        op = layout.groups.get(key, ("", 0))[0]
        return style.category_of(op) if op else "group"
    return kind


def _walkable(edge, layout: GraphLayout, values: dict) -> tuple[Key, Key]:
    """The boxes an arrow key moves between along `edge`, through open groups' frames.

    An edge into a frame continues at the frame's input pill for the value; an edge out of a
    frame starts at the box inside that makes the value.
    """
    src, dst = edge.src, edge.dst
    if dst in layout.frames:
        dst = f"port:{edge.value}@{dst}"
    if src in layout.frames and layout.grouping is not None:
        value = values.get(edge.value)
        producer = value.producer if value is not None else None
        if producer is not None and producer.id in layout.grouping.hierarchy.parent:
            src = layout.grouping.hierarchy.shown_as(producer.id, layout.expanded)
    return src, dst


class GraphCanvas(CanvasMarks, QGraphicsView):
    """Shows one graph; emits what the user selects and activates.

    Selection is the canvas's own state (one node or one edge), not QGraphicsItem selection,
    so programmatic and mouse selection take one path and the items stay simple.
    """

    nodeSelected = Signal(object)  # key or None
    edgeSelected = Signal(str)  # value name
    nodeActivated = Signal(object)  # key (Enter or double click)
    groupToggled = Signal(object)  # group key: open it if closed, close it if open
    revealRequested = Signal(object)  # node id inside closed groups: open them to show it
    overviewChanged = Signal()  # boxes or their colours changed (the minimap redraws)
    viewportChanged = Signal()  # the visible part of the scene moved or was zoomed

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setScene(QGraphicsScene(self))
        self._opening_view = False  # the view reset_view made, untouched since: it follows size
        self.setRenderHints(QPainter.RenderHint.Antialiasing
                            | QPainter.RenderHint.TextAntialiasing)
        self.setBackgroundBrush(style.color(style.BACKGROUND))
        self.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.SmartViewportUpdate)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.NoAnchor)
        self.setResizeAnchor(QGraphicsView.ViewportAnchor.AnchorViewCenter)
        self.setOptimizationFlag(QGraphicsView.OptimizationFlag.DontSavePainterState, False)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setMouseTracking(True)
        self.horizontalScrollBar().valueChanged.connect(self.viewportChanged)
        self.verticalScrollBar().valueChanged.connect(self.viewportChanged)
        self._graph: Graph | None = None
        self._layout: GraphLayout | None = None
        self._boxes: dict[Key, BoxItem] = {}
        self._frames: dict[Key, FrameItem] = {}
        self._edges: list[EdgeItem] = []
        self._edges_of: dict[Key, list[EdgeItem]] = {}
        self._producers: dict[Key, list[Key]] = {}
        self._consumers: dict[Key, list[Key]] = {}
        self._problems: dict[int, str] = {}
        self._highlight: set[Key] = set()
        self._highlight_asked: set[Key] = set()
        self._ghosts: dict[Key, BoxItem] = {}  # nodes a pass removed (pass stepping)
        self._selected: Key | None = None
        self._selected_edge: str | None = None
        self._came_from: tuple[str, Key] | None = None  # last keyboard move: direction, origin
        self._cached: bool | None = None  # whether boxes cache their pictures now
        self._press: QPoint | None = None
        self._dragged = False

    # -- content ----------------------------------------------------------------------------

    def set_graph(self, graph: Graph | None, layout: GraphLayout | None, *,
                  new_model: bool = False) -> None:
        """Show `graph` as laid out by `layout`, replacing what was shown.

        When most boxes survive (an edit, a re-layout), the view stays where it was and the
        selection is kept; a different model (or any with `new_model`: ids are given per file,
        so another model's boxes may share them) starts with the opening view (reset_view).
        Problems and search highlights persist until replaced (set_problems, set_highlight).
        """
        anchor = self._view_anchor()
        old_keys = set(self._boxes)
        self.scene().clear()
        self._boxes, self._edges, self._edges_of = {}, [], {}
        self._frames, self._ghosts = {}, {}
        self._producers, self._consumers = {}, {}
        self._graph, self._layout = graph, layout
        if graph is None or layout is None:
            self.scene().setSceneRect(QRectF())
            self._set_selection(None, None)
            self.overviewChanged.emit()
            return
        values = {v.name: v for v in graph.values()}
        nodes = {n.id: n for n in graph.nodes}
        for key, box in layout.frames.items():
            frame = FrameItem(key, box, layout.labels[key].title,
                              layout.groups.get(key, ("", 0))[1])
            self.scene().addItem(frame)
            self._frames[key] = frame
        for key, box in layout.boxes.items():
            kind = _kind(key)
            item = BoxItem(key, kind, box, layout.labels[key], _category(kind, key, nodes, layout))
            self.scene().addItem(item)
            self._boxes[key] = item
        for edge in layout.edges:
            value = values.get(edge.value)
            item = EdgeItem(edge.src, edge.dst, edge.value, edge.points,
                            integer=value is not None and value.type.dtype in ("int8", "uint8"))
            item.setToolTip(edge_tip(values.get(edge.value), edge.value))
            self.scene().addItem(item)
            self._edges.append(item)
            self._edges_of.setdefault(edge.src, []).append(item)
            self._edges_of.setdefault(edge.dst, []).append(item)
            src, dst = _walkable(edge, layout, values)
            if src in layout.boxes and dst in layout.boxes:
                self._consumers.setdefault(src, []).append(dst)
                self._producers.setdefault(dst, []).append(src)
        for key, item in self._boxes.items():
            item.setToolTip(self._box_tip(key, nodes, values))
        self.scene().setSceneRect(QRectF(0, 0, layout.width, layout.height))
        self._cached = None
        self._sync_cache()
        self._apply_problems()
        self._highlight = self._shown_highlight()
        for key in self._highlight & set(self._boxes):
            self._boxes[key].set_state(highlighted=True)
        for key in self._highlight & set(self._frames):
            self._frames[key].set_state(highlighted=True)
        selected = self._selected if self._selected in self._boxes else None
        edge = self._selected_edge if self._selected_edge in values else None
        self._selected = self._selected_edge = None
        self._set_selection(selected, edge)
        if not new_model and old_keys and len(old_keys & set(self._boxes)) * 2 >= len(old_keys):
            self._restore_anchor(anchor)
        else:
            self.reset_view()
        self.overviewChanged.emit()

    def graph(self) -> Graph | None:
        """The graph shown."""
        return self._graph

    def graph_layout(self) -> GraphLayout | None:
        """The layout shown."""
        return self._layout

    def box_rect(self, key: Key) -> QRectF | None:
        """The scene rectangle of a box (or of an open group's frame), None when not shown."""
        item = self._boxes.get(key) or self._frames.get(key)
        return item.sceneBoundingRect().adjusted(5, 5, -5, -5) if item else None

    def overview(self) -> list[tuple[QRectF, QColor]]:
        """Every box's rectangle and its colour at a glance (for the minimap)."""
        out = []
        for item in self._boxes.values():
            color, _, border, _ = item._colors()
            if item.kind != "node" and not item.problem:
                color = border
            if item.highlighted:
                color = style.color(style.HIGHLIGHT)
            if item.selected:
                color = style.color(style.SELECTED)
            out.append((QRectF(item.pos(), item.rect.size()), color))
        return out

    def edge_paths(self):
        """The painter paths of all edges (for the minimap)."""
        return [item.path() for item in self._edges]

    def _box_tip(self, key: Key, nodes, values) -> str:
        kind = _kind(key)
        if kind == "node":
            node = nodes[key]
            lines = [f"<b>{escape(node.name)}</b>", escape(node.op)]
            problem = self._problems.get(key)
            if problem:
                lines.append(f"<span style='color:{style.PROBLEM}'>⚠ {escape(problem)}</span>")
            return "<br>".join(lines)
        if kind == "group":
            label = self._layout.labels[key]
            return "<br>".join([f"<b>{escape(label.title)}</b>", *map(escape, label.lines),
                                "<i>double click or + to open</i>"])
        name = self._layout.values.get(key, key.split(":", 1)[1]) if self._layout else key
        what = {"in": "graph input", "out": "graph output", "const": "constant",
                "port": "enters the group from outside:"}[kind]
        value = values.get(name)
        type_line = escape(type_text(value.type)) if value is not None else ""
        return f"<b>{escape(name)}</b><br>{what} {type_line}"

    # -- groups -----------------------------------------------------------------------------

    def frames(self) -> dict[Key, QRectF]:
        """The open groups' frames, by group key, in scene coordinates."""
        return {key: item.sceneBoundingRect().adjusted(3, 3, -3, -3)
                for key, item in self._frames.items()}

    def frame_header(self, key: Key) -> QRectF | None:
        """The title band of an open group (a click there closes it), in scene coordinates."""
        item = self._frames.get(key)
        return item.mapRectToScene(item.header()) if item else None

    def enclosing_frame(self, key: Key) -> Key | None:
        """The innermost open group around a box."""
        rect = self.box_rect(key)
        if rect is None:
            return None
        around = [(f.rect.width() * f.rect.height(), k) for k, f in self._frames.items()
                  if f.sceneBoundingRect().contains(rect)]
        return min(around)[1] if around else None

    # -- selection --------------------------------------------------------------------------

    def select(self, key: Key | None) -> None:
        """Select a node (or input/output/constant box); None or an unknown key clears.

        A node inside closed groups asks for them to be opened first (revealRequested).
        """
        self._came_from = None
        if key is not None and key not in self._boxes and self._layout is not None \
                and self._layout.grouping is not None:
            self.revealRequested.emit(key)
        self._set_selection(key if key in self._boxes else None, None)

    def select_edge(self, value: str | None) -> None:
        """Select the edges carrying `value`."""
        known = any(e.value == value for e in self._edges)
        self._set_selection(None, value if known else None)

    def selected_key(self) -> Key | None:
        """The selected box's key, or None."""
        return self._selected

    def selected_edge(self) -> str | None:
        """The value name of the selected edge, or None."""
        return self._selected_edge

    def _set_selection(self, key: Key | None, edge: str | None) -> None:
        old_key, old_edge = self._selected, self._selected_edge
        if old_key == key and old_edge == edge:
            return
        if old_key in self._boxes:
            self._boxes[old_key].set_state(selected=False)
            for item in self._edges_of.get(old_key, []):
                item.set_state(active=False)
        if old_edge is not None:
            for item in self._edges:
                if item.value == old_edge:
                    item.set_state(selected=False)
        self._selected, self._selected_edge = key, edge
        if key is not None:
            self._boxes[key].set_state(selected=True)
            for item in self._edges_of.get(key, []):
                item.set_state(active=True)
        if edge is not None:
            for item in self._edges:
                if item.value == edge:
                    item.set_state(selected=True)
        if key != old_key:
            self.nodeSelected.emit(key)
        if edge is not None and edge != old_edge:
            self.edgeSelected.emit(edge)
        self.overviewChanged.emit()

    # -- view -------------------------------------------------------------------------------

    def zoom_level(self) -> float:
        """Device pixels per scene unit (1.0: boxes at their designed size)."""
        return self.transform().m11()

    def set_zoom(self, zoom: float, anchor: QPointF | None = None) -> None:
        """Zoom to `zoom`, keeping the scene point under `anchor` (viewport coords) in place."""
        zoom = max(MIN_ZOOM, min(MAX_ZOOM, zoom))
        self._opening_view = False
        pivot = anchor if anchor is not None else QPointF(self.viewport().rect().center())
        scene_point = self.mapToScene(pivot.toPoint())
        self.resetTransform()
        self.scale(zoom, zoom)
        delta = self.mapToScene(pivot.toPoint()) - scene_point
        self.centerOn(self.mapToScene(self.viewport().rect().center()) - delta)
        self._sync_cache()
        self.viewportChanged.emit()

    def _sync_cache(self) -> None:
        """Cache box pictures only when zoomed in enough to draw text.

        A cached box is a pixmap made at each new zoom: worth it when text is drawn (panning
        then blits pixmaps), a waste when zoomed out, where a box is one rectangle fill and
        making thousands of pixmaps would slow down every zoom step.
        """
        cached = self.zoom_level() >= style.LOD_TEXT
        if cached == self._cached:
            return
        self._cached = cached
        mode = (QGraphicsItem.CacheMode.DeviceCoordinateCache if cached
                else QGraphicsItem.CacheMode.NoCache)
        for item in [*self._boxes.values(), *self._ghosts.values()]:
            item.setCacheMode(mode)

    def zoom_in(self) -> None:
        """One step closer."""
        self.set_zoom(self.zoom_level() * ZOOM_STEP)

    def zoom_out(self) -> None:
        """One step farther."""
        self.set_zoom(self.zoom_level() / ZOOM_STEP)

    def fit(self) -> None:
        """Show the whole graph."""
        self._opening_view = False
        rect = self.scene().sceneRect()
        if rect.isEmpty():
            return
        # Measured against the viewport without scroll bars: fitted, the graph needs none,
        # so the zoom does not depend on whether they were showing before.
        room = self.maximumViewportSize()
        zoom = min((room.width() - 4) / rect.width(), (room.height() - 4) / rect.height())
        self.resetTransform()
        self.scale(min(zoom, 1.0), min(zoom, 1.0))  # a tiny graph is not blown up
        self._sync_cache()
        self.centerOn(rect.center())
        self.viewportChanged.emit()

    def reset_view(self) -> None:
        """The view a model opens with: the whole graph if it is readable so, else its top."""
        rect = self.scene().sceneRect()
        if rect.isEmpty():
            return
        view = self.maximumViewportSize()
        fit = min(view.width() / rect.width(), view.height() / rect.height())
        if fit >= 0.6:
            self.fit()
            self._opening_view = True
            return
        self.set_zoom(min(1.0, max(READABLE_ZOOM, fit)))
        first = min(self._boxes.values(), key=lambda i: (i.pos().y(), i.pos().x()))
        x = first.pos().x() + first.rect.width() / 2
        half_h = self.viewport().height() / 2 / self.zoom_level()  # scroll bars now shown
        self.centerOn(QPointF(x, rect.top() + half_h))
        self._opening_view = True
        self.viewportChanged.emit()

    def center_on(self, key: Key) -> None:
        """Bring a box to the middle of the view, zooming in first if text would be unreadable."""
        self._opening_view = False
        item = self._boxes.get(key)
        if item is None:
            return
        if self.zoom_level() < style.LOD_TEXT:
            self.set_zoom(READABLE_ZOOM)
        self.centerOn(item.sceneBoundingRect().center())
        self.viewportChanged.emit()

    def visible_scene_rect(self) -> QRectF:
        """The part of the scene the viewport shows."""
        return self.mapToScene(self.viewport().rect()).boundingRect()

    def _view_anchor(self):
        """A box near the view centre and its offset from it, to restore after a re-layout."""
        if not self._boxes:
            return None
        centre = self.visible_scene_rect().center()
        key = self._selected if self._selected in self._boxes else min(
            self._boxes, key=lambda k: _distance(self._boxes[k].sceneBoundingRect().center(),
                                                 centre))
        return key, centre - self._boxes[key].sceneBoundingRect().center()

    def _restore_anchor(self, anchor) -> None:
        if anchor is None or anchor[0] not in self._boxes:
            return
        key, offset = anchor
        self.centerOn(self._boxes[key].sceneBoundingRect().center() + offset)
        self.viewportChanged.emit()

    def resizeEvent(self, event) -> None:  # noqa: D102 - Qt override
        super().resizeEvent(event)
        if self._opening_view:  # docks still settling after an open: the opening view again
            self.reset_view()
        self.viewportChanged.emit()

    # -- mouse ------------------------------------------------------------------------------

    def wheelEvent(self, event: QWheelEvent) -> None:
        """Zoom around the cursor; a touchpad's two-finger scroll (no Ctrl) pans instead."""
        mods = event.modifiers()
        if not event.pixelDelta().isNull() and not mods & Qt.KeyboardModifier.ControlModifier:
            super().wheelEvent(event)
            return
        if mods & Qt.KeyboardModifier.ShiftModifier:
            super().wheelEvent(event)
            return
        steps = event.angleDelta().y() / 120.0
        if steps:
            self.set_zoom(self.zoom_level() * ZOOM_STEP ** steps, event.position())
        event.accept()

    def mousePressEvent(self, event: QMouseEvent) -> None:
        """Start a possible drag (pan) or click."""
        self._opening_view = False
        if event.button() == Qt.MouseButton.LeftButton:
            self._press = event.position().toPoint()
            self._dragged = False
            self._scroll_at_press = (self.horizontalScrollBar().value(),
                                     self.verticalScrollBar().value())
            event.accept()
            return
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        """Pan while the left button is held."""
        if self._press is not None and event.buttons() & Qt.MouseButton.LeftButton:
            delta = event.position().toPoint() - self._press
            if not self._dragged and delta.manhattanLength() > CLICK_SLOP:
                self._dragged = True
                self.viewport().setCursor(Qt.CursorShape.ClosedHandCursor)
            if self._dragged:
                h, v = self._scroll_at_press
                self.horizontalScrollBar().setValue(h - delta.x())
                self.verticalScrollBar().setValue(v - delta.y())
            event.accept()
            return
        super().mouseMoveEvent(event)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        """A release without a drag is a click: select what is under the cursor."""
        if event.button() == Qt.MouseButton.LeftButton and self._press is not None:
            if self._dragged:
                self.viewport().unsetCursor()
            else:
                self._click(event.position().toPoint())
            self._press = None
            event.accept()
            return
        super().mouseReleaseEvent(event)

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        """Double click on a box activates it; on a closed group, opens it."""
        item = self._item_at(event.position().toPoint())
        if isinstance(item, BoxItem) and item.kind == "group":
            self.select(item.key)
            self.groupToggled.emit(item.key)
        elif isinstance(item, BoxItem):
            self.select(item.key)
            self.nodeActivated.emit(item.key)
        event.accept()

    def _item_at(self, pos: QPoint):
        for item in self.items(pos):
            if isinstance(item, (BoxItem, EdgeItem, FrameItem)) \
                    and not getattr(item, "ghost", False):
                return item
        return None

    def _click(self, pos: QPoint) -> None:
        item = self._item_at(pos)
        self._came_from = None
        if isinstance(item, FrameItem):  # the title band of an open group: close it
            self.groupToggled.emit(item.key)
        elif isinstance(item, BoxItem):
            self._set_selection(item.key, None)
        elif isinstance(item, EdgeItem):
            self._set_selection(None, item.value)
        else:
            self._set_selection(None, None)

    # -- keyboard ---------------------------------------------------------------------------

    def keyPressEvent(self, event: QKeyEvent) -> None:
        """Arrows walk the graph, Enter activates, Escape clears the selection.

        + opens the selected group, - closes the open group around the selection.
        """
        key = event.key()
        moves = {Qt.Key.Key_Down: "down", Qt.Key.Key_Up: "up", Qt.Key.Key_Left: "left",
                 Qt.Key.Key_Right: "right"}
        if key in moves and self._boxes:
            self._move(moves[key])
        elif key in (Qt.Key.Key_Plus, Qt.Key.Key_Equal) and isinstance(self._selected, str) \
                and _kind(self._selected) == "group":
            self.groupToggled.emit(self._selected)
        elif key == Qt.Key.Key_Minus and self._selected is not None:
            frame = self.enclosing_frame(self._selected)
            if frame is not None:
                self.groupToggled.emit(frame)
        elif key in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and self._selected is not None:
            self.nodeActivated.emit(self._selected)
        elif key == Qt.Key.Key_Escape:
            self.select(None)
        else:
            super().keyPressEvent(event)
            return
        event.accept()

    def _x(self, key: Key) -> float:
        return self._boxes[key].sceneBoundingRect().center().x()

    def neighbour(self, key: Key, direction: str) -> Key | None:
        """The box an arrow key leads to from `key` (views.navigation.neighbour's rule)."""
        return neighbour(self._producers, self._consumers, self._x, key, direction,
                         self._came_from)

    def _move(self, direction: str) -> None:
        current = self._selected
        if current is None:
            first = min(self._boxes.values(), key=lambda i: (i.pos().y(), i.pos().x()))
            self.select(first.key)
            self.ensureVisible(first, 40, 40)
            return
        target = self.neighbour(current, direction)
        if target is None:
            return
        came = self._came_from
        if direction in ("down", "up"):
            came = ("down" if direction == "down" else "up", current)
        self._set_selection(target, None)
        self._came_from = came
        item = self._boxes[target]
        if self.zoom_level() < style.LOD_TEXT:
            self.center_on(target)
        else:
            self.ensureVisible(item, 60, 60)
        self.viewportChanged.emit()


def _distance(a: QPointF, b: QPointF) -> float:
    return (a - b).x() ** 2 + (a - b).y() ** 2
