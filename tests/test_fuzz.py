"""Fuzz the loader with mutated real models: it may refuse, it must never crash.

Hypothesis mutates the serialized models (flipped bytes, truncations, spliced runs, deletions)
and, since most byte-level mutants stop at the parser, also the decoded structure (attribute
values, dimensions, operator types, wiring): 300 cases of each in `make test`, 2,500 with
KILN_FUZZ_LONG=1. A case passes when the model loads and survives the verifier, stats, export
and (when small) the interpreter, or when loading raises Kiln's ModelError.
"""

from __future__ import annotations

import os
import re

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.errors import KilnError, ModelError
from compiler.frontends.onnx import load_onnx, to_onnx
from compiler.inputs import random_inputs
from compiler.interpreter import run
from compiler.stats import compute_stats
from compiler.verify import problems
from tests.conftest import SAMPLE_MODEL, SHARED_MODELS, shared_models

SEEDS = [SAMPLE_MODEL] + [SHARED_MODELS / "onnx" / f"{name}.onnx"
                          for name in ("mnist-8", "ad01_int8", "kws_ref_model")]
BASES = [p.read_bytes() for p in SEEDS if p.exists()]

# `make test` runs 300 seeded examples per strategy; KILN_FUZZ_LONG=1 the long campaign of 2,500;
# `KILN_FUZZ_EXAMPLES=N` a randomized campaign of N.
CAMPAIGN = int(os.environ.get("KILN_FUZZ_EXAMPLES", "0"))
EXAMPLES = 2500 if os.environ.get("KILN_FUZZ_LONG", "") not in ("", "0") else 300
PYTHON_ERROR = re.compile(r"\b[A-Z]\w*(Error|Exception)\b|object has no attribute|"
                          r"cannot reshape array|index \d+ is out of bounds")


def _settings(examples: int):
    return settings(max_examples=CAMPAIGN or examples, deadline=None, derandomize=not CAMPAIGN,
                    database=None, print_blob=bool(CAMPAIGN),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# Only models whose intermediate tensors stay small are run after a successful load.
RUN_LIMIT_BYTES = 16 << 20


@st.composite
def mutated(draw) -> bytes:
    data = bytearray(draw(st.sampled_from(BASES)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "set", "truncate", "delete", "splice"]))
        pos = draw(st.integers(0, len(data) - 1)) if data else 0
        if not data:
            break
        if kind == "flip":
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set":
            data[pos] = draw(st.sampled_from([0x00, 0xFF, 0x7F, 0x80, 0x08, 0x12, 0x1A]))
        elif kind == "truncate":
            del data[pos:]
        elif kind == "delete":
            del data[pos:pos + draw(st.integers(1, 16))]
        else:
            chunk = draw(st.binary(min_size=1, max_size=16))
            data[pos:pos] = chunk
    return bytes(data)


OP_TYPES = ["Relu", "Conv", "MaxPool", "Add", "Reshape", "Gemm", "MatMul", "Softmax",
            "Transpose", "Concat", "AveragePool", "QuantizeLinear", "DequantizeLinear", "Flatten"]


@st.composite
def restructured(draw) -> bytes:
    model = onnx.load_from_string(draw(st.sampled_from(BASES)))
    graph = model.graph
    for _ in range(draw(st.integers(1, 3))):
        node = graph.node[draw(st.integers(0, len(graph.node) - 1))]
        kind = draw(st.sampled_from(["attr", "dims", "op", "wire", "drop", "init", "opset"]))
        if kind == "attr" and node.attribute:
            attr = node.attribute[draw(st.integers(0, len(node.attribute) - 1))]
            if attr.ints:
                attr.ints[draw(st.integers(0, len(attr.ints) - 1))] = draw(st.integers(-3, 9))
            elif attr.type == onnx.AttributeProto.INT:
                attr.i = draw(st.integers(-3, 9))
            elif attr.type == onnx.AttributeProto.FLOAT:
                attr.f = draw(st.sampled_from([0.0, -1.0, float("nan"), float("inf"), 1e30]))
        elif kind == "dims" and graph.input:
            dims = graph.input[0].type.tensor_type.shape.dim
            if dims:
                dims[draw(st.integers(0, len(dims) - 1))].dim_value = draw(st.integers(0, 7))
        elif kind == "op":
            node.op_type = draw(st.sampled_from(OP_TYPES))
        elif kind == "wire" and node.input:
            names = [o for n in graph.node for o in n.output] + [i.name for i in graph.input]
            node.input[draw(st.integers(0, len(node.input) - 1))] = draw(st.sampled_from(names))
        elif kind == "drop" and node.input:
            del node.input[-1]
        elif kind == "init" and graph.initializer:
            tensor = graph.initializer[draw(st.integers(0, len(graph.initializer) - 1))]
            if tensor.dims:
                tensor.dims[draw(st.integers(0, len(tensor.dims) - 1))] = draw(st.integers(0, 9))
        elif kind == "opset":
            model.opset_import[0].version = draw(st.integers(1, 30))
    return model.SerializeToString()


def _exercise(data: bytes) -> None:
    exercise(data, load_onnx, "fuzz.onnx")


def exercise(data: bytes, load, label: str) -> None:
    """Load `data` with `load`; a refusal must be one clean line, a graph must survive use.

    Every check, stats, export (when it can be expressed) and, when small, a run.
    """
    try:
        graph = load(data, label=label)
    except ModelError as exc:
        assert str(exc).startswith(f"{label}: ")
        assert "\n" not in str(exc)
        # A sentence about the model, never a Python exception's text.
        assert not PYTHON_ERROR.search(str(exc)), str(exc)
        return
    problems(graph)
    compute_stats(graph)
    try:
        to_onnx(graph)
    except KilnError:
        pass
    if sum(v.type.nbytes for v in graph.values()) <= RUN_LIMIT_BYTES:
        try:
            with np.errstate(all="ignore"):
                run(graph, random_inputs(graph))
        except KilnError:
            pass


@pytest.mark.slow
@_settings(EXAMPLES)
@given(mutated())
def test_mutated_models_never_crash(data):
    _exercise(data)


@pytest.mark.slow
@_settings(EXAMPLES)
@given(restructured())
def test_restructured_models_never_crash(data):
    _exercise(data)


def test_fuzz_has_every_seed():
    """The shared seeds are not dropped in silence: without them this skips, under CI fails."""
    if len(BASES) < len(SEEDS):
        shared_models()
    assert len(BASES) == len(SEEDS), [str(p) for p in SEEDS if not p.exists()]
