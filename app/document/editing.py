"""The Edit menu's work: turn the selection and a dialog's answer into one undoable edit."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PySide6.QtCore import QObject
from PySide6.QtWidgets import QDialog, QFileDialog, QInputDialog, QLineEdit, QMainWindow

from compiler import edit, ops
from compiler.errors import KilnError, one_line
from compiler.fileio import atomic_write_bytes
from views import dialogs


class EditController(QObject):
    """Edits on the window's document, each one undo step; refusals become a one-line dialog.

    The methods that take values (`rename_node`, `set_attribute_text`, `insert_on_edge`, ...)
    are what the dialogs and panels call, and what tests drive directly.
    """

    def __init__(self, window: QMainWindow):
        super().__init__(window)
        self.window = window

    @property
    def document(self):
        """The window's document."""
        return self.window.document

    def _apply(self, fn, text: str, *args, **kwargs) -> bool:
        try:
            self.document.apply(fn, text, *args, **kwargs)
        except KilnError as exc:
            dialogs.show_refusal(self.window, str(exc))
            return False
        return True

    def _node_name(self, node_id: int) -> str:
        return one_line(self.document.graph.node(node_id).name)

    def _exists(self, node_id: int) -> bool:
        """True when the node is in the graph; otherwise says so (a stale panel or canvas)."""
        graph = self.document.graph
        if graph is not None and any(n.id == node_id for n in graph.nodes):
            return True
        dialogs.show_refusal(self.window, "that node is no longer in the graph")
        return False

    # -- what is selected ---------------------------------------------------------------------

    def selected_node(self) -> int | None:
        """The id of the selected node (not an input, output or constant box)."""
        key = self.window.canvas.selected_key()
        graph = self.document.graph
        if not isinstance(key, int) or graph is None:
            return None
        # The canvas may still show the graph before the last edit while it is laid out again.
        return key if any(n.id == key for n in graph.nodes) else None

    def selected_tensor(self) -> str | None:
        """The tensor selected: an edge, or an input, output or constant box."""
        canvas = self.window.canvas
        edge = canvas.selected_edge()
        if edge is not None:
            return edge
        key = canvas.selected_key()
        return key.split(":", 1)[1] if isinstance(key, str) else None

    def edge_target(self) -> tuple[str, object, str] | None:
        """(tensor, consumer, description) of the edge an insert goes to, or None.

        Selecting an edge selects every edge of its tensor, so the insert feeds all its users.
        """
        name = self.window.canvas.selected_edge()
        graph = self.document.graph
        if name is None or graph is None:
            return None
        try:
            value = graph.value(name)
        except KeyError:
            return None
        users = [n.name for n, _ in graph.users(value)]
        if any(v is value for v in graph.outputs):
            users.append("output")
        shown = ", ".join(users[:3]) + (f" +{len(users) - 3}" if len(users) > 3 else "")
        return name, None, one_line(f"{name} → {shown}" if users else name)

    # -- delete -------------------------------------------------------------------------------

    def delete_selected(self) -> bool:
        """Edit > Delete Node."""
        node_id = self.selected_node()
        if node_id is None:
            return self._delete_selected_group()
        return self._apply(edit.delete_node, f"Delete {self._node_name(node_id)}", node_id)

    def _delete_selected_group(self) -> bool:
        """Delete every node of the selected closed group, as one undo step."""
        key = self.window.canvas.selected_key()
        grouping = self.window.grouping.grouping()
        if not isinstance(key, str) or grouping is None or key not in grouping.hierarchy.groups:
            return False
        title = grouping.hierarchy.groups[key].title
        return self._apply(edit.delete_nodes, f"Delete {title}",
                           grouping.hierarchy.members(key), f"group {title!r}")

    # -- rename -------------------------------------------------------------------------------

    def rename_selected(self) -> bool:
        """Edit > Rename…: the selected node, or else the selected tensor."""
        node_id = self.selected_node()
        if node_id is not None:
            old = self.document.graph.node(node_id).name
            name, ok = QInputDialog.getText(self.window, "Rename Node", "Node name:",
                                            QLineEdit.EchoMode.Normal, old)
            return ok and name != old and self.rename_node(node_id, name)
        tensor = self.selected_tensor()
        if tensor is not None:
            name, ok = QInputDialog.getText(self.window, "Rename Tensor", "Tensor name:",
                                            QLineEdit.EchoMode.Normal, tensor)
            return ok and name != tensor and self.rename_tensor(tensor, name)
        return False

    def rename_node(self, node_id: int, name: str) -> bool:
        """Rename a node (one undo step)."""
        if not self._exists(node_id):
            return False
        old = self._node_name(node_id)
        return self._apply(edit.rename_node, f"Rename {old} to {one_line(name)}", node_id, name)

    def rename_tensor(self, old: str, new: str) -> bool:
        """Rename a tensor (one undo step)."""
        ok = self._apply(edit.rename_value, f"Rename tensor {one_line(old)} to {one_line(new)}",
                         old, new)
        if ok and self.window.canvas.selected_edge() is None:
            key = self.window.canvas.selected_key()
            if isinstance(key, str) and key.split(":", 1)[1] == old:
                self.window.select_and_center(f"{key.split(':', 1)[0]}:{new}")
        return ok

    # -- attributes ---------------------------------------------------------------------------

    def editable_attributes(self, node_id: int) -> list[str]:
        """Attributes of a node that can be typed in."""
        node = self.document.graph.node(node_id)
        opdef = ops.get(node.op)
        if opdef is None:
            return []
        return [name for name, spec in opdef.attrs.items()
                if spec.kind != "tensor" and name != "layout"]

    def edit_attribute_dialog(self) -> bool:
        """Edit > Edit Attribute…."""
        node_id = self.selected_node()
        if node_id is None:
            return False
        names = self.editable_attributes(node_id)
        if not names:
            dialogs.show_refusal(self.window, f"{self._node_name(node_id)} has no attribute "
                                              "that can be edited")
            return False
        dialog = dialogs.AttributeDialog(self.window, self.document.graph.node(node_id), names)
        if dialog.exec() != QDialog.DialogCode.Accepted:
            return False
        return self.set_attribute_text(node_id, *dialog.result_value())

    def set_attribute_text(self, node_id: int, name: str, text: str) -> bool:
        """Set an attribute from what the user typed (parsed by the schema's kind)."""
        if not self._exists(node_id):
            return False
        graph = self.document.graph
        opdef = ops.get(graph.node(node_id).op)
        spec = opdef.attrs.get(name) if opdef else None
        try:
            if spec is None:
                raise KilnError(f"{graph.node(node_id).op} has no attribute {name!r}")
            value = edit.parse_attribute(spec.kind, text, name)
        except KilnError as exc:
            dialogs.show_refusal(self.window, str(exc))
            self.window.refresh_properties()
            return False
        ok = self._apply(edit.set_attribute, f"Set {name} of {self._node_name(node_id)}",
                         node_id, name, value)
        if not ok:
            self.window.refresh_properties()
        return ok

    # -- insert -------------------------------------------------------------------------------

    def insert_dialog(self) -> bool:
        """Edit > Insert Operator… on the selected edge."""
        target = self.edge_target()
        if target is None:
            dialogs.show_refusal(self.window, "select an edge first: an operator is inserted on "
                                              "the edge you click")
            return False
        dialog = dialogs.InsertDialog(self.window, edit.insertable_ops(), target[2],
                                      self.window.palette.current_operator())
        if dialog.exec() != QDialog.DialogCode.Accepted:
            return False
        return self.insert_on_edge(*dialog.result_value())

    def insert_on_edge(self, op: str, parameters: str = "") -> bool:
        """Insert `op` on the selected edge; the new node becomes the selection."""
        target = self.edge_target()
        if target is None:
            dialogs.show_refusal(self.window, "select an edge first")
            return False
        tensor, consumer, _ = target
        try:
            attrs = edit.parse_insert_parameters(op, parameters)
        except KilnError as exc:
            dialogs.show_refusal(self.window, str(exc))
            return False
        new_id = self.document.graph.next_id
        ok = self._apply(edit.insert_operator, f"Insert {op} on {one_line(tensor)}", tensor, op,
                         attrs, consumer)
        if ok:
            self.window.select_and_center(new_id)
        return ok

    # -- input shape --------------------------------------------------------------------------

    def input_shape_dialog(self) -> bool:
        """Edit > Change Input Shape…."""
        graph = self.document.graph
        if graph is None or not graph.inputs:
            return False
        tensor = self.selected_tensor()
        current = tensor if any(v.name == tensor for v in graph.inputs) else None
        dialog = dialogs.InputShapeDialog(self.window, graph, current)
        if dialog.exec() != QDialog.DialogCode.Accepted:
            return False
        return self.set_input_shape_text(*dialog.result_value())

    def set_input_shape_text(self, name: str, text: str) -> bool:
        """Change an input's shape from typed text such as `1, 3, 224, 224`."""
        try:
            shape = edit.parse_attribute("ints", text, "the shape")
            if shape is None:
                raise KilnError("type the shape as numbers separated by commas")
        except KilnError as exc:
            dialogs.show_refusal(self.window, str(exc))
            return False
        return self._apply(edit.set_input_shape, f"Change shape of {one_line(name)}", name,
                           shape)

    # -- export -------------------------------------------------------------------------------

    def export_constant(self, name: str, path: str | Path | None = None) -> bool:
        """Write a constant's payload to a .npy file (atomically); asks where without `path`."""
        graph = self.document.graph
        constant = graph.constants.get(name) if graph is not None else None
        if constant is None:
            return False
        if path is None:
            safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)
            start = str((self.document.path.parent if self.document.path else Path()) /
                        f"{safe}.npy")
            chosen, _ = QFileDialog.getSaveFileName(self.window, "Export Weight", start,
                                                    "NumPy arrays (*.npy)")
            if not chosen:
                return False
            path = chosen
        path = Path(path)
        buffer = io.BytesIO()
        np.save(buffer, np.asarray(constant.data), allow_pickle=False)
        try:
            atomic_write_bytes(path, buffer.getvalue())
        except OSError as exc:
            dialogs.show_error(self.window, "Cannot export weight",
                               f"cannot write {path.name}: {exc.strerror or exc}")
            return False
        self.window.statusBar().showMessage(f"Exported {name} to {path}", 6000)
        return True
