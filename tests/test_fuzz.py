"""Fuzz the loader with mutated bytes of real models: it may refuse, it must never crash.

Hypothesis mutates the serialized models (flipped bytes, truncations, spliced runs, deletions)
for a few thousand cases; a case passes when the model loads and survives the verifier, stats,
export and (when small) the interpreter, or when loading raises Kiln's ModelError.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.errors import KilnError, ModelError
from compiler.frontends.onnx import load_onnx, to_onnx
from compiler.inputs import random_inputs
from compiler.interpreter import run
from compiler.stats import compute_stats
from compiler.verify import problems
from tests.conftest import SAMPLE_MODEL, SHARED_MODELS

SEEDS = [SAMPLE_MODEL] + [SHARED_MODELS / "onnx" / f"{name}.onnx"
                          for name in ("mnist-8", "ad01_int8", "kws_ref_model")]
BASES = [p.read_bytes() for p in SEEDS if p.exists()]

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


def _exercise(data: bytes) -> None:
    try:
        graph = load_onnx(data, label="fuzz.onnx")
    except ModelError as exc:
        assert str(exc).startswith("fuzz.onnx: ")
        assert "\n" not in str(exc)
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
@settings(max_examples=3000, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated())
def test_mutated_models_never_crash(data):
    _exercise(data)


def test_fuzz_has_seeds():
    assert BASES, "no seed model found"
