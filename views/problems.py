"""The problems panel: every node shape inference rejects, with the reason."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import QLabel, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget

from compiler.ir.graph import Graph

INVALID = QColor("#b00020")


class ProblemsPanel(QWidget):
    """A list of invalid nodes; activating one asks the canvas to select it.

    Signals:
        nodeActivated(node_id): the user clicked or activated a problem.
    """

    nodeActivated = Signal(int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("ProblemsPanel")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.summary = QLabel()
        self.summary.setContentsMargins(6, 4, 6, 4)
        self.summary.setWordWrap(True)  # a narrow column wraps the sentence, not widens
        layout.addWidget(self.summary)
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(["Node", "Op", "Reason"])
        self.tree.setRootIsDecorated(False)
        self.tree.setUniformRowHeights(True)
        self.tree.setAlternatingRowColors(True)
        self.tree.itemActivated.connect(self._activated)
        self.tree.itemClicked.connect(self._activated)
        layout.addWidget(self.tree)
        self.set_problems(None, {})

    def set_problems(self, graph: Graph | None, problems: dict[int, str]) -> None:
        """Show `problems` (node id -> reason) of `graph`, in graph order."""
        self.tree.clear()
        nodes = {n.id: n for n in graph.nodes} if graph is not None else {}
        order = {n.id: i for i, n in enumerate(graph.nodes)} if graph is not None else {}
        for node_id in sorted(problems, key=lambda i: order.get(i, len(order))):
            node = nodes.get(node_id)
            item = QTreeWidgetItem([node.name if node else f"#{node_id}",
                                    node.op if node else "", problems[node_id]])
            item.setData(0, Qt.ItemDataRole.UserRole, node_id)
            item.setForeground(0, QBrush(INVALID))
            item.setToolTip(2, problems[node_id])
            self.tree.addTopLevelItem(item)
        for column in range(2):
            self.tree.resizeColumnToContents(column)
        count = len(problems)
        self.summary.setText("No problems: every node passes shape inference." if not count else
                             f"{count} invalid node{'s' if count > 1 else ''}: fix the edit or "
                             "undo it (Ctrl+Z).")
        self.summary.setStyleSheet("" if not count else f"color: {INVALID.name()};")

    def count(self) -> int:
        """Number of problems listed."""
        return self.tree.topLevelItemCount()

    def _activated(self, item: QTreeWidgetItem, _column: int = 0) -> None:
        self.nodeActivated.emit(int(item.data(0, Qt.ItemDataRole.UserRole)))
