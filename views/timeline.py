"""The memory timeline: arena buffers as rectangles over schedule steps, with live bytes.

x is the schedule step, y the byte offset in the activation arena. Each buffer is a rectangle
from its first to its last step, at its offset, as tall as its aligned size, coloured by the
operator that produces it. A step curve shows the live bytes; horizontal lines show the lower
bound and the arena size; the peak step is marked. The widget only draws what it is given.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont, QMouseEvent, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from views import style

LEFT, RIGHT, TOP, BOTTOM = 78, 150, 34, 40  # margins around the plot (axes, labels, legend)
# Narrower than this, the plot keeps the right margin's room and the arena and lower-bound
# labels go inside it, right-aligned on their lines (a squeezed plot showed a strip).
NARROW_PLOT = 240
LIVE_COLOR = "#1d232a"
BOUND_COLOR = "#2e7d32"
ARENA_COLOR = "#c62828"
PEAK_COLOR = "#ef6c00"


@dataclass(frozen=True)
class Bar:
    """One buffer as drawn: live over steps first..last, at `offset` for `height` bytes."""

    name: str
    node: str
    op: str
    size: int
    offset: int
    height: int  # the aligned size it takes in the arena
    first: int
    last: int
    streams_from: str = ""  # the buffer its op streams rows from, which it may overlap
    window_of: str = ""  # a row-streamed chain's window: the tensor whose rows pass through
    window_rows: int = 0  # the rows it holds


def window_fields(window: dict | None) -> tuple[str, int]:
    """A bar's `window_of` and `window_rows` from a plan's window description (or None)."""
    return (window["of"], window["rows"]) if window else ("", 0)


def kib(n: float) -> str:
    """Bytes as KiB for axis labels (one decimal below 10 KiB)."""
    value = n / 1024
    return f"{value:,.1f} KiB" if value < 10 and value != int(value) else f"{value:,.0f} KiB"


def op_colors(ops: list[str]) -> dict[str, QColor]:
    """One colour per operator: its canvas category colour, lighter for each further op."""
    colors: dict[str, QColor] = {}
    seen: dict[str, int] = {}
    for op in sorted(set(ops)):
        category = style.category_of(op)
        k = seen.get(category, 0)
        seen[category] = k + 1
        base = style.header_color(category)
        colors[op] = base.lighter(100 + 35 * k) if k else QColor(base)
    return colors


# The object name of the Memory Timeline dock's own timeline (Compare and Passes draw others).
TIMELINE_NAME = "memoryTimeline"


class MemoryTimeline(QWidget):
    """Draws an arena plan; click a rectangle to select its buffer, hover for its details.

    Signals:
        bufferSelected(name): the user clicked a buffer ("" when clicking empty space).
    """

    bufferSelected = Signal(str)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setMouseTracking(True)
        # Small enough for a bottom dock in an 800x600 window; the chart stays legible there.
        self.setMinimumSize(260, 120)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.bars: list[Bar] = []
        self.live: list[int] = []
        self.lower_bound = 0
        self.arena = 0
        self.colors: dict[str, QColor] = {}
        self.message = "No model."
        self._selected: str | None = None
        # Both scales are read for every rectangle and curve point: kept per plan, since
        # computing them per call made a paint of DenseNet-121's plan quadratic.
        self._step_count = 0
        self._top = 1
        self._by_name: dict[str, Bar] = {}

    def sizeHint(self) -> QSize:  # noqa: D102 (Qt override)
        return QSize(900, 300)

    # -- data ---------------------------------------------------------------------------------

    def set_plan(self, bars: list[Bar], live: list[int], lower_bound: int, arena: int) -> None:
        """Show these buffers and curves (the selection stays when its buffer is still there)."""
        self.bars = sorted(bars, key=lambda b: (b.first, b.offset, b.name))
        self.live = list(live)
        self.lower_bound = lower_bound
        self.arena = arena
        self.colors = op_colors([b.op for b in bars])
        self.message = "" if bars else "The arena is empty: no activation buffers."
        self._rescale()
        if self._selected not in self._by_name:
            self._selected = None
        self.update()

    def clear(self, message: str) -> None:
        """Show nothing but `message` (no model, an invalid graph, an error)."""
        self.bars, self.live, self.colors = [], [], {}
        self.lower_bound = self.arena = 0
        self.message = message
        self._selected = None
        self._rescale()
        self.update()

    def _rescale(self) -> None:
        self._by_name = {b.name: b for b in self.bars}
        self._step_count = max(len(self.live), max((b.last + 1 for b in self.bars), default=0))
        highest = max([self.arena, max(self.live, default=0)]
                      + [b.offset + b.height for b in self.bars])
        self._top = max(int(highest * 1.08), 1)

    def steps(self) -> int:
        """Schedule steps shown."""
        return self._step_count

    def peak_step(self) -> int | None:
        """The first step with the most live bytes."""
        return max(range(len(self.live)), key=lambda s: (self.live[s], -s)) if self.live else None

    def bar(self, name: str) -> Bar | None:
        """The shown buffer named `name`."""
        return self._by_name.get(name)

    # -- selection ----------------------------------------------------------------------------

    def select(self, name: str | None) -> None:
        """Outline a buffer (None or an unknown name clears); emits nothing."""
        self._selected = name if self.bar(name or "") is not None else None
        self.update()

    def selected(self) -> str | None:
        """The selected buffer's name."""
        return self._selected

    # -- geometry -----------------------------------------------------------------------------

    def plot_rect(self) -> QRectF:
        """Where the rectangles go (inside the axes)."""
        return QRectF(LEFT, TOP, max(self.width() - LEFT - self._right(), 10),
                      max(self.height() - TOP - BOTTOM, 10))

    def _right(self) -> int:
        """The margin right of the plot: room for the labels, unless that leaves a strip."""
        return RIGHT if self.width() - LEFT - RIGHT >= NARROW_PLOT else 8

    def axis_steps(self, font_metrics) -> list[int]:
        """The steps labelled under the plot: every k-th, k such that no labels touch."""
        steps = self.steps()
        room = self.plot_rect().width() / max(steps, 1)  # pixels per step
        label = font_metrics.horizontalAdvance(str(max(steps - 1, 0))) + 8
        every = max(1, _nice_step(max(steps / 12, label / max(room, 1e-6))))
        return list(range(0, steps, every))

    def _top_bytes(self) -> int:
        return self._top

    def _x(self, step: float) -> float:
        r = self.plot_rect()
        return r.left() + r.width() * step / max(self.steps(), 1)

    def _y(self, offset: float) -> float:
        r = self.plot_rect()
        return r.bottom() - r.height() * offset / self._top_bytes()

    def bar_rect(self, bar: Bar) -> QRectF:
        """The rectangle of a buffer, in widget coordinates."""
        left, right = self._x(bar.first), self._x(bar.last + 1)
        top, bottom = self._y(bar.offset + bar.height), self._y(bar.offset)
        return QRectF(left, top, right - left, max(bottom - top, 2.0))

    def bar_at(self, pos: QPointF) -> Bar | None:
        """The buffer under a point (the smallest one when several touch it)."""
        hits = [b for b in self.bars if self.bar_rect(b).adjusted(-1, -1, 1, 1).contains(pos)]
        return min(hits, key=lambda b: b.height * (b.last - b.first + 1)) if hits else None

    # -- events -------------------------------------------------------------------------------

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: D102 (Qt override)
        if event.button() != Qt.MouseButton.LeftButton:
            return super().mousePressEvent(event)
        hit = self.bar_at(event.position())
        self.select(hit.name if hit else None)
        self.bufferSelected.emit(hit.name if hit else "")

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: D102 (Qt override)
        hit = self.bar_at(event.position())
        if hit is None:
            QToolTip.hideText()
            self.setToolTip("")
            return
        text = self.tooltip(hit)
        self.setToolTip(text)
        QToolTip.showText(event.globalPosition().toPoint(), text, self)

    def tooltip(self, bar: Bar) -> str:
        """What hovering a buffer says."""
        steps = f"step {bar.first}" if bar.first == bar.last else \
            f"steps {bar.first}–{bar.last}"
        text = (f"<b>{bar.name}</b><br>{bar.op} node {bar.node or '(graph input)'}<br>"
                f"{bar.size:,} bytes ({kib(bar.size)}), offset {bar.offset:,}<br>{steps}")
        if bar.window_of:
            text += (f"<br>a window of {bar.window_rows} row{'s' if bar.window_rows > 1 else ''}"
                     f" of {bar.window_of}: its rows pass through here, row by row; the whole "
                     "tensor never exists")
        source = self.bar(bar.streams_from)
        if source is not None and self._overlap(bar, source) is not None:
            text += (f"<br>overlaps {source.name}: written row by row, {_way(bar, source)}, "
                     "each row over input rows already read")
        for reader in self.bars:
            if reader.streams_from == bar.name and self._overlap(reader, bar) is not None:
                text += (f"<br>overlapped by {reader.name} at step {reader.first}: written "
                         f"row by row, {_way(reader, bar)}, over rows already read")
        return text

    def _overlap(self, bar: Bar, source: Bar) -> QRectF | None:
        """The bytes a streaming buffer shares with its source at the step they meet."""
        low = max(bar.offset, source.offset)
        high = min(bar.offset + bar.height, source.offset + source.height)
        if high <= low or source.last != bar.first:
            return None
        return QRectF(self._x(bar.first), self._y(high), self._x(bar.first + 1)
                      - self._x(bar.first), self._y(low) - self._y(high))

    # -- painting -----------------------------------------------------------------------------

    def paintEvent(self, _event) -> None:  # noqa: D102 (Qt override)
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        p.fillRect(self.rect(), QColor(style.BACKGROUND))
        if not self.bars and not self.live:
            p.setPen(QColor(style.TEXT_MUTED))
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, self.message)
            return
        font = QFont(self.font())
        font.setPixelSize(11)
        p.setFont(font)
        self._paint_axes(p)
        self._paint_peak(p, band=True)
        self._paint_bars(p)
        self._paint_peak(p, band=False)
        self._paint_curves(p)
        self._paint_legend(p)
        p.end()

    def _paint_axes(self, p: QPainter) -> None:
        r = self.plot_rect()
        p.fillRect(r, QColor("#ffffff"))
        top = self._top_bytes()
        tick = _nice_step(top / 6)
        grid, text = QPen(QColor("#e3e6ea")), QColor(style.TEXT_MUTED)
        value = 0
        while value <= top:
            y = self._y(value)
            p.setPen(grid)
            p.drawLine(QPointF(r.left(), y), QPointF(r.right(), y))
            p.setPen(text)
            p.drawText(QRectF(0, y - 8, LEFT - 6, 16),
                       Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, kib(value))
            value += tick
        for s in self.axis_steps(p.fontMetrics()):
            x = (self._x(s) + self._x(s + 1)) / 2
            p.drawText(QRectF(x - 20, r.bottom() + 3, 40, 14), Qt.AlignmentFlag.AlignCenter,
                       str(s))
        p.setPen(QColor(style.EDGE))
        p.drawRect(r)
        p.setPen(QColor(style.TEXT))
        p.drawText(QRectF(r.left(), r.bottom() + 18, r.width(), 16), Qt.AlignmentFlag.AlignCenter,
                   "schedule step")
        p.save()
        p.translate(12, r.center().y())
        p.rotate(-90)
        p.drawText(QRectF(-80, -8, 160, 16), Qt.AlignmentFlag.AlignCenter, "arena offset")
        p.restore()

    def _paint_peak(self, p: QPainter, band: bool) -> None:
        """The peak step: a band under the buffers (`band`), a line and label over them."""
        step = self.peak_step()
        if step is None:
            return
        r = self.plot_rect()
        left, right = self._x(step), self._x(step + 1)
        if band:
            p.fillRect(QRectF(left, r.top(), right - left, r.height()), QColor(255, 183, 77, 70))
            return
        p.setPen(QPen(QColor(PEAK_COLOR), 1.5, Qt.PenStyle.DashLine))
        centre = (left + right) / 2
        p.drawLine(QPointF(centre, r.top()), QPointF(centre, r.bottom()))
        p.setPen(QColor(PEAK_COLOR))
        p.drawText(QRectF(left - 150, r.top() - 16, right - left + 300, 14),
                   Qt.AlignmentFlag.AlignCenter,
                   f"peak {kib(self.live[step])} at step {step}")

    def _paint_bars(self, p: QPainter) -> None:
        for bar in self.bars:
            rect = self.bar_rect(bar)
            fill = QColor(self.colors.get(bar.op, style.UNKNOWN))
            fill.setAlpha(200)
            p.fillRect(rect, fill)
            # A white seam: buffers of one operator touch, and must still read as separate.
            p.setPen(QPen(QColor("#ffffff"), 2))
            p.drawRect(rect)
            self._paint_window_rows(p, bar, rect)
            if rect.width() > 60 and rect.height() > 14:
                text = p.fontMetrics().elidedText(f"{bar.op} {kib(bar.height)}",
                                                  Qt.TextElideMode.ElideRight,
                                                  int(rect.width() - 8))
                if bar.window_rows > 1:  # the rows' lines stop under the label
                    width = p.fontMetrics().horizontalAdvance(text) + 4
                    p.fillRect(QRectF(rect.left() + 2, rect.center().y() - 7, width, 14), fill)
                p.setPen(QColor(style.TITLE_TEXT))
                p.drawText(rect.adjusted(4, 0, -4, 0),
                           Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, text)
        # Bytes a streaming buffer shares with its source: hatched at the step both are live.
        for bar in self.bars:
            source = self.bar(bar.streams_from)
            shared = self._overlap(bar, source) if source is not None else None
            if shared is not None:
                p.fillRect(shared, QBrush(QColor("#ffffff"), Qt.BrushStyle.BDiagPattern))
        chosen = self.bar(self._selected or "")
        if chosen is not None:
            p.setPen(QPen(QColor(style.SELECTED), 3))
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.drawRect(self.bar_rect(chosen).adjusted(-1, -1, 1, 1))

    def _paint_window_rows(self, p: QPainter, bar: Bar, rect: QRectF) -> None:
        """A chain's window: a dotted line between its rows, where they are tall enough."""
        if bar.window_rows < 2 or rect.height() / bar.window_rows < 3:
            return
        p.setPen(QPen(QColor("#ffffff"), 1, Qt.PenStyle.DotLine))
        step = bar.size / bar.window_rows
        for k in range(1, bar.window_rows):
            y = self._y(bar.offset + k * step)
            p.drawLine(QPointF(rect.left() + 2, y), QPointF(rect.right() - 2, y))

    def _paint_curves(self, p: QPainter) -> None:
        r = self.plot_rect()
        p.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        labels = []
        for value, color, dash, text, above in (
                (self.arena, ARENA_COLOR, Qt.PenStyle.SolidLine, "arena", True),
                (self.lower_bound, BOUND_COLOR, Qt.PenStyle.DashLine, "lower bound", False)):
            y = self._y(value)
            p.setPen(QPen(QColor(color), 2, dash))
            p.drawLine(QPointF(r.left(), y), QPointF(r.right(), y))
            labels.append((y - 15 if above else y + 1, color, f"{text} {kib(value)}"))
        if self.live:
            path = QPainterPath(QPointF(self._x(0), self._y(self.live[0])))
            for s, value in enumerate(self.live):
                path.lineTo(self._x(s), self._y(value))
                path.lineTo(self._x(s + 1), self._y(value))
            p.setPen(QPen(QColor(LIVE_COLOR), 2))
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.drawPath(path)
        inside = self._right() < RIGHT
        for y, color, text in labels:
            p.setPen(QColor(color))
            if inside:
                p.drawText(QRectF(r.left(), y, r.width() - 4, 14),
                           Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, text)
            else:
                p.drawText(QRectF(r.right() + 6, y, RIGHT - 8, 14),
                           Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, text)
        p.setRenderHint(QPainter.RenderHint.Antialiasing, False)

    def _paint_legend(self, p: QPainter) -> None:
        """Operator colours, then the live-bytes line, along the top."""
        x, y = float(LEFT), 4.0
        metrics = p.fontMetrics()
        for op, color in sorted(self.colors.items()):
            p.fillRect(QRectF(x, y + 2, 12, 12), color)
            p.setPen(QColor(style.TEXT))
            p.drawText(QPointF(x + 16, y + 12), op)
            x += 16 + metrics.horizontalAdvance(op) + 14
        p.setPen(QPen(QColor(LIVE_COLOR), 2))
        p.drawLine(QPointF(x, y + 8), QPointF(x + 18, y + 8))
        p.setPen(QColor(style.TEXT))
        p.drawText(QPointF(x + 22, y + 12), "live bytes")
        x += 22 + metrics.horizontalAdvance("live bytes") + 14
        if any(self._overlap(b, s) is not None for b in self.bars
               if (s := self.bar(b.streams_from)) is not None):
            swatch = QRectF(x, y + 2, 12, 12)
            p.fillRect(swatch, QColor(style.UNKNOWN))
            p.fillRect(swatch, QBrush(QColor("#ffffff"), Qt.BrushStyle.BDiagPattern))
            p.drawText(QPointF(x + 16, y + 12), "shared by a layer's input and output")
            x += 16 + metrics.horizontalAdvance("shared by a layer's input and output") + 14
        if any(b.window_rows for b in self.bars):
            swatch = QRectF(x, y + 2, 12, 12)
            p.fillRect(swatch, QColor(style.UNKNOWN))
            p.setPen(QPen(QColor("#ffffff"), 1, Qt.PenStyle.DotLine))
            p.drawLine(QPointF(x, y + 8), QPointF(x + 12, y + 8))
            p.setPen(QColor(style.TEXT))
            p.drawText(QPointF(x + 16, y + 12), "window of rows (row-streamed chain)")


def _way(bar: Bar, source: Bar) -> str:
    """The order a streaming buffer's rows are written in, from where it sits."""
    return "downwards" if bar.offset > source.offset else "upwards"


def _nice_step(raw: float) -> int:
    """A tick step of at least `raw`: 1, 2 or 5 times a power of ten, or a power of two of KiB.

    Bytes read better in steps of 16, 32 or 64 KiB than of 20 or 50.
    """
    if raw <= 1:
        return 1
    if raw >= 1024:
        step = 1024
        while step < raw:
            step *= 2
        return step
    power = 1
    while power * 10 <= raw:
        power *= 10
    for m in (1, 2, 5, 10):
        if m * power >= raw:
            return int(m * power)
    return int(10 * power)
