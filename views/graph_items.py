"""The graphics items of the graph canvas: node boxes, input/output pills and edges."""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import (
    QBrush,
    QColor,
    QFontMetricsF,
    QPainter,
    QPainterPath,
    QPainterPathStroker,
    QPen,
    QPolygonF,
)
from PySide6.QtWidgets import QGraphicsItem, QGraphicsPathItem, QStyleOptionGraphicsItem

from views import labels, style
from views.labels import NodeLabel
from views.layout import Box, Key
from views.quant_colors import (
    EDGE_LABEL_BORDER,
    EDGE_LABEL_FILL,
    EDGE_LABEL_TEXT,
    overlay_palette,
)

HALO = 5.0  # room around a box for the selection and search outlines
RADIUS = 5.0
ARROW = 7.0
LABEL_DROP = 22.0  # an edge's label sits this far below its producer: in the first layer gap
LABEL_PAD = 4.0

# Pass stepping: what a pass did to a node, as an outline colour (removed nodes are ghosts).
DIFF_COLORS = {"added": "#2e9d46", "removed": "#d32f2f", "modified": "#f0a202"}
OPERATORS = ("node", "group")  # boxes drawn with a coloured title band
STACK = 4.0  # offset of the card drawn behind a closed group's box
GHOST_OPACITY = 0.4
RELATED = "#8e24aa"  # halo of nodes sharing a source with the selected one (provenance)


def _lod(painter: QPainter, option: QStyleOptionGraphicsItem) -> float:
    return option.levelOfDetailFromTransform(painter.worldTransform())


class BoxItem(QGraphicsItem):
    """A box of the canvas (operator, graph input or output, constant), drawn from its label.

    Painting is cached in device coordinates and degrades with the zoom: text only when it
    would be readable, plain rectangles when the whole graph is in view.
    """

    # kind: "node", "group" (closed), "in", "out", "const" or "port" (a value entering a group)
    def __init__(self, key: Key, kind: str, box: Box, label: NodeLabel, category: str):
        super().__init__()
        self.key = key
        self.kind = kind
        self.label = label
        self.category = category
        self.rect = QRectF(0, 0, box.w, box.h)
        self.problem: str | None = None
        self.selected = False
        self.highlighted = False
        self.tip = ""
        self.diff: str | None = None  # "added", "modified" or "removed" (a ghost)
        self.related = False  # shares a source node with the selected node (provenance)
        self.ghost = False
        self.overlay: tuple[str, str] | None = None  # (fill, text) of the quantization overlay
        self.setPos(box.x, box.y)
        self.setZValue(2)
        self.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        self.setAcceptHoverEvents(False)
        self._scale = 1.0  # font scale when this machine's font is wider than the layout assumed

    def boundingRect(self) -> QRectF:  # noqa: D102 - Qt override
        grow = HALO + (STACK if self.kind == "group" else 0.0)
        return self.rect.adjusted(-HALO, -HALO, grow, grow)

    def shape(self) -> QPainterPath:  # noqa: D102 - Qt override: hits on the box, not the halo
        path = QPainterPath()
        path.addRect(self.rect)
        return path

    def set_state(self, *, selected=None, highlighted=None, problem=..., tip=None,
                  diff=..., related=None, overlay=...) -> None:
        """Change what the box shows; repaints (and re-caches) only when something changed."""
        changed = False
        if overlay is not ... and overlay != self.overlay:
            self.overlay = overlay
            changed = True
        if related is not None and related != self.related:
            self.related = related
            changed = True
        if diff is not ... and diff != self.diff:
            self.diff = diff
            changed = True
        for name, value in (("selected", selected), ("highlighted", highlighted)):
            if value is not None and getattr(self, name) != value:
                setattr(self, name, value)
                changed = True
        if problem is not ... and problem != self.problem:
            self.problem = problem
            changed = True
        if tip is not None:
            self.tip = tip
        if changed:
            self.update()

    # -- painting ---------------------------------------------------------------------------

    def _colors(self):
        """(fill of the title band, fill of the body, border, title text colour)."""
        if self.problem:
            red = style.color(style.PROBLEM)
            return red, style.color(style.PROBLEM_BODY), red.darker(130), style.color("#ffffff")
        if self.overlay is not None:
            p = overlay_palette(self.overlay[0])
            return (style.color(p.head), style.color(p.body), style.color(p.border),
                    style.color(p.title))
        if self.kind in ("in", "port"):
            return (style.color(style.INPUT_FILL), style.color(style.INPUT_FILL),
                    style.color(style.INPUT_BORDER), style.color(style.TEXT))
        if self.kind == "out":
            return (style.color(style.OUTPUT_FILL), style.color(style.OUTPUT_FILL),
                    style.color(style.OUTPUT_BORDER), style.color(style.TEXT))
        if self.kind == "const":
            return (style.color(style.CONST_FILL), style.color(style.CONST_FILL),
                    style.color(style.CONST_BORDER), style.color(style.TEXT))
        return (style.header_color(self.category), style.body_color(self.category),
                style.border_color(self.category), style.color(style.TITLE_TEXT))

    def line_colors(self) -> tuple[QColor, QColor]:
        """(text, muted text) of the lines under the title, and of a pill's name.

        On an overlay fill both are the one colour that contrasts most with the body: the
        canvas's muted grey is unreadable on the darker bins.
        """
        if self.overlay is not None and not self.problem:
            text = style.color(overlay_palette(self.overlay[0]).text)
            return text, text
        return style.color(style.TEXT), style.color(style.TEXT_MUTED)

    def _outline(self) -> QPainterPath:
        path = QPainterPath()
        radius = self.rect.height() / 2 if self.kind in ("in", "out", "port") else RADIUS
        radius = min(radius, 14.0)
        path.addRoundedRect(self.rect, radius, radius)
        return path

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget=None) -> None:
        """Draw the box at the detail the zoom allows."""
        lod = _lod(painter, option)
        head, body, border, title_color = self._colors()
        if lod < style.LOD_PLAIN:
            fill = head if self.kind in OPERATORS or self.problem else border
            if self.highlighted:
                fill = style.color(style.HIGHLIGHT)
            if self.selected:
                fill = style.color(style.SELECTED)
            elif self.related:
                fill = style.color(RELATED)
            elif self.diff:
                fill = style.color(DIFF_COLORS[self.diff])
            painter.fillRect(self.rect, fill)
            return
        outline = self._outline()
        if self.kind == "group":  # a card behind: more inside
            painter.setPen(QPen(border, 1.0))
            painter.setBrush(body)
            painter.drawPath(outline.translated(STACK, STACK))
        if self.related:
            painter.setPen(QPen(style.color(RELATED), 9.0))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawPath(outline)
        if self.highlighted:
            painter.setPen(QPen(style.color(style.HIGHLIGHT), 7.0))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawPath(outline)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(body)
        painter.drawPath(outline)
        if self.kind in OPERATORS:  # the band as a shape, not a clip: SVG export drops clips
            band = QPainterPath()
            band.addRect(QRectF(0, 0, self.rect.width(), labels.TITLE_H))
            painter.setBrush(head)
            painter.drawPath(outline.intersected(band))
        pen = QPen(border, 2.0 if self.problem else 1.0)
        if self.kind == "const":
            pen.setStyle(Qt.PenStyle.DashLine)
        painter.setPen(pen)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawPath(outline)
        if lod >= style.LOD_TEXT:
            self._paint_text(painter, title_color)
        if self.diff and lod < style.LOD_TEXT:  # too small for an outline to show: a wash
            wash = QColor(style.color(DIFF_COLORS[self.diff]))
            wash.setAlpha(150)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(wash)
            painter.drawPath(outline)
        if self.diff:
            pen = QPen(style.color(DIFF_COLORS[self.diff]), 4.0)
            if self.ghost:
                pen.setStyle(Qt.PenStyle.DashLine)
            painter.setPen(pen)
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawPath(self._selection_path())
            if self.highlighted:  # the diff ring covers the search halo: a ring outside it
                painter.setPen(QPen(style.color(style.HIGHLIGHT), 2.5))
                painter.drawPath(self._selection_path(3.75))
        if self.selected:
            painter.setPen(QPen(style.color(style.SELECTED), 2.5))
            painter.drawPath(self._selection_path())

    def _selection_path(self, grow: float = 2.5) -> QPainterPath:
        path = QPainterPath()
        r = self.rect.adjusted(-grow, -grow, grow, grow)
        radius = r.height() / 2 if self.kind in ("in", "out", "port") else RADIUS + 2
        radius = min(radius, 16.0)
        path.addRoundedRect(r, radius, radius)
        return path

    def _fit_scale(self) -> float:
        """Shrink factor for this box's fonts so the widest string fits (measured once)."""
        if self._scale != 1.0 or getattr(self, "_measured", False):
            return self._scale
        self._measured = True
        width = self.rect.width() - 2 * labels.PAD_X + 2
        title = QFontMetricsF(style.title_font()).horizontalAdvance(self.label.title)
        body = max((QFontMetricsF(style.body_font()).horizontalAdvance(line)
                    for line in self.label.lines), default=0.0)
        widest = max(title, body)
        if widest > width > 0:
            self._scale = max(0.6, width / widest)
        return self._scale

    def _paint_text(self, painter: QPainter, title_color) -> None:
        scale = self._fit_scale()
        painter.save()
        if scale != 1.0:
            painter.translate(self.rect.width() / 2, 0)
            painter.scale(scale, 1.0)
            painter.translate(-self.rect.width() / 2, 0)
        w = self.rect.width()
        text, muted = self.line_colors()
        painter.setFont(style.title_font())
        painter.setPen(title_color if self.kind in OPERATORS or self.problem else text)
        title = f"⚠ {self.label.title}" if self.problem else self.label.title
        painter.drawText(QRectF(0, 0, w, labels.TITLE_H), Qt.AlignmentFlag.AlignCenter, title)
        y = labels.TITLE_H
        kinds = self.label.kinds or (labels.ATTR,) * len(self.label.lines)
        centred = self.kind != "node"
        for line, kind in zip(self.label.lines, kinds):
            rect = QRectF(labels.PAD_X, y, w - 2 * labels.PAD_X, labels.LINE_H)
            if centred:
                painter.setFont(style.body_font())
                painter.setPen(muted)
                painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, line)
            elif kind == labels.SHAPE:
                painter.setFont(style.body_font())
                painter.setPen(muted)
                painter.drawText(rect, Qt.AlignmentFlag.AlignVCenter, line)
            elif kind == labels.SOURCE:  # the model file's own operator, centred
                painter.setFont(style.body_font())
                painter.setPen(text)
                painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, line)
            else:
                key, _, value = line.partition(" ")
                bold = kind == labels.CONST
                painter.setFont(style.body_bold_font() if bold else style.body_font())
                painter.setPen(text if bold else muted)
                advance = painter.fontMetrics().horizontalAdvance(key + " ")
                painter.drawText(rect, Qt.AlignmentFlag.AlignVCenter, key)
                painter.setFont(style.body_font())
                painter.setPen(text)
                painter.drawText(rect.adjusted(advance, 0, 0, 0), Qt.AlignmentFlag.AlignVCenter,
                                 value)
            y += labels.LINE_H
        painter.restore()


def ghost_item(key: Key, box: Box, label: NodeLabel, category: str) -> BoxItem:
    """A faded, red-outlined box where a node removed by a pass used to be (not selectable)."""
    item = BoxItem(key, "node", box, label, category)
    item.ghost = True
    item.diff = "removed"
    item.setOpacity(GHOST_OPACITY)
    item.setZValue(1)
    return item


def smooth_path(points: list[tuple[float, float]]) -> QPainterPath:
    """A polyline from the layout as a path: straight vertical runs, S-curves between columns."""
    path = QPainterPath(QPointF(*points[0]))
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if abs(x1 - x0) < 0.5:
            path.lineTo(x1, y1)
        else:
            mid = (y1 - y0) / 2
            path.cubicTo(x0, y0 + mid, x1, y1 - mid, x1, y1)
    return path


class EdgeItem(QGraphicsPathItem):
    """An edge: a smooth path with an arrow head into its consumer when zoomed in."""

    def __init__(self, src: Key, dst: Key, value: str, points: list[tuple[float, float]],
                 integer: bool = False):
        super().__init__(smooth_path(points))
        self.integer = integer  # carries 8-bit integers: drawn in its own colour, dashed
        self.src = src
        self.dst = dst
        self.value = value
        self.tip_point = QPointF(*points[-1])
        self.active = False  # touches the selected node
        self.selected = False
        self.hovered = False
        self.setZValue(0)
        self.setAcceptHoverEvents(True)
        self._shape: QPainterPath | None = None
        self._bounds = super().boundingRect().adjusted(-ARROW, -ARROW, ARROW, ARROW)
        self.label = ""  # written on the edge (the quantization overlay's scale, zero point)
        self._label_rect = QRectF()

    def set_label(self, text: str) -> None:
        """Write `text` on the edge, in a pill just below its producer ("" removes it)."""
        if text == self.label:
            return
        self.prepareGeometryChange()
        self.label = text
        bounds = super().boundingRect().adjusted(-ARROW, -ARROW, ARROW, ARROW)
        self._label_rect = QRectF()
        if text:
            path = self.path()
            at = path.pointAtPercent(path.percentAtLength(min(LABEL_DROP, path.length() / 2)))
            metrics = QFontMetricsF(style.body_font())
            w, h = metrics.horizontalAdvance(text) + 2 * LABEL_PAD, metrics.height() + 2
            self._label_rect = QRectF(at.x() - w / 2, at.y() - h / 2, w, h)
            bounds = bounds.united(self._label_rect.adjusted(-1, -1, 1, 1))
        self._bounds = bounds
        self.update()

    def label_rect(self) -> QRectF:
        """Where the label's pill is drawn (empty without a label)."""
        return QRectF(self._label_rect)

    def boundingRect(self) -> QRectF:  # noqa: D102 - Qt override: room for the arrow head
        return self._bounds

    def shape(self) -> QPainterPath:  # noqa: D102 - Qt override: a band easy to hover and click
        if self._shape is None:
            stroker = QPainterPathStroker()
            stroker.setWidth(8.0)
            self._shape = stroker.createStroke(self.path())
        return self._shape

    def set_state(self, *, active=None, selected=None) -> None:
        """Mark the edge as touching the selection, or as the selected edge itself."""
        changed = False
        if active is not None and active != self.active:
            self.active = active
            changed = True
        if selected is not None and selected != self.selected:
            self.selected = selected
            changed = True
        if changed:
            self.setZValue(1 if self.active or self.selected else 0)
            self.update()

    def hoverEnterEvent(self, event) -> None:  # noqa: D102 - Qt override
        self.hovered = True
        self.update()

    def hoverLeaveEvent(self, event) -> None:  # noqa: D102 - Qt override
        self.hovered = False
        self.update()

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget=None) -> None:
        """Draw the path (thin and light when zoomed far out) and, zoomed in, the arrow head."""
        lod = _lod(painter, option)
        emphasis = self.selected or self.active or self.hovered
        if emphasis:
            color = style.color(style.SELECTED)
        elif self.integer:
            color = style.color(style.EDGE_INT)
        else:
            color = style.color(style.EDGE if lod >= style.LOD_TEXT else style.EDGE_LOW)
        width = 2.2 if self.selected or self.hovered else 1.6 if self.active else 1.2
        pen = QPen(color, width)
        if self.integer and lod >= style.LOD_TEXT:
            pen.setStyle(Qt.PenStyle.DashLine)
        if lod * width < 1.0:
            pen.setCosmetic(True)
            pen.setWidthF(1.0)
        if lod < style.LOD_PLAIN:  # hairlines over a whole graph: aliased is fast and looks alike
            painter.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        painter.setPen(pen)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawPath(self.path())
        if lod >= style.LOD_ARROWS:
            tip = self.tip_point
            arrow = QPolygonF([tip, QPointF(tip.x() - ARROW / 2, tip.y() - ARROW),
                               QPointF(tip.x() + ARROW / 2, tip.y() - ARROW)])
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(QBrush(color))
            painter.drawPolygon(arrow)
        if self.label and lod >= style.LOD_TEXT:
            self._paint_label(painter)

    def _paint_label(self, painter: QPainter) -> None:
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        painter.setPen(QPen(style.color(EDGE_LABEL_BORDER), 1.0))
        painter.setBrush(style.color(EDGE_LABEL_FILL))
        radius = self._label_rect.height() / 2
        painter.drawRoundedRect(self._label_rect, radius, radius)
        painter.setFont(style.body_font())
        painter.setPen(style.color(EDGE_LABEL_TEXT))
        painter.drawText(self._label_rect, Qt.AlignmentFlag.AlignCenter, self.label)
