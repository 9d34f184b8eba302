"""Save a Kiln graph as ONNX, at the opset it was loaded with unless asked otherwise.

Each operator's `to_onnx` hook re-encodes the canonical form for older opsets (attributes that
newer opsets pass as inputs, for example). Attributes the target opset's schema does not have are
left out when they hold their default and refused otherwise, so a saved file never means
something other than the graph.
"""

from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import helper, numpy_helper

from compiler import ops
from compiler.errors import ModelError
from compiler.fileio import atomic_write_bytes
from compiler.frontends.onnx.attributes import encode_attribute
from compiler.frontends.onnx.expand import REQUANT_PROP, Expander, shared_rule
from compiler.ir.graph import Constant, Graph, Node
from compiler.ir.types import ONNX_ELEM_TYPES, TensorType
from compiler.qmath.requant import MODES, REQUANT_KEY

_PAIRS = ("QuantizeLinear", "DequantizeLinear")


def to_onnx(graph: Graph, opset: int | None = None) -> onnx.ModelProto:
    """Build a ModelProto for `graph` (channels-last nodes are wrapped in Transposes)."""
    return _Exporter(graph, opset or graph.opset).run()


def save_onnx(graph: Graph, path: str | os.PathLike, opset: int | None = None) -> None:
    """Write `graph` to `path` atomically (a temporary file renamed over the target)."""
    model = to_onnx(graph, opset)
    atomic_write_bytes(path, model.SerializeToString())


def _value_info(name: str, t: TensorType) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, ONNX_ELEM_TYPES[t.dtype], list(t.shape))


class _Exporter:
    def __init__(self, graph: Graph, opset: int):
        self.graph = graph
        self.opset = opset
        self.extra_initializers: list[onnx.TensorProto] = []
        self.names = {v.name for v in graph.values()} | {n.name for n in graph.nodes}
        self.node: Node | None = None
        # Written once, as a model property. A QDQ graph's integer operators do not exist yet:
        # its metadata holds the rule it was quantized for (kiln quantize's --requant), so the
        # file compiles back with that rounding.
        declared = graph.metadata.get(REQUANT_KEY)
        pairs = any(n.op in _PAIRS for n in graph.nodes)
        self.rule = declared if pairs and declared in MODES else shared_rule(graph)

    def run(self) -> onnx.ModelProto:
        g = self.graph
        nodes = [proto for n in g.nodes for proto in self._node(n)]
        # Only constants the written nodes read: a hook may have turned one into an attribute.
        read = {name for proto in nodes for name in proto.input} | {v.name for v in g.outputs}
        constants = [c for c in g.used_constants() if c.name in read]
        initializers = [numpy_helper.from_array(np.asarray(c.data), c.name) for c in constants]
        initializers += self.extra_initializers
        inputs = [_value_info(p.name, p.type) for p in g.inputs]
        meta = g.metadata
        opsets = dict(meta.get("opset_imports", {}))
        opsets.pop("ai.onnx", None)
        opsets[""] = self.opset
        for domain in {ops.lookup(n.op).domain for n in g.nodes} - {""}:
            opsets.setdefault(domain, 1)
        ir_version = max(int(meta.get("ir_version", 0) or 0),
                         helper.find_min_ir_version_for(
                             [helper.make_opsetid(d, v) for d, v in opsets.items()],
                             ignore_unknown=True))
        if ir_version < 4:
            # IR 3 requires every initializer to be declared as a graph input too.
            inputs += [_value_info(c.name, c.type) for c in constants]
        outputs = [_value_info(v.name, v.type) for v in g.outputs]
        output_names = {v.name for v in g.outputs}
        value_info = [_value_info(v.name, v.type) for n in g.nodes for v in n.outputs
                      if v.name not in output_names]
        graph_proto = helper.make_graph(nodes, g.name, inputs, outputs, initializers,
                                        doc_string=meta.get("graph_doc_string") or None,
                                        value_info=value_info)
        model = helper.make_model(
            graph_proto, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()],
            producer_name=meta.get("producer_name") or "kiln",
            producer_version=meta.get("producer_version") or "",
            doc_string=meta.get("doc_string") or "")
        model.ir_version = ir_version
        model.domain = meta.get("domain") or ""
        model.model_version = int(meta.get("model_version") or 0)
        for key, value in meta.get("metadata_props", {}).items():
            if key != REQUANT_PROP:
                model.metadata_props.add(key=key, value=value)
        if self.rule not in (None, "onnx"):
            model.metadata_props.add(key=REQUANT_PROP, value=self.rule)
        return model

    def _node(self, node: Node) -> list[onnx.NodeProto]:
        """The node as ONNX, with the nodes Kiln-only forms expand into around it."""
        expander = Expander(self)
        attrs = dict(node.attrs)
        inputs = [v.name if v is not None else "" for v in node.inputs]
        outputs = [v.name for v in node.outputs]
        if node.op == "IntLookupTable":
            expander.lookup(node, inputs, outputs[0])
            return expander.before + expander.after
        if attrs.get("requant") == self.rule:
            attrs["requant"] = None  # the model property says it
        if attrs.get("layout", "NCHW") == "NHWC":
            inputs, outputs = expander.channels_first(node, inputs)
            attrs["layout"] = "NCHW"
        if attrs.get("output_range") is not None:
            outputs[0] = expander.clamp(node, outputs[0], attrs.pop("output_range"))
        return [*expander.before, self._proto(node, attrs, inputs, outputs), *expander.after]

    def _proto(self, node: Node, attrs: dict, inputs: list[str], outputs: list[str]
               ) -> onnx.NodeProto:
        opdef = ops.lookup(node.op)
        if not opdef.onnx and not opdef.domain:
            what = opdef.doc.removeprefix("Kiln only: ")
            raise ModelError(f"{node.op} is Kiln's own operator ({what}), which has no ONNX "
                             "form: the model can be compiled and exported as a bundle, not "
                             "saved as ONNX", node=node.name)
        self.node = node  # hooks may look at the node's types and outputs
        if opdef.to_onnx is not None:
            attrs, inputs = opdef.to_onnx(self, attrs, inputs, self.opset)
        while inputs and not inputs[-1]:
            inputs.pop()
        if opdef.domain:  # onnxruntime's contrib operators: Kiln's schema is the reference
            known = {name for name, spec in opdef.attrs.items() if spec.onnx}
        else:
            try:
                known = set(onnx.defs.get_schema(node.op, self.opset, "").attributes)
            except onnx.defs.SchemaError:
                raise ModelError(f"operator {node.op} does not exist at opset {self.opset}",
                                 node=node.name) from None
        encoded = []
        for name, value in attrs.items():
            if value is None:
                continue
            spec = opdef.attrs.get(name)
            if name not in known:
                if spec is not None and _equal(value, spec.default):
                    continue
                raise ModelError(f"attribute {name}={value!r} cannot be expressed at opset "
                                 f"{self.opset}", node=f"{node.name} ({node.op})")
            kind = spec.kind if spec is not None else _kind_of(value)
            encoded.append(encode_attribute(name, value, kind))
        proto = helper.make_node(node.op, inputs, outputs, name=node.name,
                                 domain=opdef.domain or None)
        proto.attribute.extend(encoded)
        return proto

    # -- services for to_onnx hooks -----------------------------------------------------------

    def constant_value(self, name: str) -> np.ndarray | None:
        """The payload of constant `name`, or None when it is not a constant."""
        value = self.graph.constants.get(name)
        return value.data if isinstance(value, Constant) else None

    def constant(self, name_hint: str, array: np.ndarray) -> str:
        """Add an initializer that only the saved file needs (an attribute turned input)."""
        name = name_hint
        i = 1
        while name in self.names:
            name = f"{name_hint}_{i}"
            i += 1
        self.names.add(name)
        self.extra_initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name


def _equal(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and np.array_equal(a, b)
    return a == b


def _kind_of(value) -> str:
    if isinstance(value, bool | int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, np.ndarray):
        return "tensor"
    first = value[0] if value else 0
    return {int: "ints", float: "floats", str: "strings"}.get(type(first), "ints")
