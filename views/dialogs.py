"""Small dialogs of the main window: errors, the unsaved-changes question, edit parameters."""

from __future__ import annotations

from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QMessageBox,
    QVBoxLayout,
    QWidget,
)

from compiler import ops
from compiler.edit import format_attribute
from compiler.errors import one_line
from compiler.ir.graph import Graph, Node

SAVE, DISCARD, CANCEL = "save", "discard", "cancel"


def show_error(parent: QWidget | None, title: str, message: str) -> None:
    """An error as a dialog with its one-line message (never a traceback)."""
    QMessageBox.critical(parent, title, one_line(message))


def show_refusal(parent: QWidget | None, message: str) -> None:
    """An edit the graph does not allow: a warning, since nothing was lost."""
    QMessageBox.warning(parent, "Edit not allowed", one_line(message))


def save_changes_question(name: str, graph_edited: bool) -> tuple[str, object]:
    """The unsaved-changes question about `name` and its default button.

    Save is the default only for a graph the user edited: when only ranges, float tensors or
    notes changed, Save means a session and the default is Cancel, so Enter never rewrites a
    model file (often someone else's) that nobody edited.
    """
    if graph_edited:
        return f"{name} has unsaved edits. Save them first?", QMessageBox.StandardButton.Save
    return (f"Your changes to {name} (ranges, tensors kept float, notes) are in no file yet; "
            "the model itself is unchanged. Save them as a session first? Save asks where "
            "and leaves the model file as it is.", QMessageBox.StandardButton.Cancel)


def ask_save_changes(parent: QWidget | None, name: str, graph_edited: bool = True) -> str:
    """Ask whether to save unsaved changes: SAVE, DISCARD or CANCEL."""
    buttons = (QMessageBox.StandardButton.Save | QMessageBox.StandardButton.Discard
               | QMessageBox.StandardButton.Cancel)
    text, default = save_changes_question(name, graph_edited)
    answer = QMessageBox.question(parent, "Unsaved changes", text, buttons, default)
    if answer == QMessageBox.StandardButton.Save:
        return SAVE
    if answer == QMessageBox.StandardButton.Discard:
        return DISCARD
    return CANCEL


class _FormDialog(QDialog):
    """A titled form with OK and Cancel."""

    def __init__(self, parent: QWidget | None, title: str, note: str = ""):
        super().__init__(parent)
        self.setWindowTitle(title)
        self.setMinimumWidth(420)
        layout = QVBoxLayout(self)
        if note:
            label = QLabel(note)
            label.setWordWrap(True)
            layout.addWidget(label)
        self.form = QFormLayout()
        layout.addLayout(self.form)
        self.help = QLabel()
        self.help.setWordWrap(True)
        self.help.setStyleSheet("color: gray;")
        layout.addWidget(self.help)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                   | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)


class AttributeDialog(_FormDialog):
    """Choose one of a node's attributes and type its new value."""

    def __init__(self, parent: QWidget | None, node: Node, editable: list[str]):
        super().__init__(parent, f"Edit Attribute of {node.name}",
                         "Shape inference re-runs after the edit; a node that cannot accept the "
                         "value turns red (undo with Ctrl+Z).")
        self.node = node
        self.name = QComboBox()
        self.name.addItems(editable)
        self.value = QLineEdit()
        self.form.addRow("Attribute", self.name)
        self.form.addRow("Value", self.value)
        self.name.currentTextChanged.connect(self._changed)
        self._changed(self.name.currentText())

    def _changed(self, name: str) -> None:
        opdef = ops.get(self.node.op)
        spec = opdef.attrs.get(name) if opdef else None
        self.value.setText(format_attribute(self.node.attrs.get(name)))
        self.value.selectAll()
        if spec is not None:
            self.help.setText(f"{spec.kind}: {spec.doc}. Lists as [1, 2]; empty resets to the "
                              "default." if spec.doc else f"{spec.kind}")

    def result_value(self) -> tuple[str, str]:
        """(attribute name, typed text)."""
        return self.name.currentText(), self.value.text()


# Parameters an inserted operator takes beside its schema attributes, with the default text.
INSERT_PARAMETERS = {
    "Clip": ("min, max", "bounds of the output (constant inputs of the new node)"),
    "Reshape": ("shape", "target shape; default: the tensor's own shape"),
    "Transpose": ("perm", "permutation of the axes; default: identity"),
    "LeakyRelu": ("alpha", "slope for negative inputs"),
}


class InsertDialog(_FormDialog):
    """Choose the operator to insert on an edge, and its main parameter."""

    def __init__(self, parent: QWidget | None, operators: list[str], target: str,
                 current: str | None = None):
        super().__init__(parent, "Insert Operator", f"Insert on the edge {target}.")
        self.op = QComboBox()
        self.op.addItems(operators)
        if current in operators:
            self.op.setCurrentText(current)
        self.parameter = QLineEdit()
        self.parameter_label = QLabel()
        self.form.addRow("Operator", self.op)
        self.form.addRow(self.parameter_label, self.parameter)
        self.op.currentTextChanged.connect(self._changed)
        self._changed(self.op.currentText())

    def _changed(self, op: str) -> None:
        label, help_text = INSERT_PARAMETERS.get(op, ("", ""))
        self.parameter_label.setText(label.capitalize() if label else "")
        self.parameter.setVisible(bool(label))
        self.parameter_label.setVisible(bool(label))
        self.parameter.setPlaceholderText("0, 6" if op == "Clip" else "default")
        self.parameter.clear()
        self.help.setText(help_text)

    def result_value(self) -> tuple[str, str]:
        """(operator, parameter text)."""
        return self.op.currentText(), self.parameter.text()


class InputShapeDialog(_FormDialog):
    """Choose a graph input and type its new static shape."""

    def __init__(self, parent: QWidget | None, graph: Graph, current: str | None = None):
        super().__init__(parent, "Change Input Shape",
                         "Every downstream shape is inferred again; nodes that cannot follow "
                         "turn red.")
        self.graph = graph
        self.input = QComboBox()
        self.input.addItems([v.name for v in graph.inputs])
        if current is not None:
            self.input.setCurrentText(current)
        self.shape = QLineEdit()
        self.form.addRow("Input", self.input)
        self.form.addRow("Shape", self.shape)
        self.input.currentTextChanged.connect(self._changed)
        self._changed(self.input.currentText())
        self.help.setText("Dimensions separated by commas, e.g. 1, 3, 224, 224.")

    def _changed(self, name: str) -> None:
        value = next((v for v in self.graph.inputs if v.name == name), None)
        if value is not None:
            self.shape.setText(", ".join(str(d) for d in value.type.shape))

    def result_value(self) -> tuple[str, str]:
        """(input name, typed shape)."""
        return self.input.currentText(), self.shape.text()
