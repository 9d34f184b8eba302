"""Border classes of a convolution's output pixels, for folding the input zero point.

(x - x_zp) * w summed over the taps inside the image is sum(x * w) minus x_zp times the sum
of those taps' weights. Which taps are inside depends only on how the pixel's window is cut:
at the top or bottom for its row, at either side for its column. So the correction, joined
with the bias, is a small compile-time table of accumulator starts per (row class, column
class, output channel), and the kernel's inner loop multiplies stored values only.
"""

from __future__ import annotations

import numpy as np

from compiler.codegen.kernel import Kernel
from compiler.ir.graph import Node
from compiler.ops.geometry import spatial

# Weight slots of the starts and of each output row's and column's class.
STARTS, ROW_CLASS, COLUMN_CLASS = 13, 14, 15


def _classes(out: int, stride: int, dilation: int, pad: int, kernel: int, size: int
             ) -> tuple[np.ndarray, list[np.ndarray]]:
    """Per output row (or column): its class; per class: which kernel taps are inside."""
    masks, classes = [], []
    for o in range(out):
        inside = np.array([0 <= o * stride - pad + t * dilation < size for t in range(kernel)])
        match = next((i for i, m in enumerate(masks) if np.array_equal(m, inside)), None)
        if match is None:
            masks.append(inside)
            match = len(masks) - 1
        classes.append(match)
    return np.array(classes, np.int32), masks


def _geometry(node: Node):
    kernel, strides, dilations, pads = spatial(node)
    _, height, width, _ = node.inputs[0].type.shape
    _, out_h, out_w, _ = node.output.type.shape
    rows = _classes(out_h, strides[0], dilations[0], pads[0], kernel[0], height)
    columns = _classes(out_w, strides[1], dilations[1], pads[1], kernel[1], width)
    return rows, columns


def border_starts(node: Node, tap_sums: np.ndarray, bias: np.ndarray, x_zero_point: int
                  ) -> dict[int, np.ndarray]:
    """The starts table and the class of each output row and column, by weight slot.

    `tap_sums` is [O, KH, KW]: each output channel's weights summed over its inputs per tap.
    """
    (rows, row_masks), (columns, column_masks) = _geometry(node)
    starts = np.array([[bias - x_zero_point * tap_sums[:, rm][:, :, cm].sum(axis=(1, 2))
                        for cm in column_masks] for rm in row_masks])
    return {STARTS: starts.reshape(-1).astype(np.int32), ROW_CLASS: rows,
            COLUMN_CLASS: columns}


def border_offset(k: Kernel, oh, ow):
    """The index of pixel (oh, ow)'s row of starts (one start per output channel)."""
    column_masks = _geometry(k.node)[1][1]
    out_c = k.node.output.type.shape[3]
    return k.index((k.load(k.args[ROW_CLASS], oh), len(column_masks) * out_c),
                   (k.load(k.args[COLUMN_CLASS], ow), out_c))
