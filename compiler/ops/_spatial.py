"""Helpers of the spatial operators: NCHW/NHWC layouts and sliding-window geometry."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from compiler.ops.registry import Attr, fail

AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")

# The attributes every windowed operator (Conv, ConvTranspose, pools) shares.
WINDOW_ATTRS = {
    "auto_pad": Attr("string", "NOTSET", "NOTSET (explicit pads), SAME_UPPER, SAME_LOWER or VALID"),
    "dilations": Attr("ints", None, "spacing between kernel taps per spatial axis (default 1)"),
    "pads": Attr("ints", None, "begin pads of every spatial axis, then end pads (default 0)"),
    "strides": Attr("ints", None, "stride per spatial axis (default 1)"),
}


# -- layouts ------------------------------------------------------------------------------------

def layout_of(node) -> str:
    """The node's layout attribute, checked."""
    layout = node.attrs.get("layout", "NCHW")
    if layout not in ("NCHW", "NHWC"):
        fail(f"layout {layout!r} is not NCHW or NHWC")
    return layout


def nchw_shape(shape: tuple[int, ...], layout: str) -> tuple[int, ...]:
    """The NCHW shape of an activation stored in `layout`."""
    if layout == "NHWC" and len(shape) >= 2:
        return (shape[0], shape[-1], *shape[1:-1])
    return tuple(shape)


def layout_shape(shape: tuple[int, ...], layout: str) -> tuple[int, ...]:
    """An NCHW shape stored in `layout` (the inverse of nchw_shape)."""
    if layout == "NHWC" and len(shape) >= 2:
        return (shape[0], *shape[2:], shape[1])
    return tuple(shape)


def to_nchw(x: np.ndarray, layout: str) -> np.ndarray:
    """An activation array viewed as NCHW."""
    return np.moveaxis(x, -1, 1) if layout == "NHWC" else x


def from_nchw(y: np.ndarray, layout: str) -> np.ndarray:
    """An NCHW result stored in `layout`."""
    return np.ascontiguousarray(np.moveaxis(y, 1, -1)) if layout == "NHWC" else y


def activation_shape(node, x_type, what: str = "input") -> tuple[int, ...]:
    """The NCHW shape of the node's image input (a batch, channels and spatial axes)."""
    if x_type.rank < 3:
        fail(f"{what} must have rank 3 or more (N, C, spatial...), got shape {list(x_type.shape)}")
    return nchw_shape(x_type.shape, layout_of(node))


# -- windows ------------------------------------------------------------------------------------

# Window parameters become 32-bit index arithmetic in the generated kernels.
INDEX_LIMIT = 2**31

def per_axis(node, name: str, rank: int, default: int, minimum: int = 1) -> tuple[int, ...]:
    """An ints attribute with one value per spatial axis, `default` when absent."""
    value = node.attrs.get(name)
    if value is None:
        return (default,) * rank
    if len(value) != rank:
        fail(f"{name} has {len(value)} values {list(value)}, the input has {rank} spatial axes")
    if any(v < minimum for v in value):
        fail(f"{name} {list(value)} must be at least {minimum}")
    return tuple(int(v) for v in value)


@dataclass(frozen=True)
class Window:
    """Where a kernel lands: output position o reads input o*stride - begin + tap*dilation."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    begin: tuple[int, ...]
    end: tuple[int, ...]
    out: tuple[int, ...]

    @property
    def extent(self) -> tuple[int, ...]:
        """Span of the dilated kernel per axis."""
        return tuple((k - 1) * d + 1 for k, d in zip(self.kernel, self.dilations))


def window(node, in_spatial, kernel, ceil_mode: bool = False) -> Window:
    """The window geometry of a Conv or pooling node over spatial input dims `in_spatial`."""
    rank = len(in_spatial)
    strides = per_axis(node, "strides", rank, 1)
    dilations = per_axis(node, "dilations", rank, 1)
    extent = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    auto_pad = node.attrs.get("auto_pad", "NOTSET")
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = [-(-n // s) for n, s in zip(in_spatial, strides)]
        total = [max(0, (o - 1) * s + e - n)
                 for o, s, e, n in zip(out, strides, extent, in_spatial)]
        small = [t // 2 for t in total]
        big = [t - h for t, h in zip(total, small)]
        begin, end = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
    elif auto_pad in ("NOTSET", "VALID"):
        begin, end = [0] * rank, [0] * rank
        if auto_pad == "NOTSET":
            begin, end = explicit_pads(node, rank)
        out = [_out_size(n + b + e, x, s, ceil_mode, n + b)
               for n, b, e, x, s in zip(in_spatial, begin, end, extent, strides)]
    else:
        fail(f"auto_pad {auto_pad!r} is not one of {', '.join(AUTO_PADS)}")
    if any(o < 1 for o in out):
        fail(f"the kernel (extent {extent}) is larger than the padded input {list(in_spatial)}")
    pads = list(begin) + list(end)
    for name, values in (("strides", strides), ("dilations", dilations), ("pads", pads),
                         ("kernel extent", extent)):
        if any(v >= INDEX_LIMIT for v in values):
            fail(f"{name} {list(values)} reach 2**31: indices are 32-bit in generated code")
    return Window(tuple(kernel), strides, dilations, tuple(begin), tuple(end), tuple(out))


def explicit_pads(node, rank: int) -> tuple[list[int], list[int]]:
    """The `pads` attribute split into begin and end pads, checked."""
    pads = node.attrs.get("pads")
    if pads is None:
        return [0] * rank, [0] * rank
    if len(pads) != 2 * rank:
        fail(f"pads has {len(pads)} values {list(pads)}, expected {2 * rank} (begin and end of "
             f"{rank} spatial axes)")
    if any(p < 0 for p in pads):
        fail(f"pads {list(pads)} must not be negative")
    return list(pads[:rank]), list(pads[rank:])


def _out_size(padded: int, extent: int, stride: int, ceil_mode: bool, last_start: int) -> int:
    span = padded - extent
    if span < 0:
        return 0
    if not ceil_mode:
        return span // stride + 1
    out = -(-span // stride) + 1
    # The last window must start inside the input or its begin padding.
    return out - 1 if (out - 1) * stride >= last_start else out


def padded_input(x: np.ndarray, win: Window, fill) -> np.ndarray:
    """NC... input padded with `fill` (or cropped) to exactly the span the windows read."""
    pads = [(0, 0), (0, 0)]
    crops = [slice(None), slice(None)]
    for n, b, o, s, e in zip(x.shape[2:], win.begin, win.out, win.strides, win.extent):
        tail = (o - 1) * s + e - n - b
        pads.append((b, max(tail, 0)))
        crops.append(slice(0, b + n + tail))
    if any(p != (0, 0) for p in pads):
        x = np.pad(x, pads, constant_values=fill)
    return x[tuple(crops)]


def taps(padded: np.ndarray, win: Window):
    """(tap, view) per kernel tap: the strided view of what that tap reads at every output."""
    for tap in itertools.product(*[range(k) for k in win.kernel]):
        index = tuple(slice(t * d, t * d + (o - 1) * s + 1, s)
                      for t, d, o, s in zip(tap, win.dilations, win.out, win.strides))
        yield tap, padded[(slice(None), slice(None), *index)]


def tap_positions(win: Window, axis: int, tap: int) -> np.ndarray:
    """Input coordinate read by `tap` along `axis`, per output position (may be out of range)."""
    return (np.arange(win.out[axis]) * win.strides[axis] - win.begin[axis]
            + tap * win.dilations[axis])
