"""int8 dot products over a contiguous depth, as each core's instructions do them best.

The convolution and fully connected kernels built on this module hold a block of output
channels' int32 accumulators and add to each the dot product of an input run (one pixel's
channels, or one row's features) with that channel's weight run, both contiguous:
- Helium (MVE): one VMLADAVA per 16 int8 products (8 products widened to 16 bits for a
  remainder of 8), through the intrinsic.
- Scalar cores (Cortex-M3, M0+): per input byte one load for the block, then per channel a
  load and a multiply-accumulate.
- DSP (Cortex-M4/M7/M33): per word of four input bytes, two SXTB16 make its (0, 2) and (1, 3)
  int16 pairs once for the block; weights are stored as the matching int16 pairs
  (`dsp_pairs`), so each channel takes one 64-bit load and two SMLAD per four products. With
  lean weights (`Target.lean_weights`) they stay int8, half the flash, and each channel's
  word is unpacked the same way at run time: one load, two SXTB16, two SMLAD.
The accumulators of a block are then requantized together as one vector.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from compiler.codegen import requant
from compiler.codegen.borders import border_starts
from compiler.codegen.kernel import I32, Kernel, conv_bias, first
from compiler.codegen.qbinary import add_residual
from compiler.codegen.targets import DotProduct
from compiler.qmath.requant import RANGES

WEIGHTS = 3  # the weight slot: QLinearConv's and QGemm's weights both come fourth


def conv_requant_arrays(node, target=None) -> dict[int, np.ndarray]:
    """`requant_arrays` of a QLinearConv, read from its own inputs (x, w and y parameters)."""
    return requant_arrays(node, np.float32(first(node.inputs[1].data)), node.inputs[4].data,
                          np.float32(first(node.inputs[6].data)), node.inputs[3].type.shape[0],
                          int(first(node.inputs[7].data)), target=target)


def conv_dot_arrays(node, target, stored: np.ndarray, tap_sums: np.ndarray, flip: int = 0
                    ) -> dict[int, np.ndarray]:
    """A dot-product convolution's arrays: weights as stored, starts, the rule's data.

    The starts are per border class, the bias and input zero point folded in (plus `flip`
    where the kernel flips the input's sign bits).
    """
    zx = int(first(node.inputs[2].data))
    return {WEIGHTS: stored, **border_starts(node, tap_sums, conv_bias(node), zx + flip),
            **conv_requant_arrays(node, target)}


def requant_arrays(node, x_scale, w_scale, y_scale, channels: int, zero_point: int,
                   fully_connected: bool = False, target=None) -> dict[int, np.ndarray]:
    """The per-channel requantization data `store_block` reads (split shifts where exact).

    With the float64 tables too on a target that requantizes in float64. One element each
    when every channel's is the same (`same_requant`): a fully connected layer of 640
    outputs would otherwise store 640 copies of six numbers.
    """
    low, high = node.attrs.get("output_range") or RANGES[node.output.type.dtype]
    float64 = target is not None and target.float64_requant
    reach = None
    if float64:
        lo, hi = accumulator_range(node)
        if same_requant(node):  # one table for all: the layer's whole range
            lo, hi = np.full(channels, lo.min()), np.full(channels, hi.max())
        reach = (lo, hi)
    arrays = requant.channel_arrays(node, x_scale, w_scale, y_scale, channels,
                                    fully_connected, split_for=(zero_point, high),
                                    float64=float64, reach=reach,
                                    output=(zero_point, low, high))
    if same_requant(node):
        arrays = {slot: np.ascontiguousarray(a[:1]) for slot, a in arrays.items()}
    return arrays


# Where a node's requantization data sit: (x scale, y scale, y zero point) input slots. Only
# convolutions: for a fully connected layer's per-tensor tables (loaded once) dropping the
# terms makes Cortex-M7's code slower (ad01: 2.7 % more instructions).
_REQUANT_SLOTS = {"QLinearConv": (1, 6, 7)}


def accumulator_range(node) -> tuple[np.ndarray, np.ndarray]:
    """Per output channel, the lowest and highest accumulator any input can produce.

    The accumulator is bias + sum w * (x - x_zero_point) with x an int8 (or uint8) byte, so
    each term runs between w times the lowest and the highest of x - x_zero_point.
    """
    w = np.asarray(node.inputs[WEIGHTS].data, np.int64)
    if node.op == "QLinearConv":
        rows, bias_slot = w.reshape(w.shape[0], -1), 8
    else:  # QGemm, QLinearMatMul (no bias): weights [K, N], or [N, K] under transB
        rows = w if node.attrs.get("transB") else w.T
        bias_slot = 6 if node.op == "QGemm" else None
    x_low, x_high = RANGES[node.inputs[0].type.dtype]
    zx = int(first(node.inputs[2].data))
    a, b = x_low - zx, x_high - zx
    lo = np.minimum(rows * a, rows * b).sum(axis=1)
    hi = np.maximum(rows * a, rows * b).sum(axis=1)
    bias = node.inputs[bias_slot] if bias_slot and len(node.inputs) > bias_slot else None
    if bias is not None:
        offset = np.broadcast_to(np.asarray(bias.data, np.int64).reshape(-1), lo.shape)
        lo, hi = lo + offset, hi + offset
    return lo, hi


def split_facts(node) -> tuple[bool, bool]:
    """What a node's split requantization can leave out: (no left shifts, every fix taken).

    No channel shifts left, and every channel's rounding takes the negative fix: each saves
    an instruction and a table load per output when true.
    """
    slots = _REQUANT_SLOTS.get(node.op)
    if slots is None:
        return False, False
    xs, ys, yz = slots
    arrays = requant_arrays(node, np.float32(first(node.inputs[xs].data)), node.inputs[4].data,
                            np.float32(first(node.inputs[ys].data)),
                            node.inputs[3].type.shape[0], int(first(node.inputs[yz].data)))
    if requant.LEFTS not in arrays:
        return False, False
    return (not np.asarray(arrays[requant.LEFTS]).any(),
            bool(np.all(np.asarray(arrays[requant.NEGATIVE_FIXES]) == 1)))


def same_requant(node) -> bool:
    """True when one weight scale serves every output channel (per-tensor weights)."""
    scales = np.asarray(node.inputs[4].data, np.float32).reshape(-1)
    return bool(np.all(scales == scales[0]))


BLOCK = 4  # output channels sharing each input load
# The depth a kernel needs a multiple of: Helium's dot products take 16 bytes (or 8 widened);
# SMLAD takes two pairs of 16-bit values, unpacked from one word of four bytes; scalar cores
# take four bytes to a trip.
DEPTH_STEP = {DotProduct.MVE: 8, DotProduct.DSP: 4, DotProduct.SCALAR: 4}
I8 = ir.IntType(8)


def dsp_weights(blocked: np.ndarray, target) -> np.ndarray:
    """Weights as the target's DSP kernels read them: int16 pairs, or int8 when lean.

    Other targets read the int8 bytes as they are.
    """
    return dsp_pairs(blocked) if target is not None and target.int16_pairs else blocked


def dsp_pairs(blocked: np.ndarray) -> np.ndarray:
    """Each four channels reordered 0, 2, 1, 3 and widened to int16.

    Those are the two words SXTB16 makes of four input bytes, so SMLAD takes the weights as
    stored, with nothing unpacked at run time (at twice the flash).
    """
    shape = blocked.shape
    quads = blocked.reshape(*shape[:-1], shape[-1] // 4, 4)[..., [0, 2, 1, 3]]
    return quads.reshape(shape).astype(np.int16)


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


def load_vector(k: Kernel, ptr: ir.Value, index: ir.Value, lanes: int, element: ir.Type = I8
                ) -> ir.Value:
    """ptr[index : index + lanes] as one vector (no alignment assumed)."""
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


_UNROLLED_CHUNKS = 8  # a depth of up to 128 is unrolled whole


def mve_dots(k: Kernel, x, x_base, w_bases, accs, channels: int) -> None:
    """Each accumulator plus the dot product of x[x_base:] with its filter row.

    A deep run loops over its chunks of sixteen, two to a trip: unrolled whole, the
    addresses of every chunk are hoisted and spilled (a 256-deep 1 x 1 convolution on
    Cortex-M55: half again the instructions).
    """
    b = k.b
    full = channels // 16
    depth = k.knob("depth", "default")  # the schedule's choice, else deep runs loop
    looped = full > _UNROLLED_CHUNKS if depth == "default" else depth != "unrolled"
    if channels % 16 == 0 and full > 1 and looped:
        unroll = 2 if full % 2 == 0 and depth != "loop1" else 1
        with k.loop(full // unroll) as trip:
            for u in range(unroll):
                start = k.index((trip, 16 * unroll), base=16 * u)
                xv = load_vector(k, x, b.add(x_base, start), 16)
                for w_base, slot in zip(w_bases, accs):
                    wv = load_vector(k, k.args[WEIGHTS], b.add(w_base, start), 16)
                    b.store(_mve_dot(k, b.load(slot), xv, wv), slot)
        return
    for start, lanes in _chunks(channels):
        xv = _widen(k, load_vector(k, x, b.add(x_base, I32(start)), lanes))
        for w_base, slot in zip(w_bases, accs):
            wv = _widen(k, load_vector(k, k.args[WEIGHTS], b.add(w_base, I32(start)),
                                       lanes))
            b.store(_mve_dot(k, b.load(slot), xv, wv), slot)


def arm_intrinsic(k: Kernel, name: str, *args: ir.Value) -> ir.Value:
    """A call of `llvm.arm.NAME` on int32 arguments (SXTB16, SMLAD, SMLABB, ...)."""
    module = k.fn.module
    fn = module.globals.get(f"llvm.arm.{name}") or ir.Function(
        module, ir.FunctionType(I32, [I32] * len(args)), f"llvm.arm.{name}")
    return k.b.call(fn, list(args))


def sxtb16_pairs(k: Kernel, word: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Bytes 0 and 2, and bytes 1 and 3, of a word as two pairs of int16 (two SXTB16)."""
    b = k.b
    rotated = b.or_(b.lshr(word, I32(8)), b.shl(word, I32(24)))
    return arm_intrinsic(k, "sxtb16", word), arm_intrinsic(k, "sxtb16", rotated)


def weight_pair(k: Kernel, ptr: ir.Value) -> tuple[ir.Value, ir.Value]:
    """The two words of stored int16 pairs at i64 pointer `ptr`, in one 64-bit load (LDRD)."""
    b = k.b
    pair = b.load(ptr, align=4)
    return b.trunc(pair, I32), b.trunc(b.lshr(pair, ir.IntType(64)(32)), I32)


def weight_words(k: Kernel, base: ir.Value, weights: ir.Value | None = None) -> ir.Value:
    """The weights from element `base` on, as the pointer `weight_quad` indexes by fours.

    From `weights` when given (an opaque base), else from the node's weights.
    """
    b = k.b
    ty = ir.PointerType(I32 if k.target.lean_weights else ir.IntType(64))
    weights = k.args[WEIGHTS] if weights is None else weights
    return b.bitcast(b.gep(weights, [base], inbounds=True), ty)


def weight_quad(k: Kernel, words: ir.Value, i: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Four weights (the i-th four from `words`) as the pairs SMLAD takes.

    Stored pairs load as they are; lean int8 weights are one word unpacked by two SXTB16.
    """
    b = k.b
    if k.target.lean_weights:
        return sxtb16_pairs(k, b.load(b.gep(words, [i], inbounds=True), align=1))
    return weight_pair(k, b.gep(words, [i], inbounds=True))


# A convolution's tap of up to this many words is unrolled whole: a loop of two trips
# (ResNet-8's 16 channels) recomputes and spills its addresses, whole its loads take constant
# offsets (Cortex-M7: ResNet-8 0.88 -> 0.59 of CMSIS-NN, KWS 0.84 -> 0.74). A fully connected
# layer's rows keep the loop: unrolled, the network's code inlined around them runs slower.
DSP_UNROLLED_WORDS = 16


def dsp_dots(k: Kernel, x, x_base, w_bases, accs, channels: int, taps: int = 0) -> None:
    """The same dot products with the DSP extension.

    Per word of four input channels: its pairs unpacked once (two SXTB16), then for each
    filter two words of prepared int16 pairs and two SMLAD. A convolution's tap (of `taps`
    taps) of up to DSP_UNROLLED_WORDS words is unrolled whole; otherwise two words per trip
    when the depth allows. The filters are read from an opaque base (`Kernel.opaque`) in a
    loop and in a 1 x 1 convolution (VWW on Cortex-M7: 0.84 -> 0.69 of CMSIS-NN, KWS 0.74 ->
    0.67); a window of several taps unrolled whole keeps the constant's address, whose
    offsets LLVM folds across the taps (ResNet-8: 4 % fewer instructions than opaque).
    """
    b = k.b
    word = ir.PointerType(I32)
    x_words = b.bitcast(b.gep(x, [x_base], inbounds=True), word)
    words = channels // 4
    depth = k.knob("depth", "default")  # the schedule's choice, else the rule above
    whole = taps and words <= DSP_UNROLLED_WORDS if depth == "default" else depth == "unrolled"
    base = k.knob("weight_base", "default")
    opaque = taps == 1 or (taps and not whole) if base == "default" else base == "opaque"
    if opaque:
        first = k.opaque(b.gep(k.args[WEIGHTS], [w_bases[0]], inbounds=True))
        w_pairs = [weight_words(k, b.sub(base, w_bases[0]), first) for base in w_bases]
    else:
        w_pairs = [weight_words(k, base) for base in w_bases]

    def word(i: ir.Value) -> None:
        x_even, x_odd = sxtb16_pairs(k, b.load(b.gep(x_words, [i], inbounds=True), align=1))
        for w_ptr, slot in zip(w_pairs, accs):
            w_even, w_odd = weight_quad(k, w_ptr, i)
            acc = arm_intrinsic(k, "smlad", x_even, w_even, b.load(slot))
            b.store(arm_intrinsic(k, "smlad", x_odd, w_odd, acc), slot)

    if whole:
        for i in range(words):
            word(I32(i))
        return
    unroll = 2 if words % 2 == 0 and depth != "loop1" else 1
    with k.loop(words // unroll) as trip:
        for u in range(unroll):
            word(k.index((trip, unroll), base=u))


def dots(k: Kernel, x_base, w_bases, accs, depth: int, x: ir.Value | None = None,
         taps: int = 0) -> None:
    """Each accumulator slot plus the dot product of x[x_base:] with its weight run.

    By the instructions of the kernel's target (`int8_dot`); `x` is the node's input unless
    given (a column buffer); `taps`: the taps of the convolution the run is from (0 for a
    fully connected layer), which shape the DSP loop (`dsp_dots`).
    """
    x = k.args[0] if x is None else x
    if k.target.int8_dot is DotProduct.DSP:
        dsp_dots(k, x, x_base, w_bases, accs, depth, taps)
    elif k.target.int8_dot is DotProduct.SCALAR:
        scalar_dots(k, x, x_base, w_bases, accs, depth)
    else:
        mve_dots(k, x, x_base, w_bases, accs, depth)


def scalar_dots(k: Kernel, x, x_base, w_bases, accs, depth: int) -> None:
    """The same dot products one product at a time, for cores without SIMD.

    Each input byte is loaded once for the block and each weight byte once: per product a
    load and a multiply-accumulate, plus a quarter of a load for the input with the block of
    four (CMSIS-NN's C path pays a load of each and an im2col copy). Four bytes to a trip, at
    constant offsets from the trip's pointers.
    """
    b = k.b
    with k.loop(depth // 4) as trip:
        for u in range(4):
            i = k.index((trip, 4), base=u)
            xv = b.sext(k.load(x, b.add(x_base, i)), I32)
            for w_base, slot in zip(w_bases, accs):
                wv = b.sext(k.load(k.args[WEIGHTS], b.add(w_base, i)), I32)
                b.store(b.add(b.load(slot), b.mul(xv, wv)), slot)


def _widen(k: Kernel, vector: ir.Value) -> ir.Value:
    """Eight int8 lanes widened to 16 bits (VMLADAVA.S16); sixteen stay bytes."""
    if vector.type.count == 8:
        return k.b.sext(vector, ir.VectorType(ir.IntType(16), 8))
    return vector


def store_block(k: Kernel, accs: list[ir.Value], oc0: ir.Value, at: ir.Value, zp: int
                ) -> None:
    """A block of accumulators requantized as one vector by the node's rule and stored."""
    b = k.b
    values = ir.Constant(ir.VectorType(I32, len(accs)), None)
    for j, acc in enumerate(accs):
        values = b.insert_element(values, acc, I32(j))
    store_vector(k, values, oc0, at, zp)


def _has(k: Kernel, slot: int) -> bool:
    """Whether the kernel was given the weight array of `slot`."""
    return len(k.args) > slot and k.args[slot] is not None


def store_vector(k: Kernel, values: ir.Value, oc0: ir.Value, at: ir.Value, zp: int) -> None:
    """A vector of accumulators (output channels oc0...) requantized and stored at `at`."""
    node, b = k.node, k.b
    low, high = node.attrs.get("output_range") or RANGES[node.output.type.dtype]
    count = values.type.count
    split = _has(k, requant.NEGATIVE_FIXES)
    same = same_requant(node)

    def table(slot: int, ty: ir.Type = I32) -> ir.Value:
        ptr = k.args[slot]
        if ty is requant.F64:  # float64 tables are stored as their bit patterns
            ptr = b.bitcast(ptr, ir.PointerType(ty))
        if not same:
            return load_vector(k, ptr, oc0, count, ty)
        one = b.insert_element(ir.Constant(ir.VectorType(ty, 1), None), b.load(ptr), I32(0))
        return b.shuffle_vector(one, ir.Constant(ir.VectorType(ty, 1), None),
                                ir.Constant(ir.VectorType(I32, count), [0] * count))

    if _has(k, requant.F64_SCALES):  # the two-step float64 form
        out = requant.tflite_float64(
            k, values, *(table(slot, requant.F64) for slot in (
                requant.F64_MULTIPLIERS, requant.F64_UPS, requant.F64_DOWNS)),
            None, zp, low, high, scale=table(requant.F64_SCALES, requant.F64))
    elif _has(k, requant.F64_MULTIPLIERS):
        out = requant.tflite_float64(
            k, values, *(table(slot, requant.F64) for slot in (
                requant.F64_MULTIPLIERS, requant.F64_UPS, requant.F64_DOWNS)),
            table(requant.NEGATIVE_BELOW), zp, low, high)
    elif split:
        no_left, all_fix = split_facts(node)
        out = requant.tflite_split(
            k, values, table(requant.MULTIPLIERS), None if no_left else table(requant.LEFTS),
            table(requant.RIGHTS), table(requant.ROUNDS),
            None if all_fix else table(requant.NEGATIVE_FIXES), zp, low, high)
    elif node.attrs.get("requant", "onnx") == "tflite":
        out = requant.tflite(k, values, table(requant.MULTIPLIERS), table(requant.SHIFTS), zp,
                             low, high)
    else:
        out = requant.onnx(k, values, table(requant.SCALES, ir.FloatType()), zp, low, high)
    if k.residual is not None:  # a fused QLinearAdd
        out = add_residual(k, out, at)
    ptr = b.bitcast(b.gep(k.outs[0], [at], inbounds=True),
                    ir.PointerType(ir.VectorType(I8, count)))
    b.store(b.trunc(out, ir.VectorType(I8, count)), ptr, align=1)
