"""IntResizeBilinear (Kiln only): TFLite's 8-bit bilinear resize of NHWC images, in integers.

TFLite Micro resizes int8 images with 10-bit fixed-point positions: each output row and column
has a lower and an upper input index and a weight out of 1024, and an output is the four
neighbours' weighted sum (a 20-bit fixed-point number) rounded half away from zero. The
weights are integers, so the result is exact integer arithmetic, here and in the kernel.
"""

from __future__ import annotations

import numpy as np

from compiler.ops.registry import Attr, OpDef, fail, register

ONE = 1 << 10  # a position's fixed-point unit
HALF_OUTPUT = 1 << 19  # half of the output's unit, 2^20


def _c_div(a: np.ndarray, d: int) -> np.ndarray:
    """C's integer division (toward zero)."""
    return np.sign(a) * (np.abs(a) // d)


def bilinear_taps(in_size: int, out_size: int, align_corners: bool,
                  half_pixel_centers: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lower index, upper index, upper weight out of 1024) per output position.

    The weight of the upper neighbour is the position's distance past the lower index; it may
    fall outside 0..1024 at a border with half-pixel centres, as it does in TFLite.
    """
    if align_corners and out_size > 1:
        scale = (ONE * (in_size - 1) + (out_size - 1) // 2) // (out_size - 1)
    else:
        scale = (ONE * in_size + out_size // 2) // out_size
    position = np.arange(out_size, dtype=np.int64) * scale
    if half_pixel_centers:
        position = position + scale // 2 - (1 << 9)
    lower = np.maximum(_c_div(position, ONE), 0)
    upper = np.minimum(_c_div(position + ONE - 1, ONE), in_size - 1)
    return lower, upper, position - ONE * lower


def round_output(total: np.ndarray) -> np.ndarray:
    """A 20-bit fixed-point sum rounded half away from zero to an integer."""
    return _c_div(total + np.where(total > 0, HALF_OUTPUT, -HALF_OUTPUT), 1 << 20)


def _infer(node, ins, values):
    x = ins[0]
    if x.dtype not in ("int8", "uint8") or x.rank != 4:
        fail(f"IntResizeBilinear takes an 8-bit NHWC image, got {x}")
    size = list(node.attrs["size"])
    if len(size) != 2 or min(size) < 1:
        fail(f"IntResizeBilinear's size must be two positive numbers, got {size}")
    return [x.with_shape((x.shape[0], *size, x.shape[3]))]


def _reference(node, x):
    align, half = bool(node.attrs["align_corners"]), bool(node.attrs["half_pixel_centers"])
    oh, ow = node.attrs["size"]
    y0, y1, wy = bilinear_taps(x.shape[1], oh, align, half)
    x0, x1, wx = bilinear_taps(x.shape[2], ow, align, half)
    q = x.astype(np.int64)
    wy, wx = wy[None, :, None, None], wx[None, None, :, None]
    total = (q[:, y0][:, :, x0] * (ONE - wy) * (ONE - wx) + q[:, y1][:, :, x0] * wy * (ONE - wx)
             + q[:, y0][:, :, x1] * (ONE - wy) * wx + q[:, y1][:, :, x1] * wy * wx)
    return round_output(total).astype(x.dtype)


register(OpDef("IntResizeBilinear", "shape", _infer, _reference, onnx=False, attrs={
    "size": Attr("ints", doc="Kiln only: output height and width"),
    "align_corners": Attr("int", 0, "Kiln only: 1 maps corner pixels onto corner pixels"),
    "half_pixel_centers": Attr("int", 0, "Kiln only: 1 samples at pixel centres")},
    doc="Kiln only: TFLite's 8-bit bilinear resize of an NHWC image (10-bit fixed point)"))
