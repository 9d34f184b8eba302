"""Models with state or subgraphs, written by the tests: streaming, SVDF, LSTM, IF, WHILE.

Each builder is `(integer) -> (Model, input shapes)` like the other generated cases (the LSTM
ones take their geometry first). Their state (a resource variable, an SVDF's memory, an LSTM's
hidden and cell state) is what tests/tflite/test_streaming.py carries across inferences.
"""

from __future__ import annotations

import numpy as np

from tests.tflite.case_builders import ZERO_POINT
from tests.tflite.case_builders import const as _const
from tests.tflite.case_builders import tensor as _t
from tests.tflite.writer import Model, Op, T


def streaming_model(integer: bool, history: int = 3, width: int = 4) -> tuple[Model, dict]:
    """A streaming model: each inference joins its frame to the last `history` frames.

    The history is a resource variable (VAR_HANDLE, READ_VARIABLE, ASSIGN_VARIABLE) that an
    initialization subgraph (CALL_ONCE) sets to zeros; the output is |history, frame|.
    """
    kept = history * width
    zero = ZERO_POINT if integer else 0
    start = np.full((1, kept), zero, np.int8 if integer else np.float32)
    init = Model([T("handle", (), "resource"),
                  _t("zeros", (1, kept), integer)],
                 [Op("VAR_HANDLE", [], [0], ("VarHandleOptions", {"SharedName": "frames"})),
                  Op("ASSIGN_VARIABLE", [0, 1], [])], [], [])
    init.tensors[1].data = start
    tensors = [_t("x", (1, width), integer), T("handle", (), "resource"),
               _t("previous", (1, kept), integer), _t("joined", (1, kept + width), integer),
               _const("begin", [0, width]), _const("size", [1, kept]),
               _t("kept", (1, kept), integer), _t("y", (1, kept + width), integer)]
    ops = [Op("CALL_ONCE", [], [], ("CallOnceOptions", {"InitSubgraphIndex": 1})),
           Op("VAR_HANDLE", [], [1], ("VarHandleOptions", {"SharedName": "frames"})),
           Op("READ_VARIABLE", [1], [2]),
           Op("CONCATENATION", [2, 0], [3], ("ConcatenationOptions", {"Axis": 1})),
           Op("SLICE", [3, 4, 5], [6]),
           Op("ASSIGN_VARIABLE", [1, 6], []),
           Op("ABS", [3], [7])]
    return Model(tensors, ops, [0], [7], more=[init]), {"x": (1, width)}


def svdf_model(integer: bool, state_dtype: str = "int16", rank: int = 2, units: int = 3,
               memory: int = 4, activation: int = 0, seed: int = 8) -> tuple[Model, dict]:
    """An SVDF layer (TFLite Micro's keyword-spotting building block) on a 2 x 5 input.

    In int8 the time weights and the activation state are `state_dtype` (TFLite Micro takes
    int16 or int8), the bias int32 at state scale x time scale.
    """
    rng = np.random.default_rng(seed)
    filters, batch, width = units * rank, 2, 5
    features = rng.standard_normal((filters, width)) * 0.4
    times = rng.standard_normal((filters, memory)) * 0.4
    bias = rng.standard_normal(units) * 0.2
    if integer:
        state_scale = 0.02 if state_dtype == "int8" else 0.002
        wide = np.iinfo(state_dtype).max
        f_scale = float(np.float32(np.abs(features).max() / 127))
        t_scale = float(np.float32(np.abs(times).max() / wide))
        bias_scale = float(np.float32(np.float32(state_scale) * np.float32(t_scale)))
        state_zp = -3 if state_dtype == "int8" else 0
        tensors = [_t("x", (batch, width), True),
                   T("features", features.shape, "int8", np.round(features / f_scale),
                     scale=[f_scale], zero_point=[0]),
                   T("times", times.shape, state_dtype, np.round(times / t_scale),
                     scale=[t_scale], zero_point=[0]),
                   T("bias", (units,), "int32", np.round(bias / bias_scale), scale=[bias_scale],
                     zero_point=[0]),
                   T("state", (batch, filters * memory), state_dtype, scale=[state_scale],
                     zero_point=[state_zp], variable=True),
                   _t("y", (batch, units), True, (0.1, 2))]
    else:
        tensors = [T("x", (batch, width)), T("features", features.shape,
                                             data=features.astype(np.float32)),
                   T("times", times.shape, data=times.astype(np.float32)),
                   T("bias", (units,), data=bias.astype(np.float32)),
                   T("state", (batch, filters * memory), variable=True), T("y", (batch, units))]
    op = Op("SVDF", [0, 1, 2, 3, 4], [5], ("SVDFOptions", {
        "Rank": rank, "FusedActivationFunction": activation}))
    return Model(tensors, [op], [0], [5], versions={"SVDF": 4}), {"x": (batch, width)}


def if_model(integer: bool) -> tuple[Model, dict]:
    """IF on a bool input: ABS in the then branch, RELU in the else branch."""
    def branch(builtin):
        return Model([_t("a", (1, 2, 4), integer), _t("b", (1, 2, 4), integer)],
                     [Op(builtin, [0], [1])], [0], [1])
    main = Model([T("condition", (1,), "bool"), _t("x", (1, 2, 4), integer),
                  _t("y", (1, 2, 4), integer)],
                 [Op("IF", [0, 1], [2], ("IfOptions", {"ThenSubgraphIndex": 1,
                                                       "ElseSubgraphIndex": 2}))],
                 [0, 1], [2], more=[branch("ABS"), branch("RELU")])
    return main, {"condition": (1,), "x": (1, 2, 4)}


def while_model(integer: bool, runs: int = 3) -> tuple[Model, dict]:
    """WHILE counted by constants: `runs` times, x becomes x + x (saturating in int8)."""
    counter = ()
    cond = Model([T("i", counter, "int32"), _t("a", (1, 4), integer),
                  _const("limit", np.array(runs, np.int32)), T("go", counter, "bool")],
                 [Op("LESS", [0, 2], [3])], [0, 1], [3])
    body = Model([T("i", counter, "int32"), _t("a", (1, 4), integer),
                  _const("one", np.array(1, np.int32)), T("next", counter, "int32"),
                  _t("doubled", (1, 4), integer)],
                 [Op("ADD", [0, 2], [3]), Op("ADD", [1, 1], [4])], [0, 1], [3, 4])
    main = Model([_t("x", (1, 4), integer), _const("start", np.array(0, np.int32)),
                  T("count", counter, "int32"), _t("y", (1, 4), integer)],
                 [Op("WHILE", [1, 0], [2, 3], ("WhileOptions", {"CondSubgraphIndex": 1,
                                                                "BodySubgraphIndex": 2}))],
                 [0], [3], more=[cond, body])
    return main, {"x": (1, 4)}


def lstm_model(x_shape, cells: int, time_major: bool, clip: float, seed: int = 6,
               activation: int = 4) -> tuple[Model, dict]:
    """A float UNIDIRECTIONAL_SEQUENCE_LSTM with random Keras-style weights (no peepholes)."""
    rng = np.random.default_rng(seed)
    features = x_shape[2]
    batch = x_shape[1] if time_major else x_shape[0]
    steps = x_shape[0] if time_major else x_shape[1]

    def w(name, shape):
        return T(name, shape, data=(rng.standard_normal(shape) * 0.5).astype(np.float32))
    tensors = [T("x", tuple(x_shape))]
    tensors += [w(f"w_{g}", (cells, features)) for g in "ifco"]
    tensors += [w(f"r_{g}", (cells, cells)) for g in "ifco"]
    tensors += [w(f"b_{g}", (cells,)) for g in "ifco"]
    tensors += [T("h", (batch, cells), variable=True), T("c", (batch, cells), variable=True)]
    out_shape = (steps, batch, cells) if time_major else (batch, steps, cells)
    tensors.append(T("y", out_shape))
    inputs = [0, 1, 2, 3, 4, 5, 6, 7, 8, -1, -1, -1, 9, 10, 11, 12, -1, -1, 13, 14,
              -1, -1, -1, -1]
    options = ("UnidirectionalSequenceLSTMOptions", {
        "FusedActivationFunction": activation, "CellClip": clip, "ProjClip": 0.0,
        "TimeMajor": time_major})
    op = Op("UNIDIRECTIONAL_SEQUENCE_LSTM", inputs, [15], options)
    return Model(tensors, [op], [0], [15]), {"x": tuple(x_shape)}


def lstm_int8_model(x_shape, cells: int, time_major: bool, clip: float, seed: int = 6,
                    cell_power: int = -11, x_quant=(0.04, -5), h_quant=(2 / 255, 1)
                    ) -> tuple[Model, dict]:
    """An 8-bit UNIDIRECTIONAL_SEQUENCE_LSTM as TFLite's converter writes it.

    int8 weights with one scale per gate, int32 biases at input scale times weight scale, an
    int8 hidden state (the output's quantization) and an int16 cell state of scale 2^power.
    """
    rng = np.random.default_rng(seed)
    features = x_shape[2]
    batch = x_shape[1] if time_major else x_shape[0]
    steps = x_shape[0] if time_major else x_shape[1]

    def w(name, shape, in_scale):
        real = rng.standard_normal(shape) * 0.5
        scale = float(np.float32(np.abs(real).max() / 127))
        return T(name, shape, "int8", np.clip(np.round(real / scale), -127, 127),
                 scale=[scale], zero_point=[0]), in_scale * scale

    tensors = [T("x", tuple(x_shape), "int8", scale=[x_quant[0]], zero_point=[x_quant[1]])]
    bias_scales = []
    for prefix, shape, in_scale in (("w", (cells, features), x_quant[0]),
                                    ("r", (cells, cells), h_quant[0])):
        for g in "ifco":
            t, product = w(f"{prefix}_{g}", shape, in_scale)
            tensors.append(t)
            if prefix == "w":
                bias_scales.append(product)
    for g, scale in zip("ifco", bias_scales):
        real = rng.standard_normal(cells) * 0.3 + (1.0 if g == "f" else 0.0)
        tensors.append(T(f"b_{g}", (cells,), "int32", np.round(real / scale).astype(np.int32),
                         scale=[scale], zero_point=[0]))
    tensors += [T("h", (batch, cells), "int8", scale=[h_quant[0]], zero_point=[h_quant[1]],
                  variable=True),
                T("c", (batch, cells), "int16", scale=[2.0 ** cell_power], zero_point=[0],
                  variable=True)]
    out_shape = (steps, batch, cells) if time_major else (batch, steps, cells)
    tensors.append(T("y", out_shape, "int8", scale=[h_quant[0]], zero_point=[h_quant[1]]))
    inputs = [0, 1, 2, 3, 4, 5, 6, 7, 8, -1, -1, -1, 9, 10, 11, 12, -1, -1, 13, 14,
              -1, -1, -1, -1]
    options = ("UnidirectionalSequenceLSTMOptions", {
        "FusedActivationFunction": 4, "CellClip": clip, "ProjClip": 0.0,
        "TimeMajor": time_major})
    op = Op("UNIDIRECTIONAL_SEQUENCE_LSTM", inputs, [15], options)
    return Model(tensors, [op], [0], [15]), {"x": tuple(x_shape)}


def lstm_case(x_shape, cells: int, time_major: bool, clip: float):
    """A Case builder: the float or the int8 LSTM of this geometry."""
    def build(integer):
        make = lstm_int8_model if integer else lstm_model
        return make(x_shape, cells, time_major, clip)
    return build
