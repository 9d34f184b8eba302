"""Fully connected layers: y = act(x W^T + b), one dot product per output."""

from __future__ import annotations

from compiler.codegen.kernel import FAST, Kernel, activate, add_residual, bias_or_zero, llvm_type


def emit_fully_connected(k: Kernel) -> None:
    """y[m, n] = act(b[n] + sum_k x[m, k] * w[n, k]); w rows are contiguous in k."""
    x, w = k.node.inputs[0].type, k.node.inputs[1].type
    ty = llvm_type(x.dtype)
    rows, depth, outs = x.numel // x.shape[-1], x.shape[-1], w.shape[0]
    acc = k.alloca(ty)
    b = k.b
    with k.loop(rows) as m, k.loop(outs) as n:
        b.store(bias_or_zero(k, 2, n, ty), acc)
        with k.loop(depth) as d:
            prod = b.fmul(k.load(k.args[0], k.index((m, depth), (d, 1))),
                          k.load(k.args[1], k.index((n, depth), (d, 1))), flags=FAST)
            b.store(b.fadd(b.load(acc), prod, flags=FAST), acc)
        yi = k.index((m, outs), (n, 1))
        k.store(activate(k, add_residual(k, b.load(acc), yi)), k.outs[0], yi)
