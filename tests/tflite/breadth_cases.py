"""One small model per TFLite builtin and element type, written by the tests.

Each case is a builder `(integer) -> (Model, input shapes)`; `CASES` lists them by builtin with
the element types TFLite Micro runs the builtin for (float32 with LiteRT as the oracle, int8
with TFLite Micro). `merged` joins many cases into one model, so that one compilation and one
firmware run check them all on the host and under QEMU.
"""

from __future__ import annotations

import numpy as np

from tests.tflite.breadth_earlier import EARLIER_CASES
from tests.tflite.case_builders import SCALE, ZERO_POINT, Case, one, two
from tests.tflite.case_builders import const as _const
from tests.tflite.case_builders import tensor as _t
from tests.tflite.stateful_cases import (
    if_model,
    lstm_case,
    lstm_int8_model,
    streaming_model,
    svdf_model,
    while_model,
)
from tests.tflite.writer import Model, Op, T


def _slice(integer):
    return one("SLICE", (1, 5, 6, 3), [(1, 3, 4, 2)], integer,
               [_const("begin", [0, 1, 2, 0]), _const("size", [1, 3, -1, 2])])


def _split(integer):
    return one("SPLIT", (1, 4, 6, 4), [(1, 4, 2, 4)] * 3, integer, [_const("axis", 2)],
               ("SplitOptions", {"NumSplits": 3}), data_last=True)


def _split_v(integer):
    return one("SPLIT_V", (1, 4, 7, 2), [(1, 4, 2, 2), (1, 4, 4, 2), (1, 4, 1, 2)], integer,
               [_const("sizes", [2, -1, 1]), _const("axis", -2)],
               ("SplitVOptions", {"NumSplits": 3}))


def _unpack(integer):
    return one("UNPACK", (3, 4, 5), [(3, 5)] * 4, integer, (),
               ("UnpackOptions", {"Num": 4, "Axis": 1}))


def _gather(integer):
    return one("GATHER", (5, 4, 3), [(5, 5, 3)], integer, [_const("indices", [3, 0, 2, 2, 1])],
               ("GatherOptions", {"Axis": 1, "BatchDims": 0}))


def _depth_to_space(integer):
    return one("DEPTH_TO_SPACE", (1, 3, 4, 8), [(1, 6, 8, 2)], integer, (),
               ("DepthToSpaceOptions", {"BlockSize": 2}))


def _space_to_depth(integer):
    return one("SPACE_TO_DEPTH", (1, 4, 6, 3), [(1, 2, 3, 12)], integer, (),
               ("SpaceToDepthOptions", {"BlockSize": 2}))


def _batch_to_space(integer):
    return one("BATCH_TO_SPACE_ND", (4, 3, 3, 2), [(1, 5, 5, 2)], integer,
               [_const("block", [2, 2]), _const("crops", [[0, 1], [1, 0]])])


def _space_to_batch(padded: bool):
    def build(integer):
        if padded:
            return one("SPACE_TO_BATCH_ND", (1, 5, 6, 2), [(6, 3, 2, 2)], integer,
                       [_const("block", [2, 3]), _const("paddings", [[1, 0], [0, 0]])])
        return one("SPACE_TO_BATCH_ND", (1, 4, 6, 2), [(6, 2, 2, 2)], integer,
                   [_const("block", [2, 3]), _const("paddings", [[0, 0], [0, 0]])])
    return build


def _reverse(integer):
    return one("REVERSE_V2", (2, 3, 4), [(2, 3, 4)], integer, [_const("axis", [1])])


def _mirror_pad(mode: int):
    def build(integer):
        return one("MIRROR_PAD", (1, 4, 5, 2), [(1, 7, 8, 2)], integer,
                   [_const("paddings", [[0, 0], [1, 2], [2, 1], [0, 0]])],
                   ("MirrorPadOptions", {"Mode": mode}))
    return build


def _resize_nearest(size, align: bool, half: bool):
    def build(integer):
        return one("RESIZE_NEAREST_NEIGHBOR", (1, 3, 5, 2), [(1, *size, 2)], integer,
                   [_const("size", list(size))],
                   ("ResizeNearestNeighborOptions", {"AlignCorners": align,
                                                     "HalfPixelCenters": half}))
    return build


def _resize_bilinear(size, align: bool, half: bool):
    def build(integer):
        return one("RESIZE_BILINEAR", (1, 3, 5, 2), [(1, *size, 2)], integer,
                   [_const("size", list(size))],
                   ("ResizeBilinearOptions", {"AlignCorners": align, "HalfPixelCenters": half}))
    return build


def _reduce(builtin: str, axes, keep: bool, out):
    def build(integer):
        return one(builtin, (1, 4, 5, 3), [out], integer, [_const("axes", axes)],
                   ("ReducerOptions", {"KeepDims": keep}))
    return build


def _unary(builtin: str, out_quant=(0.03, -5)):
    def build(integer):
        return one(builtin, (2, 3, 7), [(2, 3, 7)], integer, out_quant=out_quant)
    return build


def _rows_at_zero_point(rng, shape):
    """Codes near the zero point (3), some rows exactly at it: sums of squares of 0 and 1."""
    x = rng.integers(-2, 9, shape).astype(np.int8)
    x[..., ::2, :] = ZERO_POINT
    x[0, 0, 0] = ZERO_POINT + 1
    return x


def _positive(rng, shape):
    return (np.abs(rng.standard_normal(shape)) + 0.1).astype(np.float32)


def _away_from_zero(rng, shape):
    x = rng.standard_normal(shape)
    return (np.sign(x) * (np.abs(x) + 0.5)).astype(np.float32)


def _at_least_zero_point(rng, shape):
    """Every int8 code from the input's zero point up (RSQRT's domain), then random ones."""
    every = np.arange(ZERO_POINT, 128)
    return np.resize(np.concatenate([every, rng.integers(ZERO_POINT, 128, 64)]),
                     shape).astype(np.int8)


def _binary(builtin: str, options=None):
    def build(integer):
        return two(builtin, (1, 3, 4, 5), (1, 1, 4, 5), (1, 3, 4, 5), integer, options)
    return build


def _div_scales(integer):
    """A dividend that meets its zero point, a divisor whose zero point is out of the domain."""
    tensors = [_t("a", (2, 3, 4, 5), True, (0.05, ZERO_POINT)),
               _t("b", (1, 3, 1, 5), True, (0.02, -100)), _t("y", (2, 3, 4, 5), True, (0.1, -20))]
    op = Op("DIV", [0, 1], [2], ("DivOptions", {"FusedActivationFunction": 0}))
    return Model(tensors, [op], [0, 1], [2]), {"a": (2, 3, 4, 5), "b": (1, 3, 1, 5)}


def _div_by_constant(integer):
    """A divisor known at compile time (read from the weights), one per channel."""
    divisor = T("d", (5,), "int8", np.array([-128, -40, 4, 90, 127], np.int8), scale=[0.03],
                zero_point=[1])
    tensors = [_t("a", (1, 3, 4, 5), True), divisor, _t("y", (1, 3, 4, 5), True, (0.2, 9))]
    op = Op("DIV", [0, 1], [2], ("DivOptions", {"FusedActivationFunction": 3}))
    return Model(tensors, [op], [0], [2]), {"a": (1, 3, 4, 5)}


def _log_softmax_scaled(scale: float, depth: int):
    def build(integer):
        return one("LOG_SOFTMAX", (3, depth), [(3, depth)], integer, out_quant=(16 / 256, 127),
                   consts=()) if not integer else _log_softmax_int8(scale, depth)
    return build


def _log_softmax_int8(scale: float, depth: int):
    tensors = [_t("x", (3, depth), True, (scale, -4)), _t("y", (3, depth), True, (16 / 256, 127))]
    return Model(tensors, [Op("LOG_SOFTMAX", [0], [1])], [0], [1]), {"x": (3, depth)}


def _not_zero_point(rng, shape):
    """Every code but the zero point (DIV's divisor may not be 0)."""
    x = rng.integers(-128, 128, shape)
    return np.where(x == ZERO_POINT, ZERO_POINT + 1, x).astype(np.int8)


def _above(low: int):
    def domain(rng, shape):
        return rng.integers(low, 128, shape).astype(np.int8)
    return domain


def _squared_two_scales(integer):
    tensors = [_t("a", (1, 3, 4, 5), True, (0.04, -7)), _t("b", (1, 1, 4, 5), True, (0.1, 12)),
               _t("y", (1, 3, 4, 5), True, (0.5, -128))]
    return (Model(tensors, [Op("SQUARED_DIFFERENCE", [0, 1], [2])], [0, 1], [2]),
            {"a": (1, 3, 4, 5), "b": (1, 1, 4, 5)})


def _prelu(shared: bool):
    def build(integer):
        values = np.full(5, 0.25) if shared else np.linspace(-0.5, 1.5, 5)
        if integer:
            alpha = T("alpha", (1, 1, 5), "int8", np.round(values / 0.0125).reshape(1, 1, 5),
                      scale=[0.0125], zero_point=[0])
        else:
            alpha = _const("alpha", values.reshape(1, 1, 5).astype(np.float32), "float32")
        return one("PRELU", (1, 3, 4, 5), [(1, 3, 4, 5)], integer, [alpha],
                   out_quant=(0.04, -9))
    return build


def _sum(integer):
    return one("SUM", (1, 4, 5, 3), [(1, 5)], integer, [_const("axes", [1, 3])],
               ("ReducerOptions", {"KeepDims": False}), out_quant=(0.3, -2))


def _compare(builtin: str, scale: float = SCALE):
    def build(integer):
        quant = (scale, ZERO_POINT)
        tensors = [_t("a", (1, 3, 4, 5), integer, quant), _t("b", (1, 1, 4, 5), integer, quant),
                   T("y", (1, 3, 4, 5), "bool")]
        return (Model(tensors, [Op(builtin, [0, 1], [2])], [0, 1], [2]),
                {"a": (1, 3, 4, 5), "b": (1, 1, 4, 5)})
    return build


def _logical(builtin: str):
    def build(integer):
        count = 1 if builtin == "LOGICAL_NOT" else 2
        shapes = [(2, 3, 4), (1, 3, 4)][:count]
        tensors = [T(f"in{i}", s, "bool") for i, s in enumerate(shapes)] + [
            T("y", (2, 3, 4), "bool")]
        return (Model(tensors, [Op(builtin, list(range(count)), [count])], list(range(count)),
                      [count]), {f"in{i}": s for i, s in enumerate(shapes)})
    return build


def _select(integer):
    tensors = [T("c", (1, 3, 4, 1), "bool"), _t("x", (1, 3, 4, 5), integer),
               _t("z", (1, 1, 4, 5), integer), _t("y", (1, 3, 4, 5), integer)]
    return (Model(tensors, [Op("SELECT_V2", [0, 1, 2], [3])], [0, 1, 2], [3]),
            {"c": (1, 3, 4, 1), "x": (1, 3, 4, 5), "z": (1, 1, 4, 5)})


def _coarse(rng, shape):
    """Halves from -2 to 2: comparisons meet equal values often."""
    return (rng.integers(-4, 5, shape) / 2).astype(np.float32)


_COMPARISONS = ("EQUAL", "NOT_EQUAL", "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL")
LOGIC_CASES = [
    *(Case(name, "", _compare(name), domain=_coarse) for name in _COMPARISONS),
    # A fine scale maps neighbouring codes to one image: TFLite Micro finds them equal.
    *(Case(name, "fine-scale", _compare(name, 0.001), ("int8",)) for name in _COMPARISONS),
    *(Case(name, "", _logical(name), ("bool",)) for name in ("LOGICAL_AND", "LOGICAL_OR",
                                                            "LOGICAL_NOT")),
    Case("SELECT_V2", "", _select, domain=_coarse),
]

def _arg(builtin: str):
    def build(integer):
        x = _t("x", (2, 3, 5), integer)
        tensors = [x, _const("axis", [2]), T("y", (2, 3), "int32")]
        op = Op(builtin, [0, 1], [2], ("ArgMaxOptions" if builtin == "ARG_MAX" else
                                       "ArgMinOptions", {"OutputType": 2}))
        return Model(tensors, [op], [0], [2]), {"x": (2, 3, 5)}
    return build


def _cast(source: str, target: str):
    def build(integer):
        tensors = [T("x", (2, 3, 4), source), T("y", (2, 3, 4), target)]
        return Model(tensors, [Op("CAST", [0], [1])], [0], [1]), {"x": (2, 3, 4)}
    return build


def _broadcast_to(integer):
    model, shapes = one("BROADCAST_TO", (1, 3, 1), [(2, 3, 4)], integer,
                        [_const("shape", [2, 3, 4])])
    model.versions["BROADCAST_TO"] = 2  # LiteRT registers versions 2 and up
    return model, shapes


def _gather_nd(integer):
    return one("GATHER_ND", (4, 3, 2), [(3, 2)], integer,
               [_const("indices", [[1, 2], [3, 0], [0, 1]])])


def _embedding(hybrid: bool):
    def build(integer):
        rows = np.random.default_rng(5).standard_normal((5, 4)).astype(np.float32)
        if integer or hybrid:
            data = T("params", (5, 4), "int8", data=np.random.default_rng(5).integers(
                -127, 128, (5, 4)), scale=[0.02], zero_point=[0])
        else:
            data = T("params", (5, 4), data=rows)
        out = T("y", (3, 4)) if hybrid or not integer else T("y", (3, 4), "int8",
                                                              scale=[0.02], zero_point=[0])
        tensors = [T("ids", (3,), "int32"), data, out]
        return Model(tensors, [Op("EMBEDDING_LOOKUP", [0, 1], [2])], [0], [2]), {"ids": (3,)}
    return build


def _ids(rng, shape):
    return rng.integers(0, 5, shape).astype(np.int32)


def _cumsum(exclusive: bool, reverse: bool):
    def build(integer):
        return one("CUMSUM", (2, 5, 3), [(2, 5, 3)], integer, [_const("axis", 1)],
                   ("CumsumOptions", {"Exclusive": exclusive, "Reverse": reverse}))
    return build


def _l2_pool(integer):
    return one("L2_POOL_2D", (1, 5, 6, 2), [(1, 3, 3, 2)], integer, (),
               ("Pool2DOptions", {"Padding": 0, "StrideW": 2, "StrideH": 2, "FilterWidth": 3,
                                  "FilterHeight": 3, "FusedActivationFunction": 0}))


def _wide(rng, shape):
    return (rng.standard_normal(shape) * 20).astype(np.float32)


def _transpose_conv(padding: int, stride: int, out_hw, bias: bool):
    def build(integer):
        rng = np.random.default_rng(9)
        shape, cout = (1, 4, 5, 3), 2
        wshape = (cout, 3, 3, shape[3])
        if integer:
            ws = rng.uniform(0.005, 0.03, cout).tolist()
            w = T("w", wshape, "int8", rng.integers(-127, 128, wshape), scale=ws,
                  zero_point=[0] * cout, axis=0)
            b = T("b", (cout,), "int32", rng.integers(-800, 800, cout),
                  scale=[SCALE * s for s in ws], zero_point=[0] * cout)
            x, y = _t("x", shape, True), _t("y", (1, *out_hw, cout), True, (0.08, -4))
        else:
            w = T("w", wshape, data=rng.standard_normal(wshape))
            b = T("b", (cout,), data=rng.standard_normal(cout))
            x, y = _t("x", shape, False), _t("y", (1, *out_hw, cout), False)
        tensors = [_const("out_shape", [1, *out_hw, cout]), w, x] + ([b] if bias else []) + [y]
        inputs = [0, 1, 2] + ([3] if bias else [])
        options = ("TransposeConvOptions", {"Padding": padding, "StrideH": stride,
                                            "StrideW": stride})
        op = Op("TRANSPOSE_CONV", inputs, [len(tensors) - 1], options)
        return Model(tensors, [op], [2], [len(tensors) - 1]), {"x": shape}
    return build


def _batch_matmul(adj_y: bool):
    def build(integer):
        rng = np.random.default_rng(4)
        wshape = (6, 4) if adj_y else (4, 6)
        if integer:
            rhs = T("w", wshape, "int8", rng.integers(-127, 128, wshape), scale=[0.02],
                    zero_point=[0])
            y = _t("y", (2, 3, 6), True, (0.3, -2))
        else:
            rhs = T("w", wshape, data=rng.standard_normal(wshape))
            y = _t("y", (2, 3, 6), False)
        tensors = [_t("x", (2, 3, 4), integer), rhs, y]
        op = Op("BATCH_MATMUL", [0, 1], [2], ("BatchMatMulOptions", {"AdjX": False,
                                                                     "AdjY": adj_y}))
        return Model(tensors, [op], [0], [2]), {"x": (2, 3, 4)}
    return build


def _batch_matmul_runtime(integer):
    model, shapes = two("BATCH_MATMUL", (2, 4, 3), (2, 5, 4), (2, 3, 5), integer,
                        ("BatchMatMulOptions", {"AdjX": True, "AdjY": True}))
    return model, shapes


def _zeros_like(integer):
    return one("ZEROS_LIKE", (2, 3, 4), [(2, 3, 4)], integer)


def _fill(integer):
    value = _const("value", np.array(3 if integer else 1.5, "int8" if integer else "float32"),
                   "int8" if integer else "float32")
    if integer:
        value = T("value", (), "int8", np.array(3), scale=[SCALE], zero_point=[ZERO_POINT])
    model, shapes = one("ADD", (2, 3), [(2, 3)], integer, [_t("filled", (2, 3), integer)])
    tensors = [_const("dims", [2, 3]), value, _t("filled", (2, 3), integer),
               _t("x", (2, 3), integer), _t("y", (2, 3), integer)]
    ops = [Op("FILL", [0, 1], [2]), Op("MAXIMUM", [3, 2], [4])]
    return Model(tensors, ops, [3], [4]), {"x": (2, 3)}


def _broadcast_args(integer):
    """The broadcast shape as the model's output, beside a passed-through input."""
    tensors = [_const("s0", [2, 1, 4]), _const("s1", [1, 3, 1]), T("shape", (3,), "int32"),
               _t("x", (2, 3), integer), _t("y", (2, 3), integer)]
    ops = [Op("BROADCAST_ARGS", [0, 1], [2]), Op("MAXIMUM", [3, 3], [4])]
    return Model(tensors, ops, [3], [2, 4]), {"x": (2, 3)}


def _dynamic_update_slice(start):
    def build(integer):
        return _dynamic_update_model(start, integer)
    return build


def _dynamic_update_model(start, integer):
    tensors = [_t("operand", (2, 5, 6), integer), _t("update", (1, 3, 2), integer),
               _const("start", start), _t("y", (2, 5, 6), integer)]
    op = Op("DYNAMIC_UPDATE_SLICE", [0, 1, 2], [3])
    return (Model(tensors, [op], [0, 1], [3]), {"operand": (2, 5, 6), "update": (1, 3, 2)})


def _reduce_all(integer):
    tensors = [T("x", (2, 3, 4), "bool"), _const("axes", [2]), T("y", (2, 3), "bool")]
    return (Model(tensors, [Op("REDUCE_ALL", [0, 1], [2], ("ReducerOptions",
                                                           {"KeepDims": False}))], [0], [2]),
            {"x": (2, 3, 4)})


INDEXING_CASES = [
    Case("ARG_MAX", "", _arg("ARG_MAX")), Case("ARG_MIN", "", _arg("ARG_MIN")),
    Case("CAST", "float-to-int32", _cast("float32", "int32"), ("float32",), _wide),
    Case("CAST", "int8-to-float", _cast("int8", "float32"), ("int8",)),
    Case("CAST", "int32-to-int8", _cast("int32", "int8"), ("int32",)),
    Case("CAST", "bool-to-float", _cast("bool", "float32"), ("bool",)),
    Case("BROADCAST_TO", "", _broadcast_to), Case("GATHER_ND", "", _gather_nd),
    Case("EMBEDDING_LOOKUP", "", _embedding(False), ("float32", "int8"), _ids),
    Case("EMBEDDING_LOOKUP", "hybrid", _embedding(True), ("int8",), _ids),
    *(Case("CUMSUM", label, _cumsum(e, r))
      for label, e, r in (("", False, False), ("exclusive", True, False),
                          ("reverse", False, True))),
    Case("L2_POOL_2D", "", _l2_pool, ("float32",)),
    Case("ZEROS_LIKE", "", _zeros_like), Case("FILL", "", _fill),
    Case("BROADCAST_ARGS", "", _broadcast_args),
    Case("DYNAMIC_UPDATE_SLICE", "", _dynamic_update_slice([1, 1, 3])),
    Case("DYNAMIC_UPDATE_SLICE", "clamped", _dynamic_update_slice([-2, 4, 9])),
    Case("REDUCE_ALL", "", _reduce_all, ("bool",)),
    Case("BATCH_MATMUL", "", _batch_matmul(False)),
    Case("BATCH_MATMUL", "adj-y", _batch_matmul(True)),
    Case("BATCH_MATMUL", "runtime-adjoint", _batch_matmul_runtime, ("float32",)),
    *(Case(name, "", streaming_model)
      for name in ("CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE")),
    Case("IF", "", if_model), Case("WHILE", "", while_model),
    Case("SVDF", "", svdf_model), Case("SVDF", "int8-state",
                                        lambda integer: svdf_model(integer, "int8"), ("int8",)),
    Case("SVDF", "rank-1-relu", lambda integer: svdf_model(integer, rank=1, activation=1),
         ("float32",)),
    Case("UNIDIRECTIONAL_SEQUENCE_LSTM", "", lstm_case((2, 5, 3), 4, False, 0.0)),
    Case("UNIDIRECTIONAL_SEQUENCE_LSTM", "time-major-clip", lstm_case((6, 1, 3), 5, True, 0.8)),
    Case("UNIDIRECTIONAL_SEQUENCE_LSTM", "wide-cell-scale",
         lambda integer: lstm_int8_model((1, 7, 6), 9, False, 0.0, seed=9, cell_power=-15),
         ("int8",)),
    Case("TRANSPOSE_CONV", "same-2", _transpose_conv(0, 2, (8, 10), True)),
    Case("TRANSPOSE_CONV", "valid-2", _transpose_conv(1, 2, (9, 11), False)),
    Case("TRANSPOSE_CONV", "same-1", _transpose_conv(0, 1, (4, 5), True)),
]

_FLOAT = ("float32",)
MATHS_CASES = [
    *(Case(name, "", _unary(name), _FLOAT, domain)
      for name, domain in (("EXP", None), ("LOG", _positive), ("NEG", None),
                           ("SQRT", _positive), ("SIN", None), ("COS", None), ("CEIL", None),
                           ("FLOOR", None), ("ROUND", None),
                           ("SQUARE", None))),
    Case("ABS", "", _unary("ABS")), Case("ABS", "same-scale", _unary("ABS", (SCALE, 7)),
                                         ("int8",)),
    Case("ELU", "", _unary("ELU")),
    # TFLite Micro refuses codes below the input's zero point: the int8 input holds the others.
    Case("RSQRT", "", _unary("RSQRT", (0.02, -100)), domain=_positive,
         int8_domain=_at_least_zero_point),
    Case("RSQRT", "coarse", _unary("RSQRT", (0.5, -128)), ("int8",),
         int8_domain=_at_least_zero_point),
    Case("DIV", "", _binary("DIV", ("DivOptions", {"FusedActivationFunction": 1})),
         domain=_away_from_zero, int8_domain=_not_zero_point),
    Case("DIV", "scales", _div_scales, ("int8",), int8_domain=_above(-60)),
    Case("DIV", "constant-divisor", _div_by_constant, ("int8",)),
    Case("SQUARED_DIFFERENCE", "", _binary("SQUARED_DIFFERENCE")),
    Case("SQUARED_DIFFERENCE", "two-scales", _squared_two_scales, ("int8",)),
    Case("FLOOR_DIV", "", _binary("FLOOR_DIV"), _FLOAT, _away_from_zero),
    Case("FLOOR_MOD", "", _binary("FLOOR_MOD"), _FLOAT, _away_from_zero),
    Case("PRELU", "", _prelu(False)), Case("PRELU", "shared-alpha", _prelu(True)),
    Case("LOG_SOFTMAX", "", _unary("LOG_SOFTMAX", (16 / 256, 127))),
    Case("LOG_SOFTMAX", "fine-scale", _log_softmax_scaled(0.01, 300), ("int8",)),
    Case("LOG_SOFTMAX", "coarse-scale", _log_softmax_scaled(0.3, 7), ("int8",)),
    Case("L2_NORMALIZATION", "", _unary("L2_NORMALIZATION", (1 / 128, 0))),
    Case("L2_NORMALIZATION", "zero-rows", _unary("L2_NORMALIZATION", (1 / 128, 0)), ("int8",),
         int8_domain=_rows_at_zero_point),
    Case("SUM", "", _sum),
    Case("ADD_N", "", lambda integer: two("ADD_N", (2, 3, 4), (2, 3, 4), (2, 3, 4), integer,
                                          count=3)),
]

CASES = [
    Case("SLICE", "", _slice), Case("SPLIT", "", _split), Case("SPLIT_V", "", _split_v),
    Case("UNPACK", "", _unpack), Case("GATHER", "", _gather),
    Case("DEPTH_TO_SPACE", "", _depth_to_space), Case("SPACE_TO_DEPTH", "", _space_to_depth),
    Case("BATCH_TO_SPACE_ND", "", _batch_to_space),
    # TFLite Micro pads 8 bits with a value it never sets (what its arena held): only float is
    # compared with padding.
    Case("SPACE_TO_BATCH_ND", "", _space_to_batch(False)),
    Case("SPACE_TO_BATCH_ND", "padded", _space_to_batch(True), ("float32",)),
    Case("REVERSE_V2", "", _reverse),
    Case("MIRROR_PAD", "reflect", _mirror_pad(0)),
    Case("MIRROR_PAD", "symmetric", _mirror_pad(1)),
    Case("RESIZE_NEAREST_NEIGHBOR", "up", _resize_nearest((7, 4), False, False)),
    Case("RESIZE_NEAREST_NEIGHBOR", "align", _resize_nearest((7, 9), True, False)),
    Case("RESIZE_NEAREST_NEIGHBOR", "half", _resize_nearest((5, 3), False, True)),
    Case("RESIZE_BILINEAR", "up", _resize_bilinear((7, 4), False, False)),
    Case("RESIZE_BILINEAR", "align", _resize_bilinear((7, 9), True, False)),
    Case("RESIZE_BILINEAR", "half", _resize_bilinear((5, 3), False, True)),
    Case("RESIZE_BILINEAR", "half-up", _resize_bilinear((6, 10), False, True)),
    Case("REDUCE_MAX", "", _reduce("REDUCE_MAX", [1, 2], True, (1, 1, 1, 3))),
    Case("REDUCE_MIN", "", _reduce("REDUCE_MIN", [3], False, (1, 4, 5))),
    *MATHS_CASES,
    *LOGIC_CASES,
    *INDEXING_CASES,
    *EARLIER_CASES,
]


def cases_of(dtype: str) -> list[Case]:
    """The cases checked with `dtype`'s oracle (TFLite Micro's int8 group takes bool cases)."""
    group = ("int8", "bool", "int32") if dtype == "int8" else (dtype,)
    return [c for c in CASES if set(group) & set(c.dtypes)]


def merged(cases: list[Case], integer: bool) -> tuple[Model, dict, dict]:
    """One model running every case side by side: (model, input shapes, input name -> case).

    Tensor names and variable names take the case's id as a prefix; indices shift by the
    tensors before them, the subgraphs CALL_ONCE, IF and WHILE run by the subgraphs before.
    """
    tensors, ops, inputs, outputs, shapes, domains, versions = [], [], [], [], {}, {}, {}
    more: list[Model] = []
    for case in cases:
        model, case_shapes = case.build(integer)
        base = len(tensors)
        prefix = case.id.replace("-", "_") + "_"
        tensors += _prefixed(model.tensors, prefix)
        versions.update(model.versions)
        ops += [_shifted(op, base, prefix, len(more)) for op in model.ops]
        more += [Model(_prefixed(g.tensors, prefix), [_shifted(op, 0, prefix, 0) for op in g.ops],
                       g.inputs, g.outputs) for g in model.more]
        inputs += [i + base for i in model.inputs]
        outputs += [i + base for i in model.outputs]
        shapes.update({prefix + name: shape for name, shape in case_shapes.items()})
        domains.update({prefix + name: case for name in case_shapes})
    return Model(tensors, ops, inputs, outputs, versions=versions, more=more), shapes, domains


def _prefixed(tensors: list[T], prefix: str) -> list[T]:
    return [T(prefix + t.name, t.shape, t.dtype, t.data, t.scale, t.zero_point, t.axis,
              t.variable) for t in tensors]


def _shifted(op: Op, base: int, prefix: str, subgraphs: int) -> Op:
    """`op` with tensor indices moved by `base`, its variable and init subgraph renamed."""
    options = op.options
    if op.builtin == "VAR_HANDLE":
        options = (options[0], {**options[1], "SharedName": prefix + options[1]["SharedName"]})
    elif op.builtin in ("CALL_ONCE", "IF", "WHILE"):  # subgraph indices move along
        options = (options[0], {key: index + subgraphs for key, index in options[1].items()})
    return Op(op.builtin, [i + base if i >= 0 else i for i in op.inputs],
              [i + base for i in op.outputs], options)
