"""The lane dot products the hosts' int8 convolution and fully connected kernels are built on.

Both kernels (`qconv_lanes`, `qfully_connected_lanes`) keep output channels in int32 lanes and
broadcast a word of input channels to every lane; what a word is depends on the CPU:
- VPDPBUSD (AVX-512 VNNI; AVX-VNNI on 256-bit registers): four channels' bytes, made
  unsigned by flipping each sign bit (x + 128), times four signed weight bytes per lane,
  summed into the lane.
- VPMADDWD (AVX2 without AVX-VNNI, AVX-512 without VNNI): two channels' bytes
  sign-extended to a pair of int16, times a pair of int16 weights per lane: both products
  and their sum exact, unlike VPMADDUBSW's saturating byte products.
- SDOT (AArch64 with the dot product): four channels' signed bytes times four signed weight
  bytes per lane, four lanes to a register.
This module says, per target, how many channels a word holds, how weights are stored, what
the input zero point is folded with, and emits the broadcast word and the dot product.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from compiler.codegen.int8dot import WEIGHTS, load_vector
from compiler.codegen.kernel import I32, Kernel, splat
from compiler.codegen.targets import DotProduct, Target

LANE_DOTS = (DotProduct.VNNI, DotProduct.PMADDWD, DotProduct.SDOT)
I8, I16 = ir.IntType(8), ir.IntType(16)


def step(target: Target | None) -> int:
    """Input channels per word: four bytes for VPDPBUSD, two int16 for VPMADDWD."""
    return 2 if target is not None and target.int8_dot is DotProduct.PMADDWD else 4


def lanes_for(outputs: int, target: Target | None) -> int:
    """Output channels per vector: the register's int32 lanes where they divide the outputs.

    Emulated VPDPBUSD keeps AVX-512's sixteen on an AVX2 CPU, so the emulation tiles as
    icelake-server's kernels do; AVX-VNNI's registers hold eight.
    """
    widest = 16 if target is None or target.int8_dot_emulated else target.vector_bits // 32
    if widest < 8:  # 128-bit registers
        return widest
    return 16 if widest >= 16 and outputs % 16 == 0 else 8


def vectors_and_chains(target: Target | None) -> tuple[int, int]:
    """Output vectors one pixel keeps in registers, and accumulators it wants at least.

    VPDPBUSD accumulates in place, so a vector's sum waits on the instruction's latency: four
    vectors in two chains each keep eight in flight (KWS's 64-channel 1 x 1 layers: 10 %
    faster than one chain). VPMADDWD's products are added by a one-cycle VPADDD, so one chain
    suffices, and eight vectors share each broadcast word (sixteen registers: eight
    accumulators, the word, a product).
    """
    if target is not None and target.int8_dot is DotProduct.SDOT:
        return 8, 8  # four lanes a register: eight of 32 hold 32 channels' sums
    return (8, 1) if step(target) == 2 else (4, 8)


def sign_shift(target: Target | None) -> int:
    """What each input byte carries besides its value: +128 where the sign bit is flipped."""
    return 128 if target is None or target.int8_dot is DotProduct.VNNI else 0


def padding_byte(target: Target | None) -> int:
    """The input byte whose product adds nothing: -128 before the flip, else 0."""
    return -sign_shift(target)


def stored_weights(arranged: np.ndarray, target: Target | None) -> np.ndarray:
    """The arranged weights as the dot product reads them: bytes, or int16 for VPMADDWD.

    Widened once here rather than by VPMOVSXBW in the loop, which measured 15 to 23 % slower
    on the four int8 models at x86-64-v3 for half the weight bytes.
    """
    return np.ascontiguousarray(arranged).astype(np.int8 if step(target) == 4 else np.int16)


def input_word(k: Kernel, ptr: ir.Value, at: ir.Value, lanes: int, available: int = 0
               ) -> ir.Value:
    """ptr[at : at + step] as one int32 word broadcast to `lanes` lanes, ready to multiply.

    `available`: a last, partial word's bytes (the rest read as 0, against zero weights).
    """
    b = k.b
    size = step(k.target)
    ty = ir.VectorType(I8, size)
    if available:
        loaded = ir.Constant(ty, [0] * size)
        for i in range(available):
            loaded = b.insert_element(loaded, k.load(ptr, b.add(at, I32(i))), I32(i))
    else:
        loaded = b.load(b.bitcast(b.gep(ptr, [at], inbounds=True), ir.PointerType(ty)),
                        align=1)
    if sign_shift(k.target):  # 0x80808080: each sign bit flipped
        word = b.xor(b.bitcast(loaded, I32), I32(-0x7F7F7F80))
    elif size == 4:
        word = b.bitcast(loaded, I32)
    else:
        word = b.bitcast(b.sext(loaded, ir.VectorType(I16, 2)), I32)
    return splat(k, word, ir.VectorType(I32, lanes))


def lane_dot(k: Kernel, acc: ir.Value, x: ir.Value, w_at: ir.Value, lanes: int) -> ir.Value:
    """Acc plus, per lane, the word `x` dotted with the lane's weights at element `w_at`."""
    b = k.b
    vec = ir.VectorType(I32, lanes)
    if k.target.int8_dot is DotProduct.SDOT:
        quads = ir.VectorType(I8, 4 * lanes)
        name = f"llvm.aarch64.neon.sdot.v{lanes}i32.v{4 * lanes}i8"
        module = k.fn.module
        fn = module.globals.get(name) or ir.Function(
            module, ir.FunctionType(vec, [vec, quads, quads]), name)
        return b.call(fn, [acc, b.bitcast(x, quads),
                           load_vector(k, k.args[WEIGHTS], w_at, 4 * lanes)])
    if step(k.target) == 4:
        w = b.bitcast(load_vector(k, k.args[WEIGHTS], w_at, 4 * lanes), vec)
        return vpdpbusd(k, acc, x, w)
    pairs = ir.VectorType(I16, 2 * lanes)
    w = load_vector(k, k.args[WEIGHTS], w_at, 2 * lanes, I16)
    name = ("llvm.x86.avx512.pmaddw.d.512" if lanes == 16 else "llvm.x86.avx2.pmadd.wd")
    module = k.fn.module
    fn = module.globals.get(name) or ir.Function(module, ir.FunctionType(vec, [pairs, pairs]),
                                                 name)
    return b.add(acc, b.call(fn, [b.bitcast(x, pairs), w]))


def vpdpbusd(k: Kernel, acc: ir.Value, x: ir.Value, w: ir.Value) -> ir.Value:
    """Acc + per lane the four products of x's unsigned bytes by w's signed bytes.

    One VPDPBUSD, or on a target that emulates it (`Target.int8_dot_emulated`) the same sum
    in portable IR, so everything else about these kernels can be tested on any AVX2 CPU.
    """
    if k.target.int8_dot_emulated:
        return _portable_vpdpbusd(k.b, acc, x, w)
    ty = acc.type
    name = f"llvm.x86.avx512.vpdpbusd.{32 * ty.count}"
    module = k.fn.module
    fn = module.globals.get(name) or ir.Function(module, ir.FunctionType(ty, [ty, ty, ty]),
                                                 name)
    return k.b.call(fn, [acc, x, w])


def _portable_vpdpbusd(b: ir.IRBuilder, acc: ir.Value, x: ir.Value, w: ir.Value) -> ir.Value:
    """VPDPBUSD's result without the instruction.

    The bytes of lane i are bytes 4i..4i+3 of the vectors taken as bytes (little-endian):
    x's zero-extended, w's sign-extended, multiplied in int32 and added to the lane's
    accumulator, wrapping as the non-saturating instruction does.
    """
    lanes = acc.type.count
    wide, narrow = ir.VectorType(I32, 4 * lanes), ir.VectorType(I8, 4 * lanes)
    products = b.mul(b.zext(b.bitcast(x, narrow), wide), b.sext(b.bitcast(w, narrow), wide))
    total = acc
    for j in range(4):
        picks = ir.Constant(ir.VectorType(I32, lanes), [4 * i + j for i in range(lanes)])
        total = b.add(total, b.shuffle_vector(products, products, picks))
    return total
