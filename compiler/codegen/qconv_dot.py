"""8-bit convolution as dot products over the input depth, for cores with int8 dot products.

With the weights arranged by output channel, tap and input channel, one output channel's filter
at one tap and one input pixel's channels are both contiguous, so the sum over C is a dot
product of two int8 vectors, which Helium (MVE) executes as one VMLADAV per 16 products. The
input zero point leaves the loop: the accumulators start from the bias minus x_zero_point times
the sum of the weights of the taps inside the image (a tap in the padding adds nothing, as
everywhere else). Which taps are inside depends only on the pixel's border class, (rows cut at
the top or bottom, columns cut at either side), so that start is a small compile-time table per
class and channel. A block of output channels shares each input load, and their accumulators are
requantized as one vector. Used for symmetric int8 weights (zero point 0) and a depth that is a
multiple of 8; other convolutions take `qconv`'s kernels.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from compiler.codegen import requant
from compiler.codegen.kernel import I32, Kernel, constant_input
from compiler.codegen.targets import Target
from compiler.codegen.window import spatial, window
from compiler.ir.graph import Node
from compiler.quant.requant import RANGES

_WEIGHTS, _STARTS, _ROW_CLASS, _COLUMN_CLASS = 3, 13, 14, 15
_BLOCK = 4  # output channels sharing each input load
# The depth a convolution needs a multiple of: Helium's dot products take 16 bytes (or 8
# widened); SMLAD takes two pairs of 16-bit values, unpacked from one word of four bytes.
_DEPTH_STEP = {"mve": 8, "dsp": 4}
I8 = ir.IntType(8)


def _first(array, default=0):
    return default if array is None else np.asarray(array).reshape(-1)[0]


def dot_eligible(node: Node, target: Target | None) -> bool:
    """Whether this convolution runs as depth dot products on `target`."""
    if target is None or target.int8_dot not in _DEPTH_STEP or int(node.attrs.get("group",
                                                                                    1)) != 1:
        return False
    if node.inputs[0].type.dtype != "int8" or node.inputs[3].type.dtype != "int8":
        return False
    zw = node.inputs[5]
    if zw is not None and np.asarray(zw.data).any():
        return False
    channels, out_c = node.inputs[0].type.shape[3], node.output.type.shape[3]
    return channels % _DEPTH_STEP[target.int8_dot] == 0 and out_c % _BLOCK == 0


def _classes(out: int, stride: int, dilation: int, pad: int, kernel: int, size: int
             ) -> tuple[np.ndarray, list[np.ndarray]]:
    """Per output row (or column): its class; per class: which kernel taps are inside."""
    masks, classes = [], []
    for o in range(out):
        inside = np.array([0 <= o * stride - pad + t * dilation < size for t in range(kernel)])
        match = next((i for i, m in enumerate(masks) if np.array_equal(m, inside)), None)
        if match is None:
            masks.append(inside)
            match = len(masks) - 1
        classes.append(match)
    return np.array(classes, np.int32), masks


def _dsp_pairs(blocked: np.ndarray) -> np.ndarray:
    """Each four channels reordered 0, 2, 1, 3 and widened to int16.

    Those are the two words SXTB16 makes of four input bytes, so SMLAD takes the weights as
    stored, with nothing unpacked at run time (at twice the flash).
    """
    shape = blocked.shape
    quads = blocked.reshape(*shape[:-1], shape[-1] // 4, 4)[..., [0, 2, 1, 3]]
    return quads.reshape(shape).astype(np.int16)


def qconv_dot_weights(node: Node, target: Target | None = None) -> dict[int, np.ndarray]:
    """The arranged weights, the accumulator starts per border class, the rule's data.

    Weights are [O/B, KH, KW, B, C]: a block's rows of one tap side by side, so one pointer
    with constant offsets reads them; on DSP cores as widened pairs (`_dsp_pairs`).
    """
    w = np.asarray(node.inputs[3].data, np.int64)
    out_c, _, kh_n, kw_n = w.shape
    zx = int(_first(node.inputs[2].data))
    bias_value = node.inputs[8] if len(node.inputs) > 8 else None
    bias = np.zeros(out_c, np.int64) if bias_value is None else np.asarray(bias_value.data,
                                                                            np.int64)
    _, strides, dilations, pads = spatial(node)
    _, height, width, _ = node.inputs[0].type.shape
    _, out_h, out_w, _ = node.output.type.shape
    rows, row_masks = _classes(out_h, strides[0], dilations[0], pads[0], kh_n, height)
    columns, column_masks = _classes(out_w, strides[1], dilations[1], pads[1], kw_n, width)
    tap_sums = w.sum(axis=1)  # [O, KH, KW]
    starts = np.array([[bias - zx * tap_sums[:, rm][:, :, cm].sum(axis=(1, 2))
                        for cm in column_masks] for rm in row_masks])
    blocked = w.reshape(out_c // _BLOCK, _BLOCK, -1, kh_n, kw_n).transpose(0, 3, 4, 1, 2)
    arrays = {_WEIGHTS: np.ascontiguousarray(blocked).astype(np.int8),
              _STARTS: starts.reshape(-1).astype(np.int32), _ROW_CLASS: rows,
              _COLUMN_CLASS: columns}
    arrays.update(requant.channel_arrays(node, np.float32(_first(node.inputs[1].data)),
                                         node.inputs[4].data,
                                         np.float32(_first(node.inputs[6].data)), out_c))
    if target is not None and target.int8_dot == "dsp":
        arrays[_WEIGHTS] = _dsp_pairs(arrays[_WEIGHTS])
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


def _chunks(channels: int) -> list[tuple[int, int]]:
    """(start, lanes) of the dot products covering one pixel's channels: 16s, then one 8."""
    chunks = [(c, 16) for c in range(0, channels - channels % 16, 16)]
    if channels % 16:
        chunks.append((channels - 8, 8))
    return chunks


def _border_classes(node: Node) -> int:
    """How many column border classes the convolution's output has."""
    _, strides, dilations, pads = spatial(node)
    out_w, width = node.output.type.shape[2], node.inputs[0].type.shape[2]
    return len(_classes(out_w, strides[1], dilations[1], pads[1], node.inputs[3].type.shape[3],
                        width)[1])


def emit_qconv_dot(k: Kernel) -> None:
    """Per output pixel and block of output channels: the taps' dot products, requantized."""
    node, b = k.node, k.b
    batch, height, width, channels = node.inputs[0].type.shape
    _, out_h, out_w, out_c = node.output.type.shape
    kw_n = node.inputs[3].type.shape[3]
    taps = node.inputs[3].type.shape[2] * kw_n
    column_classes = _border_classes(node)
    accs = [k.alloca(I32) for _ in range(_BLOCK)]
    with k.loop(batch) as n, k.loop(out_h) as oh, k.loop(out_w) as ow:
        border = k.index((k.load(k.args[_ROW_CLASS], oh), column_classes * out_c),
                         (k.load(k.args[_COLUMN_CLASS], ow), out_c))
        pixel = k.index((n, out_h * out_w * out_c), (oh, out_w * out_c), (ow, out_c))
        with k.loop(out_c // _BLOCK) as ob:
            oc0 = k.index((ob, _BLOCK))
            for j, slot in enumerate(accs):
                b.store(k.load(k.args[_STARTS], b.add(border, b.add(oc0, I32(j)))), slot)
            with window(k, node, oh, ow) as (ih, iw, kh, kw):
                x_base = k.index((n, height * width * channels), (ih, width * channels),
                                 (iw, channels))
                tap = k.index((kh, kw_n), (kw, 1))
                w_bases = [k.index((ob, _BLOCK * taps * channels), (tap, _BLOCK * channels),
                                   base=j * channels) for j in range(_BLOCK)]
                dot = _dsp_dots if k.target.int8_dot == "dsp" else _mve_dots
                dot(k, x_base, w_bases, accs, channels)
            _store_block(k, [b.load(slot) for slot in accs], oc0, b.add(pixel, oc0))


def _mve_dots(k: Kernel, x_base, w_bases, accs, channels: int) -> None:
    """Each accumulator plus the dot product of the pixel's channels with its filter row."""
    b = k.b
    for start, lanes in _chunks(channels):
        xv = _widen(k, _load(k, k.args[0], b.add(x_base, I32(start)), lanes))
        for w_base, slot in zip(w_bases, accs):
            wv = _widen(k, _load(k, k.args[_WEIGHTS], b.add(w_base, I32(start)), lanes))
            b.store(_mve_dot(k, b.load(slot), xv, wv), slot)


def _arm(k: Kernel, name: str, *args: ir.Value) -> ir.Value:
    module = k.fn.module
    fn = module.globals.get(f"llvm.arm.{name}") or ir.Function(
        module, ir.FunctionType(I32, [I32] * len(args)), f"llvm.arm.{name}")
    return k.b.call(fn, list(args))


def _pairs(k: Kernel, word: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Bytes 0 and 2, and bytes 1 and 3, of a word as two pairs of int16 (two SXTB16)."""
    b = k.b
    rotated = b.or_(b.lshr(word, I32(8)), b.shl(word, I32(24)))
    return _arm(k, "sxtb16", word), _arm(k, "sxtb16", rotated)


def _dsp_dots(k: Kernel, x_base, w_bases, accs, channels: int) -> None:
    """The same dot products with the DSP extension.

    Per word of four input channels: its pairs unpacked once (two SXTB16), then for each
    filter two words of prepared int16 pairs and two SMLAD. Two words per trip when the depth
    allows.
    """
    b = k.b
    word = ir.PointerType(I32)
    x_words = b.bitcast(b.gep(k.args[0], [x_base], inbounds=True), word)
    w_pairs = [b.bitcast(b.gep(k.args[_WEIGHTS], [base], inbounds=True),
                         ir.PointerType(ir.IntType(64))) for base in w_bases]
    words = channels // 4
    unroll = 2 if words % 2 == 0 else 1
    with k.loop(words // unroll) as trip:
        for u in range(unroll):
            i = k.index((trip, unroll), base=u)
            x_even, x_odd = _pairs(k, b.load(b.gep(x_words, [i], inbounds=True), align=1))
            for w_ptr, slot in zip(w_pairs, accs):
                # Both words of the pair in one 64-bit load (an LDRD).
                pair = b.load(b.gep(w_ptr, [i], inbounds=True), align=4)
                w_even = b.trunc(pair, I32)
                w_odd = b.trunc(b.lshr(pair, ir.IntType(64)(32)), I32)
                acc = _arm(k, "smlad", x_even, w_even, b.load(slot))
                b.store(_arm(k, "smlad", x_odd, w_odd, acc), slot)


def _widen(k: Kernel, vector: ir.Value) -> ir.Value:
    """Eight int8 lanes widened to 16 bits (VMLADAVA.S16); sixteen stay bytes."""
    if vector.type.count == 8:
        return k.b.sext(vector, ir.VectorType(ir.IntType(16), 8))
    return vector


def _store_block(k: Kernel, accs: list[ir.Value], oc0: ir.Value, at: ir.Value) -> None:
    """A block of accumulators requantized as one vector by the node's rule and stored."""
    node, b = k.node, k.b
    zp = int(_first(constant_input(k, 7, "output zero point")))
    low, high = node.attrs.get("output_range") or RANGES[node.output.type.dtype]
    count = len(accs)
    values = ir.Constant(ir.VectorType(I32, count), None)
    for j, acc in enumerate(accs):
        values = b.insert_element(values, acc, I32(j))
    if node.attrs.get("requant", "onnx") == "tflite":
        out = requant.tflite(k, values, _load(k, k.args[requant.MULTIPLIERS], oc0, count, I32),
                             _load(k, k.args[requant.SHIFTS], oc0, count, I32), zp, low, high)
    else:
        out = requant.onnx(k, values, _load(k, k.args[requant.SCALES], oc0, count,
                                            ir.FloatType()), zp, low, high)
    ptr = b.bitcast(b.gep(k.outs[0], [at], inbounds=True),
                    ir.PointerType(ir.VectorType(I8, count)))
    b.store(b.trunc(out, ir.VectorType(I8, count)), ptr, align=1)
