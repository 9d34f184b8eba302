"""Lowering passes: high-level operators rewritten as the few simple ones backends implement."""

from __future__ import annotations

import numpy as np

from compiler.ir.graph import Constant, Graph, Node, Value
from compiler.ir.types import is_float
from compiler.ops._spatial import layout_of
from compiler.passes.base import register_pass
from compiler.passes.rewrite import (
    Rewriter,
    const,
    is_splat,
    reshape_attrs,
    shape_constant,
    splat,
)


@register_pass("lower_reshapes", "lower")
def lower_reshapes(graph: Graph) -> bool:
    """Rewrite Squeeze, Unsqueeze and Flatten as Reshape to their (static) output shape.

    All four only change how the same row-major data is indexed, so one operator is enough; it
    also lets merge_reshapes collapse mixed chains.
    """
    rw = Rewriter(graph)
    changed = False
    for node in rw.nodes("Squeeze", "Unsqueeze", "Flatten"):
        shape = node.output.type.shape
        target = shape_constant(graph, f"{node.name}_shape", shape)
        new = rw.add("Reshape", [node.inputs[0], target], reshape_attrs(shape), replaces=[node])
        rw.replace(node.output, new.output)
        changed = True
    rw.finish()
    return changed


@register_pass("lower_sum", "lower")
def lower_sum(graph: Graph) -> bool:
    """Rewrite a Sum of two or more tensors as a chain of two-input Adds.

    The reference adds them left to right, exactly as the chain does, and an Add is what
    activations fuse into and what backends implement.
    """
    rw = Rewriter(graph)
    changed = False
    for node in rw.nodes("Sum"):
        if len(node.inputs) < 2:
            continue
        total = node.inputs[0]
        for value in node.inputs[1:]:
            total = rw.add("Add", [total, value], replaces=[node]).output
        rw.replace(node.output, total)
        changed = True
    rw.finish()
    return changed


# -- Gemm and MatMul + Add -> FullyConnected ----------------------------------------------------

def _bias_vector(data: np.ndarray | None, n: int, out_rank: int) -> np.ndarray | None:
    """`data` as a vector of n per-output values, if it broadcasts along the last axis only."""
    if data is None or data.ndim > out_rank or any(d != 1 for d in data.shape[:-1]):
        return None
    if data.ndim and data.shape[-1] not in (1, n):
        return None
    return np.broadcast_to(data.reshape(-1), (n,))


def _fc_from_gemm(rw: Rewriter, node: Node) -> bool:
    a, b = node.inputs[0], node.inputs[1]
    c = node.inputs[2] if len(node.inputs) > 2 else None
    w = const(b)
    if w is None or node.attrs["transA"] or not is_float(a.type.dtype):
        return False  # the weights must be known; a transposed A would need a Transpose node
    w = w if node.attrs["transB"] else w.T  # [N, K], as a view
    alpha, beta = node.attrs["alpha"], node.attrs["beta"]
    dtype = w.dtype
    bias = None
    if c is not None and beta != 0.0:
        bias = _bias_vector(const(c), w.shape[0], 2)
        if bias is None:
            return False  # a per-row C (M > 1) is not a bias
    if alpha != 1.0:
        w = splat(w.flat[0] * alpha, w.shape, dtype) if is_splat(w) else (
            (w * dtype.type(alpha)).astype(dtype))
    inputs: list[Value] = [a, rw.constant(f"{node.name}_weights", w)]
    if bias is not None:
        inputs.append(rw.constant(f"{node.name}_bias", (bias * dtype.type(beta)).astype(dtype)))
    fc = rw.add("FullyConnected", inputs, replaces=[node])
    rw.replace(node.output, fc.output)
    return True


def _fc_from_matmul(rw: Rewriter, node: Node) -> bool:
    x, b = node.inputs
    w = const(b)
    if w is None or w.ndim != 2 or x.type.rank < 2 or not is_float(x.type.dtype):
        return False  # FullyConnected needs 2-D weights known now and a batch of rows
    inputs: list[Value] = [x, rw.constant(f"{node.name}_weights", w.T)]
    replaced, result = [node], node.output
    add = rw.sole_user(node.output)
    if add is not None and add.op == "Add" and not add.attrs.get("activation"):
        other = add.inputs[1] if add.inputs[0] is node.output else add.inputs[0]
        bias = _bias_vector(const(other), w.shape[1], node.output.type.rank)
        if bias is not None and add.output.type == node.output.type:
            inputs.append(rw.constant(f"{add.name}_bias", bias.astype(w.dtype)))
            replaced, result = [node, add], add.output
    fc = rw.add("FullyConnected", inputs, replaces=replaced)
    rw.replace(result, fc.output)
    return True


@register_pass("lower_fully_connected", "lower")
def lower_fully_connected(graph: Graph) -> bool:
    """Rewrite Gemm, and MatMul followed by a bias Add, with constant weights as FullyConnected.

    FullyConnected stores its weights as [outputs, inputs], so each output reads one contiguous
    row (the layout CMSIS-NN kernels take); a Gemm's alpha and beta are folded into the
    constants.
    """
    rw = Rewriter(graph)
    changed = False
    for node in rw.nodes("Gemm", "MatMul"):
        if node.op == "Gemm":
            changed |= _fc_from_gemm(rw, node)
        elif node.op == "MatMul":
            changed |= _fc_from_matmul(rw, node)
    rw.finish()
    return changed


# -- BatchNormalization -> Mul, Add --------------------------------------------------------------

def batchnorm_factors(node: Node, dtype) -> tuple[np.ndarray, np.ndarray] | None:
    """(factor, shift) with BN(x) = x * factor + shift per channel, or None if not constant."""
    arrays = [const(v) for v in node.inputs[1:]]
    if any(a is None for a in arrays):
        return None
    scale, bias, mean, var = (a.astype(dtype) for a in arrays)
    factor = scale / np.sqrt(var + np.dtype(dtype).type(node.attrs["epsilon"]))
    return factor, bias - mean * factor


@register_pass("lower_batchnorm", "lower")
def lower_batchnorm(graph: Graph) -> bool:
    """Rewrite a BatchNormalization that fold_batchnorm could not absorb as a Mul and an Add.

    At inference its statistics are constants, so it is x * factor + shift per channel, computed
    exactly as the reference does; the pair can then fuse with neighbouring element-wise work.
    """
    rw = Rewriter(graph)
    changed = False
    for node in rw.nodes("BatchNormalization"):
        x = node.inputs[0]
        if x.type.dtype not in ("float32", "float64"):
            continue  # float16 normalizes in float32: a float16 Mul/Add would round differently
        found = batchnorm_factors(node, x.type.dtype)
        if found is None:
            continue
        channels_first = layout_of(node) == "NCHW" and x.type.rank > 2
        shape = (-1, *([1] * (x.type.rank - 2))) if channels_first else (-1,)
        factor, shift = (rw.constant(f"{node.name}_{what}", a.reshape(shape))
                         for what, a in zip(("factor", "shift"), found))
        mul = rw.add("Mul", [x, factor], replaces=[node])
        add = rw.add("Add", [mul.output, shift], replaces=[node])
        rw.replace(node.output, add.output)
        changed = True
    rw.finish()
    return changed


# -- GlobalAveragePool and ReduceMean over H, W -> AveragePool ------------------------------------

def _pool_over(rw: Rewriter, node: Node, layout: str) -> Node:
    x = node.inputs[0]
    spatial = x.type.shape[2:] if layout == "NCHW" else x.type.shape[1:-1]
    return rw.add("AveragePool", [x], {"kernel_shape": tuple(spatial), "layout": layout},
                  replaces=[node])


@register_pass("lower_global_pool", "lower")
def lower_global_pool(graph: Graph) -> bool:
    """Rewrite GlobalAveragePool and ReduceMean over the image axes as one AveragePool.

    Its window is the whole image, so backends need only one average-pooling kernel; a
    ReduceMean that drops the reduced axes gets a Reshape after the pool.
    """
    rw = Rewriter(graph)
    changed = False
    for node in rw.nodes():
        x = node.inputs[0] if node.inputs else None
        if x is None or x.type.rank < 3 or not is_float(x.type.dtype):
            continue
        if node.op == "GlobalAveragePool":
            pool = _pool_over(rw, node, layout_of(node))
        elif node.op == "ReduceMean" and len(node.inputs) > 1 and const(node.inputs[1]) is not None:
            rank = x.type.rank
            axes = sorted(int(a) % rank for a in const(node.inputs[1]).reshape(-1))
            if axes == list(range(2, rank)):
                pool = _pool_over(rw, node, "NCHW")
            elif axes == list(range(1, rank - 1)):
                pool = _pool_over(rw, node, "NHWC")
            else:
                continue  # not the image axes
            if not node.attrs["keepdims"]:
                shape = node.output.type.shape
                target = shape_constant(rw.graph, f"{node.name}_shape", shape)
                pool = rw.add("Reshape", [pool.output, target], reshape_attrs(shape),
                              replaces=[node])
        else:
            continue
        rw.replace(node.output, pool.output)
        changed = True
    rw.finish()
    return changed


# -- 1-D convolutions -> 2-D convolutions of height 1 --------------------------------------------

_WEIGHT_SLOTS = {"Conv": 1, "ConvInteger": 1, "QLinearConv": 3}


def _unit_axis(rw: Rewriter, value: Value, axis: int, hint: str, node: Node) -> Value:
    """`value` with a new axis of size 1 at `axis`: a reshaped constant, else a Reshape node.

    Float weights dequantized from constant integers keep their DequantizeLinear (the int8
    constant takes the axis), so prepare_for_codegen still folds them into a constant.
    """
    shape = [*value.type.shape[:axis], 1, *value.type.shape[axis:]]
    if isinstance(value, Constant):
        return rw.constant(hint, value.data.reshape(shape))
    dq = rw.producer(value, "DequantizeLinear")
    if dq is not None and not dq.attrs.get("block_size") and all(
            v is None or isinstance(v, Constant) for v in dq.inputs):
        quantized = dq.attrs["axis"] % value.type.rank
        integers = rw.constant(hint, dq.inputs[0].data.reshape(shape))
        moved = quantized + 1 if quantized >= axis else quantized
        return rw.add("DequantizeLinear", [integers, *dq.inputs[1:]],
                      {**dq.attrs, "axis": moved}, replaces=[dq, node]).output
    target = shape_constant(rw.graph, f"{hint}_shape", shape)
    return rw.add("Reshape", [value, target], reshape_attrs(shape), replaces=[node]).output


@register_pass("lower_conv_1d", "lower")
def lower_conv_1d(graph: Graph) -> bool:
    """Run a 1-D convolution (Conv, QLinearConv, ConvInteger) as a 2-D one of height 1.

    The kernels are written for images, and a signal of width W is an image of one row: the
    input and the weights gain an axis of size 1 for the height, the kernel, strides and
    dilations a leading 1, the pads a 0 on both sides. Reshapes around it are views, so the
    rewrite costs nothing at run time.
    """
    rw = Rewriter(graph)
    changed = False
    for node in rw.nodes(*_WEIGHT_SLOTS):
        x = node.inputs[0]
        if x.type.rank != 3:
            continue
        inputs = list(node.inputs)
        height = 2 if layout_of(node) == "NCHW" else 1  # the new axis goes before the width
        inputs[0] = _unit_axis(rw, x, height, f"{node.name}_rows", node)
        slot = _WEIGHT_SLOTS[node.op]
        inputs[slot] = _unit_axis(rw, inputs[slot], 2, f"{node.name}_weights", node)
        attrs = {name: (1, *node.attrs[name]) for name in ("kernel_shape", "strides",
                                                            "dilations")
                 if node.attrs.get(name) is not None}
        if node.attrs.get("pads") is not None:
            begin, end = node.attrs["pads"]
            attrs["pads"] = (0, begin, 0, end)
        image = rw.copy(node, inputs, attrs)
        shape = node.output.type.shape
        signal = rw.add("Reshape", [image.output, shape_constant(graph, f"{node.name}_shape",
                                                                 shape)],
                        reshape_attrs(shape), replaces=[node])
        rw.replace(node.output, signal.output)
        changed = True
    rw.finish()
    return changed
