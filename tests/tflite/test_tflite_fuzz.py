"""Fuzz the TFLite loader with mutated flatbuffers: it may refuse, it must never crash or hang.

Seeds are .tflite files written here (and two small MLPerf Tiny models when the shared folder is
there); mutations are byte-level (flips, truncations, splices, deletions) and structural (models
written with wrong indices, shapes, buffers, opcodes and options). A case passes when the model
loads and survives the verifier, stats and the interpreter, or when loading raises Kiln's
ModelError as one line naming the file.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from compiler.frontends.load import load_model
from tests.conftest import SHARED_MODELS
from tests.test_fuzz import _settings, exercise
from tests.tflite.writer import Model, Op, T, write


def _seed_models() -> list[Model]:
    rng = np.random.default_rng(0)
    w = rng.integers(-127, 128, (4, 3, 3, 2))
    conv = Model([T("x", (1, 6, 6, 2), "int8", scale=[0.05], zero_point=[1]),
                  T("w", (4, 3, 3, 2), "int8", w, scale=[0.01] * 4, zero_point=[0] * 4),
                  T("b", (4,), "int32", rng.integers(-99, 99, 4), scale=[5e-4] * 4,
                    zero_point=[0] * 4),
                  T("y", (1, 6, 6, 4), "int8", scale=[0.1], zero_point=[-3]),
                  T("p", (1, 3, 3, 4), "int8", scale=[0.1], zero_point=[-3])],
                 [Op("CONV_2D", [0, 1, 2], [3], ("Conv2DOptions", {"StrideH": 1, "StrideW": 1})),
                  Op("AVERAGE_POOL_2D", [3], [4], ("Pool2DOptions", {
                      "Padding": 1, "StrideH": 2, "StrideW": 2, "FilterHeight": 2,
                      "FilterWidth": 2}))], [0], [4])
    fc = Model([T("x", (1, 8)), T("w", (3, 8), data=rng.standard_normal((3, 8))),
                T("y", (1, 3)), T("s", (1, 3))],
               [Op("FULLY_CONNECTED", [0, 1, -1], [2],
                   ("FullyConnectedOptions", {"FusedActivationFunction": 1})),
                Op("SOFTMAX", [2], [3], ("SoftmaxOptions", {"Beta": 1.0}))], [0], [3])
    return [conv, fc]


SEEDS = [write(m) for m in _seed_models()]
SHARED = [SHARED_MODELS / "tflite" / f"{n}.tflite" for n in ("kws_ref_model", "ad01_int8")]
BASES = SEEDS + [p.read_bytes() for p in SHARED if p.exists()]


@st.composite
def mutated(draw) -> bytes:
    data = bytearray(draw(st.sampled_from(BASES)))
    for _ in range(draw(st.integers(1, 4))):
        if not data:
            break
        kind = draw(st.sampled_from(["flip", "set", "truncate", "delete", "splice"]))
        pos = draw(st.integers(0, len(data) - 1))
        if kind == "flip":
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set":
            data[pos] = draw(st.sampled_from([0x00, 0xFF, 0x7F, 0x80, 0x01, 0x10]))
        elif kind == "truncate":
            del data[pos:]
        elif kind == "delete":
            del data[pos:pos + draw(st.integers(1, 16))]
        else:
            data[pos:pos] = draw(st.binary(min_size=1, max_size=16))
    return bytes(data)


@st.composite
def restructured(draw) -> bytes:
    model = _seed_models()[draw(st.integers(0, 1))]
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["index", "shape", "data", "op", "dtype", "quant", "io",
                                     "subgraphs", "option"]))
        op = model.ops[draw(st.integers(0, len(model.ops) - 1))]
        t = model.tensors[draw(st.integers(0, len(model.tensors) - 1))]
        if kind == "index":
            op.inputs[draw(st.integers(0, len(op.inputs) - 1))] = draw(st.integers(-2, 9))
        elif kind == "shape" and t.shape:
            shape = list(t.shape)
            shape[draw(st.integers(0, len(shape) - 1))] = draw(st.integers(-2, 40))
            t.shape = tuple(shape)
        elif kind == "data" and t.data is not None:
            t.data = np.asarray(t.data).reshape(-1)[:draw(st.integers(0, 5))]
        elif kind == "op":
            op.builtin = draw(st.sampled_from(["CONV_2D", "DEPTHWISE_CONV_2D", "SOFTMAX", "ADD",
                                               "RESHAPE", "MAX_POOL_2D", "TANH", "CUSTOM"]))
        elif kind == "dtype":
            t.dtype = draw(st.sampled_from(["float32", "int8", "int32", "uint8", "int16"]))
            if t.data is not None:
                t.data = np.asarray(t.data).astype(t.dtype)
        elif kind == "quant":
            t.scale = draw(st.sampled_from([None, [0.0], [-1.0], [float("nan")], [0.1, 0.2]]))
            t.zero_point = None if t.scale is None else [draw(st.integers(-300, 300))] * len(
                t.scale)
            t.axis = draw(st.integers(-1, 4))
        elif kind == "io":
            model.outputs = [draw(st.integers(-1, 7))]
        elif kind == "subgraphs":
            model.subgraphs = draw(st.integers(0, 2))
        elif kind == "option" and op.options is not None:
            name, fields = op.options
            if fields:
                key = draw(st.sampled_from(sorted(fields)))
                fields[key] = draw(st.integers(-1, 7)) if not isinstance(fields[key], float) \
                    else draw(st.sampled_from([0.0, -1.0, float("inf")]))
    try:
        return write(model)
    except (ValueError, TypeError, OverflowError, AttributeError):
        return write(_seed_models()[0])  # the writer itself refused the combination


def _exercise(data: bytes) -> None:
    exercise(data, load_model, "fuzz.tflite")


@pytest.mark.slow
@_settings(2000)
@given(mutated())
def test_mutated_tflite_files_never_crash(data):
    _exercise(data)


@pytest.mark.slow
@_settings(600)
@given(restructured())
def test_restructured_tflite_files_never_crash(data):
    _exercise(data)
