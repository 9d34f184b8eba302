"""Kiln-only forms written as plain ONNX when a graph is saved, so a TFLite model saves too.

A channels-last spatial node is wrapped in two Transposes (ONNX's operators are channels-first,
Kiln's weights already are); an integer output range (a folded activation) becomes a Clip on
the integers; an IntLookupTable becomes a Gather from its table in value order at
Cast(x) + 128 (int8), the same bytes. The
requantization rule of the integer operators, when they share one, is written once as the
model property `kiln.requant` and read back by the loader.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from compiler.ir.graph import Graph, Node

REQUANT_PROP = "kiln.requant"  # model metadata_props: the rule every integer operator follows


def shared_rule(graph: Graph) -> str | None:
    """The requantization rule all nodes that carry one share (None when they differ)."""
    rules = {n.attrs["requant"] for n in graph.nodes if n.attrs.get("requant")}
    return rules.pop() if len(rules) == 1 else None


def _perm(rank: int, channels_last: bool) -> list[int]:
    return [0, *range(2, rank), 1] if channels_last else [0, rank - 1, *range(1, rank - 1)]


class Expander:
    """Writes the extra nodes around one node; the exporter asks it for fresh names."""

    def __init__(self, exporter):
        self.exporter = exporter
        self.before: list = []
        self.after: list = []

    def fresh(self, hint: str) -> str:
        """A name no value or node of the file has yet."""
        name, i = hint, 1
        while name in self.exporter.names:
            name, i = f"{hint}_{i}", i + 1
        self.exporter.names.add(name)
        return name

    def channels_first(self, node: Node, inputs: list[str]) -> tuple[list[str], list[str]]:
        """Wrap an NHWC node: its activation input transposed in, its outputs transposed out."""
        rank = node.inputs[0].type.rank
        moved = self.fresh(f"{inputs[0]}_nchw")
        self.before.append(helper.make_node("Transpose", [inputs[0]], [moved],
                                            perm=_perm(rank, False),
                                            name=self.fresh(f"{node.name}_to_nchw")))
        outputs = []
        for out in node.outputs:
            inner = self.fresh(f"{out.name}_nchw")
            self.after.append(helper.make_node("Transpose", [inner], [out.name],
                                               perm=_perm(out.type.rank, True),
                                               name=self.fresh(f"{node.name}_to_nhwc")))
            outputs.append(inner)
        return [moved, *inputs[1:]], outputs

    def clamp(self, node: Node, output: str, bounds) -> str:
        """A Clip of the integers to `bounds` after `output`; returns the node's new output."""
        dtype = node.outputs[0].type.dtype
        raw = self.fresh(f"{output}_unclamped")
        low = self.exporter.constant(f"{node.name}_low", np.array(bounds[0], dtype))
        high = self.exporter.constant(f"{node.name}_high", np.array(bounds[1], dtype))
        self.after.insert(0, helper.make_node("Clip", [raw, low, high], [output],
                                              name=self.fresh(f"{node.name}_range")))
        return raw

    def lookup(self, node: Node, inputs: list[str], output: str) -> None:
        """IntLookupTable as Gather(table in value order, Cast(x, int32) + offset)."""
        table = np.asarray(self.exporter.constant_value(inputs[1])).reshape(-1)
        offset = 128 if node.inputs[0].type.dtype == "int8" else 0
        ordered = self.exporter.constant(f"{node.name}_table", np.roll(table, -offset))
        wide = self.fresh(f"{node.name}_wide")
        index = self.fresh(f"{node.name}_index")
        shift = self.exporter.constant(f"{node.name}_offset", np.array(offset, np.int32))
        self.before += [
            helper.make_node("Cast", [inputs[0]], [wide], to=TensorProto.INT32,
                             name=self.fresh(f"{node.name}_cast")),
            helper.make_node("Add", [wide, shift], [index], name=self.fresh(f"{node.name}_at"))]
        self.after.insert(0, helper.make_node("Gather", [ordered, index], [output], axis=0,
                                              name=node.name))
