"""Register-tiled NHWC convolution: a tile of output pixels times a chunk of output channels.

The accumulators of a tile (`pixels` output pixels of one row, `chunk` output channels each)
live in vector registers for the whole reduction over the window and the input channels. Each
filter vector loaded is used once per pixel of the tile and each input value once per vector
of the chunk, so the inner loop does one load per fused multiply-add or better, instead of
the load/add/store round trip through memory of a pixel-at-a-time loop.

Only the pixels whose window can leave the input need bounds checks: the columns at the left
and right edges are emitted one pixel at a time with the checks, the interior in whole tiles
without. Rows are checked once per tile (every pixel of a tile shares the row).

Code compiled to run once over a data set (a profile) does not earn back the edges' code.
A compact kernel (`Kernel.compact`) has whole tiles along the row, each a loop over the
window's columns in which a pixel whose column falls outside the input reads a row of zeros
(one select per pixel and column, outside the channel loop), and at most four pixels a tile:
about a sixth of the code for LLVM to compile, a few percent slower to run.

Two forms use the tiles: ordinary convolutions (one group: the filter vector runs over output
channels and the input value is broadcast) and depthwise ones (one channel per group: the
input and the filter vectors both run over channels). Other grouped convolutions keep the
simple loops at the end of this module.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from compiler.codegen.kernel import (
    FAST,
    I32,
    MAX_VECTOR,
    Kernel,
    activate,
    add_residual,
    bias_or_zero,
    llvm_type,
    splat,
    vector_ptr,
)
from compiler.codegen.targets import Target
from compiler.codegen.window import inside, window
from compiler.ir.graph import Node
from compiler.ops.geometry import spatial

# Pixels per tile of a compact kernel: half the code of eight for LLVM, 1 % slower (ResNet-8 on
# an AVX-512 host).
COMPACT_PIXELS = 4


@dataclass(frozen=True)
class Tiling:
    """How one target wants its convolution tiles.

    Attributes:
        lanes: Floats per vector register (1 when the target has no SIMD).
        registers: Vector (or float) registers the accumulators, one filter chunk and one
            input value must fit in.
        max_pixels: Upper bound on the pixels of a tile (longer tiles stop paying).
    """

    lanes: int
    registers: int
    max_pixels: int = 8

    def shape(self, channels: int) -> tuple[int, int]:
        """(chunk, pixels): output channels per chunk and pixels per tile for `channels`."""
        # Two vectors of channels; a scalar FPU takes four channels (its registers are many).
        chunk = min(channels, 2 * self.lanes if self.lanes > 1 else 4)
        vectors = -(-chunk // self.lanes)
        pixels = max(1, (self.registers - vectors - 1) // vectors)
        return chunk, min(pixels, self.max_pixels)


def tiling_for(target: Target | None) -> Tiling:
    """The tile shape for `target` (an AVX2 host's when unknown)."""
    if target is None:
        return Tiling(8, 16)
    if target.vector_bits:
        return Tiling(target.vector_bits // 32, target.registers)
    return Tiling(1, target.registers, 4)


def tiled_form(node) -> str | None:
    """"dense" or "depthwise" when the tiled kernel handles `node`, else None."""
    channels = node.inputs[0].type.shape[3]
    out_c = node.output.type.shape[3]
    groups = int(node.attrs.get("group", 1))
    if groups == 1:
        return "dense"
    if groups == channels == out_c:
        return "depthwise"
    return None


def _const_vec(ty: ir.VectorType, value: float) -> ir.Constant:
    return ir.Constant(ty, [value] * ty.count)


class _Conv:
    """The shape facts of one convolution node and the tile emitter."""

    def __init__(self, k: Kernel, tiling: Tiling):
        node = k.node
        self.k, self.node = k, node
        self.batch, self.height, self.width, self.channels = node.inputs[0].type.shape
        _, self.out_h, self.out_w, self.out_c = node.output.type.shape
        (self.kh, self.kw), (self.sh, self.sw), (self.dh, self.dw), pads = spatial(node)
        self.pt, self.pl = pads[0], pads[1]
        if (self.kh, self.kw, self.sh, self.sw, *pads) == (1, 1, 1, 1, 0, 0, 0, 0):
            # A pointwise conv reads pixel i for output pixel i: in NHWC the image is one long
            # row, so tiles run across row ends and only the very last tile is partial.
            self.width *= self.height
            self.out_w *= self.out_h
            self.height = self.out_h = 1
        self.depthwise = tiled_form(node) == "depthwise"
        self.cg = 1 if self.depthwise else self.channels
        self.ty = llvm_type(node.output.type.dtype)
        self.chunk, self.pixels = tiling.shape(self.out_c)
        if k.compact:
            self.pixels = min(self.pixels, COMPACT_PIXELS)
        self.has_bias = len(node.inputs) > 2 and node.inputs[2] is not None

    # -- indices --------------------------------------------------------------------------

    def x_index(self, n, ih, iw, c) -> ir.Value:
        h, w, ch = self.height, self.width, self.channels
        return self.k.index((n, h * w * ch), (ih, w * ch), (iw, ch), (c, 1))

    def w_index(self, kh, kw, c, oc) -> ir.Value:
        """Flat filter index; for both forms `oc` is the contiguous one.

        The layout is [KH, KW, groups, I/group, O/group], so `oc` is the output channel, or
        the group for depthwise.
        """
        if self.depthwise:
            return self.k.index((kh, self.kw * self.out_c), (kw, self.out_c), (oc, 1))
        return self.k.index((kh, self.kw * self.cg * self.out_c), (kw, self.cg * self.out_c),
                            (c, self.out_c), (oc, 1))

    def y_index(self, n, oh, ow, oc) -> ir.Value:
        return self.k.index((n, self.out_h * self.out_w * self.out_c),
                            (oh, self.out_w * self.out_c), (ow, self.out_c), (oc, 1))

    # -- the column ranges --------------------------------------------------------------

    def interior(self) -> tuple[int, int]:
        """[lo, hi): output columns whose whole window lies inside the input columns."""
        lo = -(-self.pl // self.sw)
        last = self.width - 1 + self.pl - (self.kw - 1) * self.dw
        hi = last // self.sw + 1 if last >= 0 else 0
        lo, hi = min(lo, self.out_w), max(0, min(hi, self.out_w))
        return (lo, hi) if hi > lo else (self.out_w, self.out_w)

    def check_rows(self) -> bool:
        return (self.pt > 0 or (self.out_h - 1) * self.sh - self.pt + (self.kh - 1) * self.dh
                >= self.height)

    # -- emission -----------------------------------------------------------------------

    def emit(self) -> None:
        """Per row: a loop of checked-free tiles over the interior, fixed tiles at the edges.

        Tiles at a compile-time column unroll the window's columns in Python, so a tap that
        falls outside the input is simply not emitted for the pixels it misses: the edge
        pixels get full tiles (several independent accumulators) instead of a one-pixel loop.
        """
        k, p = self.k, self.pixels
        lo, hi = self.interior()
        if k.compact:
            self.emit_compact(guarded=(lo, hi) != (0, self.out_w))
            return
        first = min(self.out_w, p * -(-lo // p)) if lo else 0  # first interior tile start
        count = max(0, (hi - first) // p)
        with k.loop(self.batch) as n, k.loop(self.out_h) as oh:
            for start in range(0, first, p):
                self.tile(n, oh, start, min(p, first - start))
            if count:
                with k.loop(count) as t:
                    self.tile(n, oh, k.index((t, p), base=first), p)
            for start in range(first + count * p, self.out_w, p):
                self.tile(n, oh, start, min(p, self.out_w - start))

    def emit_compact(self, guarded: bool) -> None:
        """Per row: a loop of whole tiles and one shorter tile, the same code at any column.

        With `guarded`, columns outside the input read zeros (some window leaves the input).
        """
        k, p = self.k, self.pixels
        full, tail = divmod(self.out_w, p)
        with k.loop(self.batch) as n, k.loop(self.out_h) as oh:
            if full:
                with k.loop(full) as t:
                    self.tile(n, oh, k.index((t, p)), p, guarded)
            if tail:
                self.tile(n, oh, I32(full * p), tail, guarded)

    def tile(self, n, oh, ow0, pixels: int, guarded: bool = False) -> None:
        """`pixels` output pixels from column `ow0` of row `oh`, every output channel.

        `ow0` is an int when the tile sits at a fixed column. Channels go one chunk at a time.
        """
        full, tail = divmod(self.out_c, self.chunk)
        if full > 1:
            with self.k.loop(full) as j:
                self.chunk_tile(n, oh, ow0, pixels, self.k.index((j, self.chunk)), self.chunk,
                                guarded)
        elif full:
            self.chunk_tile(n, oh, ow0, pixels, I32(0), self.chunk, guarded)
        if tail:
            self.chunk_tile(n, oh, ow0, pixels, I32(full * self.chunk), tail, guarded)

    def chunk_tile(self, n, oh, ow0, pixels: int, oc0, width: int,
                   guarded: bool = False) -> None:
        """Accumulate `width` channels from `oc0` of `pixels` pixels in registers, then store.

        With `guarded`, the window's columns run in a loop and those outside read zeros.
        """
        k, b = self.k, self.k.b
        vec = ir.VectorType(self.ty, width)
        fixed = isinstance(ow0, int) and not guarded
        col0 = ow0 if isinstance(ow0, ir.Value) else I32(ow0)
        accs = [k.alloca(vec) for _ in range(pixels)]
        y_base = b.gep(k.outs[0], [self.y_index(n, oh, col0, oc0)], inbounds=True)
        init = _const_vec(vec, 0.0)
        if self.has_bias:
            init = b.load(vector_ptr(k, k.args[2], oc0, vec), align=4)
        for p, acc in enumerate(accs):
            value = init
            if k.residual is not None:
                r_base = b.gep(k.residual, [self.y_index(n, oh, col0, oc0)], inbounds=True)
                value = b.fadd(value, b.load(vector_ptr(k, r_base, I32(p * self.out_c), vec),
                                             align=4))
            b.store(value, acc)
        with k.loop(self.kh) as kh:
            ih = k.index((oh, self.sh), (kh, self.dh), base=-self.pt)
            with inside(k, ih, self.height, self.check_rows()):
                row = b.gep(k.args[0], [k.index((n, self.height * self.width * self.channels),
                                                (ih, self.width * self.channels))],
                            inbounds=True)
                if guarded:
                    self.guarded_taps(row, col0, pixels, kh, oc0, vec, accs)
                elif fixed:  # unroll the window's columns: taps outside the input vanish
                    for kw in range(self.kw):
                        cols = [(p, (ow0 + p) * self.sw - self.pl + kw * self.dw)
                                for p in range(pixels)]
                        cols = [(p, iw) for p, iw in cols if 0 <= iw < self.width]
                        if cols:
                            self.taps(row, [iw for _, iw in cols], kh, I32(kw), oc0, vec,
                                      [accs[p] for p, _ in cols], I32(0))
                else:
                    with k.loop(self.kw) as kw:
                        iw0 = k.index((col0, self.sw), (kw, self.dw), base=-self.pl)
                        self.taps(row, [p * self.sw for p in range(pixels)], kh, kw, oc0, vec,
                                  accs, iw0)
        for p, acc in enumerate(accs):
            y = activate(k, b.load(acc))
            b.store(y, vector_ptr(k, y_base, I32(p * self.out_c), vec), align=4)

    def taps(self, row, iws: list[int], kh, kw, oc0, vec, accs, iw0) -> None:
        """acc[p] += x[row, iw0 + iws[p], c] * w[kh, kw, c, oc0:] over the input channels.

        `iws` are compile-time column offsets, so each pixel's input is one base pointer plus
        a constant: the loads fold into the multiply-adds' addressing.
        """
        b, ch = self.k.b, self.channels
        base = b.gep(row, [b.mul(iw0, I32(ch), flags=["nsw"])], inbounds=True)
        self.pixel_taps([(base, iw * ch) for iw in iws], kh, kw, oc0, vec, accs)

    def guarded_taps(self, row, col0, pixels: int, kh, oc0, vec, accs) -> None:
        """The window's columns in a loop; a pixel whose column is outside reads zeros."""
        k, b = self.k, self.k.b
        zeros = self.zero_row()
        with k.loop(self.kw) as kw:
            starts = []
            for p in range(pixels):
                iw = k.index((col0, self.sw), (kw, self.dw), base=p * self.sw - self.pl)
                # No `inbounds`: the address of a column outside is computed, never used.
                at = b.gep(row, [b.mul(iw, I32(self.channels), flags=["nsw"])])
                starts.append((b.select(b.icmp_unsigned("<", iw, I32(self.width)), at, zeros),
                               0))
            self.pixel_taps(starts, kh, kw, oc0, vec, accs)

    def zero_row(self) -> ir.Value:
        """A constant row of zeros as long as one input pixel, one per kernel function."""
        fn = self.k.fn
        name = f"{fn.name}.zeros"
        if name not in fn.module.globals:
            gv = ir.GlobalVariable(fn.module, ir.ArrayType(self.ty, self.channels), name)
            gv.initializer = ir.Constant(gv.value_type, None)
            gv.global_constant = True
            gv.linkage = "internal"
        return self.k.b.bitcast(fn.module.globals[name], ir.PointerType(self.ty))

    def pixel_taps(self, starts: list[tuple[ir.Value, int]], kh, kw, oc0, vec, accs) -> None:
        """acc[p] += x[starts[p] + c] * w[kh, kw, c, oc0:] over the input channels.

        Each start is a pointer and a constant offset from it (kept apart so the loads fold
        it into their addressing).
        """
        k, b = self.k, self.k.b
        if self.depthwise:
            w = b.load(vector_ptr(k, k.args[1], self.w_index(kh, kw, None, oc0), vec), align=4)
            for (ptr, offset), acc in zip(starts, accs):
                x = b.load(vector_ptr(k, ptr, b.add(oc0, I32(offset)), vec), align=4)
                b.store(b.fadd(b.load(acc), b.fmul(x, w, flags=FAST), flags=FAST), acc)
            return
        taps = b.gep(k.args[1], [self.w_index(kh, kw, I32(0), oc0)], inbounds=True)
        with k.loop(self.cg) as c:
            w = b.load(vector_ptr(k, taps, b.mul(c, I32(self.out_c), flags=["nsw"]), vec),
                       align=4)
            for (ptr, offset), acc in zip(starts, accs):
                x = splat(k, b.load(b.gep(ptr, [b.add(c, I32(offset))], inbounds=True)), vec)
                b.store(b.fadd(b.load(acc), b.fmul(x, w, flags=FAST), flags=FAST), acc)


def emit_conv_tiled(k: Kernel, target: Target | None = None) -> None:
    """Emit `k.node` (dense or depthwise NHWC Conv) with register tiles shaped for `target`."""
    _Conv(k, tiling_for(target)).emit()


# -- the simple loops: grouped convolutions the tiles do not cover ----------------------------

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
    kw_n = spatial(k.node)[0][1]
    return k.index((kh, kw_n * channels * og), (kw, channels * og), (g, cg * og), (c, og))


def _conv_pixel_scalar(k: Kernel, n, oh, ow, pixel, groups: int, cg: int, og: int) -> None:
    """Accumulate one output pixel in memory; the loop over groups is the contiguous one."""
    node, b = k.node, k.b
    ty = llvm_type(node.output.type.dtype)
    with k.loop(groups * og) as oc:
        yi = b.add(pixel, oc)
        k.store(add_residual(k, bias_or_zero(k, 2, oc, ty), yi), k.outs[0], yi)
    with window(k, node, oh, ow) as (ih, iw, kh, kw), k.loop(groups) as g, k.loop(cg) as c:
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
        with window(k, node, oh, ow) as (ih, iw, kh, kw), k.loop(cg) as c:
            xv = k.load(k.args[0], _x_index(k, n, ih, iw, g, c, cg))
            splat = b.shuffle_vector(b.insert_element(ir.Constant(vec, None), xv, I32(0)),
                                     ir.Constant(vec, None), lanes)
            w = b.load(_vector_ptr(k, k.args[1], _tap_index(k, kh, kw, g, c, cg, og), vec),
                       align=4)
            b.store(b.fadd(b.load(acc), b.fmul(splat, w, flags=FAST), flags=FAST), acc)
        b.store(b.load(acc), _vector_ptr(k, k.outs[0], first, vec), align=4)
