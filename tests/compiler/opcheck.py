"""One-node models checked against onnxruntime: the helpers of the operator tests."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

from compiler.errors import ModelError
from compiler.frontends.onnx import load_onnx
from tests.helpers import check_against_ort
from tests.helpers import make_typed_model as typed

RNG = np.random.default_rng(0)
TP = onnx.TensorProto


def rand(*shape, dtype=np.float32, scale=1.0):
    return np.asarray(RNG.standard_normal(shape) * scale).astype(dtype)


def ints(*shape, dtype=np.int32, low=-50, high=50):
    return RNG.integers(low, high, shape).astype(dtype)


def one_node(op, feeds, opset, inits=(), input_names=None, **attrs):
    """A model of one node reading `feeds` (graph inputs) then `inits`, writing "y"."""
    inits = list(inits.items() if isinstance(inits, dict) else inits)
    names = input_names or [*feeds, *(n for n, _ in inits)]
    node = helper.make_node(op, names, ["y"], **attrs)
    inputs = [(n, a.dtype, list(a.shape)) for n, a in feeds.items()]
    return typed([node], inputs, ["y"], inits, opset)


# Tolerance per element type: as tight as each type's rounding allows (float32 absolute error
# is a few ulps of the intermediates, which reach a few units), so a result off by a
# factor (a softmax scaled by 1.0015) fails in float32 and float64 alike.
TOLERANCE = {"float64": (1e-12, 1e-14), "float32": (1e-6, 5e-7), "float16": (2e-3, 1e-3)}


def check(op, feeds, opset=13, inits=(), input_names=None, rtol=None, atol=None, **attrs):
    """One node against onnxruntime (and saved back by Kiln); returns Kiln's output.

    Float outputs are held to their type's TOLERANCE unless a test gives its own (with a
    reason); integer outputs must be equal.
    """
    model = one_node(op, feeds, opset, inits, input_names, **attrs)
    out = model.graph.output[0].type.tensor_type.elem_type
    dtype = onnx.helper.tensor_dtype_to_np_dtype(out).name
    default_rtol, default_atol = TOLERANCE.get(dtype, (0, 0))
    return check_against_ort(model, feeds, rtol=default_rtol if rtol is None else rtol,
                             atol=default_atol if atol is None else atol)["y"]


def load_error(model, match):
    with pytest.raises(ModelError, match=match):
        load_onnx(model)
