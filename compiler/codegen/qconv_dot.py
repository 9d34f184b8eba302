"""8-bit convolution as dot products over the input depth, for cores with int8 dot products.

With the weights arranged [O, KH, KW, C], one output channel's filter at one tap and one input
pixel's channels are both contiguous, so the sum over C is a dot product of two int8 vectors,
which Helium (MVE) executes as one VMLADAV per 16 products. The input zero point leaves the
loop: for each tap, -x_zero_point * sum_c w[o, tap, c] is a precomputed int32 added when the
tap is inside the image (a tap in the padding adds nothing, as everywhere else). A block of
output channels shares each input load, and their accumulators are requantized as one vector.
Used for symmetric int8 weights (zero point 0) and a depth that is a multiple of 8; other
convolutions take `qconv`'s kernels.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from compiler.codegen import requant
from compiler.codegen.kernel import I32, Kernel, constant_input
from compiler.codegen.targets import Target
from compiler.codegen.window import window
from compiler.ir.graph import Node
from compiler.quant.requant import RANGES

_WEIGHTS, _BIAS, _TAP_SUMS = 3, 8, 13
_BLOCK = 4  # output channels sharing each input load
I8 = ir.IntType(8)


def _first(array, default=0):
    return default if array is None else np.asarray(array).reshape(-1)[0]


def dot_eligible(node: Node, target: Target | None) -> bool:
    """Whether this convolution runs as depth dot products on `target`."""
    if target is None or target.int8_dot != "mve" or int(node.attrs.get("group", 1)) != 1:
        return False
    if node.inputs[0].type.dtype != "int8" or node.inputs[3].type.dtype != "int8":
        return False
    zw = node.inputs[5]
    if zw is not None and np.asarray(zw.data).any():
        return False
    channels, out_c = node.inputs[0].type.shape[3], node.output.type.shape[3]
    return channels % 8 == 0 and out_c % _BLOCK == 0


def qconv_dot_weights(node: Node) -> dict[int, np.ndarray]:
    """Weights [O, KH, KW, C], the bias, per-tap zero-point sums and the rule's data."""
    w = np.asarray(node.inputs[3].data, np.int64)
    out_c = w.shape[0]
    zx = int(_first(node.inputs[2].data))
    bias_value = node.inputs[8] if len(node.inputs) > 8 else None
    bias = np.zeros(out_c, np.int32) if bias_value is None else np.asarray(bias_value.data,
                                                                            np.int32)
    arrays = {_WEIGHTS: np.ascontiguousarray(w.transpose(0, 2, 3, 1)).astype(np.int8),
              _BIAS: bias,
              _TAP_SUMS: (-zx * w.sum(axis=1)).reshape(out_c, -1).astype(np.int32)}
    arrays.update(requant.channel_arrays(node, np.float32(_first(node.inputs[1].data)),
                                         node.inputs[4].data,
                                         np.float32(_first(node.inputs[6].data)), out_c))
    return arrays


def _reduce_add(k: Kernel, vector: ir.Value) -> ir.Value:
    ty = vector.type
    name = f"llvm.vector.reduce.add.v{ty.count}i32"
    module = k.fn.module
    fn = module.globals.get(name) or ir.Function(module, ir.FunctionType(I32, [ty]), name)
    return k.b.call(fn, [vector])


def _mve_dot(k: Kernel, acc: ir.Value, x: ir.Value, w: ir.Value) -> ir.Value:
    """The accumulator plus the dot product of two vectors: one VMLADAVA.

    Sixteen int8 lanes, or eight widened to 16 bits; Helium's intrinsic, since the generic
    reduce-of-products form loses the instruction when x is shared between channels.
    """
    ty = x.type
    name = f"llvm.arm.mve.vmldava.v{ty.count}i{ty.element.width}"
    module = k.fn.module
    fn = module.globals.get(name) or ir.Function(
        module, ir.FunctionType(I32, [I32, I32, I32, I32, ty, ty]), name)
    return k.b.call(fn, [I32(0), I32(0), I32(0), acc, x, w])


def _load(k: Kernel, ptr: ir.Value, index: ir.Value, lanes: int, element: ir.Type = I8):
    b = k.b
    cast = b.bitcast(b.gep(ptr, [index], inbounds=True),
                     ir.PointerType(ir.VectorType(element, lanes)))
    return b.load(cast, align=1)


def emit_qconv_dot(k: Kernel) -> None:
    """Per output pixel and block of output channels: the taps' dot products, requantized."""
    node, b = k.node, k.b
    batch, height, width, channels = node.inputs[0].type.shape
    _, out_h, out_w, out_c = node.output.type.shape
    kh_n, kw_n = node.inputs[3].type.shape[2:]
    taps = kh_n * kw_n
    zp = int(_first(constant_input(k, 7, "output zero point")))
    low, high = node.attrs.get("output_range") or RANGES[node.output.type.dtype]
    chunks = [(c, 16) for c in range(0, channels - channels % 16, 16)]
    if channels % 16:
        chunks.append((channels - 8, 8))
    accs = [k.alloca(I32) for _ in range(_BLOCK)]
    block_vec = ir.VectorType(I32, _BLOCK)
    with k.loop(batch) as n, k.loop(out_h) as oh, k.loop(out_w) as ow, \
            k.loop(out_c // _BLOCK) as ob:
        oc0 = k.index((ob, _BLOCK))
        for j, slot in enumerate(accs):
            b.store(k.load(k.args[_BIAS], b.add(oc0, I32(j))), slot)
        with window(k, node, oh, ow) as (ih, iw, kh, kw):
            x_base = k.index((n, height * width * channels), (ih, width * channels),
                             (iw, channels))
            tap = k.index((kh, kw_n), (kw, 1))
            w_bases = [k.index((ob, _BLOCK * taps * channels), (tap, channels),
                               base=j * taps * channels) for j in range(_BLOCK)]
            for j, slot in enumerate(accs):
                extra = k.load(k.args[_TAP_SUMS], k.index((ob, _BLOCK * taps), (tap, 1),
                                                          base=j * taps))
                b.store(b.add(b.load(slot), extra), slot)
            for start, lanes in chunks:
                xv = _load(k, k.args[0], b.add(x_base, I32(start)), lanes)
                if lanes == 8:  # eight bytes widened to 16 bits: VMLADAVA.S16
                    xv = b.sext(xv, ir.VectorType(ir.IntType(16), 8))
                for w_base, slot in zip(w_bases, accs):
                    wv = _load(k, k.args[_WEIGHTS], b.add(w_base, I32(start)), lanes)
                    if lanes == 8:
                        wv = b.sext(wv, ir.VectorType(ir.IntType(16), 8))
                    b.store(_mve_dot(k, b.load(slot), xv, wv), slot)
        values = ir.Constant(block_vec, None)
        for j, slot in enumerate(accs):
            values = b.insert_element(values, b.load(slot), I32(j))
        if node.attrs.get("requant", "onnx") == "tflite":
            out = requant.tflite(k, values, _load(k, k.args[requant.MULTIPLIERS], oc0, _BLOCK,
                                                  I32),
                                 _load(k, k.args[requant.SHIFTS], oc0, _BLOCK, I32), zp, low,
                                 high)
        else:
            out = requant.onnx(k, values, _load(k, k.args[requant.SCALES], oc0, _BLOCK,
                                                ir.FloatType()), zp, low, high)
        pixel = k.index((n, out_h * out_w * out_c), (oh, out_w * out_c), (ow, out_c))
        ptr = b.bitcast(b.gep(k.outs[0], [b.add(pixel, oc0)], inbounds=True),
                        ir.PointerType(ir.VectorType(I8, _BLOCK)))
        b.store(b.trunc(out, ir.VectorType(I8, _BLOCK)), ptr, align=1)
