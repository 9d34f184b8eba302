"""Glow's growing histograms, accumulated by compiled code straight from the network's buffers.

Profiling feeds every tensor of every sample into its histogram. In numpy that costs five
passes over the values (subtract, scale, convert, clip, count) plus a copy out of the network's
buffers; here one compiled function per call finds the tensor's min, max and any NaN or
infinity (eight lanes at a time), and when the values fit the current range bins them in one
pass into four interleaved copies of the counts (so equal bins in a row do not wait on each
other's stores). Growing the range is rare: the function then returns without binning, and the
caller grows the merged counts with `Histogram`'s own rule and calls again. The arithmetic is
`Histogram.add`'s, operation for operation (float32 offset and scale, truncation, clamp), so
both give the same counts for the same batches.
"""

from __future__ import annotations

import ctypes
from functools import cache

import numpy as np
from llvmlite import ir

from compiler.codegen.inprocess import LoadedObject
from compiler.codegen.llvm import emit_object, new_module
from compiler.codegen.targets import get_target
from compiler.errors import KilnError
from compiler.quant.histogram import Histogram

COPIES = 4  # interleaved count arrays
SMALL_BINS = 12  # up to this many bins, counted in vector registers
LANES = 8  # floats per min/max step
BINNED, GROW, NOT_FINITE = 0, 1, 2  # what a call did
ROW = 5  # fields of a kiln_bin_rows row

_F32, _F64, _I64, _I32 = ir.FloatType(), ir.DoubleType(), ir.IntType(64), ir.IntType(32)


class _Builder:
    """An IR builder with counted loops (a phi index from 0, step `step`, while index < end)."""

    def __init__(self, fn: ir.Function):
        self.fn = fn
        self.b = ir.IRBuilder(fn.append_basic_block("entry"))

    def loop(self, start: ir.Value, end: ir.Value, step: int, carried: list[ir.Value], body):
        """Emit `body(i, carried) -> carried` for i = start, start + step, ... (i + step <= end).

        Returns the final carried values and the first index not visited.
        """
        b = self.b
        before = b.block
        head = self.fn.append_basic_block("head")
        work = self.fn.append_basic_block("body")
        done = self.fn.append_basic_block("done")
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(_I64)
        i.add_incoming(start, before)
        phis = []
        for value in carried:
            phi = b.phi(value.type)
            phi.add_incoming(value, before)
            phis.append(phi)
        b.cbranch(b.icmp_signed("<=", b.add(i, _I64(step)), end), work, done)
        b.position_at_end(work)
        new = body(i, phis)
        nxt = b.add(i, _I64(step))
        i.add_incoming(nxt, b.block)
        for phi, value in zip(phis, new):
            phi.add_incoming(value, b.block)
        b.branch(head)
        b.position_at_end(done)
        return phis, i


def _min_max(k: _Builder, x, n) -> tuple[ir.Value, ir.Value, ir.Value]:
    """(min, max, some value is NaN) of x[0:n], eight lanes at a time, then a scalar tail."""
    b = k.b
    vec = ir.VectorType(_F32, LANES)
    bits = ir.VectorType(ir.IntType(1), LANES)
    vptr = b.bitcast(x, vec.as_pointer())

    def wide(i, acc):
        lo, hi, nan = acc
        v = b.load(b.gep(vptr, [b.sdiv(i, _I64(LANES))]), align=4)
        return [b.select(b.fcmp_ordered("<", v, lo), v, lo),
                b.select(b.fcmp_ordered(">", v, hi), v, hi),
                b.or_(nan, b.fcmp_unordered("uno", v, v))]

    (lo, hi, nan), i = k.loop(_I64(0), n, LANES, [
        ir.Constant(vec, [float("inf")] * LANES), ir.Constant(vec, [float("-inf")] * LANES),
        ir.Constant(bits, [0] * LANES)], wide)
    low, high = b.extract_element(lo, _I32(0)), b.extract_element(hi, _I32(0))
    bad = b.extract_element(nan, _I32(0))
    for lane in range(1, LANES):
        a, c = b.extract_element(lo, _I32(lane)), b.extract_element(hi, _I32(lane))
        low = b.select(b.fcmp_ordered("<", a, low), a, low)
        high = b.select(b.fcmp_ordered(">", c, high), c, high)
        bad = b.or_(bad, b.extract_element(nan, _I32(lane)))

    def tail(j, acc):
        lo1, hi1, nan1 = acc
        v = b.load(b.gep(x, [j]))
        return [b.select(b.fcmp_ordered("<", v, lo1), v, lo1),
                b.select(b.fcmp_ordered(">", v, hi1), v, hi1),
                b.or_(nan1, b.fcmp_unordered("uno", v, v))]

    (low, high, bad), _ = k.loop(i, n, 1, [low, high, bad], tail)
    return low, high, bad


def _module(bin_count: int) -> str:
    """The IR of `int kiln_bin(x, n, range[2], counts[COPIES * bins], seen[2])`.

    For `bin_count` bins; it returns BINNED, GROW or NOT_FINITE.
    """
    target = get_target("host")
    module = new_module("kiln_binning", target)
    fnty = ir.FunctionType(_I32, [_F32.as_pointer(), _I64, _F64.as_pointer(),
                                  _I64.as_pointer(), _F32.as_pointer()])
    fn = ir.Function(module, fnty, "kiln_bin")
    fn.attributes.add("noinline")  # compiled once, called by kiln_bin_rows too
    x, n, span, counts, seen = fn.args
    bins = _I64(bin_count)
    k = _Builder(fn)
    b = k.b
    low, high, nan = _min_max(k, x, n)
    b.store(low, b.gep(seen, [_I64(0)]))
    b.store(high, b.gep(seen, [_I64(1)]))
    inf = ir.Constant(_F32, float("inf"))
    not_finite = b.or_(nan, b.or_(b.fcmp_ordered("==", low, b.fsub(ir.Constant(_F32, 0.0), inf)),
                                  b.fcmp_ordered("==", high, inf)))
    bad = fn.append_basic_block("not_finite")
    finite = fn.append_basic_block("finite")
    b.cbranch(b.and_(not_finite, b.icmp_signed(">", n, _I64(0))), bad, finite)
    b.position_at_end(bad)
    b.ret(_I32(NOT_FINITE))
    b.position_at_end(finite)
    r_low, r_high = b.load(b.gep(span, [_I64(0)])), b.load(b.gep(span, [_I64(1)]))
    outside = b.or_(b.fcmp_ordered("<", b.fpext(low, _F64), r_low),
                    b.fcmp_ordered(">", b.fpext(high, _F64), r_high))
    empty = b.fcmp_ordered(">", r_low, r_high)
    grow = fn.append_basic_block("grow")
    fits = fn.append_basic_block("fits")
    b.cbranch(b.and_(b.or_(outside, empty), b.icmp_signed(">", n, _I64(0))), grow, fits)
    b.position_at_end(grow)
    b.ret(_I32(GROW))
    b.position_at_end(fits)
    width = b.fdiv(b.fsub(r_high, r_low), b.sitofp(bins, _F64))
    flat = fn.append_basic_block("flat")
    spread = fn.append_basic_block("spread")
    b.cbranch(b.fcmp_ordered("==", width, ir.Constant(_F64, 0.0)), flat, spread)
    b.position_at_end(flat)
    b.store(b.add(b.load(counts), n), counts)
    b.ret(_I32(BINNED))
    b.position_at_end(spread)
    offset = b.fptrunc(r_low, _F32)
    inverse = b.fptrunc(b.fdiv(ir.Constant(_F64, 1.0), width), _F32)
    last = b.sub(bins, _I64(1))

    def slot(index, copy: int):
        """Increment counts[copy * bins + index]."""
        place = b.gep(counts, [b.add(index, b.mul(bins, _I64(copy)))])
        b.store(b.add(b.load(place), _I64(1)), place)

    def clamp(index, zero, top):
        index = b.select(b.icmp_signed("<", index, zero), zero, index)
        return b.select(b.icmp_signed(">", index, top), top, index)

    # Eight indices at a time in vector registers (the float32 offset and scale, truncation
    # and clamp of `Histogram.add`), then eight increments spread over the copies.
    vec = ir.VectorType(_F32, LANES)
    ivec = ir.VectorType(_I32, LANES)
    vptr = b.bitcast(x, vec.as_pointer())
    v_offset = b.insert_element(ir.Constant(vec, ir.Undefined), offset, _I32(0))
    v_offset = b.shuffle_vector(v_offset, v_offset, ir.Constant(ivec, [0] * LANES))
    v_inverse = b.insert_element(ir.Constant(vec, ir.Undefined), inverse, _I32(0))
    v_inverse = b.shuffle_vector(v_inverse, v_inverse, ir.Constant(ivec, [0] * LANES))
    last32 = b.trunc(last, _I32)
    v_last = b.insert_element(ir.Constant(ivec, ir.Undefined), last32, _I32(0))
    v_last = b.shuffle_vector(v_last, v_last, ir.Constant(ivec, [0] * LANES))

    def indices(i):
        v = b.load(b.gep(vptr, [b.sdiv(i, _I64(LANES))]), align=4)
        return clamp(b.fptosi(b.fmul(b.fsub(v, v_offset), v_inverse), ivec),
                     ir.Constant(ivec, [0] * LANES), v_last)

    if bin_count <= SMALL_BINS:
        # Few bins: one vector of lane counters per bin, bumped by comparing indices with it
        # (no memory traffic), added into the counts once at the end.
        def compare(i, acc):
            index = indices(i)
            return [b.sub(a, b.sext(b.icmp_signed("==", index, ir.Constant(ivec, [j] * LANES)),
                                    ivec)) for j, a in enumerate(acc)]

        acc, i = k.loop(_I64(0), n, LANES, [ir.Constant(ivec, [0] * LANES)] * bin_count,
                        compare)
        # LLVM's reduction intrinsic: the same sum as adding the lanes one by one, which
        # LLVM would spend a fifth of this module's compile time recognizing as one.
        reduce = ir.Function(module, ir.FunctionType(_I32, [ivec]),
                             f"llvm.vector.reduce.add.v{LANES}i32")
        for j, lanes in enumerate(acc):
            total = b.call(reduce, [lanes])
            slot_j = b.gep(counts, [_I64(j)])
            b.store(b.add(b.load(slot_j), b.zext(total, _I64)), slot_j)
    else:
        def scatter(i, _):
            index = indices(i)
            for lane in range(LANES):
                slot(b.sext(b.extract_element(index, _I32(lane)), _I64), lane % COPIES)
            return []

        _, i = k.loop(_I64(0), n, LANES, [], scatter)

    def tail(j, _):
        value = b.load(b.gep(x, [j]))
        index = clamp(b.fptosi(b.fmul(b.fsub(value, offset), inverse), _I64), _I64(0), last)
        slot(index, 0)
        return []

    k.loop(i, n, 1, [], tail)
    b.ret(_I32(BINNED))
    _add_batched(module, fn)
    return str(module)


def _add_batched(module: ir.Module, one: ir.Function) -> None:
    """`i64 kiln_bin_rows(i64 *rows, i64 start, i64 count)`: kiln_bin on rows[start:count].

    Each row is (x, n, range, counts, seen); it stops at the first row not BINNED and returns
    4 * row + status, or 4 * count when every row was binned. One call per sample instead of
    one per tensor: a ctypes call costs more than binning a small tensor.
    """
    fn = ir.Function(module, ir.FunctionType(_I64, [_I64.as_pointer(), _I64, _I64]),
                     "kiln_bin_rows")
    rows, start, count = fn.args
    k = _Builder(fn)
    b = k.b
    args_types = [a.type for a in one.args]

    def row(i, _):
        base = b.mul(i, _I64(ROW))
        fields = [b.load(b.gep(rows, [b.add(base, _I64(f))])) for f in range(ROW)]
        args = [b.inttoptr(v, t) if isinstance(t, ir.PointerType) else v
                for v, t in zip(fields, args_types)]
        status = b.call(one, args)
        carry_on, stop = fn.append_basic_block("binned"), fn.append_basic_block("stop")
        b.cbranch(b.icmp_signed("==", status, _I32(BINNED)), carry_on, stop)
        b.position_at_end(stop)
        b.ret(b.add(b.mul(i, _I64(4)), b.zext(status, _I64)))
        b.position_at_end(carry_on)
        return []

    k.loop(start, count, 1, [], row)
    b.ret(b.mul(count, _I64(4)))


@cache
def _compiled(bins: int):
    """`kiln_bin` and `kiln_bin_rows` for `bins` bins, linked into this process.

    Through the object cache and LLVM's in-process linker, like every host network: compiled
    once per machine and LLVM, loaded in a third less time than MCJIT's engine took.
    """
    obj = emit_object(_module(bins), get_target("host"))
    code = LoadedObject(obj, "the histogram code", ["kiln_bin", "kiln_bin_rows"])
    fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p,
                          ctypes.c_void_p, ctypes.c_void_p)(code.address("kiln_bin"))
    rows = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)(
        code.address("kiln_bin_rows"))
    return code, fn, rows


class CompiledHistogram:
    """One tensor's growing histogram, fed from float32 buffers by compiled code."""

    def __init__(self, name: str, bins: int):
        self.name = name
        self.bins = bins
        self.span = np.array([np.inf, -np.inf])  # empty: the first batch sets the range
        self.counts = np.zeros(COPIES * bins, np.int64)
        self.seen = np.zeros(2, np.float32)
        self._fn = _compiled(bins)[1]
        self._args = (self.span.ctypes.data, self.counts.ctypes.data, self.seen.ctypes.data)

    def add_buffer(self, address: int, size: int) -> None:
        """Take `size` float32 values at `address` (a buffer that stays alive meanwhile)."""
        status = self._fn(address, size, *self._args)
        if status == GROW:
            self._grow()
            status = self._fn(address, size, *self._args)
        if status == NOT_FINITE:
            raise KilnError(f"tensor {self.name!r} holds NaN or infinity; it cannot be profiled")

    def add(self, values: np.ndarray) -> None:
        """Take an array of values (float32, contiguous copy when needed)."""
        values = np.ascontiguousarray(values, np.float32)
        self.add_buffer(values.ctypes.data, values.size)

    def _grow(self) -> None:
        low, high = float(self.seen[0]), float(self.seen[1])
        merged = self.histogram()
        if merged.low > merged.high:
            merged.low, merged.high = low, high
        else:
            merged.grow(min(low, merged.low), max(high, merged.high))
        self.span[:] = merged.low, merged.high
        self.counts[:] = 0
        self.counts[:self.bins] = merged.counts

    def histogram(self) -> Histogram:
        """The merged counts and range as a `Histogram`."""
        return Histogram(float(self.span[0]), float(self.span[1]),
                         self.counts.reshape(COPIES, self.bins).sum(axis=0))


class BufferHistograms:
    """Histograms fed together from fixed buffers (a network's outputs): one call per batch."""

    def __init__(self, buffers: list[tuple[CompiledHistogram, int, int]]):
        """`buffers`: (histogram, address, float count); one bin count for all."""
        self.histograms = [h for h, _, _ in buffers]
        if len({h.bins for h in self.histograms}) > 1:
            raise ValueError("the histograms differ in their number of bins")
        self._rows = np.array([[address, size, *h._args] for h, address, size in buffers],
                              np.int64).reshape(-1, ROW)
        self._fn = _compiled(self.histograms[0].bins)[2] if buffers else None

    def add(self) -> None:
        """Take each buffer's current values into its histogram."""
        start, count = 0, len(self.histograms)
        while start < count:
            row, status = divmod(self._fn(self._rows.ctypes.data, start, count), 4)
            if status == GROW:
                self.histograms[row]._grow()
                start = row  # the same buffer again, into the grown range
            elif status == NOT_FINITE:
                raise KilnError(f"tensor {self.histograms[row].name!r} holds NaN or infinity; "
                                "it cannot be profiled")
            else:
                start = count
