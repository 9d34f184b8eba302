"""The per-layer metric table (sortable by any column) and the overlay's legend."""

from __future__ import annotations

import math

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QRectF,
    QSize,
    QSortFilterProxyModel,
    Qt,
    Signal,
)
from PySide6.QtGui import QColor, QLinearGradient, QPainter
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView, QWidget

from compiler.layer_metrics import MetricSet, Row
from views import style
from views.metric_colors import GRADIENT, Coloring, format_value, gradient_stops, legend_ticks

SORT_ROLE = Qt.ItemDataRole.UserRole + 1
LAYER, OP, NODES, VALUE, PEER, RATIO = range(6)
HEADERS = ("Layer", "Operator", "Nodes", "Value", "Peer", "Ratio")


class MetricModel(QAbstractTableModel):
    """One row per measured unit of a MetricSet; `names` turns node ids into node names."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.metric: MetricSet | None = None
        self.names: dict[int, str] = {}

    def set_metric(self, metric: MetricSet | None, names: dict[int, str]) -> None:
        """Show `metric`'s rows (None empties the table)."""
        self.beginResetModel()
        self.metric, self.names = metric, names
        self.endResetModel()

    def row(self, index: int) -> Row:
        """The metric row at a source index."""
        return self.metric.rows[index]

    def rowCount(self, parent=QModelIndex()) -> int:  # noqa: D102, B008 (Qt override)
        return 0 if parent.isValid() or self.metric is None else len(self.metric.rows)

    def columnCount(self, parent=QModelIndex()) -> int:  # noqa: D102, B008 (Qt override)
        return len(HEADERS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):  # noqa: D102
        if orientation != Qt.Orientation.Horizontal or role != Qt.ItemDataRole.DisplayRole:
            return None
        if section == VALUE and self.metric is not None:
            return self.metric.title
        if section == PEER and self.metric is not None and self.metric.peer_title:
            return self.metric.peer_title
        if section == RATIO and self.metric is not None and self.metric.peer_title:
            return f"Kiln / {self.metric.peer_title}"
        return HEADERS[section]

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):  # noqa: D102 (Qt override)
        if not index.isValid() or self.metric is None:
            return None
        row, column = self.metric.rows[index.row()], index.column()
        ratio = row.value / row.peer if row.peer else None
        if role == SORT_ROLE:
            sort = (row.label, row.op, self._nodes(row), row.value, row.peer, ratio)[column]
            if isinstance(sort, float) and math.isinf(sort):
                return -1e300 if sort < 0 else 1e300
            return -math.inf if sort is None and column >= VALUE else sort
        if role == Qt.ItemDataRole.DisplayRole:
            unit = self.metric.unit
            return (row.label, row.op, self._nodes(row), format_value(row.value, unit),
                    format_value(row.peer, unit) if row.peer is not None else "",
                    f"{ratio:.2f}" if ratio is not None else "")[column]
        if role == Qt.ItemDataRole.ToolTipRole:
            exact = f"{row.value:,}" if float(row.value).is_integer() else f"{row.value:.4g}"
            peer = f"; {self.metric.peer_title} {row.peer:,}" if row.peer is not None else ""
            return f"{row.label} ({row.op}): {exact} {self.metric.unit}{peer}".strip()
        if role == Qt.ItemDataRole.TextAlignmentRole and column >= VALUE:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ForegroundRole and not row.nodes:
            return QColor(style.TEXT_MUTED)  # work outside any layer
        return None

    def _nodes(self, row: Row) -> str:
        return ", ".join(self.names.get(n, str(n)) for n in row.nodes) or "(outside layers)"


class MetricTable(QTableView):
    """The sortable table; emits the row's first shown node when the user clicks a row.

    Signals:
        nodeRequested(key): a row of a layer was clicked (its first node id).
    """

    nodeRequested = Signal(object)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.model_ = MetricModel(self)
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.model_)
        self.proxy.setSortRole(SORT_ROLE)
        self.setModel(self.proxy)
        self.setSortingEnabled(True)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.verticalHeader().hide()
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.horizontalHeader().setStretchLastSection(True)
        self.clicked.connect(self._clicked)

    def set_metric(self, metric: MetricSet | None, names: dict[int, str]) -> None:
        """Show a metric, sorted by its value, the worst first."""
        self.model_.set_metric(metric, names)
        peer = metric is not None and bool(metric.peer_title)
        self.setColumnHidden(PEER, not peer)
        self.setColumnHidden(RATIO, not peer)
        if metric is not None:
            order = (Qt.SortOrder.DescendingOrder if metric.higher_is_worse
                     else Qt.SortOrder.AscendingOrder)
            self.sortByColumn(VALUE, order)
            self.resizeColumnsToContents()

    def view_index(self, source_row: int) -> QModelIndex:
        """The proxy index of a source row's first cell (for tests and scrolling)."""
        return self.proxy.mapFromSource(self.model_.index(source_row, 0))

    def rows_shown(self) -> list[Row]:
        """The metric's rows in the order the table shows them."""
        return [self.model_.row(self.proxy.mapToSource(self.proxy.index(r, 0)).row())
                for r in range(self.proxy.rowCount())]

    def _clicked(self, index: QModelIndex) -> None:
        row = self.model_.row(self.proxy.mapToSource(index).row())
        if row.nodes:
            self.nodeRequested.emit(row.nodes[0])


class Legend(QWidget):
    """The overlay's key: a gradient bar with values under it, or the threshold's two fills."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.coloring: Coloring | None = None
        self.title = ""
        self.unit = ""
        self.setMinimumHeight(44)

    def set_coloring(self, coloring: Coloring | None, title: str = "", unit: str = "") -> None:
        """Show the key of `coloring` (None: nothing)."""
        self.coloring, self.title, self.unit = coloring, title, unit
        self.update()

    def sizeHint(self) -> QSize:  # noqa: D102 (Qt override)
        return QSize(260, 44)

    def paintEvent(self, _event) -> None:  # noqa: D102 (Qt override)
        c = self.coloring
        if c is None:
            return
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        p.setPen(QColor(style.TEXT))
        metrics = p.fontMetrics()
        line = metrics.height()
        width = self.width() - 12
        bar = QRectF(6, line + 2, width, 12)
        if c.mode == GRADIENT:
            scale = " (log scale)" if c.log else ""
            p.drawText(6, line - 2, f"{self.title}{scale}; dark is worse")
            gradient = QLinearGradient(bar.topLeft(), bar.topRight())
            for t, color in gradient_stops(c):
                gradient.setColorAt(t, QColor(color))
            p.fillRect(bar, gradient)
            for t, value in legend_ticks(c):
                text = format_value(value, self.unit)
                x = bar.left() + t * bar.width() - t * metrics.horizontalAdvance(text)
                p.drawText(int(x), int(bar.bottom() + line), text)
            return
        from views.metric_colors import BAD, GOOD

        side = ">" if c.higher_is_worse else "<"
        other = "≤" if c.higher_is_worse else "≥"
        limit = format_value(c.threshold, self.unit)
        p.drawText(6, line - 2, f"{self.title}: threshold {limit}")
        half = QRectF(bar.left(), bar.top(), 14, 12)
        for i, (fill, text) in enumerate(((BAD, f"{side} {limit}"), (GOOD, f"{other} {limit}"))):
            box = half.translated(i * width / 2, 0)
            p.fillRect(box, QColor(fill))
            p.drawRect(box)
            p.drawText(int(box.right() + 6), int(box.bottom()), text)
