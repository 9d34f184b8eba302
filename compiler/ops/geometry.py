"""The 2-D window geometry of an NHWC node, as code generation and memory planning read it."""

from __future__ import annotations

from compiler.errors import KilnError
from compiler.ir.graph import Node


def spatial(node: Node) -> tuple[list[int], list[int], list[int], list[int]]:
    """Kernel, strides, dilations and pads (top, left, bottom, right) of a 2-D NHWC node."""
    attrs = node.attrs
    if attrs.get("layout") != "NHWC" or len(node.inputs[0].type.shape) != 4:
        raise KilnError(f"cannot generate {node.op} {node.name}: only 2-D NHWC is supported")
    kernel = attrs.get("kernel_shape")
    if not kernel:  # a convolution's weights say it (QLinearConv's are its fourth input)
        kernel = node.inputs[3 if node.op == "QLinearConv" else 1].type.shape[2:]
    kernel = list(kernel)
    strides = list(attrs.get("strides") or [1, 1])
    dilations = list(attrs.get("dilations") or [1, 1])
    pads = list(attrs.get("pads") or [0, 0, 0, 0])
    auto_pad = attrs.get("auto_pad", "NOTSET")
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        # ONNX: pad so that out = ceil(in / stride); the odd pixel goes at the end for UPPER.
        sizes, outs = node.inputs[0].type.shape[1:3], node.output.type.shape[1:3]
        for d in range(2):
            total = max(0, (outs[d] - 1) * strides[d] + (kernel[d] - 1) * dilations[d] + 1
                        - sizes[d])
            small = total // 2
            begin = small if auto_pad == "SAME_UPPER" else total - small
            pads[d], pads[d + 2] = begin, total - begin
    elif auto_pad not in ("NOTSET", "VALID"):
        raise KilnError(f"cannot generate {node.op} {node.name}: auto_pad {auto_pad}")
    elif auto_pad == "VALID":
        pads = [0, 0, 0, 0]
    return kernel, strides, dilations, pads


def rows_read(node: Node) -> list[tuple[int, int]] | None:
    """Per output row of a one-image NHWC window node, the first and last input row it reads.

    A row whose window lies wholly in the padding reads none: (input rows, -1). None when the
    node is not a one-image NHWC window.
    """
    x, y = node.inputs[0].type, node.output.type
    if node.attrs.get("layout") != "NHWC" or len(x.shape) != 4 or x.shape[0] != 1:
        return None
    (kh, _), (sh, _), (dh, _), (pt, _, _, _) = spatial(node)
    height = x.shape[1]
    needed = []
    for r in range(y.shape[1]):
        rows = [i for i in (r * sh - pt + t * dh for t in range(kh)) if 0 <= i < height]
        needed.append((rows[0], rows[-1]) if rows else (height, -1))
    return needed


def row_preserving(node: Node) -> int | None:
    """The kernel height of a one-image NHWC window node that keeps its rows one to one.

    Stride and dilation 1 down the rows, the same padding above and below, as many output rows
    as input rows: output row r reads input rows r - p .. r + p. None for any other node.
    """
    x, y = node.inputs[0].type, node.output.type
    if node.attrs.get("layout") != "NHWC" or len(x.shape) != 4 or x.shape[0] != 1:
        return None
    (kh, _), (sh, _), (dh, _), (pt, _, pb, _) = spatial(node)
    if sh != 1 or dh != 1 or kh % 2 != 1 or pt != pb or pt != kh // 2 or y.shape[1] != x.shape[1]:
        return None
    return kh
