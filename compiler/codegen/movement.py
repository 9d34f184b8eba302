"""Data movement kernels: Transpose and the Concat copies placement could not avoid."""

from __future__ import annotations

from contextlib import ExitStack

from llvmlite import ir

from compiler.codegen.kernel import Kernel, strides


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


def emit_copy(k: Kernel) -> None:
    """Copy the input's elements in order: a reshape or Identity that placement left a copy.

    A view shares its input's bytes; one of a constant (a graph whose output is a reshaped or
    passed-through initializer) or an Identity from a graph input to a graph output cannot.
    """
    with k.loop(k.node.output.type.numel) as i:
        k.store(k.load(k.args[0], i), k.outs[0], i)


def emit_bitcast(k: Kernel) -> None:
    """BitCast: the input's bytes, reinterpreted as the output's element type."""
    b = k.b
    nbytes = k.node.inputs[0].type.nbytes
    byte = ir.PointerType(ir.IntType(8))
    source, target = b.bitcast(k.args[0], byte), b.bitcast(k.outs[0], byte)
    with k.loop(nbytes) as i:
        k.store(k.load(source, i), target, i)
