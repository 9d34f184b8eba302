"""Drive onnx.backend.test's node cases with Kiln's reference interpreter as the backend.

The case list is computed: every node case whose operators are all in Kiln's registry (at an
opset Kiln reads) runs, except the documented exclusions in exclusions.py; outputs are compared
with onnx.backend.test's own tolerance check. `python -m tests.conformance.summary` prints the
counts (passed / claimed / excluded).

Kiln compiles for static shapes, so shape-like parameters (Reshape's shape, Slice's starts, a
reduction's axes) must be known when the model is loaded. Many cases feed them as graph inputs;
the harness binds small inputs (at most 16 elements, at most one dimension: integer axes and
shapes, float Resize scales) as initializers holding the case's own values, which is how such a
model reaches Kiln in practice. The interpreter computes the same thing either way; larger
tensors always stay runtime inputs.
"""

from __future__ import annotations

import re

import onnx
import pytest
from onnx import numpy_helper
from onnx.backend.test.runner import Runner, _normalize_tensor

from tests.conformance.cases import node_cases
from tests.conformance.exclusions import EXCLUDED
from tests.conformance.kiln_backend import KilnBackend, claims

CASES = {c.name: c for c in node_cases()}


def excluded_reason(name: str) -> str | None:
    """The documented reason a claimed case is excluded, or None."""
    for pattern, reason in EXCLUDED.items():
        if re.fullmatch(pattern, name):
            return reason
    return None


CLAIMED = sorted(name for name, case in CASES.items() if claims(case.model))
RUN = [name for name in CLAIMED if excluded_reason(name) is None]


BIND_LIMIT = 16


def bind_parameters(model: onnx.ModelProto, inputs: list) -> tuple[onnx.ModelProto, list]:
    """Move small (parameter-like) graph inputs into initializers with the case's values."""
    bound = onnx.ModelProto()
    bound.CopyFrom(model)
    # Before IR version 4 an initializer had to be a graph input too: bound, it is not one.
    bound.ir_version = max(bound.ir_version, 4)
    del bound.graph.input[:]
    remaining = []
    for info, array in zip(model.graph.input, inputs):
        array = _normalize_tensor(array)
        if array.ndim <= 1 and array.size <= BIND_LIMIT:
            bound.graph.initializer.append(numpy_helper.from_array(array, info.name))
        else:
            bound.graph.input.append(info)
            remaining.append(array)
    return bound, remaining


def run_case(name: str) -> None:
    """Run one conformance case through Kiln; raises AssertionError on a mismatch."""
    case = CASES[name]
    for inputs, expected in case.data_sets:
        model, feeds = bind_parameters(case.model, list(inputs))
        outputs = list(KilnBackend.prepare(model).run(feeds))
        expected = [_normalize_tensor(e) for e in expected]
        Runner.assert_similar_outputs(expected, outputs, rtol=case.rtol, atol=case.atol)


@pytest.mark.parametrize("name", RUN)
def test_conformance(name):
    run_case(name)


def test_every_exclusion_matches_a_claimed_case():
    stale = [p for p in EXCLUDED if not any(re.fullmatch(p, n) for n in CLAIMED)]
    assert not stale, f"exclusions that match no claimed case: {stale}"
