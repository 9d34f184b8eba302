"""A bundle's size report (the NET.report.json document) as bars and tables.

The view only formats the report dict that `compiler.codegen.bundle.report` builds, so what the
dialog shows is exactly what `kiln compile --json` prints.
"""

from __future__ import annotations

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPen
from PySide6.QtWidgets import (
    QAbstractItemView,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QSizePolicy,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from compiler.codegen.bundle import weights_label
from views import style

OK_COLOR = "#3d7c3a"  # green: within budget
OVER_COLOR = style.PROBLEM  # red: over budget
TRACK_COLOR = "#e6e9ed"
TOP_SYMBOLS = 10


def human_bytes(n: int) -> str:
    """Bytes with a binary unit, for labels (tables keep exact byte counts)."""
    value = float(n)
    for unit in ("B", "KiB", "MiB"):
        if abs(value) < 1024 or unit == "MiB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return f"{n} B"


class BudgetBar(QWidget):
    """One memory budget: a filled bar of used / budget, red when over, with the figures."""

    def __init__(self, label: str, parent: QWidget | None = None):
        super().__init__(parent)
        self.label = label
        self.used = 0
        self.budget = 1
        self.setMinimumHeight(26)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def set_usage(self, used: int, budget: int) -> None:
        """Show `used` bytes of `budget`."""
        self.used, self.budget = used, max(1, budget)
        self.setToolTip(f"{self.label}: {used:,} B used of {budget:,} B")
        self.update()

    def is_over(self) -> bool:
        """True when the use exceeds the budget."""
        return self.used > self.budget

    def fraction(self) -> float:
        """Use as a fraction of the budget (may exceed 1)."""
        return self.used / self.budget

    def color(self) -> QColor:
        """The fill colour: red over budget, green within."""
        return QColor(OVER_COLOR if self.is_over() else OK_COLOR)

    def text(self) -> str:
        """The caption drawn on the bar."""
        over = (f", {human_bytes(self.used - self.budget)} over" if self.is_over() else "")
        return (f"{self.label}: {human_bytes(self.used)} of {human_bytes(self.budget)} "
                f"({100 * self.fraction():.1f}%{over})")

    def sizeHint(self) -> QSize:  # noqa: D102 (Qt override)
        return QSize(360, 26)

    def paintEvent(self, _event) -> None:  # noqa: D102 (Qt override)
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        rect = QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5)
        painter.setPen(QPen(QColor("#b4bcc5"), 1))
        painter.setBrush(QColor(TRACK_COLOR))
        painter.drawRoundedRect(rect, 4, 4)
        fill = QRectF(rect)
        fill.setWidth(rect.width() * min(1.0, self.fraction()))
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(self.color())
        painter.drawRoundedRect(fill, 4, 4)
        font = painter.font()
        font.setBold(True)
        painter.setFont(font)
        # White on the fill when the fill holds the whole caption, else dark, after the fill.
        inside = painter.fontMetrics().horizontalAdvance(self.text()) + 16 <= fill.width()
        left = 8 if inside else max(8.0, fill.width() + 6)
        text_rect = rect.adjusted(left, 0, -8, 0)
        painter.setPen(QColor("#ffffff" if inside else style.TEXT))
        painter.drawText(text_rect, Qt.AlignmentFlag.AlignVCenter, self.text())
        painter.end()


def _table(headers: list[str]) -> QTableWidget:
    table = QTableWidget(0, len(headers))
    table.setHorizontalHeaderLabels(headers)
    table.verticalHeader().hide()
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setAlternatingRowColors(True)
    table.setFocusPolicy(Qt.FocusPolicy.NoFocus)
    table.verticalHeader().setDefaultSectionSize(table.fontMetrics().height() + 6)
    header = table.horizontalHeader()
    header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
    for column in range(1, len(headers)):
        header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
    return table


def _fill(table: QTableWidget, rows: list[list]) -> None:
    """Rows of text and ints; ints are right-aligned with thousands separators."""
    table.setSortingEnabled(False)
    table.setRowCount(len(rows))
    for r, row in enumerate(rows):
        for c, value in enumerate(row):
            if isinstance(value, int):
                item = QTableWidgetItem()
                item.setData(Qt.ItemDataRole.DisplayRole, value)  # sorts as a number
                item.setText(f"{value:,}")
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            else:
                item = QTableWidgetItem(str(value))
            table.setItem(r, c, item)


def _fit_rows(table: QTableWidget, most: int) -> None:
    """Make `table` tall enough for up to `most` rows without scrolling."""
    rows = min(max(table.rowCount(), 1), most)
    table.setMinimumHeight(rows * table.verticalHeader().defaultSectionSize()
                           + table.horizontalHeader().sizeHint().height() + 2 * table.frameWidth())


def _group(title: str, widget: QWidget) -> QGroupBox:
    box = QGroupBox(title)
    column = QVBoxLayout(box)
    column.setContentsMargins(6, 6, 6, 6)
    column.addWidget(widget)
    return box


class SizeReport(QWidget):
    """The report of one bundle: summary, budget bars, sections, largest symbols, layers."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.report: dict | None = None
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.summary.setTextFormat(Qt.TextFormat.RichText)
        self.flash_bar = BudgetBar("Flash")
        self.ram_bar = BudgetBar("RAM")
        self.verdict = QLabel()
        self.sections = _table(["Section", "Bytes"])
        self.symbols = _table(["Symbol", "Bytes"])
        self.layers = _table(["#", "Node", "Op", "Weights (B)", "MACs"])
        header = self.layers.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)

        self.budget_box = QGroupBox("Board budget")
        bars = QVBoxLayout(self.budget_box)
        bars.setContentsMargins(6, 6, 6, 6)
        bars.addWidget(self.flash_bar)
        bars.addWidget(self.ram_bar)
        bars.addWidget(self.verdict)

        top = QHBoxLayout()
        top.addWidget(_group("Sections and regions", self.sections), 1)
        top.addWidget(_group(f"Largest symbols (top {TOP_SYMBOLS})", self.symbols), 1)
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.summary)
        column.addWidget(self.budget_box)
        column.addLayout(top, 2)
        column.addWidget(_group("Per layer: weights and MACs", self.layers), 3)

    def clear(self, message: str = "No size report.") -> None:
        """Show nothing but `message`."""
        self.report = None
        self.summary.setText(message)
        for table in (self.sections, self.symbols, self.layers):
            table.setRowCount(0)
        self._set_board(None)

    def set_report(self, report: dict) -> None:
        """Show `report` (a NET.report.json document)."""
        self.report = report
        sections = report["sections"]
        regions = report["regions"]
        self.summary.setText(
            f"<b>{report['name']}</b> for <b>{report['target']}</b> ({report['triple']}); "
            f"weights {weights_label(report)}; object {report['object_bytes']:,} B; "
            f"{len(report['layers'])} kernels, "
            f"{sum(layer['macs'] for layer in report['layers']):,} MACs")
        kinds = [[k, sections[k]] for k in ("text", "rodata", "data", "bss")]
        named = [[k, v] for k, v in sections.items() if k.startswith(".")]
        if all(k in (".text", ".rodata", ".data", ".bss") for k, _ in named):
            named = []  # one section per kind: the kind rows already say it all
        regs = [[f"region: {k}", regions[k]] for k in ("constant", "mutable", "activations")]
        _fill(self.sections, kinds + named + regs)
        symbols = sorted(report["symbols"], key=lambda s: -s["bytes"])[:TOP_SYMBOLS]
        _fill(self.symbols, [[s["name"], s["bytes"]] for s in symbols])
        most = max(self.sections.rowCount(), self.symbols.rowCount())
        for table in (self.sections, self.symbols):
            _fit_rows(table, min(most, 12))
        _fill(self.layers, [[i + 1, ", ".join(layer["nodes"]) or layer["symbol"], layer["op"],
                             layer["weight_bytes"], layer["macs"]]
                            for i, layer in enumerate(report["layers"])])
        self.layers.setSortingEnabled(True)  # click a header to rank by weights or MACs
        self.layers.sortItems(0, Qt.SortOrder.AscendingOrder)  # execution order first
        self._set_board(report.get("board"))

    def _set_board(self, board: dict | None) -> None:
        if board is None:
            self.budget_box.setTitle("Board budget")
            self.flash_bar.hide()
            self.ram_bar.hide()
            self.verdict.setText("No board chosen: pick one to check flash and RAM.")
            self.verdict.setStyleSheet(f"color: {style.TEXT_MUTED};")
            return
        self.budget_box.setTitle(f"Budget of {board['name']}")
        self.flash_bar.set_usage(board["flash_used"], board["flash"])
        self.ram_bar.set_usage(board["ram_used"], board["ram"])
        self.flash_bar.show()
        self.ram_bar.show()
        over = [bar.label for bar in (self.flash_bar, self.ram_bar) if bar.is_over()]
        if over:
            hints = "".join(f"\nHint: {hint}." for hint in board.get("hints", ()))
            self.verdict.setText(f"Does not fit {board['name']}: {' and '.join(over)} over "
                                 f"budget (the bundle was still written).{hints}")
            self.verdict.setStyleSheet(f"color: {OVER_COLOR}; font-weight: bold;")
        else:
            self.verdict.setText(f"Fits {board['name']}.")
            self.verdict.setStyleSheet(f"color: {OK_COLOR}; font-weight: bold;")

    def fits(self) -> bool | None:
        """Whether the bundle fits its board (None without a board)."""
        board = (self.report or {}).get("board")
        return None if board is None else bool(board["fits"])


def footprint(report: dict) -> dict[str, int]:
    """Flash, RAM, weights and arena bytes of a bundle report (as `board_usage` counts them)."""
    s, r = report["sections"], report["regions"]
    return {"Flash (code, read-only data, weights)": s["text"] + s["rodata"] + r["constant"],
            "RAM (data, activations, inputs and outputs)": s["data"] + s["bss"] + r["mutable"]
            + r["activations"],
            "Weights": report["weight_bytes"],
            "Activation arena": r["activations"]}


def _weighted_layers(report: dict) -> list[dict]:
    return [layer for layer in report.get("layers", []) if layer["weight_bytes"]]


class ComparisonTable(QGroupBox):
    """Float and int8 bundles side by side.

    Flash, RAM, weights, arena and, when counted, instructions; then the weights of each layer
    that has some.
    """

    def __init__(self, parent: QWidget | None = None):
        super().__init__("Float and int8, side by side", parent)
        self.table = _table(["", "float32", "int8", "int8 / float"])
        self.layers = _table(["Layer (float / int8)", "float32 (B)", "int8 (B)", "int8 / float"])
        column = QVBoxLayout(self)
        column.setContentsMargins(6, 6, 6, 6)
        column.addWidget(self.table)
        column.addWidget(self.layers)
        self.rows: list[list] = []
        self.layer_rows: list[list] = []
        self.hide()

    def set_reports(self, floating: dict | None, integer: dict,
                    counts: dict[str, int] | None = None) -> None:
        """Compare `floating` with `integer` (None hides the table: a float export).

        `counts` maps "float" and "int8" to the instructions of one inference, when counted.
        """
        self.setVisible(floating is not None)
        if floating is None:
            self.rows = self.layer_rows = []
            return
        a, b = footprint(floating), footprint(integer)
        if counts and "float" in counts and "int8" in counts:
            a["Instructions (one inference)"] = counts["float"]
            b["Instructions (one inference)"] = counts["int8"]
        self.rows = [[name + ("" if name.startswith("Instr") else " (B)"), a[name], b[name],
                      f"{b[name] / a[name]:.2f}" if a[name] else "–"] for name in a]
        _fill(self.table, self.rows)
        _fit_rows(self.table, len(self.rows))
        # Layers with weights pair up in order (a Conv and the QLinearConv it became).
        ours, theirs = _weighted_layers(floating), _weighted_layers(integer)
        self.layer_rows = [] if len(ours) != len(theirs) else [
            [f"{f['node']} / {q['node']}", f["weight_bytes"], q["weight_bytes"],
             f"{q['weight_bytes'] / f['weight_bytes']:.2f}"] for f, q in zip(ours, theirs)]
        self.layers.setVisible(bool(self.layer_rows))
        _fill(self.layers, self.layer_rows)
        _fit_rows(self.layers, min(len(self.layer_rows), 8))
