"""Local response normalization (LRN) over the channels of an NHWC tensor."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from compiler.codegen.elementwise import intrinsic
from compiler.codegen.kernel import FAST, Kernel, llvm_type
from compiler.errors import KilnError


def emit_lrn(k: Kernel) -> None:
    """y[c] = x[c] / (bias + alpha / size * sum of x[j]^2 over the `size` channels around c)^beta.

    Channels are innermost in NHWC, so each pixel's window sums go into a stack row of
    `channels` floats, one shifted contiguous pass per window offset (bounds are constants, no
    per-element test), and every loop vectorizes. The row also makes an in-place output safe.
    """
    node = k.node
    shape = node.inputs[0].type.shape
    if node.attrs.get("layout", "NCHW") != "NHWC" and len(shape) > 2:
        raise KilnError(f"cannot generate LRN {node.name}: only channels-last (NHWC) is "
                        "supported")
    channels = shape[-1]
    pixels = int(np.prod(shape[:-1], dtype=np.int64))
    size = int(node.attrs["size"])
    below = (size - 1) // 2
    ty = llvm_type(node.output.type.dtype)
    sums = k.alloca(ir.ArrayType(ty, channels))
    row = k.b.bitcast(sums, ir.PointerType(ty))
    alpha = ir.Constant(ty, float(node.attrs["alpha"]) / size)
    bias = ir.Constant(ty, float(node.attrs["bias"]))
    beta = ir.Constant(ty, float(node.attrs["beta"]))
    b = k.b
    with k.loop(pixels) as p:
        with k.loop(channels) as c:
            k.store(ir.Constant(ty, 0.0), row, c)
        for shift in range(-below, size - below):
            first, last = max(0, -shift), min(channels, channels - shift)
            if last <= first:
                continue
            with k.loop(last - first) as i:
                c = b.add(i, ir.Constant(i.type, first))
                x = k.load(k.args[0], k.index((p, channels), (c, 1), base=shift))
                k.store(b.fadd(k.load(row, c), b.fmul(x, x, flags=FAST), flags=FAST), row, c)
        with k.loop(channels) as c:
            i = k.index((p, channels), (c, 1))
            scale = b.fadd(bias, b.fmul(alpha, k.load(row, c), flags=FAST), flags=FAST)
            k.store(b.fdiv(k.load(k.args[0], i), intrinsic(k, "pow", scale, beta)),
                    k.outs[0], i)
