"""Kernel emitters: one specialized LLVM function per node, every shape and stride a constant.

The table `EMITTERS` maps (operator, element type) to an emitter; a miss is a clear error. An
emitter gets a `Kernel` (the function being built, its runtime tensor arguments and the weight
globals) and writes loops whose trip counts and strides are Python integers, so LLVM unrolls
and vectorizes them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager

import numpy as np
from llvmlite import ir

from compiler.errors import KilnError
from compiler.ir.graph import Constant, Node

I32 = ir.IntType(32)
LLVM_TYPES = {"float32": ir.FloatType()}

# Reassociation lets LLVM vectorize reductions; contraction lets it use FMA. Both move results
# by a few ulps, well inside the 1e-4 relative tolerance the bundle is checked against.
FAST = ("reassoc", "contract")
# Widest group of output channels a convolution keeps in one LLVM vector (wider ones are split
# by the backend into native registers; beyond this the scalar loop is used).
MAX_VECTOR = 64


def llvm_type(dtype: str) -> ir.Type:
    """The LLVM type of a Kiln element type."""
    try:
        return LLVM_TYPES[dtype]
    except KeyError:
        raise KilnError(f"code generation does not support element type {dtype}") from None


class Kernel:
    """The function of one node while its body is emitted.

    Attributes:
        node: The node.
        fn: The LLVM function; its arguments are the runtime (non-constant) inputs, then the
            outputs, as element pointers.
        b: Builder positioned in the body.
        args: Pointer per node input (runtime argument or weight global; None if omitted).
        outs: Pointer per node output.
        residual: For a `Conv+Add` / `FullyConnected+Add` instruction, the pointer to the
            tensor added to the result (it may be the output itself: element i is read just
            before element i is written), else None.
        act_node: The node whose fused activation ends the kernel (the Add when fused).
    """

    def __init__(self, node: Node, fn: ir.Function, args: list, outs: list,
                 residual: ir.Value | None = None, act_node: Node | None = None,
                 target=None):
        self.node, self.fn, self.args, self.outs = node, fn, args, outs
        self.target = target
        self.residual = residual
        self.act_node = act_node or node
        self._entry = ir.IRBuilder(fn.append_basic_block("entry"))
        self.b = ir.IRBuilder(fn.append_basic_block("body"))

    def alloca(self, ty: ir.Type) -> ir.Value:
        """A scalar slot in the entry block (mem2reg turns it into a register)."""
        return self._entry.alloca(ty)

    def finish(self) -> None:
        """Close the function: entry falls through to the body, the body returns."""
        self._entry.branch(self.fn.blocks[1])
        self.b.ret_void()

    def load(self, ptr: ir.Value, index: ir.Value) -> ir.Value:
        """ptr[index]."""
        return self.b.load(self.b.gep(ptr, [index], inbounds=True))

    def store(self, value: ir.Value, ptr: ir.Value, index: ir.Value) -> None:
        """ptr[index] = value."""
        self.b.store(value, self.b.gep(ptr, [index], inbounds=True))

    @contextmanager
    def loop(self, n: int) -> Iterator[ir.Value]:
        """Loop `for i in range(n)`, with `n` a compile-time constant; yields i."""
        b = self.b
        before = b.block
        head, body, done = (b.append_basic_block(s) for s in ("loop", "loop.body", "loop.end"))
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(I32)
        i.add_incoming(I32(0), before)
        b.cbranch(b.icmp_unsigned("<", i, I32(n)), body, done)
        b.position_at_end(body)
        yield i
        i.add_incoming(b.add(i, I32(1), flags=["nuw", "nsw"]), b.block)
        b.branch(head)
        b.position_at_end(done)

    def index(self, *terms: tuple[ir.Value, int], base: int = 0) -> ir.Value:
        """A flat element index, base + sum(value * stride), with constant strides."""
        acc: ir.Value = I32(base)
        for value, stride in terms:
            if stride:
                acc = self.b.add(acc, self.b.mul(value, I32(stride), flags=["nsw"]),
                                 flags=["nsw"])
        return acc


def strides(shape) -> list[int]:
    """Row-major element strides of `shape`."""
    return [int(np.prod(shape[i + 1:], dtype=np.int64)) for i in range(len(shape))]


def constant_input(k: Kernel, slot: int, what: str) -> np.ndarray | None:
    """The data of input `slot`, which kernels need at compile time (None when omitted).

    A runtime value there is a clear error naming the node and `what` the input is.
    """
    node = k.node
    value = node.inputs[slot] if len(node.inputs) > slot else None
    if value is None:
        return None
    if not isinstance(value, Constant):
        raise KilnError(f"cannot generate {node.op} {node.name}: its {what} must be constants")
    return value.data


# -- activations ----------------------------------------------------------------------------

def _const(ty: ir.Type, value: float) -> ir.Constant:
    """`value` as a constant of `ty`, splatted when `ty` is a vector (tiled kernels)."""
    if isinstance(ty, ir.VectorType):
        return ir.Constant(ty, [value] * ty.count)
    return ir.Constant(ty, value)


def _relu(k: Kernel, x: ir.Value, params) -> ir.Value:
    zero = _const(x.type, 0.0)
    return k.b.select(k.b.fcmp_ordered(">", x, zero), x, zero)


def _clip(k: Kernel, x: ir.Value, params) -> ir.Value:
    low, high = (_const(x.type, float(p)) for p in params)
    x = k.b.select(k.b.fcmp_ordered("<", x, low), low, x)
    return k.b.select(k.b.fcmp_ordered(">", x, high), high, x)


def _leaky_relu(k: Kernel, x: ir.Value, params) -> ir.Value:
    scaled = k.b.fmul(x, _const(x.type, float(params[0])))
    return k.b.select(k.b.fcmp_ordered(">=", x, _const(x.type, 0.0)), x, scaled)


ACTIVATIONS: dict[str, Callable] = {
    "": lambda k, x, params: x, "Relu": _relu, "Clip": _clip, "LeakyRelu": _leaky_relu}


def activate(k: Kernel, x: ir.Value) -> ir.Value:
    """The node's fused activation applied to a scalar, inside the producer's loop."""
    attrs = k.act_node.attrs
    name = attrs.get("activation") or ""
    if name not in ACTIVATIONS:
        raise KilnError(f"cannot generate fused activation {name} of {k.act_node.name}")
    return ACTIVATIONS[name](k, x, attrs.get("activation_params") or ())


def _bias_or_zero(k: Kernel, slot: int, index: ir.Value, ty: ir.Type) -> ir.Value:
    node = k.node
    if len(node.inputs) > slot and node.inputs[slot] is not None:
        return k.load(k.args[slot], index)
    return ir.Constant(ty, 0.0)


def _add_residual(k: Kernel, value: ir.Value, index: ir.Value) -> ir.Value:
    """Add residual[index] to `value` for a fused residual Add (same shape as the output)."""
    if k.residual is None:
        return value
    return k.b.fadd(value, k.load(k.residual, index))


# -- FullyConnected -------------------------------------------------------------------------

def emit_fully_connected(k: Kernel) -> None:
    """y[m, n] = act(b[n] + sum_k x[m, k] * w[n, k]); w rows are contiguous in k."""
    x, w = k.node.inputs[0].type, k.node.inputs[1].type
    ty = llvm_type(x.dtype)
    rows, depth, outs = x.numel // x.shape[-1], x.shape[-1], w.shape[0]
    acc = k.alloca(ty)
    b = k.b
    with k.loop(rows) as m, k.loop(outs) as n:
        b.store(_bias_or_zero(k, 2, n, ty), acc)
        with k.loop(depth) as d:
            prod = b.fmul(k.load(k.args[0], k.index((m, depth), (d, 1))),
                          k.load(k.args[1], k.index((n, depth), (d, 1))), flags=FAST)
            b.store(b.fadd(b.load(acc), prod, flags=FAST), acc)
        yi = k.index((m, outs), (n, 1))
        k.store(activate(k, _add_residual(k, b.load(acc), yi)), k.outs[0], yi)


def _spatial(node: Node) -> tuple[list[int], list[int], list[int], list[int]]:
    """Kernel, strides, dilations and pads (top, left, bottom, right) of a 2-D NHWC node."""
    attrs = node.attrs
    if attrs.get("layout") != "NHWC" or len(node.inputs[0].type.shape) != 4:
        raise KilnError(f"cannot generate {node.op} {node.name}: only 2-D NHWC is supported")
    kernel = list(attrs.get("kernel_shape") or node.inputs[1].type.shape[2:])
    strides = list(attrs.get("strides") or [1, 1])
    dilations = list(attrs.get("dilations") or [1, 1])
    pads = list(attrs.get("pads") or [0, 0, 0, 0])
    auto_pad = attrs.get("auto_pad", "NOTSET")
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        # ONNX: pad so that out = ceil(in / stride); the odd pixel goes at the end for UPPER.
        sizes, outs = node.inputs[0].type.shape[1:3], node.output.type.shape[1:3]
        for d in range(2):
            total = max(0, (outs[d] - 1) * strides[d] + (kernel[d] - 1) * dilations[d] + 1
                        - sizes[d])
            small = total // 2
            begin = small if auto_pad == "SAME_UPPER" else total - small
            pads[d], pads[d + 2] = begin, total - begin
    elif auto_pad not in ("NOTSET", "VALID"):
        raise KilnError(f"cannot generate {node.op} {node.name}: auto_pad {auto_pad}")
    elif auto_pad == "VALID":
        pads = [0, 0, 0, 0]
    return kernel, strides, dilations, pads


@contextmanager
def _window(k: Kernel, node: Node, oh: ir.Value, ow: ir.Value) -> Iterator[tuple]:
    """Loops over the (kh, kw) window of output (oh, ow), skipping taps that fall in padding.

    Yields (ih, iw, kh, kw); the bounds checks exist only where a tap can leave the input
    (padding, or a last window that ceil_mode lets run past the edge).
    """
    (kh_n, kw_n), (sh, sw), (dh, dw), (pt, pl, _, _) = _spatial(node)
    _, height, width, _ = node.inputs[0].type.shape
    _, out_h, out_w, _ = node.output.type.shape
    check_h = pt > 0 or (out_h - 1) * sh - pt + (kh_n - 1) * dh >= height
    check_w = pl > 0 or (out_w - 1) * sw - pl + (kw_n - 1) * dw >= width
    with k.loop(kh_n) as kh:
        ih = k.index((oh, sh), (kh, dh), base=-pt)
        with _inside(k, ih, height, check_h), k.loop(kw_n) as kw:
            iw = k.index((ow, sw), (kw, dw), base=-pl)
            with _inside(k, iw, width, check_w):
                yield ih, iw, kh, kw


@contextmanager
def _inside(k: Kernel, i: ir.Value, n: int, needed: bool) -> Iterator[None]:
    """Run the body only when 0 <= i < n (one unsigned compare), if the check is needed."""
    if not needed:
        yield
        return
    with k.b.if_then(k.b.icmp_unsigned("<", i, I32(n))):
        yield


# -- Conv -----------------------------------------------------------------------------------

def conv_weights(node: Node) -> np.ndarray:
    """OIHW weights re-arranged to [KH, KW, group, I/group, O/group].

    The innermost loop then runs over output channels, contiguous in both the filter and the
    output pixel: it vectorizes without reassociating a reduction, and for depthwise layers
    (one channel per group) it becomes the loop over groups, contiguous too.
    """
    w = node.inputs[1].data
    groups = int(node.attrs.get("group", 1))
    out_c, cg, kh, kw = w.shape
    w = w.reshape(groups, out_c // groups, cg, kh, kw)
    return np.ascontiguousarray(np.transpose(w, (3, 4, 0, 2, 1)))


def emit_conv(k: Kernel) -> None:
    """NHWC convolution (grouped, hence depthwise too) with bias and fused activation.

    Output-stationary: each output pixel starts as the bias (plus the residual of a fused
    Add, read just before the output overwrites it, so the Add may run in place), every
    in-bounds tap adds x[c] * w[c, :] into it, then the activation runs over the pixel. Groups
    of several output channels accumulate in a vector register; depthwise layers (one per
    group) accumulate in memory with the loop over groups innermost, contiguous too.
    """
    from compiler.codegen.conv import emit_conv_tiled, tiled_form  # conv builds on this module

    node = k.node
    if tiled_form(node):
        emit_conv_tiled(k, k.target)
        return
    batch, channels = node.inputs[0].type.shape[0], node.inputs[0].type.shape[3]
    _, out_h, out_w, out_c = node.output.type.shape
    groups = int(node.attrs.get("group", 1))
    cg, og = channels // groups, out_c // groups
    b = k.b
    with k.loop(batch) as n, k.loop(out_h) as oh, k.loop(out_w) as ow:
        pixel = k.index((n, out_h * out_w * out_c), (oh, out_w * out_c), (ow, out_c))
        if 1 < og <= MAX_VECTOR:
            _conv_pixel_vector(k, n, oh, ow, pixel, groups, cg, og)
        else:
            _conv_pixel_scalar(k, n, oh, ow, pixel, groups, cg, og)
        with k.loop(out_c) as oc:
            yi = b.add(pixel, oc)
            k.store(activate(k, k.load(k.outs[0], yi)), k.outs[0], yi)


def _x_index(k: Kernel, n, ih, iw, g, c, cg: int) -> ir.Value:
    _, height, width, channels = k.node.inputs[0].type.shape
    return k.index((n, height * width * channels), (ih, width * channels), (iw, channels),
                   (g, cg), (c, 1))


def _tap_index(k: Kernel, kh, kw, g, c, cg: int, og: int) -> ir.Value:
    channels = k.node.inputs[0].type.shape[3]
    kw_n = _spatial(k.node)[0][1]
    return k.index((kh, kw_n * channels * og), (kw, channels * og), (g, cg * og), (c, og))


def _conv_pixel_scalar(k: Kernel, n, oh, ow, pixel, groups: int, cg: int, og: int) -> None:
    """Accumulate one output pixel in memory; the loop over groups is the contiguous one."""
    node, b = k.node, k.b
    ty = llvm_type(node.output.type.dtype)
    with k.loop(groups * og) as oc:
        yi = b.add(pixel, oc)
        k.store(_add_residual(k, _bias_or_zero(k, 2, oc, ty), yi), k.outs[0], yi)
    with _window(k, node, oh, ow) as (ih, iw, kh, kw), k.loop(groups) as g, k.loop(cg) as c:
        xv = k.load(k.args[0], _x_index(k, n, ih, iw, g, c, cg))
        tap = _tap_index(k, kh, kw, g, c, cg, og)
        with k.loop(og) as j:
            yi = b.add(pixel, k.index((g, og), (j, 1)))
            prod = b.fmul(xv, k.load(k.args[1], b.add(tap, j)), flags=FAST)
            k.store(b.fadd(k.load(k.outs[0], yi), prod, flags=FAST), k.outs[0], yi)


def _vector_ptr(k: Kernel, ptr: ir.Value, index: ir.Value, vec: ir.Type) -> ir.Value:
    return k.b.bitcast(k.b.gep(ptr, [index], inbounds=True), ir.PointerType(vec))


def _conv_pixel_vector(k: Kernel, n, oh, ow, pixel, groups: int, cg: int, og: int) -> None:
    """Accumulate a group's `og` outputs of one pixel in a vector register across all taps.

    The filter row of a tap is one vector load; the input value is broadcast. The output is
    written once per pixel instead of once per tap.
    """
    node, b = k.node, k.b
    ty = llvm_type(node.output.type.dtype)
    vec = ir.VectorType(ty, og)
    acc = k.alloca(vec)
    lanes = ir.Constant(ir.VectorType(I32, og), [0] * og)
    with k.loop(groups) as g:
        first = b.add(pixel, k.index((g, og)))
        init = ir.Constant(vec, [0.0] * og)
        if len(node.inputs) > 2 and node.inputs[2] is not None:
            init = b.load(_vector_ptr(k, k.args[2], k.index((g, og)), vec), align=4)
        if k.residual is not None:
            init = b.fadd(init, b.load(_vector_ptr(k, k.residual, first, vec), align=4))
        b.store(init, acc)
        with _window(k, node, oh, ow) as (ih, iw, kh, kw), k.loop(cg) as c:
            xv = k.load(k.args[0], _x_index(k, n, ih, iw, g, c, cg))
            splat = b.shuffle_vector(b.insert_element(ir.Constant(vec, None), xv, I32(0)),
                                     ir.Constant(vec, None), lanes)
            w = b.load(_vector_ptr(k, k.args[1], _tap_index(k, kh, kw, g, c, cg, og), vec),
                       align=4)
            b.store(b.fadd(b.load(acc), b.fmul(splat, w, flags=FAST), flags=FAST), acc)
        b.store(b.load(acc), _vector_ptr(k, k.outs[0], first, vec), align=4)


# -- pooling --------------------------------------------------------------------------------

def avg_divisors(node: Node) -> np.ndarray:
    """Per output pixel, how many taps the average divides by (ONNX count_include_pad rules)."""
    (kh_n, kw_n), (sh, sw), (dh, dw), (pt, pl, pb, pr) = _spatial(node)
    _, height, width, _ = node.inputs[0].type.shape
    _, out_h, out_w, _ = node.output.type.shape
    include = bool(node.attrs.get("count_include_pad", 0))
    lo_h, hi_h = (-pt, height + pb) if include else (0, height)
    lo_w, hi_w = (-pl, width + pr) if include else (0, width)
    counts = np.zeros((out_h, out_w), np.float32)
    for oh in range(out_h):
        rows = sum(lo_h <= oh * sh - pt + i * dh < hi_h for i in range(kh_n))
        for ow in range(out_w):
            counts[oh, ow] = rows * sum(lo_w <= ow * sw - pl + i * dw < hi_w
                                        for i in range(kw_n))
    return counts


def emit_pool(k: Kernel) -> None:
    """NHWC max or average pooling; channels innermost so the loop vectorizes across them."""
    node = k.node
    batch, height, width, channels = node.inputs[0].type.shape
    _, out_h, out_w, _ = node.output.type.shape
    ty = llvm_type(node.output.type.dtype)
    is_max = node.op == "MaxPool"
    acc = k.alloca(ty)
    b = k.b
    with k.loop(batch) as n, k.loop(out_h) as oh, k.loop(out_w) as ow, \
            k.loop(channels) as c:
        b.store(ir.Constant(ty, float("-inf") if is_max else 0.0), acc)
        with _window(k, node, oh, ow) as (ih, iw, _, _):
            x = k.load(k.args[0], k.index((n, height * width * channels),
                                          (ih, width * channels), (iw, channels), (c, 1)))
            old = b.load(acc)
            new = (b.select(b.fcmp_unordered(">", x, old), x, old) if is_max
                   else b.fadd(old, x, flags=FAST))
            b.store(new, acc)
        y = b.load(acc)
        if not is_max:
            y = b.fdiv(y, k.load(k.args[1], k.index((oh, out_w), (ow, 1))))
        yi = k.index((n, out_h * out_w * channels), (oh, out_w * channels), (ow, channels),
                     (c, 1))
        k.store(y, k.outs[0], yi)


# -- data movement --------------------------------------------------------------------------

def emit_transpose(k: Kernel) -> None:
    """Transpose by `perm`: loops over y in order, reading x through permuted strides."""
    node = k.node
    shape = node.inputs[0].type.shape
    perm = list(node.attrs.get("perm") or reversed(range(len(shape))))
    in_strides = strides(shape)
    out_shape = [shape[p] for p in perm]
    out_strides = strides(out_shape)
    with ExitStack() as stack:
        idx = [stack.enter_context(k.loop(n)) for n in out_shape]
        x = k.load(k.args[0], k.index(*((i, in_strides[p]) for i, p in zip(idx, perm))))
        k.store(x, k.outs[0], k.index(*zip(idx, out_strides)))


def emit_concat(k: Kernel) -> None:
    """Copy each input into its slice of the output (when placement could not do it for free)."""
    node = k.node
    out = node.output.type.shape
    axis = int(node.attrs.get("axis", 0)) % len(out)
    out_strides = strides(out)
    start = 0
    for slot, value in enumerate(node.inputs):
        shape = value.type.shape
        with ExitStack() as stack:
            idx = [stack.enter_context(k.loop(n)) for n in shape]
            x = k.load(k.args[slot], k.index(*zip(idx, strides(shape))))
            k.store(x, k.outs[0], k.index(*zip(idx, out_strides),
                                          base=start * out_strides[axis]))
        start += shape[axis]
