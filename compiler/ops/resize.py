"""Resize: nearest, N-linear and cubic interpolation, with every coordinate mapping of ONNX.

Interpolation is separable, so each resized axis is done in turn: every output position reads a
few input positions (two for linear, four for cubic, more when antialiasing shrinks an axis)
with weights that depend only on that axis.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.errors import ModelError
from compiler.ir.types import TensorType
from compiler.ops._util import normalize_axes
from compiler.ops.registry import Attr, OpDef, fail, register

_MODES = ("nearest", "linear", "cubic")
_COORDINATES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                "asymmetric", "tf_crop_and_resize", "tf_half_pixel_for_nn")
_ROUNDINGS = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
_POLICIES = ("stretch", "not_larger", "not_smaller")


@dataclass(frozen=True)
class _Plan:
    """What a Resize node does: the output shape and the scale of each (resized) axis."""

    axes: tuple[int, ...]
    out: tuple[int, ...]
    scales: tuple[np.float32, ...]  # one per input axis; 1 for axes left alone


def _present(array) -> bool:
    return array is not None and array.size > 0


def _check_attrs(node) -> None:
    for name, allowed in (("mode", _MODES), ("coordinate_transformation_mode", _COORDINATES),
                          ("nearest_mode", _ROUNDINGS), ("keep_aspect_ratio_policy", _POLICIES)):
        if node.attrs[name] not in allowed:
            fail(f"{name} {node.attrs[name]!r} is not one of {', '.join(allowed)}")
    if node.attrs["antialias"] not in (0, 1) or node.attrs["exclude_outside"] not in (0, 1):
        fail("antialias and exclude_outside must be 0 or 1")
    if node.attrs["antialias"] and node.attrs["mode"] == "nearest":
        fail("antialias=1 needs mode linear or cubic, not nearest")


def _plan(node, shape, scales, sizes) -> _Plan:
    rank = len(shape)
    axes = node.attrs.get("axes")
    axes = tuple(range(rank)) if axes is None else normalize_axes(axes, rank)
    if _present(scales) == _present(sizes):
        fail("exactly one of the scales and sizes inputs must be given (and not empty)")
    given = np.asarray(scales if _present(scales) else sizes)
    if given.ndim != 1 or given.size != len(axes):
        fail(f"{'scales' if _present(scales) else 'sizes'} has shape {list(given.shape)}, "
             f"expected [{len(axes)}] (one value per resized axis)")
    # float32 arithmetic, as onnxruntime and onnx's shape inference do it.
    factors, out = [np.float32(1)] * rank, list(shape)
    if _present(scales):
        if not np.all(given > 0):
            fail(f"scales {given.tolist()} must be positive")
        for axis, scale in zip(axes, given.astype(np.float32)):
            factors[axis], out[axis] = scale, int(np.floor(np.float32(shape[axis]) * scale))
        return _Plan(axes, tuple(out), tuple(factors))
    if np.any(given < 0) or any(shape[a] == 0 for a in axes):
        fail(f"sizes {given.tolist()} must not be negative, nor resize an empty axis")
    ratios = [np.float32(s) / np.float32(shape[a]) for a, s in zip(axes, given)]
    policy = node.attrs["keep_aspect_ratio_policy"]
    if policy == "stretch":
        for axis, ratio, size in zip(axes, ratios, given):
            factors[axis], out[axis] = ratio, int(size)
    else:
        ratio = min(ratios) if policy == "not_larger" else max(ratios)
        for axis in axes:
            factors[axis] = ratio
            out[axis] = int(np.floor(ratio * np.float32(shape[axis]) + np.float32(0.5)))
    return _Plan(axes, tuple(out), tuple(factors))


def _resize_infer(node, ins, values):
    _check_attrs(node)
    padded = list(values) + [None] * (4 - len(values))
    types = list(ins) + [None] * (4 - len(ins))
    for index, name in ((2, "scales"), (3, "sizes")):
        if types[index] is not None and types[index].numel > 0 and padded[index] is None:
            fail(f"{name} must be known at compile time (a constant or computed from shapes)")
    if types[3] is not None and types[3].numel > 0 and types[3].dtype != "int64":
        fail(f"sizes must be int64, got {types[3].dtype}")
    plan = _plan(node, ins[0].shape, padded[2], padded[3])
    if node.attrs["coordinate_transformation_mode"] == "tf_crop_and_resize":
        if types[1] is None or types[1].numel != 2 * len(plan.axes):
            fail(f"coordinate_transformation_mode tf_crop_and_resize needs a roi of "
                 f"{2 * len(plan.axes)} values (starts then ends of the resized axes)")
    return [TensorType(plan.out, ins[0].dtype, ins[0].quant)]


# -- coordinates and weights --------------------------------------------------------------------

def _source_coordinates(mode: str, out_len: int, in_len: int, scale: np.float32, roi):
    """Input coordinate of each output position along one axis (the formulas of the ONNX spec).

    Computed in float32 like onnxruntime, whose roundings nearest mode inherits. Like the spec
    and onnxruntime (unlike onnx's reference implementation), align_corners, pytorch_half_pixel
    and tf_crop_and_resize divide by the integer output length.
    """
    f = np.float32
    y = np.arange(out_len, dtype=f)
    half, n_in, n_out = f(0.5), f(in_len), f(out_len)
    if mode == "align_corners":
        x = y * 0 if out_len == 1 else y * (n_in - 1) / (n_out - 1)
    elif mode == "asymmetric":
        x = y / scale
    elif mode == "tf_crop_and_resize":
        start, end = f(roi[0]), f(roi[1])
        if out_len == 1:
            x = y * 0 + half * (start + end) * (n_in - 1)
        else:
            x = start * (n_in - 1) + y * (end - start) * (n_in - 1) / (n_out - 1)
    elif mode == "pytorch_half_pixel":
        x = y * 0 if out_len == 1 else (y + half) / scale - half
    elif mode == "tf_half_pixel_for_nn":
        x = (y + half) / scale
    elif mode == "half_pixel_symmetric":
        # The one formula that uses the fractional output length scale * in_len.
        offset = n_in / 2 * (1 - n_out / (scale * n_in))
        x = offset + (y + half) / scale - half
    else:  # half_pixel
        x = (y + half) / scale - half
    return x.astype(np.float64)


def _nearest(x: np.ndarray, rounding: str) -> np.ndarray:
    floor = np.floor(x)
    frac = x - floor
    up = {"round_prefer_floor": frac > 0.5, "round_prefer_ceil": frac >= 0.5,
          "floor": np.zeros(x.shape, bool), "ceil": frac > 0}[rounding]
    return (floor + up).astype(np.int64)[:, None]


def _cubic(t: np.ndarray, a: float) -> np.ndarray:
    t = np.abs(t)
    near = ((a + 2) * t - (a + 3)) * t * t + 1
    far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return np.where(t <= 1, near, np.where(t < 2, far, 0.0))


def _axis_taps(node, x: np.ndarray, in_len: int, scale: np.float32):
    """(indices [out, taps], weights [out, taps] or None for nearest) of one axis.

    Indices may be out of range: the caller clamps them (the edge value repeats).
    """
    mode = node.attrs["mode"]
    if mode == "nearest":
        return _nearest(x, node.attrs["nearest_mode"]), None
    support = 1 if mode == "linear" else 2
    shrink = min(float(scale), 1.0) if node.attrs["antialias"] else 1.0
    half = int(np.ceil(support / shrink))
    index = np.floor(x).astype(np.int64)[:, None] + np.arange(1 - half, 1 + half)
    t = (index - x[:, None]) * shrink
    if mode == "linear":
        weights = np.clip(1 - np.abs(t), 0, 1)
    else:
        weights = _cubic(t, node.attrs["cubic_coeff_a"])
    if node.attrs["antialias"]:
        weights /= weights.sum(axis=1, keepdims=True)
    if node.attrs["exclude_outside"]:
        weights = np.where((index < 0) | (index >= in_len), 0.0, weights)
        total = weights.sum(axis=1, keepdims=True)
        weights /= np.where(total == 0, 1.0, total)
    return index, weights


def _resize_axis(node, data: np.ndarray, axis: int, out_len: int, scale: np.float32, roi):
    coordinate_mode = node.attrs["coordinate_transformation_mode"]
    in_len = data.shape[axis]
    x = _source_coordinates(coordinate_mode, out_len, in_len, scale, roi)
    index, weights = _axis_taps(node, x, in_len, scale)
    index = np.clip(index, 0, max(in_len - 1, 0))
    if node.attrs["mode"] == "nearest":
        result = np.take(data, index[:, 0], axis=axis)
    else:
        shape = [1] * data.ndim
        shape[axis] = out_len
        result = sum(np.take(data, index[:, j], axis=axis) * weights[:, j].reshape(shape)
                     for j in range(index.shape[1]))
    if coordinate_mode == "tf_crop_and_resize":
        outside = ((x < 0) | (x > in_len - 1)).reshape([-1 if a == axis else 1
                                                        for a in range(data.ndim)])
        fill = np.asarray(node.attrs["extrapolation_value"]).astype(result.dtype)
        result = np.where(outside, fill, result)
    return result


def _is_identity(node, plan: _Plan, shape, axis: int, roi) -> bool:
    mode = node.attrs["coordinate_transformation_mode"]
    return (plan.scales[axis] == 1 and plan.out[axis] == shape[axis]
            and mode != "tf_half_pixel_for_nn"
            and (mode != "tf_crop_and_resize" or tuple(roi) == (0.0, 1.0)))


def _resize(node, x, roi=None, scales=None, sizes=None):
    plan = _plan(node, x.shape, scales, sizes)
    interpolate = node.attrs["mode"] != "nearest"
    data = x.astype(np.float64) if interpolate else x
    rois = {}
    if node.attrs["coordinate_transformation_mode"] == "tf_crop_and_resize":
        roi = np.asarray(roi, np.float32).reshape(2, -1)
        rois = {axis: (roi[0, i], roi[1, i]) for i, axis in enumerate(plan.axes)}
    for axis in sorted(plan.axes):
        if not _is_identity(node, plan, x.shape, axis, rois.get(axis, (0.0, 1.0))):
            data = _resize_axis(node, data, axis, plan.out[axis], plan.scales[axis],
                                rois.get(axis))
    if not interpolate:
        return np.ascontiguousarray(data)
    if np.issubdtype(x.dtype, np.integer):
        info = np.iinfo(x.dtype)
        data = np.clip(np.round(data), info.min, info.max)
    return data.astype(x.dtype)


# -- older opsets -------------------------------------------------------------------------------

def _opset10_rounding(scales) -> str:
    """Opset 10 (onnxruntime's reading): floor when enlarging, ceil when shrinking."""
    if scales is None:
        fail("scales must be known at compile time (a constant or computed from shapes)")
    changed = [float(s) for s in np.asarray(scales).reshape(-1) if s != 1]
    if all(s > 1 for s in changed):
        return "floor"
    if all(s < 1 for s in changed):
        return "ceil"
    fail(f"an opset 10 nearest Resize that enlarges some axes and shrinks others (scales "
         f"{np.asarray(scales).tolist()}) is not supported")
    raise AssertionError  # unreachable: fail() raises


def _resize_from_onnx(ctx, attrs, input_names, opset):
    """Opset 10 has inputs (X, scales) and fixed asymmetric coordinates."""
    if opset >= 11:
        return attrs, input_names
    attrs["coordinate_transformation_mode"] = "asymmetric"
    if attrs["mode"] == "nearest":
        scales = ctx.value_of(input_names[1]) if len(input_names) > 1 else None
        attrs["nearest_mode"] = _opset10_rounding(scales)
    return attrs, [input_names[0], "", *input_names[1:]]


def _resize_to_onnx(ctx, attrs, input_names, opset):
    coordinate_mode = attrs["coordinate_transformation_mode"]
    names = list(input_names) + [""] * (4 - len(input_names))
    if coordinate_mode == "half_pixel_symmetric" and opset < 19:
        raise ModelError(f"Resize with half_pixel_symmetric coordinates cannot be saved at opset "
                         f"{opset} (it needs opset 19)")
    if coordinate_mode == "tf_half_pixel_for_nn" and opset >= 18:
        raise ModelError(f"Resize with tf_half_pixel_for_nn coordinates cannot be saved at "
                         f"opset {opset} (it was removed in opset 18)")
    if opset < 11:
        return _to_opset10(ctx, dict(attrs), names, opset)
    if opset < 13:  # roi and scales are required inputs, empty when unused
        for i in (1, 2):
            names[i] = names[i] or ctx.constant("resize_empty", np.zeros(0, np.float32))
    return attrs, names


def _to_opset10(ctx, attrs, names, opset):
    scales = ctx.constant_value(names[2]) if names[2] else None
    why = None
    if attrs["mode"] not in ("nearest", "linear"):
        why = f"mode {attrs['mode']} needs opset 11"
    elif scales is None or names[3]:
        why = "opset 10 needs constant scales (not sizes)"
    elif attrs.pop("coordinate_transformation_mode") != "asymmetric":
        why = "opset 10 only has asymmetric coordinates"
    elif attrs["mode"] == "nearest" and attrs.pop("nearest_mode") != _opset10_rounding(scales):
        why = "opset 10 only rounds down when enlarging and up when shrinking"
    if why:
        raise ModelError(f"Resize cannot be saved at opset {opset} because {why}")
    attrs.pop("nearest_mode", None)
    return attrs, [names[0], names[2]]


register(OpDef(
    "Resize", "misc", _resize_infer, _resize,
    attrs={
        "antialias": Attr("int", 0, "1: widen linear/cubic kernels when shrinking"),
        "axes": Attr("ints", None, "the axes scales/sizes refer to (default: all)"),
        "coordinate_transformation_mode": Attr("string", "half_pixel",
                                               "how output positions map to input positions"),
        "cubic_coeff_a": Attr("float", -0.75, "the cubic kernel's coefficient"),
        "exclude_outside": Attr("int", 0, "1: taps outside the input get weight 0"),
        "extrapolation_value": Attr("float", 0.0, "tf_crop_and_resize: value outside the input"),
        "keep_aspect_ratio_policy": Attr("string", "stretch", "sizes: stretch, not_larger or "
                                         "not_smaller"),
        "mode": Attr("string", "nearest", "nearest, linear or cubic"),
        "nearest_mode": Attr("string", "round_prefer_floor", "rounding of nearest mode"),
    },
    inputs=(1, 4), since=10, from_onnx=_resize_from_onnx, to_onnx=_resize_to_onnx,
    doc="resize by scales or to sizes: nearest, N-linear or cubic interpolation"))
