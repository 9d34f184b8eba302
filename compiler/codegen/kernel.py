"""What every kernel emitter builds on: the `Kernel` being emitted, index helpers, activations.

One specialized LLVM function per node, every shape and stride a constant. An emitter (one
module per kernel family: conv, fully_connected, pool, movement, elementwise, ...) gets a
`Kernel` (the function being built, its runtime tensor arguments and the weight arguments)
and writes loops whose trip counts and strides are Python integers, so LLVM unrolls and
vectorizes them. `compiler.codegen.table` maps (operator, element type) to an emitter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np
from llvmlite import ir

from compiler.errors import KilnError
from compiler.ir.graph import Constant, Node

I32 = ir.IntType(32)
# A bool is a byte holding 0 or 1, as numpy and C store it.
LLVM_TYPES = {"float32": ir.FloatType(), "int8": ir.IntType(8), "uint8": ir.IntType(8),
              "int16": ir.IntType(16), "int32": ir.IntType(32), "int64": ir.IntType(64),
              "bool": ir.IntType(8)}

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


# The schedule of the kernel whose weights are being prepared: a weight arrangement that a
# knob changes (a convolution's channel block) reads it, as the emitter reads `Kernel.knob`.
_PREPARING: ContextVar[dict | None] = ContextVar("kiln_preparing_schedule", default=None)


@contextmanager
def preparing(schedule: dict) -> Iterator[None]:
    """Within: `prepared_knob` answers from `schedule` (the builder prepares one kernel)."""
    token = _PREPARING.set(schedule)
    try:
        yield
    finally:
        _PREPARING.reset(token)


def prepared_knob(name: str, default):
    """The value of knob `name` for the weights being prepared, or `default`."""
    return (_PREPARING.get() or {}).get(name, default)


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
        compact: Less code at some cost in speed, for code compiled to run a few times
            (emitters that specialize by position, such as convolution edges, may honour it).
        descending_rows: Run output rows from the last to the first (`rows`): the output
            overlaps the input it streams from, from above.
        schedule: The kernel's tuned knobs (`compiler.codegen.schedules`), name -> value;
            a knob not in it takes the generator's default.
    """

    def __init__(self, node: Node, fn: ir.Function, args: list, outs: list,
                 residual: ir.Value | None = None, act_node: Node | None = None,
                 target=None, compact: bool = False, descending_rows: bool = False,
                 schedule: dict | None = None):
        self.node, self.fn, self.args, self.outs = node, fn, args, outs
        self.schedule = schedule or {}
        self.target = target
        self.compact = compact
        self.descending_rows = descending_rows
        self.residual = residual
        self.act_node = act_node or node
        self._entry = ir.IRBuilder(fn.append_basic_block("entry"))
        self.b = ir.IRBuilder(fn.append_basic_block("body"))

    def knob(self, name: str, default):
        """The schedule's value of knob `name`, or `default` (the generator's own choice)."""
        return self.schedule.get(name, default)

    def opaque(self, ptr: ir.Value) -> ir.Value:
        """`ptr` (a constant's address) as a register LLVM cannot see into.

        Through an empty inline assembly, which costs no instruction. A loop over weights in
        flash otherwise has its addresses rebased by loop strength reduction onto the
        constant's global, at offsets Thumb-2 loads cannot encode: each then costs a MOVW and
        a MOVT per trip (VWW's 128-deep 1 x 1 convolutions on Cortex-M7: 1.17 of CMSIS-NN).
        """
        asm = ir.InlineAsm(ir.FunctionType(ptr.type, [ptr.type]), "", "=r,0")
        return self.b.call(asm, [ptr])

    def alloca(self, ty: ir.Type) -> ir.Value:
        """A scalar slot in the entry block (mem2reg turns it into a register)."""
        return self._entry.alloca(ty)

    def alloca_array(self, ty: ir.Type, count: int) -> ir.Value:
        """`count` elements of `ty` on the stack (entry block), as an element pointer.

        For small scratch state only (a recurrent state the node does not output).
        """
        space = self._entry.alloca(ir.ArrayType(ty, count))
        return self._entry.bitcast(space, ty.as_pointer())

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

    @contextmanager
    def rows(self, n: int) -> Iterator[ir.Value]:
        """The loop over `n` output rows; yields the row, counting down when `descending_rows`.

        Streaming kernels (`compiler.lowir.Stream`) loop over rows with it, outermost after the
        batch, and write each row within its iteration.
        """
        with self.loop(n) as i:
            yield self.b.sub(I32(n - 1), i, flags=["nsw"]) if self.descending_rows else i

    def index(self, *terms: tuple[ir.Value, int], base: int = 0) -> ir.Value:
        """A flat element index, base + sum(value * stride), with constant strides."""
        acc: ir.Value = I32(base)
        for value, stride in terms:
            if stride:
                acc = self.b.add(acc, self.b.mul(value, I32(stride), flags=["nsw"]),
                                 flags=["nsw"])
        return acc


def vector_ptr(k: Kernel, ptr: ir.Value, index: ir.Value, ty: ir.Type) -> ir.Value:
    """&ptr[index] as a pointer to the vector type `ty` (a load of ty.count elements)."""
    return k.b.bitcast(k.b.gep(ptr, [index], inbounds=True), ir.PointerType(ty))


def splat(k: Kernel, scalar: ir.Value, ty: ir.VectorType) -> ir.Value:
    """`scalar` in every lane of a vector of type `ty`."""
    b = k.b
    one = b.insert_element(ir.Constant(ty, None), scalar, I32(0))
    return b.shuffle_vector(one, ir.Constant(ty, None),
                            ir.Constant(ir.VectorType(I32, ty.count), [0] * ty.count))


def strides(shape) -> list[int]:
    """Row-major element strides of `shape`."""
    return [int(np.prod(shape[i + 1:], dtype=np.int64)) for i in range(len(shape))]


def first(array, default=0):
    """The first element of a (scalar or one-element) parameter array, or `default` for None."""
    return default if array is None else np.asarray(array).reshape(-1)[0]


def conv_bias(node: Node) -> np.ndarray:
    """A QLinearConv's int32 bias (input 8) as int64, zeros when it has none."""
    value = node.inputs[8] if len(node.inputs) > 8 else None
    out_c = node.inputs[3].type.shape[0]  # the weights are [O, C/group, KH, KW]
    return (np.zeros(out_c, np.int64) if value is None
            else np.asarray(value.data, np.int64))


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
    return k.b.select(k.b.fcmp_ordered("<", x, zero), zero, x)  # NaN stays NaN


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


def bias_or_zero(k: Kernel, slot: int, index: ir.Value, ty: ir.Type) -> ir.Value:
    """Input `slot` (the bias) at `index`, or zero when the node has none."""
    node = k.node
    if len(node.inputs) > slot and node.inputs[slot] is not None:
        return k.load(k.args[slot], index)
    return ir.Constant(ty, 0.0)


def add_residual(k: Kernel, value: ir.Value, index: ir.Value) -> ir.Value:
    """Add residual[index] to `value` for a fused residual Add (same shape as the output)."""
    if k.residual is None:
        return value
    return k.b.fadd(value, k.load(k.residual, index))
