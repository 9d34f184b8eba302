"""Quantized ONNX graphs built from scratch for the hostile-model campaign (`test_quant_fuzz`).

Each graph is a short chain of quantized units on a random int8 or uint8 tensor, deterministic
from its seed: QOperator nodes (QLinearConv of 1 to 3 spatial dimensions, QLinearMatMul with a
rank-1, 2 or 3 B, com.microsoft QGemm, QLinearAdd/Mul, QLinearConcat, the pools and table
activations, MaxPool and Reshape on integers) or QDQ units (DequantizeLinear, a float operator,
QuantizeLinear). Scales range from ordinary to extreme (denormal, 1e-30, 1e30), zero points
reach their types' ends, operands are constants or graph inputs, biases come near the int32
limits. `tests.quant_fuzz.mutations` then changes attributes, inputs, types and opsets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ELEM = {np.int8: TensorProto.INT8, np.uint8: TensorProto.UINT8}
# Scales a hostile model may carry: tiny, denormal, huge, exact powers of two.
EXTREME_SCALES = [1e-30, 1e-40, 1.4e-45, 1e30, 3e38, 2.0**-24, 1.0, 1e6]
INT32_EDGES = [2**31 - 1, -2**31, 2**31 - 77, -2**31 + 77, 2**30]


@dataclass
class QTensor:
    """An integer tensor flowing through a built graph, with how it maps to reals."""

    name: str
    shape: tuple
    dtype: type
    scale: float
    zp: int


class Builder:
    """Nodes, inputs and initializers of one graph being built, and the choices made."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.nodes: list = []
        self.inputs: list = []
        self.inits: list = []
        self.feeds: dict = {}
        self.notes: list[str] = []
        self.count = 0
        self.u8s8 = False
        self.microsoft = False

    def name(self, stem: str) -> str:
        self.count += 1
        return f"{stem}{self.count}"

    def pick(self, options):
        return options[int(self.rng.integers(len(options)))]

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    # -- values ----------------------------------------------------------------------------

    def operand(self, stem: str, array, runtime: bool = False) -> str:
        """A constant (initializer) or, when `runtime`, a graph input fed the same values."""
        name = self.name(stem)
        array = np.asarray(array)
        if runtime:
            elem = helper.np_dtype_to_tensor_dtype(array.dtype)
            self.inputs.append(helper.make_tensor_value_info(name, elem, array.shape))
            self.feeds[name] = array
        else:
            self.inits.append(numpy_helper.from_array(array, name))
        return name

    def scale(self) -> float:
        draw = self.rng.random()
        if draw < 0.06:
            self.notes.append("extreme scale")
            return float(np.float32(self.pick(EXTREME_SCALES)))
        if draw < 0.2:
            return 2.0 ** int(self.rng.integers(-12, 1))
        return float(np.float32(self.rng.uniform(0.002, 0.25)))

    def zero_point(self, dtype) -> int:
        info = np.iinfo(dtype)
        if self.chance(0.1):
            return int(self.pick([info.min, info.max]))
        return int(self.rng.integers(info.min // 2, info.max // 2 + 1)) if info.min else \
            int(self.rng.integers(64, 192))

    def params(self, q: QTensor, runtime: float = 0.0) -> list[str]:
        """Scale and zero point inputs of `q` (graph inputs with probability `runtime`)."""
        live = self.chance(runtime)
        if live:
            self.notes.append(f"runtime qparams of {q.name}")
        return [self.operand("s", np.float32(q.scale), live),
                self.operand("z", np.array(q.zp, q.dtype), live)]

    def fresh(self, stem: str, shape, dtype) -> QTensor:
        return QTensor(self.name(stem), tuple(int(d) for d in shape), dtype, self.scale(),
                       self.zero_point(dtype))

    def integers(self, shape, dtype, symmetric: bool = False) -> np.ndarray:
        info = np.iinfo(dtype)
        low = -127 if symmetric and info.min else info.min
        return self.rng.integers(low, int(info.max) + 1, shape).astype(dtype)

    def bias(self, count: int) -> np.ndarray:
        values = self.rng.integers(-3000, 3000, count)
        if self.chance(0.15):
            self.notes.append("bias near the int32 limits")
            edges = self.rng.choice(INT32_EDGES, count)
            values = np.where(self.rng.random(count) < 0.6, edges, values)
        return values.astype(np.int32)

    def node(self, op: str, inputs, outputs, domain: str = "", **attrs) -> None:
        if domain:
            self.microsoft = True
        self.nodes.append(helper.make_node(op, list(inputs), list(outputs),
                                           name=self.name(op.lower() + "_"), domain=domain,
                                           **attrs))

    def input_tensor(self, shape, dtype) -> QTensor:
        q = self.fresh("x", shape, dtype)
        self.inputs.append(helper.make_tensor_value_info(q.name, ELEM[dtype], q.shape))
        return q

    def model(self, outputs: list[tuple[str, int, tuple]], opset: int) -> onnx.ModelProto:
        """The model of the nodes built, with these (name, element type, shape) outputs."""
        graph = helper.make_graph(self.nodes, "hostile", self.inputs,
                                  [helper.make_tensor_value_info(*out) for out in outputs],
                                  self.inits)
        imports = [helper.make_opsetid("", opset)]
        if self.microsoft:
            imports.append(helper.make_opsetid("com.microsoft", 1))
        model = helper.make_model(graph, opset_imports=imports)
        model.ir_version = 8 if opset < 19 else 9 if opset < 21 else 10
        return model


def _spatial_out(size: int, kernel: int, stride: int, pads: int, dilation: int = 1) -> int:
    return (size + pads - dilation * (kernel - 1) - 1) // stride + 1


def window(b: Builder, sizes, dilate: bool = True) -> dict | None:
    """Kernel, strides, pads (and dilations) fitting images of `sizes`; None when none fits."""
    kernel = [int(b.rng.integers(1, min(4, s + 1) + 1)) for s in sizes]
    strides = [int(b.rng.integers(1, 3)) for _ in sizes]
    pads = [int(b.rng.integers(0, k)) for k in kernel] * 2
    dilations = [2 if dilate and b.chance(0.15) and s >= 2 * k else 1
                 for k, s in zip(kernel, sizes)]
    out = [_spatial_out(s, k, st, pads[i] + pads[i + len(sizes)], d)
           for i, (s, k, st, d) in enumerate(zip(sizes, kernel, strides, dilations))]
    if min(out) < 1:
        return None
    window = {"kernel_shape": kernel, "strides": strides, "pads": pads, "out": out}
    return {**window, "dilations": dilations} if dilate else window


# -- QOperator units: each takes the current tensor and returns the next ---------------------

def qconv(b: Builder, x: QTensor) -> QTensor | None:
    n, c, *sizes = x.shape
    win = window(b, sizes)
    if win is None:
        return None
    group = c if c > 1 and b.chance(0.3) else 1
    m = group * int(b.rng.integers(1, 3)) if group > 1 else int(b.rng.integers(1, 7))
    w_dtype = np.int8 if x.dtype == np.int8 or b.chance(0.5) else np.uint8
    b.u8s8 |= x.dtype == np.uint8
    w = b.integers((m, c // group, *win["kernel_shape"]), w_dtype, symmetric=True)
    per_channel = b.chance(0.5)
    count = m if per_channel else 1
    w_scale = np.array([b.scale() for _ in range(count)], np.float32)
    w_zp = np.full(count, 0 if w_dtype == np.int8 else 128, w_dtype)
    y = b.fresh("conv", (n, m, *win["out"]), x.dtype)
    inputs = [x.name, *b.params(x, 0.05), b.operand("w", w, b.chance(0.05)),
              b.operand("ws", w_scale if per_channel else w_scale[0]),
              b.operand("wz", w_zp if per_channel else w_zp[0]), *b.params(y)]
    if b.chance(0.8):
        inputs.append(b.operand("bias", b.bias(m)))
    attrs = {k: v for k, v in win.items() if k != "out" and (k != "dilations" or b.chance(0.7))}
    b.node("QLinearConv", inputs, [y.name], group=group, **attrs)
    b.notes.append(f"QLinearConv {len(sizes)}-D{' depthwise' if group > 1 else ''}")
    return y


def qmatmul(b: Builder, a: QTensor) -> QTensor | None:
    k = a.shape[-1]
    n = int(b.rng.integers(1, 9))
    rank = b.pick([2, 2, 2, 1, 3])
    shape = {1: (k,), 2: (k, n), 3: (a.shape[0] if len(a.shape) == 3 else 2, k, n)}[rank]
    b_dtype = np.int8 if a.dtype == np.int8 or b.chance(0.5) else np.uint8
    b.u8s8 |= a.dtype == np.uint8
    bq = b.fresh("b", shape, b_dtype)
    runtime = b.chance(0.25)
    if rank == 1:
        out = a.shape[:-1]
    elif rank == 2:
        out = (*a.shape[:-1], n)
    else:
        out = (shape[0], a.shape[-2], n) if len(a.shape) == 2 else (*a.shape[:-1], n)
    y = b.fresh("mm", out, a.dtype)
    inputs = [a.name, *b.params(a, 0.05),
              b.operand("B", b.integers(shape, b_dtype, True), runtime), *b.params(bq, 0.05),
              *b.params(y)]
    b.node("QLinearMatMul", inputs, [y.name])
    b.notes.append(f"QLinearMatMul with rank-{rank} {'runtime' if runtime else 'constant'} B")
    return y


def qgemm(b: Builder, a: QTensor) -> QTensor | None:
    if len(a.shape) != 2:
        return None
    k, n = a.shape[1], int(b.rng.integers(1, 9))
    trans_b = int(b.chance(0.5))
    b_dtype = np.int8 if a.dtype == np.int8 or b.chance(0.5) else np.uint8
    b.u8s8 |= a.dtype == np.uint8
    bq = b.fresh("b", (n, k) if trans_b else (k, n), b_dtype)
    alpha = 1.0 if b.chance(0.9) else float(np.float32(b.rng.uniform(0.1, 2)))
    inputs = [a.name, *b.params(a), b.operand("B", b.integers(bq.shape, b_dtype, True)),
              *b.params(bq), b.operand("C", b.bias(n)) if b.chance(0.7) else ""]
    y = b.fresh("gemm", (a.shape[0], n), a.dtype)
    if b.chance(0.8):
        inputs += b.params(y)
    else:
        y = QTensor(y.name, y.shape, np.float32, 1.0, 0)  # float output: the chain ends
    b.node("QGemm", inputs, [y.name], domain="com.microsoft", transB=trans_b, alpha=alpha)
    b.notes.append("QGemm" + (" with float output" if y.dtype == np.float32 else ""))
    return y


def qbinary(b: Builder, a: QTensor) -> QTensor | None:
    op = b.pick(["QLinearAdd", "QLinearMul"])
    rank = len(a.shape)
    shape = b.pick([a.shape, (1,) * rank, (a.shape[-1],), ()])
    if rank == 4 and b.chance(0.3):
        shape = (1, a.shape[1], 1, 1)
    other = b.fresh("o", shape, a.dtype)
    runtime = b.chance(0.4)
    y = b.fresh(op[7:].lower(), a.shape, a.dtype)
    first = [a.name, *b.params(a)]
    second = [b.operand("B", b.integers(shape, a.dtype), runtime), *b.params(other)]
    if b.chance(0.3):
        first, second = second, first
    b.node(op, [*first, *second, *b.params(y)], [y.name], domain="com.microsoft")
    b.notes.append(f"{op} with a {'runtime' if runtime else 'constant'} {list(shape)} operand")
    return y


def concat_operand_shape(b: Builder, a: QTensor) -> tuple[int, list[int]]:
    """A random concatenation axis of `a` and the shape of a second operand along it."""
    axis = int(b.rng.integers(-len(a.shape), len(a.shape)))
    extra = list(a.shape)
    extra[axis] = int(b.rng.integers(1, 4))
    return axis, extra


def qconcat(b: Builder, a: QTensor) -> QTensor | None:
    axis, extra = concat_operand_shape(b, a)
    other = b.fresh("o", extra, a.dtype)
    runtime = b.chance(0.5)
    out = list(a.shape)
    out[axis] += extra[axis]
    y = b.fresh("cat", out, a.dtype)
    parts = [[a.name, *b.params(a)],
             [b.operand("c", b.integers(extra, a.dtype), runtime), *b.params(other)]]
    if b.chance(0.3):
        parts.reverse()
    b.node("QLinearConcat", [*b.params(y), *parts[0], *parts[1]], [y.name],
           domain="com.microsoft", axis=axis)
    b.notes.append(f"QLinearConcat axis {axis} with a {'runtime' if runtime else 'constant'} "
                   "operand")
    return y


def qpool(b: Builder, x: QTensor) -> QTensor | None:
    n, c, *sizes = x.shape
    if b.chance(0.4):
        y = b.fresh("gap", (n, c) + (1,) * len(sizes), x.dtype)
        b.node("QLinearGlobalAveragePool", [x.name, *b.params(x), *b.params(y)], [y.name],
               domain="com.microsoft", channels_last=0)
        b.notes.append("QLinearGlobalAveragePool")
        return y
    win = window(b, sizes, dilate=False)
    if win is None:
        return None
    y = b.fresh("ap", (n, c, *win["out"]), x.dtype)
    b.node("QLinearAveragePool", [x.name, *b.params(x), *b.params(y)], [y.name],
           domain="com.microsoft", kernel_shape=win["kernel_shape"], strides=win["strides"],
           pads=win["pads"], count_include_pad=int(b.chance(0.5)))
    b.notes.append(f"QLinearAveragePool {len(sizes)}-D")
    return y


def qactivation(b: Builder, x: QTensor) -> QTensor | None:
    op = b.pick(["QLinearSigmoid", "QLinearLeakyRelu", "QLinearSoftmax"])
    y = b.fresh("act", x.shape, x.dtype)
    attrs = {}
    if op == "QLinearLeakyRelu":
        attrs["alpha"] = float(np.float32(b.pick([0.1, 0.01, -0.5, 1.5])))
    elif op == "QLinearSoftmax":
        attrs = {"axis": -1, "opset": 13}
        if b.chance(0.3):  # onnxruntime's fixed table: 1/256 and the type's lowest value
            y.scale, y.zp = 1 / 256, int(np.iinfo(x.dtype).min)
    b.node(op, [x.name, *b.params(x), *b.params(y)], [y.name], domain="com.microsoft", **attrs)
    b.notes.append(op)
    return y


def maxpool(b: Builder, x: QTensor) -> QTensor | None:
    n, c, *sizes = x.shape
    win = window(b, sizes, dilate=False)
    if win is None:
        return None
    y = QTensor(b.name("mp"), (n, c, *win["out"]), x.dtype, x.scale, x.zp)
    b.node("MaxPool", [x.name], [y.name], kernel_shape=win["kernel_shape"],
           strides=win["strides"], pads=win["pads"])
    b.notes.append("MaxPool on integers")
    return y


def reshape(b: Builder, x: QTensor) -> QTensor | None:
    flat = int(np.prod(x.shape[1:]))
    y = QTensor(b.name("flat"), (x.shape[0], flat), x.dtype, x.scale, x.zp)
    b.node("Reshape", [x.name, b.operand("shape", np.array([x.shape[0], -1], np.int64))],
           [y.name])
    b.notes.append("Reshape")
    return y


IMAGE_UNITS = [qconv, qconv, qconv, qpool, qbinary, qconcat, qactivation, maxpool, reshape]
MATRIX_UNITS = [qmatmul, qmatmul, qgemm, qgemm, qbinary, qconcat, qactivation]


def start(b: Builder, image: bool) -> tuple[QTensor, str]:
    """The chain's first tensor: an int8/uint8 graph input, or a float one quantized."""
    dtype = np.int8 if b.chance(0.65) else np.uint8
    if image:
        spatial = b.pick([1, 2, 2, 2, 3])
        sizes = b.rng.integers(1, 9 if spatial < 3 else 5, spatial)
        shape = (1, int(b.rng.integers(1, 5)), *(int(s) for s in sizes))
    else:
        shape = tuple(int(d) for d in b.rng.integers(1, 9, b.pick([2, 2, 3])))
    if b.chance(0.25):
        q = b.fresh("q", shape, dtype)
        real = b.name("xf")
        b.inputs.append(helper.make_tensor_value_info(real, TensorProto.FLOAT, shape))
        b.node("QuantizeLinear", [real, *b.params(q)], [q.name])
        return q, f"float {list(shape)} input quantized to {dtype.__name__}"
    return b.input_tensor(shape, dtype), f"{dtype.__name__} {list(shape)} input"


def _finish(b: Builder, y: QTensor, opset: int) -> onnx.ModelProto:
    if y.dtype != np.float32 and b.chance(0.2):
        out = b.name("yf")
        b.node("DequantizeLinear", [y.name, *b.params(y)], [out])
        b.notes.append("dequantized output")
        return b.model([(out, TensorProto.FLOAT, y.shape)], opset)
    elem = TensorProto.FLOAT if y.dtype == np.float32 else ELEM[y.dtype]
    return b.model([(y.name, elem, y.shape)], opset)


def qoperator_graph(rng: np.random.Generator) -> tuple[onnx.ModelProto, Builder]:
    """A chain of one to three QOperator units (see the module docstring)."""
    b = Builder(rng)
    if b.chance(0.08):
        return constant_graph(b), b
    image = b.chance(0.6)
    x, first = start(b, image)
    b.notes.insert(0, first)
    for _ in range(int(rng.integers(1, 4))):
        units = IMAGE_UNITS if len(x.shape) >= 3 else MATRIX_UNITS
        for _attempt in range(4):
            y = b.pick(units)(b, x)
            if y is not None:
                break
        if y is None or y.dtype == np.float32:
            x = y or x
            break
        x = y
    return _finish(b, x, b.pick([13, 13, 13, 10, 17, 19, 21])), b


def constant_graph(b: Builder) -> onnx.ModelProto:
    """A DequantizeLinear of an initializer, alone or added to a float input."""
    shape = tuple(int(d) for d in b.rng.integers(1, 6, b.pick([1, 2, 4])))
    dtype = b.pick([np.int8, np.uint8, np.int32])
    q = QTensor(b.name("k"), shape, dtype, b.scale(), 0 if dtype == np.int32 else
                b.zero_point(dtype))
    per_axis = b.chance(0.3) and len(shape) > 1 and dtype != np.int32
    scale = (np.array([b.scale() for _ in range(shape[1])], np.float32) if per_axis
             else np.float32(q.scale))
    zp = np.full(shape[1], q.zp, dtype) if per_axis else np.array(q.zp, dtype)
    attrs = {"axis": 1} if per_axis else {}
    inputs = [b.operand("W", b.integers(shape, dtype)), b.operand("ws", scale)]
    if dtype != np.int32 or b.chance(0.5):
        inputs.append(b.operand("wz", zp))
    real = b.name("wf")
    b.node("DequantizeLinear", inputs, [real], **attrs)
    b.notes.append(f"DequantizeLinear of a {dtype.__name__} initializer"
                   + (" per axis" if per_axis else ""))
    if b.chance(0.5):
        x = b.name("x")
        b.inputs.append(helper.make_tensor_value_info(x, TensorProto.FLOAT, shape))
        out = b.name("sum")
        b.node("Add", [x, real], [out])
        b.notes.append("added to a float input")
        real = out
    return b.model([(real, TensorProto.FLOAT, shape)], 13)
