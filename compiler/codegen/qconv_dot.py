"""8-bit convolution as dot products over the input depth, for cores with int8 dot products.

With the weights arranged by output channel, tap and input channel, one output channel's filter
at one tap and one input pixel's channels are both contiguous, so the sum over C is a dot
product of two int8 vectors, which Helium (MVE) executes as one VMLADAV per 16 products. The
input zero point leaves the loop: the accumulators start from the bias minus x_zero_point times
the sum of the weights of the taps inside the image (a tap in the padding adds nothing, as
everywhere else). Which taps are inside depends only on the pixel's border class, (rows cut at
the top or bottom, columns cut at either side), so that start is a small compile-time table per
class and channel. A block of output channels shares each input load, and their accumulators are
requantized as one vector. Used for symmetric int8 weights (zero point 0) and a depth that is a
multiple of 8; other convolutions take `qconv`'s kernels.
"""

from __future__ import annotations

import numpy as np

from compiler.codegen import requant
from compiler.codegen.int8dot import (
    BLOCK,
    DEPTH_STEP,
    dots,
    dsp_pairs,
    store_block,
)
from compiler.codegen.kernel import I32, Kernel, constant_input
from compiler.codegen.targets import Target
from compiler.codegen.window import spatial, window
from compiler.ir.graph import Node

_WEIGHTS, _STARTS, _ROW_CLASS, _COLUMN_CLASS = 3, 13, 14, 15


def _first(array, default=0):
    return default if array is None else np.asarray(array).reshape(-1)[0]


def dot_eligible(node: Node, target: Target | None) -> bool:
    """Whether this convolution runs as depth dot products on `target`."""
    if target is None or target.int8_dot not in DEPTH_STEP or int(node.attrs.get("group",
                                                                                    1)) != 1:
        return False
    if node.inputs[0].type.dtype != "int8" or node.inputs[3].type.dtype != "int8":
        return False
    zw = node.inputs[5]
    if zw is not None and np.asarray(zw.data).any():
        return False
    channels, out_c = node.inputs[0].type.shape[3], node.output.type.shape[3]
    return channels % DEPTH_STEP[target.int8_dot] == 0 and out_c % BLOCK == 0


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




def qconv_dot_weights(node: Node, target: Target | None = None) -> dict[int, np.ndarray]:
    """The arranged weights, the accumulator starts per border class, the rule's data.

    Weights are [O/B, KH, KW, B, C]: a block's rows of one tap side by side, so one pointer
    with constant offsets reads them; on DSP cores as widened pairs (`dsp_pairs`).
    """
    w = np.asarray(node.inputs[3].data, np.int64)
    out_c, _, kh_n, kw_n = w.shape
    zx = int(_first(node.inputs[2].data))
    bias_value = node.inputs[8] if len(node.inputs) > 8 else None
    bias = np.zeros(out_c, np.int64) if bias_value is None else np.asarray(bias_value.data,
                                                                            np.int64)
    _, strides, dilations, pads = spatial(node)
    _, height, width, _ = node.inputs[0].type.shape
    _, out_h, out_w, _ = node.output.type.shape
    rows, row_masks = _classes(out_h, strides[0], dilations[0], pads[0], kh_n, height)
    columns, column_masks = _classes(out_w, strides[1], dilations[1], pads[1], kw_n, width)
    tap_sums = w.sum(axis=1)  # [O, KH, KW]
    starts = np.array([[bias - zx * tap_sums[:, rm][:, :, cm].sum(axis=(1, 2))
                        for cm in column_masks] for rm in row_masks])
    blocked = w.reshape(out_c // BLOCK, BLOCK, -1, kh_n, kw_n).transpose(0, 3, 4, 1, 2)
    arrays = {_WEIGHTS: np.ascontiguousarray(blocked).astype(np.int8),
              _STARTS: starts.reshape(-1).astype(np.int32), _ROW_CLASS: rows,
              _COLUMN_CLASS: columns}
    arrays.update(requant.channel_arrays(node, np.float32(_first(node.inputs[1].data)),
                                         node.inputs[4].data,
                                         np.float32(_first(node.inputs[6].data)), out_c))
    if target is not None and target.int8_dot == "dsp":
        arrays[_WEIGHTS] = dsp_pairs(arrays[_WEIGHTS])
    return arrays










def _border_classes(node: Node) -> int:
    """How many column border classes the convolution's output has."""
    _, strides, dilations, pads = spatial(node)
    out_w, width = node.output.type.shape[2], node.inputs[0].type.shape[2]
    return len(_classes(out_w, strides[1], dilations[1], pads[1], node.inputs[3].type.shape[3],
                        width)[1])


def emit_qconv_dot(k: Kernel) -> None:
    """Per output pixel and block of output channels: the taps' dot products, requantized."""
    node, b = k.node, k.b
    batch, height, width, channels = node.inputs[0].type.shape
    _, out_h, out_w, out_c = node.output.type.shape
    kw_n = node.inputs[3].type.shape[3]
    taps = node.inputs[3].type.shape[2] * kw_n
    column_classes = _border_classes(node)
    zp = int(_first(constant_input(k, 7, "output zero point")))
    accs = [k.alloca(I32) for _ in range(BLOCK)]
    with k.loop(batch) as n, k.loop(out_h) as oh, k.loop(out_w) as ow:
        border = k.index((k.load(k.args[_ROW_CLASS], oh), column_classes * out_c),
                         (k.load(k.args[_COLUMN_CLASS], ow), out_c))
        pixel = k.index((n, out_h * out_w * out_c), (oh, out_w * out_c), (ow, out_c))
        with k.loop(out_c // BLOCK) as ob:
            oc0 = k.index((ob, BLOCK))
            for j, slot in enumerate(accs):
                b.store(k.load(k.args[_STARTS], b.add(border, b.add(oc0, I32(j)))), slot)
            with window(k, node, oh, ow) as (ih, iw, kh, kw):
                x_base = k.index((n, height * width * channels), (ih, width * channels),
                                 (iw, channels))
                tap = k.index((kh, kw_n), (kw, 1))
                w_bases = [k.index((ob, BLOCK * taps * channels), (tap, BLOCK * channels),
                                   base=j * channels) for j in range(BLOCK)]
                dots(k, x_base, w_bases, accs, channels)
            store_block(k, [b.load(slot) for slot in accs], oc0, b.add(pixel, oc0), zp)











