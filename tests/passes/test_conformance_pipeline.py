"""The default pipeline on every ONNX conformance case Kiln runs: the compiled graph still gives
the expected outputs (edge cases of every operator: 1-D and 3-D windows, odd paddings, ...)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx.backend.test.runner import Runner, _normalize_tensor

from compiler.frontends.onnx import load_onnx
from compiler.interpreter import run
from compiler.passes import run_pipeline
from tests.conformance.test_onnx_backend import CASES, RUN, bind_parameters


@pytest.mark.slow
@pytest.mark.parametrize("name", RUN)
def test_default_pipeline_keeps_conformance_outputs(name):
    case = CASES[name]
    inputs, expected = case.data_sets[0]
    model, values = bind_parameters(case.model, list(inputs))
    graph = load_onnx(model)
    compiled = run_pipeline(graph, snapshots=False).graph
    outputs = run(compiled, {p.name: np.asarray(a) for p, a in zip(graph.inputs, values)})
    # Folding and fusion reassociate float arithmetic: rtol 1e-4 at least, as for real models.
    Runner.assert_similar_outputs([_normalize_tensor(e) for e in expected],
                                  [outputs[v.name] for v in compiled.outputs],
                                  rtol=max(case.rtol, 1e-4), atol=max(case.atol, 1e-5))
