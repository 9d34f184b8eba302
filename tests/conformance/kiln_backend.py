"""Kiln's reference interpreter as an `onnx.backend` backend, for the ONNX conformance cases."""

from __future__ import annotations

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep

from compiler import ops
from compiler.frontends.onnx import SUPPORTED_OPSETS, load_onnx
from compiler.interpreter import run


class KilnRep(BackendRep):
    """A loaded graph, run by the reference interpreter."""

    def __init__(self, graph):
        self.graph = graph

    def run(self, inputs, **kwargs):
        if isinstance(inputs, dict):
            feeds = dict(inputs)
        else:
            feeds = {p.name: np.asarray(a) for p, a in zip(self.graph.inputs, inputs)}
        outputs = run(self.graph, feeds)
        return tuple(outputs[v.name] for v in self.graph.outputs)


class KilnBackend(Backend):
    """onnx.backend.test drives this class."""

    @classmethod
    def prepare(cls, model, device="CPU", **kwargs):
        super().prepare(model, device, **kwargs)
        return KilnRep(load_onnx(model))

    @classmethod
    def supports_device(cls, device):
        return device == "CPU"


def claims(model: onnx.ModelProto) -> bool:
    """True when every node of the model is an operator Kiln's registry claims."""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    if opset not in SUPPORTED_OPSETS:
        return False
    return all(n.domain in ("", "ai.onnx") and ops.get(n.op_type) is not None
               and ops.get(n.op_type).onnx for n in model.graph.node)
