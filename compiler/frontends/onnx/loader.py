"""Read an ONNX model into a Kiln graph, refusing bad files with one clear sentence.

Models come from strangers: loading never runs code from the file, never reads external data
outside the model's folder, refuses absurd tensor sizes before allocating them, and reports every
unsupported operator at once. Older opsets are translated to Kiln's canonical form (the newest
ONNX semantics) by each operator's `from_onnx` hook; the graph remembers the opset so that it can
be saved back in the same encoding.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import onnx

from compiler import ops
from compiler.bulk import collector_paused
from compiler.errors import KilnError, ModelError
from compiler.fileio import model_source
from compiler.frontends.onnx.attributes import check_attributes, decode_attributes
from compiler.frontends.onnx.expand import REQUANT_PROP
from compiler.frontends.onnx.schema import check_declared, check_node, check_types
from compiler.frontends.onnx.tensors import check_size, elem_type_name, tensor_to_array
from compiler.ir.graph import Graph, Value
from compiler.ir.types import DTYPE_OF_ONNX, TensorType
from compiler.limits import check_tensor_bytes, max_tensor_bytes
from compiler.ops.infer import infer_node, known_constants
from compiler.qmath.check import check_quantization
from compiler.qmath.requant import MODES, REQUANT_KEY

# Opsets of the default domain Kiln reads. The upper end follows the operators' conformance
# tests (onnx.backend.test), which all pass for the operators Kiln claims.
SUPPORTED_OPSETS = range(7, 29)

# Domains whose import is tolerated as long as no node uses them (tf2onnx adds ai.onnx.ml).
_HARMLESS_DOMAINS = {"ai.onnx.ml"}

_PENDING = TensorType((), "float32")  # an output's type until inference has run

# Files larger than this are refused up front (protobuf itself cannot exceed 2 GiB).
MAX_FILE_BYTES = 2**31


def load_onnx(source: str | os.PathLike | bytes | onnx.ModelProto,
              shapes: Mapping[str, tuple[int, ...]] | None = None,
              *, label: str | None = None) -> Graph:
    """Load an ONNX model from a path, raw bytes or a ModelProto.

    Args:
        source: The model.
        shapes: Static shapes for graph inputs, overriding the file (the CLI's `--shape`).
        label: The name used in error messages (defaults to the file name).

    Raises:
        ModelError: for anything wrong with the file, naming the file, the node and the reason.
    """
    base_dir: Path | None = None
    if isinstance(source, onnx.ModelProto):
        label = label or "<model>"
        model = source
    else:
        label, data, path = model_source(source, label, MAX_FILE_BYTES,
                                         "the limit of an ONNX protobuf")
        base_dir = path.resolve().parent if path is not None else None
        model = _parse(data, label)
    importer = None
    try:
        importer = _Importer(model, label, base_dir, shapes or {})
        with collector_paused():
            return importer.run()
    except ModelError as exc:
        raise exc.with_file(label) from None
    except KilnError as exc:
        raise ModelError(str(exc), file=label) from None
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError,
            UnicodeDecodeError, MemoryError, RecursionError) as exc:
        # A malformed file can trip numpy or protobuf in ways no check anticipates; the user
        # still gets one sentence naming where it happened, and the cause stays chained for
        # a bug report (KILN_DEBUG=1 shows it).
        where = importer.where if importer is not None else "the model"
        raise ModelError(f"{where} is malformed: its fields contradict each other or the ONNX "
                         "format, so it cannot be read", file=label) from exc


# A TFLite flatbuffer carries this file identifier at bytes 4 to 8.
TFLITE_IDENTIFIER = b"TFL3"


def _parse(data: bytes, label: str) -> onnx.ModelProto:
    if not data:
        raise ModelError("the file is empty, not an ONNX model", file=label)
    if data[4:8] == TFLITE_IDENTIFIER:
        raise ModelError("a TFLite model (its flatbuffer says TFL3), not ONNX: open it with "
                         "Kiln's model loader, which reads both", file=label)
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception:  # protobuf raises DecodeError and, on some builds, other errors
        raise ModelError("not an ONNX model (the file does not parse as an ONNX protobuf; "
                         "it may be truncated or of another format)", file=label) from None
    if not model.HasField("graph") or model.ir_version <= 0 or not model.opset_import:
        raise ModelError("not an ONNX model (no graph, IR version or opset in the file)",
                         file=label)
    return model


def _node_label(node: onnx.NodeProto, index: int) -> str:
    name = node.name or f"#{index}"
    return f"{name} ({node.op_type})"


class _Importer:
    """One import: holds the name table while nodes are translated in topological order."""

    def __init__(self, model: onnx.ModelProto, label: str, base_dir: Path | None,
                 shapes: Mapping[str, tuple[int, ...]]):
        self.model = model
        self.label = label
        self.where = "the model"  # what is being read, for a message when reading fails
        self.base_dir = base_dir
        self.shapes = dict(shapes)
        self.graph = Graph(model.graph.name or "graph", self._opset())
        self.values: dict[str, Value] = {}
        self.known: dict[int, np.ndarray] = {}
        self.present: set[str] = set()  # attributes the current node's file entry spells out
        self.outputs: list[str] = []  # output names of the current node (Split counts them)
        # Element types the file states for tensors (graph outputs, value_info), 0 if unstated.
        self.declared = {v.name: v.type.tensor_type.elem_type
                         for v in (*model.graph.value_info, *model.graph.output)
                         if v.type.WhichOneof("value") == "tensor_type"}

    # -- whole-model checks -------------------------------------------------------------------

    def _opset(self) -> int:
        versions = {imp.domain: imp.version for imp in self.model.opset_import}
        opset = versions.get("", versions.get("ai.onnx"))
        if opset is None:
            raise ModelError("the model imports no version of the default ONNX operator set")
        if opset not in SUPPORTED_OPSETS:
            raise ModelError(f"opset {opset} is not supported (Kiln reads opsets "
                             f"{SUPPORTED_OPSETS.start} to {SUPPORTED_OPSETS.stop - 1})")
        return opset

    def run(self) -> Graph:
        g = self.model.graph
        self.where = "the model"
        _check_names(g)
        self._check_supported(g)
        order = self._topological_order(g)
        self._add_constants(g)
        self._add_inputs(g)
        self.known = known_constants(self.graph)
        self.limit = max_tensor_bytes()
        self.checked: set[tuple] = set()
        for index in order:
            self.where = f"node {_node_label(g.node[index], index)}"
            self._add_node(g.node[index], index)
        self.where = "the graph's outputs or metadata"
        for out in g.output:
            if out.name not in self.values:
                raise ModelError(f"graph output {out.name!r} is produced by no node")
            self.graph.outputs.append(self.values[out.name])
        if not self.graph.outputs:
            raise ModelError("the graph has no outputs")
        check_quantization(self.graph)
        m = self.model
        self.graph.metadata = {
            "ir_version": m.ir_version,
            "producer_name": _clean(m.producer_name),
            "producer_version": _clean(m.producer_version),
            "domain": _clean(m.domain),
            "model_version": m.model_version,
            "doc_string": _clean(m.doc_string),
            "graph_doc_string": _clean(g.doc_string),
            "opset_imports": {_clean(imp.domain): imp.version for imp in m.opset_import},
            "metadata_props": {_clean(p.key): _clean(p.value) for p in m.metadata_props},
        }
        self.graph.next_id = len(g.node)
        _apply_saved_rule(self.graph)
        return self.graph

    def _check_supported(self, g: onnx.GraphProto) -> None:
        """Report every node Kiln cannot handle in one message."""
        missing = []
        for index, node in enumerate(g.node):
            opdef = ops.get(node.op_type)
            domain = "" if node.domain == "ai.onnx" else node.domain
            if opdef is not None and opdef.onnx and opdef.domain == domain:
                continue
            if domain:
                missing.append(f"node {node.name or '#' + str(index)} "
                               f"({node.domain}::{node.op_type})")
            else:
                missing.append(f"node {_node_label(node, index)}")
        if missing:
            count = len(missing)
            raise ModelError(f"{count} unsupported operator{'s' if count > 1 else ''}: "
                             + ", ".join(missing))

    def _topological_order(self, g: onnx.GraphProto) -> list[int]:
        """Kahn's algorithm over tensor names, detecting duplicates, dangling inputs and cycles."""
        producer: dict[str, int] = {}
        external = {i.name for i in g.initializer} | {i.name for i in g.input}
        for index, node in enumerate(g.node):
            for name in node.output:
                if not name:
                    continue
                if name in producer or name in external:
                    raise ModelError(f"tensor name {name!r} is defined more than once",
                                     node=_node_label(node, index))
                producer[name] = index
        waiting = [0] * len(g.node)
        consumers: dict[int, list[int]] = {i: [] for i in range(len(g.node))}
        for index, node in enumerate(g.node):
            for name in node.input:
                if not name or name in external:
                    continue
                if name not in producer:
                    raise ModelError(f"input {name!r} is not produced by any node, "
                                     "initializer or graph input", node=_node_label(node, index))
                waiting[index] += 1
                consumers[producer[name]].append(index)
        ready = [i for i, n in enumerate(waiting) if n == 0]
        order: list[int] = []
        while ready:
            index = ready.pop(0)
            order.append(index)
            for user in consumers[index]:
                waiting[user] -= 1
                if waiting[user] == 0:
                    ready.append(user)
            ready.sort()  # keep the file's order where it is valid
        if len(order) != len(g.node):
            stuck = next(i for i, n in enumerate(waiting) if n > 0)
            raise ModelError("the graph has a cycle", node=_node_label(g.node[stuck], stuck))
        return order

    # -- values -------------------------------------------------------------------------------

    def _add_constants(self, g: onnx.GraphProto) -> None:
        names = set()
        for tensor in g.initializer:
            if tensor.name in names:
                raise ModelError(f"initializer {tensor.name!r} is defined more than once")
            names.add(tensor.name)
            self.where = f"initializer {tensor.name!r}"
            data = tensor_to_array(tensor, self.base_dir)
            self.values[tensor.name] = self.graph.add_constant(tensor.name, data)
        for sparse in g.sparse_initializer:
            raise ModelError(f"sparse initializer {sparse.values.name!r} is not supported")

    def _add_inputs(self, g: onnx.GraphProto) -> None:
        declared = set()
        for info in g.input:
            if info.name in declared:
                raise ModelError(f"graph input {info.name!r} is declared more than once")
            declared.add(info.name)
            self.where = f"graph input {info.name!r}"
            if info.name in self.values:
                continue  # old-IR style: an initializer also listed as an input is a constant
            self.values[info.name] = self.graph.add_input(info.name, self._input_type(info))
        unknown = set(self.shapes) - {i.name for i in self.graph.inputs}
        if unknown:
            names = ", ".join(i.name for i in self.graph.inputs)
            raise ModelError(f"--shape names no graph input: {', '.join(sorted(unknown))} "
                             f"(inputs are: {names})")

    def _input_type(self, info: onnx.ValueInfoProto) -> TensorType:
        if info.type.WhichOneof("value") != "tensor_type":
            raise ModelError(f"graph input {info.name!r} is not a tensor")
        tensor_type = info.type.tensor_type
        dtype = DTYPE_OF_ONNX.get(tensor_type.elem_type)
        if dtype is None:
            raise ModelError(f"graph input {info.name!r} has element type "
                             f"{elem_type_name(tensor_type.elem_type)}, which Kiln does not "
                             "support")
        if info.name in self.shapes:
            shape = tuple(int(d) for d in self.shapes[info.name])
            if tensor_type.HasField("shape") and len(tensor_type.shape.dim) != len(shape):
                raise ModelError(f"--shape gives {len(shape)} dimensions for input "
                                 f"{info.name!r}, the model has {len(tensor_type.shape.dim)}")
        elif not tensor_type.HasField("shape"):
            raise ModelError(f"graph input {info.name!r} has no shape; give one with "
                             f"--shape {info.name}=d0,d1,...")
        else:
            shape = []
            for axis, dim in enumerate(tensor_type.shape.dim):
                if dim.HasField("dim_value"):
                    shape.append(dim.dim_value)
                elif dim.HasField("dim_param"):
                    shape.append(1)  # symbolic (usually batch): 1 unless --shape says otherwise
                else:
                    raise ModelError(f"graph input {info.name!r} has an unknown dimension at "
                                     f"axis {axis}; give its shape with --shape "
                                     f"{info.name}=d0,d1,...")
            shape = tuple(shape)
        if any(d < 0 for d in shape):
            raise ModelError(f"graph input {info.name!r} has a negative dimension {list(shape)}")
        check_size(shape, f"graph input {info.name!r}")
        try:
            check_tensor_bytes(TensorType(shape, dtype).nbytes, f"graph input {info.name!r}")
        except KilnError as exc:
            raise ModelError(str(exc)) from None
        return TensorType(shape, dtype)

    # -- nodes --------------------------------------------------------------------------------

    def _add_node(self, proto: onnx.NodeProto, index: int) -> None:
        label = _node_label(proto, index)
        opdef = ops.lookup(proto.op_type)
        try:
            self._check_node(proto)
            attrs = decode_attributes(proto, opdef, self.base_dir)
            input_names = list(proto.input)
            if opdef.from_onnx is not None:
                self.present = {a.name for a in proto.attribute}
                self.outputs = list(proto.output)
                attrs, input_names = opdef.from_onnx(self, attrs, input_names, self.graph.opset)
            check_attributes(attrs, opdef)
            while input_names and not input_names[-1]:
                input_names.pop()
            _check_arity("input", len(input_names), opdef.inputs)
            outputs = list(proto.output)
            while outputs and not outputs[-1]:
                outputs.pop()
            _check_arity("output", len(outputs), opdef.outputs)
            inputs = [self.values[n] if n else None for n in input_names]
            name = self.graph.unique_node_name(proto.name or f"{proto.op_type}_{index}")
            # Unnamed (omitted) optional outputs still need a value for the IR.
            out_names = [n or self.graph.unique_name(f"{name}_unused{i}")
                         for i, n in enumerate(outputs)]
            # Outputs exist (with a provisional type) before inference, which may count them.
            node = self.graph.add_node(proto.op_type, inputs, [_PENDING] * len(out_names), attrs,
                                       name=name, output_names=out_names, node_id=index)
            types, values = infer_node(node, self.known, self.limit)
        except ModelError as exc:
            raise ModelError(exc.reason, node=exc.node or label) from None
        except KilnError as exc:
            raise ModelError(str(exc), node=label) from None
        if len(types) < len(out_names):
            raise ModelError(f"the operator produces {len(types)} outputs, the node names "
                             f"{len(out_names)}", node=label)
        for out, t, value in zip(node.outputs, types, values):
            out.type = t
            self.values[out.name] = out
            if value is not None:
                self.known[id(out)] = value
        try:
            opset = self._domain_opset(proto.domain)
            inputs = [self.values[n] if n else None for n in proto.input]
            key = (proto.op_type, proto.domain, opset,
                   tuple(v.type.dtype if v is not None else None for v in inputs))
            if key not in self.checked:  # one check per operator and element types
                check_types(proto, opset, inputs)
                self.checked.add(key)
            check_declared(proto, opset, node.outputs, self.declared)
        except ModelError as exc:
            raise ModelError(exc.reason, node=label) from None

    def _check_node(self, proto: onnx.NodeProto) -> None:
        """`check_node`, once per operator, attribute names and inputs given.

        Big graphs repeat a few node shapes thousands of times.
        """
        key = (proto.op_type, proto.domain, tuple(a.name for a in proto.attribute),
               tuple(bool(n) for n in proto.input))
        if key not in self.checked:
            check_node(proto, self._domain_opset(proto.domain))
            self.checked.add(key)

    def _domain_opset(self, domain: str) -> int:
        """The version of `domain` the model imports (the default domain's is the graph's)."""
        if domain in ("", "ai.onnx"):
            return self.graph.opset
        return next((imp.version for imp in self.model.opset_import if imp.domain == domain), 1)

    # -- services for from_onnx hooks ----------------------------------------------------------

    def constant(self, name_hint: str, array: np.ndarray) -> str:
        """Add a constant (an attribute that newer opsets pass as an input); returns its name."""
        value = self.graph.add_constant(name_hint, np.asarray(array))
        self.values[value.name] = value
        self.known[id(value)] = value.data
        return value.name

    def type_of(self, name: str) -> TensorType | None:
        """The type of a tensor already loaded (inputs of the current node are)."""
        value = self.values.get(name)
        return None if value is None else value.type

    def value_of(self, name: str) -> np.ndarray | None:
        """The compile-time value of a tensor, when known."""
        value = self.values.get(name)
        return None if value is None else self.known.get(id(value))


def _apply_saved_rule(graph: Graph) -> None:
    """A file Kiln saved says which rule its integer operators follow (kiln.requant)."""
    rule = graph.metadata["metadata_props"].get(REQUANT_PROP)
    if rule not in MODES:
        return
    graph.metadata[REQUANT_KEY] = rule
    for node in graph.nodes:
        if "requant" in ops.lookup(node.op).attrs:
            node.attrs["requant"] = rule


def _check_names(g: onnx.GraphProto) -> None:
    """Refuse names that are not valid UTF-8 (protobuf does not check ONNX's string fields)."""
    names = [g.name] + [v.name for v in (*g.input, *g.output, *g.initializer)]
    for node in g.node:
        names += [node.name, node.op_type, node.domain, *node.input, *node.output]
    for name in names:
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise ModelError(f"the name {name!r} is not valid UTF-8") from None


def _clean(text: str) -> str:
    """Free text (doc strings) with invalid UTF-8 replaced rather than refused."""
    return text.encode("utf-8", errors="replace").decode("utf-8")


def _check_arity(what: str, count: int, bounds: tuple[int, int]) -> None:
    low, high = bounds
    if count < low or (high >= 0 and count > high):
        expect = f"{low}" if low == high else f"{low} to {high if high >= 0 else 'any'}"
        raise ModelError(f"has {count} {what}s, the operator takes {expect}")
