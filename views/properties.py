"""The properties panel: everything about the selected node, tensor or weight."""

from __future__ import annotations

import html

import numpy as np
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QStyledItemDelegate,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from compiler import ops
from compiler.edit import format_attribute
from compiler.frontends.source import long_text, source_of
from compiler.ir.graph import Constant, Graph, Node, Placeholder, Value
from compiler.qmath.explain import real_value_formula, requant_channels, summary
from compiler.stats import TensorStats, tensor_stats
from views.labels import input_name, type_text
from views.signals import signals_blocked

# Histograms of bigger tensors are computed on this many evenly spaced elements (the statistics
# themselves always use every element).
_MAX_PLOT = 1 << 22


def _fmt(value: float) -> str:
    if np.isnan(value):
        return "–"
    return f"{value:.6g}"


def _count(n: int) -> str:
    return f"{n:,}"


class _Table(QTableWidget):
    """A table as tall as its rows, so the panel scrolls as one page instead of per table.

    It never scrolls sideways either: a horizontal scroll bar would cover its last row (a
    one-row table would show none). Column `stretch` takes the width the others leave and
    elides its text in the middle (long tensor names keep both ends; the tooltip has all).
    """

    def __init__(self, headers: list[str], parent: QWidget | None = None, stretch: int = -1):
        super().__init__(0, len(headers), parent)
        self.setHorizontalHeaderLabels(headers)
        self.verticalHeader().hide()
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setEditTriggers(QAbstractItemView.EditTrigger.DoubleClicked
                             | QAbstractItemView.EditTrigger.EditKeyPressed)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setWordWrap(False)
        self.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        header = self.horizontalHeader()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(stretch % len(headers), QHeaderView.ResizeMode.Stretch)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def fill(self, rows: list[list[QTableWidgetItem]]) -> None:
        self.setRowCount(len(rows))
        for r, row in enumerate(rows):
            for c, item in enumerate(row):
                self.setItem(r, c, item)
        self.resizeRowsToContents()
        height = self.horizontalHeader().height() + 2 * self.frameWidth()
        height += sum(self.rowHeight(r) for r in range(self.rowCount()))
        self.setFixedHeight(height)


def _item(text: str, *, editable: bool = False, tip: str = "", data=None) -> QTableWidgetItem:
    item = QTableWidgetItem(text)
    flags = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
    if editable:
        flags |= Qt.ItemFlag.ItemIsEditable
    item.setFlags(flags)
    if tip:
        item.setToolTip(tip)
    if data is not None:
        item.setData(Qt.ItemDataRole.UserRole, data)
    return item


class _DefaultDelegate(QStyledItemDelegate):
    """Shows an unset attribute as a grey "default"; the editor still starts empty."""

    def initStyleOption(self, option, index) -> None:  # noqa: N802 - Qt override
        super().initStyleOption(option, index)
        if not option.text:
            option.text = "default"
            option.palette.setColor(QPalette.ColorRole.Text, QColor("#8a8f96"))
            option.font.setItalic(True)


def _heading(text: str) -> QLabel:
    label = QLabel(text)
    font = label.font()
    font.setBold(True)
    label.setFont(font)
    label.setContentsMargins(0, 8, 0, 2)
    return label


class Histogram(QWidget):
    """A small matplotlib histogram of a tensor's values (matplotlib is loaded on first use)."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        from matplotlib.backends.backend_qtagg import FigureCanvasQTAgg
        from matplotlib.figure import Figure

        self.figure = Figure(figsize=(3.2, 1.7), dpi=100, layout="constrained")
        self.canvas = FigureCanvasQTAgg(self.figure)
        self.canvas.setMinimumHeight(150)
        self.axes = self.figure.add_subplot()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.canvas)

    def plot(self, stats: TensorStats) -> None:
        """Draw the histogram of `stats` (nothing for an empty tensor)."""
        ax = self.axes
        ax.clear()
        if len(stats.counts):
            ax.stairs(stats.counts, stats.edges, fill=True, color="#4878a8")
            ax.axvline(0.0, color="#c04040", linewidth=0.8, alpha=0.6)
        ax.tick_params(labelsize=7)
        ax.set_yticks([])
        ax.set_title("value histogram", fontsize=8)
        self.canvas.draw_idle()


class PropertiesPanel(QWidget):
    """Shows a node (attributes, inputs, outputs, MACs, provenance) or a tensor.

    Edits are requests: the panel never changes the graph itself; the application turns each
    signal into an undoable edit and then shows the new graph.

    Signals:
        attributeEditRequested(node_id, name, text): the user typed a new attribute value.
        renameNodeRequested(node_id, name): the user typed a new node name.
        renameTensorRequested(old, new): the user typed a new tensor name.
        navigateRequested(key): the user activated an input or output row (a canvas key).
        exportRequested(name): "Export .npy…" for the constant `name`.
    """

    attributeEditRequested = Signal(int, str, str)
    renameNodeRequested = Signal(int, str)
    renameTensorRequested = Signal(str, str)
    navigateRequested = Signal(object)
    exportRequested = Signal(str)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("PropertiesPanel")
        self._graph: Graph | None = None
        self._node: Node | None = None
        self._weights: list[Constant] = []
        self._histogram: Histogram | None = None
        self._populating = False
        self.read_only = False  # a pass stage is shown: nothing may be edited

        scroll = QScrollArea(self)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(scroll)
        self.page = page = QWidget()  # the whole content, taller than the dock when scrolled
        scroll.setWidget(page)
        self._layout = layout = QVBoxLayout(page)
        layout.setContentsMargins(8, 6, 8, 8)
        layout.setSpacing(2)

        self.title = QLabel()
        self.title.setTextFormat(Qt.TextFormat.RichText)
        self.title.setWordWrap(True)
        layout.addWidget(self.title)
        self.problem = QLabel()
        self.problem.setWordWrap(True)
        self.problem.setStyleSheet("color: #b00020; font-weight: bold;")
        layout.addWidget(self.problem)

        self.info = QWidget()
        grid = QGridLayout(self.info)
        grid.setContentsMargins(0, 4, 0, 0)
        grid.setHorizontalSpacing(10)
        self.name_edit = QLineEdit()
        self.name_edit.setToolTip("The node's name; type a new one and press Enter to rename")
        self.name_edit.editingFinished.connect(self._name_edited)
        self.info_labels: dict[str, QLabel] = {}
        grid.addWidget(QLabel("Name"), 0, 0)
        grid.addWidget(self.name_edit, 0, 1)
        for row, key in enumerate(("Op", "Id", "MACs", "Provenance"), start=1):
            value = QLabel()
            value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            value.setWordWrap(True)
            grid.addWidget(QLabel(key), row, 0, Qt.AlignmentFlag.AlignTop)
            grid.addWidget(value, row, 1)
            self.info_labels[key] = value
        grid.setColumnStretch(1, 1)
        layout.addWidget(self.info)

        self.attrs_heading = _heading("Attributes")
        self.attributes = _Table(["Attribute", "Value"], stretch=1)
        self._default_delegate = _DefaultDelegate(self.attributes)
        self.attributes.setItemDelegateForColumn(1, self._default_delegate)
        self.attributes.itemChanged.connect(self._attribute_edited)
        self.inputs_heading = _heading("Inputs")
        self.inputs = _Table(["Input", "Tensor", "Type"], stretch=1)
        self.inputs.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.inputs.itemDoubleClicked.connect(self._row_activated)
        self.outputs_heading = _heading("Outputs")
        self.outputs = _Table(["Output", "Tensor", "Type"], stretch=1)
        self.outputs.itemChanged.connect(self._tensor_renamed)
        self.outputs.itemDoubleClicked.connect(self._row_activated)
        self.quant_heading = _heading("Quantization")
        self.quant_text = QLabel()
        self.quant_text.setWordWrap(True)
        self.quant_text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.requant_table = _Table(["Ch", "in×w/out", "Q31 multiplier", "Shift"])
        self.requant_table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        for widget in (self.attrs_heading, self.attributes, self.inputs_heading, self.inputs,
                       self.outputs_heading, self.outputs, self.quant_heading, self.quant_text,
                       self.requant_table):
            layout.addWidget(widget)

        self.weights_box = QWidget()
        weights = QVBoxLayout(self.weights_box)
        weights.setContentsMargins(0, 0, 0, 0)
        weights.addWidget(_heading("Weights"))
        self.weight_choice = QComboBox()
        # Weight names run long (a TFLite path): closed, the box elides them rather than
        # widening the page beyond the dock, which would then scroll sideways.
        self.weight_choice.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.weight_choice.setMinimumContentsLength(12)
        self.weight_choice.currentIndexChanged.connect(self._show_weight)
        weights.addWidget(self.weight_choice)
        self.stats_labels: dict[str, QLabel] = {}
        stats = QGridLayout()
        stats.setHorizontalSpacing(10)
        keys = ("Shape", "Elements", "Min", "Max", "Mean", "Std", "Sparsity", "Non-finite")
        for i, key in enumerate(keys):
            value = QLabel()
            value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            stats.addWidget(QLabel(key), i // 2, (i % 2) * 2)
            stats.addWidget(value, i // 2, (i % 2) * 2 + 1)
            self.stats_labels[key] = value
        stats.setColumnStretch(1, 1)
        stats.setColumnStretch(3, 1)
        weights.addLayout(stats)
        self.histogram_slot = QVBoxLayout()
        weights.addLayout(self.histogram_slot)
        buttons = QHBoxLayout()
        self.export_button = QPushButton("Export .npy…")
        self.export_button.setToolTip("Save this weight as a NumPy .npy file")
        self.export_button.clicked.connect(self._export)
        buttons.addStretch(1)
        buttons.addWidget(self.export_button)
        weights.addLayout(buttons)
        layout.addWidget(self.weights_box)
        layout.addStretch(1)
        self.clear()

    # -- what to show -------------------------------------------------------------------------

    def clear(self, message: str = "Select a node or an edge to see its properties.") -> None:
        """Show nothing but a hint."""
        self._graph, self._node, self._weights = None, None, []
        self.read_only = False
        self.title.setText(f"<span style='color: gray'>{html.escape(message)}</span>")
        for widget in (self.problem, self.info, self.attrs_heading, self.attributes,
                       self.inputs_heading, self.inputs, self.outputs_heading, self.outputs,
                       self.quant_heading, self.quant_text, self.requant_table,
                       self.weights_box):
            widget.hide()

    def current_node_id(self) -> int | None:
        """The id of the node shown, or None."""
        return self._node.id if self._node is not None else None

    def show_node(self, graph: Graph, node_id: int, *, macs: int | None = None,
                  problem: str | None = None, read_only: str = "") -> None:
        """Show the node `node_id` of `graph`, with its MACs and its problem if it has one.

        With `read_only` (why, e.g. "stage 25: fuse_activations"), nothing can be edited: the
        node belongs to a pass snapshot, not to the document.
        """
        node = graph.node(node_id)
        self._graph, self._node = graph, node
        self.read_only = bool(read_only)
        opdef = ops.get(node.op)
        category = opdef.category if opdef else "unknown"
        doc = f"<br><span style='color: gray'>{html.escape(opdef.doc)}</span>" if (
            opdef and opdef.doc) else ""
        where = (f"<br><span style='color: #b26a00'>Read-only: {html.escape(read_only)}"
                 "</span>" if read_only else "")
        self.title.setText(f"<b style='font-size: 14px'>{html.escape(node.op)}</b> "
                           f"<span style='color: gray'>{html.escape(category)}</span>{where}"
                           f"{doc}")
        self._set_problem(problem)
        self.info.show()
        self.name_edit.setEnabled(True)
        self.name_edit.setReadOnly(self.read_only)
        self.name_edit.setText(node.name)
        self._set_row_visible("Op", False)  # the title says what the node is
        self.info_labels["Id"].setText(f"#{node.id}")
        self.info_labels["MACs"].setText(_count(macs) if macs is not None else "–")
        provenance = ", ".join(f"#{p}" for p in node.provenance)
        source = source_of(graph, node)
        self.info_labels["Provenance"].setText(
            provenance + (" (as loaded)" if node.provenance == (node.id,) else "")
            + (f"; from the model file's {long_text(source)}" if source else ""))
        self._fill_attributes(node)
        self._fill_inputs(node)
        self._fill_outputs(node.outputs)
        self._fill_quantization(node.outputs, node)
        weights = [v for v in node.inputs if isinstance(v, Constant)]
        self._set_weights(weights, [input_name(node.op, node.inputs.index(w)) for w in weights])

    def show_group(self, graph: Graph, title: str, kind: str, summary) -> None:
        """Show a closed group: what it is, its nodes' sums, and the tensors leaving it.

        `summary` is a `compiler.hierarchy.GroupSummary`.
        """
        self._graph, self._node = graph, None
        self.read_only = True
        self.title.setText(f"<b style='font-size: 14px'>{html.escape(title)}</b> "
                           f"<span style='color: gray'>{html.escape(kind)}</span><br>"
                           "<span style='color: gray'>Double click the box or press + to open "
                           "it.</span>")
        self._set_problem(None)
        self.info.show()
        self.name_edit.setEnabled(False)
        self.name_edit.setText(title)
        self._set_row_visible("Op", True)
        self.info_labels["Op"].setText(f"{summary.nodes:,} nodes")
        self.info_labels["Id"].setText(kind)
        self.info_labels["MACs"].setText(_count(summary.macs))
        self.info_labels["Provenance"].setText(f"{summary.weight_bytes:,} bytes of weights")
        for key, row in (("Op", "Nodes"), ("Id", "Group"), ("MACs", "MACs"),
                         ("Provenance", "Weights")):
            self._row_title(key).setText(row)
        self.attrs_heading.hide()
        self.attributes.hide()
        self.inputs_heading.hide()
        self.inputs.hide()
        values = [graph.value(name) for name in summary.outputs]
        self._fill_outputs(values)
        self._fill_quantization(values, None)
        self._set_weights([], [])

    def show_value(self, graph: Graph, name: str) -> None:
        """Show a tensor: a graph input or output, a constant (with its statistics), an edge."""
        value = graph.value(name)
        self._graph, self._node = graph, None
        self.read_only = False
        kind = ("graph input" if isinstance(value, Placeholder) else
                "constant" if isinstance(value, Constant) else "tensor")
        if any(v is value for v in graph.outputs):
            kind = "graph output"
        self.title.setText(f"<b style='font-size: 14px'>{html.escape(value.name)}</b> "
                           f"<span style='color: gray'>{kind}</span>")
        self._set_problem(None)
        self.info.show()
        self._set_row_visible("Op", True)
        self.name_edit.setEnabled(False)
        self.name_edit.setText(value.name)
        self.info_labels["Op"].setText(type_text(value.type) + (
            f"  ({value.type.quant})" if value.type.quant else ""))
        producer = value.producer
        self.info_labels["Id"].setText(f"produced by {producer.name} ({producer.op})"
                                       if producer is not None else "–")
        users = graph.users(value)
        self.info_labels["MACs"].setText(
            ", ".join(f"{n.name} ({n.op})" for n, _ in users[:6])
            + (f" and {len(users) - 6} more" if len(users) > 6 else "") or "no node reads it")
        self.info_labels["Provenance"].setText(f"{value.type.nbytes:,} bytes")
        self.attrs_heading.hide()
        self.attributes.hide()
        self.inputs_heading.hide()
        self.inputs.hide()
        self._fill_outputs([value], heading="Tensor")
        self._fill_quantization([value], None)
        self._set_weights([value] if isinstance(value, Constant) else [], [value.name])
        # The grid's row titles fit a node; a tensor reuses the rows for its own facts.
        for key, title in (("Op", "Type"), ("Id", "Producer"), ("MACs", "Users"),
                           ("Provenance", "Size")):
            self._row_title(key).setText(title)

    def _set_row_visible(self, key: str, visible: bool) -> None:
        self._row_title(key).setVisible(visible)
        self.info_labels[key].setVisible(visible)

    def _row_title(self, key: str) -> QLabel:
        grid = self.info.layout()
        row = ("Op", "Id", "MACs", "Provenance").index(key) + 1
        return grid.itemAtPosition(row, 0).widget()

    # -- sections -----------------------------------------------------------------------------

    def _set_problem(self, problem: str | None) -> None:
        for key in ("Op", "Id", "MACs", "Provenance"):
            self._row_title(key).setText(key)
        if problem:
            self.problem.setText(f"Invalid: {problem}")
            self.problem.show()
        else:
            self.problem.hide()

    def _fill_attributes(self, node: Node) -> None:
        opdef = ops.get(node.op)
        schema = opdef.attrs if opdef else {}
        rows = []
        for name, value in node.attrs.items():
            spec = schema.get(name)
            if spec is not None and not spec.onnx and value == spec.default and name != "layout":
                continue  # Kiln's own attributes matter once a pass sets them; layout always
            kind = spec.kind if spec else "?"
            editable = spec is not None and kind != "tensor" and spec.onnx and not self.read_only
            tip = f"{kind}: {spec.doc}" if spec and spec.doc else kind
            text = format_attribute(value) if value is not None else ""
            rows.append([_item(name, tip=tip),
                         _item(text, editable=editable, tip=tip + (
                             "\nDouble-click to edit; empty resets to the default"
                             if editable else ""), data=name)])
        self._populating = True
        try:
            self.attributes.fill(rows)
        finally:
            self._populating = False
        self.attrs_heading.setVisible(bool(rows))
        self.attributes.setVisible(bool(rows))

    def _fill_inputs(self, node: Node) -> None:
        rows = []
        for i, value in enumerate(node.inputs):
            role = input_name(node.op, i)
            if value is None:
                rows.append([_item(role), _item("(omitted)"), _item("")])
                continue
            rows.append([_item(role), _item(value.name, tip=value.name, data=self._key(value)),
                         _item(type_text(value.type), tip=str(value.type), data=self._key(value))])
        self.inputs.fill(rows)
        self.inputs_heading.setVisible(bool(rows))
        self.inputs.setVisible(bool(rows))

    def _fill_outputs(self, values: list[Value], heading: str = "Outputs") -> None:
        rows = []
        for i, value in enumerate(values):
            rows.append([_item(str(i) if heading == "Outputs" else ""),
                         _item(value.name, editable=not self.read_only, data=value.name,
                               tip="" if self.read_only else
                               "Double-click to rename the tensor"),
                         _item(type_text(value.type), tip=str(value.type),
                               data=self._consumer_key(value))])
        self._populating = True
        try:
            self.outputs.fill(rows)
        finally:
            self._populating = False
        self.outputs_heading.setText(heading)
        self.outputs_heading.setVisible(bool(rows))
        self.outputs.setVisible(bool(rows))

    def _fill_quantization(self, values: list[Value], node: Node | None) -> None:
        """The real-value formula of quantized tensors; an integer node's requantization."""
        lines = [f"{v.name}: {real_value_formula(v.type.quant)}" for v in values if v.type.quant]
        channels = requant_channels(node) if node is not None else []
        if channels:
            rule = node.attrs.get("requant", "onnx")
            lines.append(f"{summary(channels)}; requantized by the {rule} rule")
        self.quant_text.setText("\n".join(lines))
        self.requant_table.fill([[_item(str(c.channel)),
                                  _item(f"{c.real:.6g}", tip=f"onnx rule: float32 scale "
                                                             f"{c.onnx_scale:.9g}"),
                                  _item(str(c.multiplier)), _item(str(c.shift))]
                                 for c in channels])
        for widget in (self.quant_heading, self.quant_text):
            widget.setVisible(bool(lines))
        self.requant_table.setVisible(bool(channels))

    def _key(self, value: Value):
        """The canvas key of the box that produces `value`."""
        if value.producer is not None:
            return value.producer.id
        return f"const:{value.name}" if isinstance(value, Constant) else f"in:{value.name}"

    def _consumer_key(self, value: Value):
        graph = self._graph
        if graph is None:
            return None
        users = graph.users(value)
        if users:
            return users[0][0].id
        return f"out:{value.name}" if any(v is value for v in graph.outputs) else None

    # -- weights ------------------------------------------------------------------------------

    def _set_weights(self, weights: list[Constant], labels: list[str]) -> None:
        self._weights = weights
        with signals_blocked(self.weight_choice):
            self.weight_choice.clear()
            for label, weight in zip(labels, weights):
                self.weight_choice.addItem(f"{label}: {weight.name}  {type_text(weight.type)}")
        self.weight_choice.setVisible(len(weights) > 1 or (
            bool(weights) and self._node is not None))
        self.weights_box.setVisible(bool(weights))
        if weights:  # the largest constant: the weights, not a scale or a zero point
            largest = max(range(len(weights)), key=lambda i: weights[i].data.size)
            self.weight_choice.setCurrentIndex(largest)
            self._show_weight(largest)

    def _show_weight(self, index: int) -> None:
        if not 0 <= index < len(self._weights):
            return
        data = self._weights[index].data
        stats = tensor_stats(data)
        values = {
            "Shape": f"{stats.dtype}[{','.join(str(d) for d in stats.shape)}]",
            "Elements": _count(stats.size),
            "Min": _fmt(stats.min), "Max": _fmt(stats.max),
            "Mean": _fmt(stats.mean), "Std": _fmt(stats.std),
            "Sparsity": f"{stats.sparsity:.1%}", "Non-finite": _count(stats.nonfinite),
        }
        for key, text in values.items():
            self.stats_labels[key].setText(text)
        if self._histogram is None:
            self._histogram = Histogram()
            self.histogram_slot.addWidget(self._histogram)
        self._histogram.plot(stats)

    def current_weight(self) -> str | None:
        """The name of the weight whose statistics are shown, or None."""
        index = self.weight_choice.currentIndex()
        return self._weights[index].name if 0 <= index < len(self._weights) else None

    # -- user input ---------------------------------------------------------------------------

    def _attribute_edited(self, item: QTableWidgetItem) -> None:
        if self._populating or self._node is None or item.column() != 1:
            return
        name = item.data(Qt.ItemDataRole.UserRole)
        text = item.text()
        if text.strip() == format_attribute(self._node.attrs.get(name)).strip():
            return
        node_id = self._node.id
        # Deferred: the application re-fills this table in response, which must not happen
        # inside the table's own itemChanged.
        QTimer.singleShot(0, lambda: self.attributeEditRequested.emit(node_id, name, text))

    def _name_edited(self) -> None:
        if self._node is None or not self.name_edit.isEnabled():
            return
        text = self.name_edit.text()
        if text != self._node.name:
            node_id = self._node.id
            QTimer.singleShot(0, lambda: self.renameNodeRequested.emit(node_id, text))

    def _tensor_renamed(self, item: QTableWidgetItem) -> None:
        if self._populating or item.column() != 1:
            return
        old, new = item.data(Qt.ItemDataRole.UserRole), item.text()
        if new != old:
            QTimer.singleShot(0, lambda: self.renameTensorRequested.emit(old, new))

    def _row_activated(self, item: QTableWidgetItem) -> None:
        # Inputs lead to their producer; an output's type cell to its first consumer (its name
        # cell is for renaming).
        if item.tableWidget() is self.outputs and item.column() != 2:
            return
        key = item.data(Qt.ItemDataRole.UserRole)
        if key is not None:
            self.navigateRequested.emit(key)

    def _export(self) -> None:
        name = self.current_weight()
        if name is not None:
            self.exportRequested.emit(name)
