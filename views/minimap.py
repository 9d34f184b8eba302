"""A minimap of the graph canvas: the whole graph in small, the visible part framed."""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, QSize, Qt, QTimer
from PySide6.QtGui import QColor, QImage, QMouseEvent, QPainter, QPaintEvent, QPen, QTransform
from PySide6.QtWidgets import QSizePolicy, QWidget

from views import style
from views.canvas import GraphCanvas

MARGIN = 6.0


class MiniMap(QWidget):
    """Shows every box of a GraphCanvas in its colour; click or drag to look elsewhere.

    The boxes are drawn once into an image (redrawn, debounced, when the canvas reports a
    change), so following the view costs one image blit and a rectangle per frame.
    """

    def __init__(self, canvas: GraphCanvas, parent: QWidget | None = None):
        super().__init__(parent)
        self.canvas = canvas
        self.setMinimumSize(80, 80)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setToolTip("Click or drag to move the view")
        self._image: QImage | None = None
        self._transform = QTransform()  # scene -> widget
        self._redraw = QTimer(self)
        self._redraw.setSingleShot(True)
        self._redraw.setInterval(60)
        self._redraw.timeout.connect(self._rebuild)
        canvas.overviewChanged.connect(self._redraw.start)
        canvas.viewportChanged.connect(self.update)
        self._rebuild()

    def set_canvas(self, canvas: GraphCanvas) -> None:
        """Follow `canvas` instead (a pass stage's canvas while it replaces the model's)."""
        if canvas is self.canvas:
            return
        self.canvas.overviewChanged.disconnect(self._redraw.start)
        self.canvas.viewportChanged.disconnect(self.update)
        self.canvas = canvas
        canvas.overviewChanged.connect(self._redraw.start)
        canvas.viewportChanged.connect(self.update)
        self._rebuild()

    def sizeHint(self) -> QSize:  # noqa: D102 - Qt override
        return QSize(220, 260)

    def scene_to_widget(self) -> QTransform:
        """The transform from scene coordinates to this widget's (for tests and painting)."""
        return self._transform

    def _fit(self) -> QTransform:
        rect = self.canvas.scene().sceneRect()
        avail = QRectF(self.rect()).adjusted(MARGIN, MARGIN, -MARGIN, -MARGIN)
        if rect.isEmpty() or avail.isEmpty():
            return QTransform()
        scale = min(avail.width() / rect.width(), avail.height() / rect.height())
        dx = avail.x() + (avail.width() - rect.width() * scale) / 2 - rect.x() * scale
        dy = avail.y() + (avail.height() - rect.height() * scale) / 2 - rect.y() * scale
        return QTransform(scale, 0, 0, scale, dx, dy)

    def _rebuild(self) -> None:
        """Draw the boxes (and faint edges) into the cached image."""
        self._transform = self._fit()
        size = self.size()
        if size.isEmpty():
            self._image = None
            return
        ratio = self.devicePixelRatioF()
        image = QImage(size * ratio, QImage.Format.Format_ARGB32_Premultiplied)
        image.setDevicePixelRatio(ratio)
        image.fill(style.color(style.BACKGROUND))
        painter = QPainter(image)
        painter.setTransform(self._transform)
        scale = self._transform.m11()
        if scale > 0:
            pen = QPen(style.color(style.EDGE_LOW), 0)  # cosmetic hairline
            painter.setPen(pen)
            for path in self.canvas.edge_paths():
                painter.drawPath(path)
            minimum = 1.5 / scale  # every box stays at least a pixel and a half across
            for rect, color in self.canvas.overview():
                w, h = max(rect.width(), minimum), max(rect.height(), minimum)
                painter.fillRect(QRectF(rect.center().x() - w / 2, rect.center().y() - h / 2,
                                        w, h), color)
        painter.end()
        self._image = image
        self.update()

    def resizeEvent(self, event) -> None:  # noqa: D102 - Qt override
        super().resizeEvent(event)
        self._rebuild()

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: D102 - Qt override
        painter = QPainter(self)
        if self._image is not None:
            painter.drawImage(0, 0, self._image)
        else:
            painter.fillRect(self.rect(), style.color(style.BACKGROUND))
        visible = self._transform.mapRect(self.canvas.visible_scene_rect())
        visible = visible.intersected(QRectF(self.rect()).adjusted(1, 1, -1, -1))
        if not visible.isEmpty():
            painter.setRenderHint(QPainter.RenderHint.Antialiasing)
            fill = QColor(style.SELECTED)
            fill.setAlpha(40)
            painter.fillRect(visible, fill)
            painter.setPen(QPen(style.color(style.SELECTED), 1.5))
            painter.drawRect(visible)
        painter.end()

    def _recentre(self, pos: QPointF) -> None:
        inverse, ok = self._transform.inverted()
        if ok:
            self.canvas.centerOn(inverse.map(pos))
            self.canvas.viewportChanged.emit()

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: D102 - Qt override
        if event.button() == Qt.MouseButton.LeftButton:
            self._recentre(event.position())
            event.accept()

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: D102 - Qt override
        if event.buttons() & Qt.MouseButton.LeftButton:
            self._recentre(event.position())
            event.accept()
