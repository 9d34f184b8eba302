"""The 2-D window of a convolution or pool: its geometry and the loops over its taps."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from llvmlite import ir

from compiler.codegen.kernel import I32, Kernel
from compiler.ir.graph import Node
from compiler.ops.geometry import spatial


@contextmanager
def window(k: Kernel, node: Node, oh: ir.Value, ow: ir.Value) -> Iterator[tuple]:
    """Loops over the (kh, kw) window of output (oh, ow), skipping taps that fall in padding.

    Yields (ih, iw, kh, kw); the bounds checks exist only where a tap can leave the input
    (padding, or a last window that ceil_mode lets run past the edge).
    """
    (kh_n, kw_n), (sh, sw), (dh, dw), (pt, pl, _, _) = spatial(node)
    _, height, width, _ = node.inputs[0].type.shape
    _, out_h, out_w, _ = node.output.type.shape
    check_h = pt > 0 or (out_h - 1) * sh - pt + (kh_n - 1) * dh >= height
    check_w = pl > 0 or (out_w - 1) * sw - pl + (kw_n - 1) * dw >= width
    with k.loop(kh_n) as kh:
        ih = k.index((oh, sh), (kh, dh), base=-pt)
        with inside(k, ih, height, check_h), k.loop(kw_n) as kw:
            iw = k.index((ow, sw), (kw, dw), base=-pl)
            with inside(k, iw, width, check_w):
                yield ih, iw, kh, kw


def each_tap(k: Kernel, node: Node, oh: ir.Value, ow: ir.Value,
             body: Callable[[ir.Value, ir.Value, ir.Value, ir.Value], None],
             unrolled: bool = False) -> None:
    """Emit `body(ih, iw, kh, kw)` for every tap of output (oh, ow) inside the input.

    When padding can cut windows, the body is emitted twice: once without any bounds check
    for the pixels whose whole window is inside (most of them), once with the checks for the
    border pixels; one test per pixel picks the copy. `unrolled`: the inside copy's taps are
    emitted one by one, not as loops LLVM may or may not unroll.
    """
    (kh_n, kw_n), (sh, sw), (dh, dw), (pt, pl, _, _) = spatial(node)
    _, height, width, _ = node.inputs[0].type.shape
    _, out_h, out_w, _ = node.output.type.shape
    # The schedule's `taps` and `border_taps` knobs (`compiler.codegen.schedules`).
    unrolled = {"unrolled": True, "loops": False}.get(k.knob("taps", "default"), unrolled)
    border = k.knob("border_taps", "loops") == "unrolled"
    # Output rows (columns) whose window lies inside: lo <= o < hi.
    lo_h, hi_h = -(-pt // sh), min(out_h, (height - 1 - (kh_n - 1) * dh + pt) // sh + 1)
    lo_w, hi_w = -(-pl // sw), min(out_w, (width - 1 - (kw_n - 1) * dw + pl) // sw + 1)
    if lo_h == 0 and hi_h >= out_h and lo_w == 0 and hi_w >= out_w:
        _taps(k, node, oh, ow, body, checked=False, unrolled=unrolled)
        return
    b = k.b
    if lo_h >= hi_h or lo_w >= hi_w:  # no pixel has its whole window inside
        _taps(k, node, oh, ow, body, checked=True, unrolled=border)
        return
    rows = b.icmp_unsigned("<", b.sub(oh, I32(lo_h)), I32(hi_h - lo_h))
    columns = b.icmp_unsigned("<", b.sub(ow, I32(lo_w)), I32(hi_w - lo_w))
    with b.if_else(b.and_(rows, columns)) as (interior, outside):
        with interior:
            _taps(k, node, oh, ow, body, checked=False, unrolled=unrolled)
        with outside:
            _taps(k, node, oh, ow, body, checked=True, unrolled=border)


def _taps(k: Kernel, node: Node, oh, ow, body, checked: bool, unrolled: bool = False
          ) -> None:
    (kh_n, kw_n), (sh, sw), (dh, dw), (pt, pl, _, _) = spatial(node)
    _, height, width, _ = node.inputs[0].type.shape
    if unrolled:  # every tap its own code; in a border copy each keeps its bounds tests
        for kh in map(I32, range(kh_n)):
            ih = k.index((oh, sh), (kh, dh), base=-pt)
            with inside(k, ih, height, checked):
                for kw in map(I32, range(kw_n)):
                    iw = k.index((ow, sw), (kw, dw), base=-pl)
                    with inside(k, iw, width, checked):
                        body(ih, iw, kh, kw)
        return
    with k.loop(kh_n) as kh:
        ih = k.index((oh, sh), (kh, dh), base=-pt)
        with inside(k, ih, height, checked), k.loop(kw_n) as kw:
            iw = k.index((ow, sw), (kw, dw), base=-pl)
            with inside(k, iw, width, checked):
                body(ih, iw, kh, kw)


@contextmanager
def inside(k: Kernel, i: ir.Value, n: int, needed: bool) -> Iterator[None]:
    """Run the body only when 0 <= i < n (one unsigned compare), if the check is needed."""
    if not needed:
        yield
        return
    with k.b.if_then(k.b.icmp_unsigned("<", i, I32(n))):
        yield


def tap_positions(k: Kernel, out, taps, win, sizes) -> tuple[ir.Value, list[ir.Value]]:
    """(whether every axis lands inside, the input position per axis) of one tap, any rank.

    Position = o * stride - begin + t * dilation (compiler/ops' Window); a position outside
    the input is replaced by 0, so a load there stays in bounds and is masked by `inside`.
    """
    b = k.b
    inside = ir.Constant(ir.IntType(1), 1)
    positions = []
    for o, t, s, d, first, size in zip(out, taps, win.strides, win.dilations, win.begin, sizes):
        i = b.add(b.sub(b.mul(o, I32(s)), I32(first)), b.mul(t, I32(d)))
        ok = b.and_(b.icmp_signed(">=", i, I32(0)), b.icmp_signed("<", i, I32(size)))
        inside = b.and_(inside, ok)
        positions.append(b.select(ok, i, I32(0)))
    return inside, positions


def landing_positions(k: Kernel, out, taps, strides, dilations, begins, counts
                      ) -> tuple[ir.Value, list[ir.Value]]:
    """The transposed window: per axis the source q with q s + t d - begin = o, if any.

    (whether such q exists inside [0, count) on every axis, q per axis, 0 where none): the
    gather form of a transposed convolution or Col2Im.
    """
    b = k.b
    reach = ir.Constant(ir.IntType(1), 1)
    positions = []
    for o, t, s, d, first, count in zip(out, taps, strides, dilations, begins, counts):
        shifted = b.sub(b.add(o, I32(first)), b.mul(t, I32(d)))
        q = b.sdiv(shifted, I32(s)) if s > 1 else shifted
        ok = b.and_(b.icmp_signed(">=", shifted, I32(0)), b.icmp_signed("<", q, I32(count)))
        if s > 1:
            ok = b.and_(ok, b.icmp_signed("==", b.srem(shifted, I32(s)), I32(0)))
        reach = b.and_(reach, ok)
        positions.append(b.select(ok, q, I32(0)))
    return reach, positions
