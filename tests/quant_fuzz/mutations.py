"""Structured mutations of quantized ONNX models for the hostile-model campaign.

Each mutation changes one thing a hostile or careless exporter could write: an attribute's
value, an attribute from a later opset, an input dropped or added, an element type, an
initializer turned into a graph input (fed the same values) or shadowed by one, the opset, a
scale, a zero point, a bias, weights, dimensions, an operator's type. A mutation returns what
it did in words, and, when the specifications forbid the result, why: such a model must be
refused, never run.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
from onnx import AttributeProto, TensorProto, helper, numpy_helper

from tests.quant_fuzz.qoperator import EXTREME_SCALES, INT32_EDGES

Result = tuple[str, str] | None  # (what was done, why it is invalid or "")

HOSTILE_INTS = [-2, -1, 0, 1, 2, 3, 5, 9, 1 << 20]
HOSTILE_FLOATS = [0.0, -1.0, float("nan"), float("inf"), 1e30, 0.5, 1e-40]
HOSTILE_SCALES = [0.0, -0.25, float("nan"), float("inf"), *EXTREME_SCALES]
# Inputs the ONNX specification makes required though DequantizeLinear's are optional.
REQUIRED_ZERO_POINTS = {"QLinearConv": (2, 5, 7), "QLinearMatMul": (2, 5, 7)}
# Attributes of QuantizeLinear / DequantizeLinear and the opset that introduced them.
LATER_ATTRIBUTES = {"saturate": (19, 0), "block_size": (21, 2),
                    "output_dtype": (21, TensorProto.INT8)}
SIBLINGS = [["QLinearAdd", "QLinearMul"], ["QLinearConv", "QLinearMatMul"],
            ["QLinearSigmoid", "QLinearLeakyRelu", "QLinearSoftmax"],
            ["QLinearAveragePool", "QLinearGlobalAveragePool"], ["Conv", "ConvTranspose"],
            ["AveragePool", "MaxPool", "GlobalAveragePool"], ["Sigmoid", "Tanh", "Softmax"],
            ["QuantizeLinear", "DequantizeLinear"], ["MatMul", "Gemm"], ["Add", "Mul", "Sub"]]


def is_extreme(scale) -> bool:
    """A valid scale (positive, finite) far outside what a quantizer writes."""
    return bool(np.isfinite(scale) and scale > 0 and not 1e-12 < scale < 1e12)


def _pick(rng, items):
    items = list(items)
    return items[int(rng.integers(len(items)))] if items else None


def _opset(model: onnx.ModelProto) -> int:
    return next((i.version for i in model.opset_import if i.domain in ("", "ai.onnx")), 1)


def _init(model, rng, test: Callable[[np.ndarray], bool]):
    """A random initializer (index, array) whose array passes `test`, or None."""
    found = [(i, numpy_helper.to_array(t)) for i, t in enumerate(model.graph.initializer)]
    return _pick(rng, [(i, a) for i, a in found if test(a)])


def _replace(model, index: int, array: np.ndarray) -> str:
    name = model.graph.initializer[index].name
    model.graph.initializer[index].CopyFrom(numpy_helper.from_array(np.asarray(array), name))
    return name


def m_attribute(model, rng, feeds) -> Result:
    node = _pick(rng, [n for n in model.graph.node if n.attribute])
    if node is None:
        return None
    attr = _pick(rng, node.attribute)
    if rng.random() < 0.2:
        node.attribute.remove(attr)
        return f"removed {attr.name} of {node.name or node.op_type}", ""
    if attr.type == AttributeProto.INTS and attr.ints:
        k = int(rng.integers(len(attr.ints)))
        if rng.random() < 0.3:
            del attr.ints[k]
        else:
            attr.ints[k] = int(_pick(rng, HOSTILE_INTS))
    elif attr.type == AttributeProto.INT:
        attr.i = int(_pick(rng, HOSTILE_INTS))
    elif attr.type == AttributeProto.FLOAT:
        attr.f = float(_pick(rng, HOSTILE_FLOATS))
    else:
        return None
    value = helper.get_attribute_value(attr)
    return f"{attr.name} of {node.name or node.op_type} set to {value}", ""


def m_new_attribute(model, rng, feeds) -> Result:
    node = _pick(rng, model.graph.node)
    name, value = _pick(rng, [("axis", 1), ("group", 2), ("auto_pad", "SAME_UPPER"),
                              ("ceil_mode", 1), ("transA", 1), ("count_include_pad", 1),
                              ("channels_last", 1), ("alpha", 0.5), ("mode", "wrap")])
    if any(a.name == name for a in node.attribute):
        return None
    node.attribute.append(helper.make_attribute(name, value))
    return f"attribute {name}={value} added to {node.name or node.op_type}", ""


def m_later_attribute(model, rng, feeds) -> Result:
    """An attribute of QuantizeLinear or DequantizeLinear from a later opset than the model's."""
    node = _pick(rng, [n for n in model.graph.node
                       if n.op_type in ("QuantizeLinear", "DequantizeLinear")])
    if node is None:
        return None
    name = _pick(rng, ["saturate", "block_size"] if node.op_type == "QuantizeLinear"
                 else ["block_size"])
    if node.op_type == "QuantizeLinear" and rng.random() < 0.3:
        name = "output_dtype"
    since, value = LATER_ATTRIBUTES[name]
    if any(a.name == name for a in node.attribute):
        return None
    node.attribute.append(helper.make_attribute(name, value))
    opset = _opset(model)
    invalid = f"{node.op_type} attribute {name} before opset {since}" if opset < since else ""
    return f"{name}={value} on {node.name} at opset {opset}", invalid


def m_drop_input(model, rng, feeds) -> Result:
    node = _pick(rng, [n for n in model.graph.node if len(n.input) >= 2])
    if node is None:
        return None
    k = int(rng.integers(1, len(node.input)))
    required = k in REQUIRED_ZERO_POINTS.get(node.op_type, ())
    if k == len(node.input) - 1 and rng.random() < 0.5:
        del node.input[k]
    else:
        node.input[k] = ""
    invalid = f"required zero point of {node.op_type} missing" if required else ""
    return f"input {k} of {node.name or node.op_type} dropped", invalid


def m_extra_input(model, rng, feeds) -> Result:
    node = _pick(rng, model.graph.node)
    names = [i.name for i in model.graph.input] + [t.name for t in model.graph.initializer]
    node.input.append(_pick(rng, names) or "")
    return f"extra input {node.input[-1]} given to {node.name or node.op_type}", ""


def m_retype_initializer(model, rng, feeds) -> Result:
    found = _init(model, rng, lambda a: a.dtype in (np.int8, np.uint8, np.int32, np.float32))
    if found is None:
        return None
    index, array = found
    if array.dtype == np.int8:
        new = array.view(np.uint8) if rng.random() < 0.7 else array.astype(np.int32)
    elif array.dtype == np.uint8:
        new = array.view(np.int8)
    elif array.dtype == np.int32:
        new = np.clip(array, -128, 127).astype(np.int8)
    else:
        with np.errstate(over="ignore"):  # a float16 may not hold the value: inf then
            new = array.astype(_pick(rng, [np.float16, np.float64]))
    name = _replace(model, index, new)
    return f"initializer {name} retyped {array.dtype} -> {new.dtype}", ""


def m_retype_output(model, rng, feeds) -> Result:
    """A graph output declared with the other 8-bit type than the graph computes."""
    out = _pick(rng, [o for o in model.graph.output
                      if o.type.tensor_type.elem_type in (TensorProto.INT8, TensorProto.UINT8)])
    if out is None:
        return None
    tt = out.type.tensor_type
    was = tt.elem_type
    tt.elem_type = TensorProto.UINT8 if was == TensorProto.INT8 else TensorProto.INT8
    return (f"output {out.name} declared {TensorProto.DataType.Name(tt.elem_type)}, computed "
            f"{TensorProto.DataType.Name(was)}", "declared output type differs from the computed")


def m_zero_point_type(model, rng, feeds) -> Result:
    """The zero point of a QuantizeLinear writing a graph output given the other 8-bit type."""
    outputs = {o.name for o in model.graph.output}
    inits = {t.name: i for i, t in enumerate(model.graph.initializer)}
    node = _pick(rng, [n for n in model.graph.node if n.op_type == "QuantizeLinear"
                       and n.output[0] in outputs and len(n.input) > 2 and n.input[2] in inits])
    if node is None:
        return None
    index = inits[node.input[2]]
    array = numpy_helper.to_array(model.graph.initializer[index])
    if array.dtype not in (np.int8, np.uint8):
        return None
    new = array.view(np.uint8 if array.dtype == np.int8 else np.int8)
    _replace(model, index, new)
    return (f"zero point of {node.name} (writing output {node.output[0]}) retyped {array.dtype} "
            f"-> {new.dtype}", f"QuantizeLinear writes {new.dtype} to an output declared "
            f"{array.dtype}")


def m_to_input(model, rng, feeds) -> Result:
    if not model.graph.initializer:
        return None
    index = int(rng.integers(len(model.graph.initializer)))
    tensor = model.graph.initializer[index]
    array = numpy_helper.to_array(tensor)
    model.graph.input.append(helper.make_tensor_value_info(tensor.name, tensor.data_type,
                                                           array.shape))
    del model.graph.initializer[index]
    feeds[tensor.name] = array
    return f"initializer {tensor.name} made a graph input", ""


def m_shadow(model, rng, feeds) -> Result:
    if not model.graph.initializer:
        return None
    tensor = _pick(rng, model.graph.initializer)
    if any(i.name == tensor.name for i in model.graph.input):
        return None
    array = numpy_helper.to_array(tensor)
    model.graph.input.append(helper.make_tensor_value_info(tensor.name, tensor.data_type,
                                                           array.shape))
    feeds[tensor.name] = array
    return f"graph input shadows initializer {tensor.name}", ""


def m_opset(model, rng, feeds) -> Result:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            was, imp.version = imp.version, int(_pick(rng, [7, 10, 11, 12, 13, 17, 19, 21, 23]))
            if imp.version >= 21:
                model.ir_version = max(model.ir_version, 10)
            return f"opset {was} -> {imp.version}", ""
    return None


def m_scale(model, rng, feeds) -> Result:
    found = _init(model, rng, lambda a: a.dtype == np.float32 and a.size <= 64)
    if found is None:
        return None
    index, array = found
    if rng.random() < 0.15:
        new = np.resize(array, array.size + 1).astype(np.float32)
    else:
        new = np.full(array.shape, _pick(rng, HOSTILE_SCALES), np.float32)
    name = _replace(model, index, new)
    extreme = " (extreme scale)" if is_extreme(new.reshape(-1)[0]) else ""
    return (f"scale {name} set to {new.reshape(-1)[:2].tolist()} (shape {list(new.shape)})"
            f"{extreme}", "")


def m_zero_point(model, rng, feeds) -> Result:
    found = _init(model, rng, lambda a: a.dtype in (np.int8, np.uint8) and a.size <= 64)
    if found is None:
        return None
    index, array = found
    info = np.iinfo(array.dtype)
    if rng.random() < 0.2:
        new = np.resize(array, (2,) if array.size == 1 else (array.size + 1,))
    else:
        new = np.full(array.shape, _pick(rng, [info.min, info.max, 1, 100 % info.max]),
                      array.dtype)
    name = _replace(model, index, new)
    return f"zero point {name} set to {new.reshape(-1)[:2].tolist()}", ""


def m_bias(model, rng, feeds) -> Result:
    found = _init(model, rng, lambda a: a.dtype == np.int32 and a.size > 0)
    if found is None:
        return None
    index, array = found
    edges = rng.choice(INT32_EDGES, array.shape)
    new = np.where(rng.random(array.shape) < 0.5, edges, array).astype(np.int32)
    name = _replace(model, index, new)
    return f"bias {name} pushed toward the int32 limits", ""


def m_weights(model, rng, feeds) -> Result:
    found = _init(model, rng, lambda a: a.dtype in (np.int8, np.uint8) and a.size > 1)
    if found is None:
        return None
    index, array = found
    info = np.iinfo(array.dtype)
    new = rng.integers(info.min, int(info.max) + 1, array.shape).astype(array.dtype)
    if rng.random() < 0.3:
        new[...] = info.min
    name = _replace(model, index, new)
    return f"weights {name} replaced", ""


def m_dims(model, rng, feeds) -> Result:
    if rng.random() < 0.3 and model.graph.input:
        dims = _pick(rng, model.graph.input).type.tensor_type.shape.dim
        if not dims:
            return None
        dim = _pick(rng, dims)
        dim.dim_value = int(_pick(rng, [0, 1, 2, 3, 7]))
        return f"a graph input dimension set to {dim.dim_value}", ""
    found = _init(model, rng, lambda a: a.ndim > 0)
    if found is None:
        return None
    index, array = found
    shape = list(array.shape)
    shape[int(rng.integers(len(shape)))] = int(_pick(rng, [0, 1, 2, 3, 5]))
    name = _replace(model, index, np.resize(array, shape))
    return f"initializer {name} reshaped to {shape}", ""


def m_kernel_shape(model, rng, feeds) -> Result:
    """kernel_shape of a convolution set unlike its weights' spatial dimensions."""
    weights = {t.name: list(t.dims) for t in model.graph.initializer}
    node = _pick(rng, [n for n in model.graph.node if n.op_type in ("Conv", "QLinearConv")])
    if node is None:
        return None
    w_name = node.input[3] if node.op_type == "QLinearConv" else node.input[1]
    dims = weights.get(w_name)
    if not dims or len(dims) < 3:
        return None
    kernel = [d + 1 for d in dims[2:]]
    for attr in list(node.attribute):
        if attr.name == "kernel_shape":
            node.attribute.remove(attr)
    node.attribute.append(helper.make_attribute("kernel_shape", kernel))
    return (f"kernel_shape of {node.name} set to {kernel}, weights {dims}",
            f"{node.op_type} kernel_shape disagrees with the weights")


def m_op(model, rng, feeds) -> Result:
    node = _pick(rng, [n for n in model.graph.node if any(n.op_type in s for s in SIBLINGS)])
    if node is None:
        return None
    group = next(s for s in SIBLINGS if node.op_type in s)
    was = node.op_type
    node.op_type = _pick(rng, [op for op in group if op != was])
    return f"{node.name or was} turned from {was} into {node.op_type}", ""


def m_domain(model, rng, feeds) -> Result:
    node = _pick(rng, [n for n in model.graph.node if n.domain == "com.microsoft"])
    if node is None:
        return None
    node.domain = ""
    return f"{node.name} moved to the default domain", ""


MUTATIONS = [m_attribute, m_attribute, m_new_attribute, m_later_attribute, m_drop_input,
             m_drop_input, m_extra_input, m_retype_initializer, m_retype_output,
             m_zero_point_type, m_to_input, m_to_input, m_shadow, m_opset, m_scale, m_scale,
             m_zero_point, m_bias, m_weights, m_dims, m_kernel_shape, m_op, m_domain]
# What the campaign changes in the MLPerf models: values, scales, zero points, attributes.
MLPERF_MUTATIONS = [m_scale, m_scale, m_zero_point, m_zero_point, m_bias, m_weights,
                    m_attribute, m_kernel_shape, m_to_input, m_later_attribute, m_drop_input]


def mutate(model: onnx.ModelProto, rng: np.random.Generator, feeds: dict, count: int,
           mutations=MUTATIONS) -> tuple[list[str], str]:
    """Apply `count` mutations (retrying inapplicable ones); what was done and why invalid."""
    done, invalid = [], ""
    for _ in range(count * 4):
        if len(done) == count or invalid:  # later changes could make the model valid again
            break
        result = _pick(rng, mutations)(model, rng, feeds)
        if result is not None:
            done.append(result[0])
            invalid = invalid or result[1]
    return done, invalid
