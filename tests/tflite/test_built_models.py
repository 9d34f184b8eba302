"""The whole models of built_models, float and int8, against their oracles at every stage.

int8 runs bit for bit with TFLite Micro, float within 1e-5 of LiteRT: in the reference
interpreter (loaded and final graphs), compiled for the host, and compiled for Cortex-M7 under
QEMU.
"""

from __future__ import annotations

import pytest

from compiler.driver import compilation
from compiler.frontends.load import load_model
from compiler.interpreter import run
from tests.tflite.built_models import BUILT, KINDS
from tests.tflite.oracles import compare_outputs, compiled_outputs, feeds_for, oracle_outputs
from tests.tflite.writer import write

PARAMS = [pytest.param(name, integer, id=f"{name}-{'int8' if integer else 'float'}")
          for name in BUILT for integer in KINDS[name]]


def _prepared(name: str, integer: bool, seed: int):
    model, shapes = BUILT[name](integer)
    data = write(model)
    feeds = feeds_for(model, shapes, integer, seed)
    return data, feeds, oracle_outputs(data, model, feeds, integer)


@pytest.mark.parametrize("name,integer", PARAMS)
def test_the_interpreter_matches_the_oracle(name, integer):
    for seed in range(2):
        data, feeds, want = _prepared(name, integer, seed)
        for graph, stage in ((load_model(data), "loaded"),
                             (compilation(load_model(data)).final, "final")):
            got = run(graph, feeds)
            compare_outputs(dict(zip(want, (got[v.name] for v in graph.outputs))), want, integer,
                            stage)


@pytest.mark.parametrize("target", ["host", "cortex-m7"])
@pytest.mark.parametrize("name,integer", PARAMS)
def test_compiled_code_matches_the_oracle(name, integer, target, tmp_path):
    data, feeds, want = _prepared(name, integer, 5)
    final = compilation(load_model(data)).final
    got = compiled_outputs(final, feeds, target, tmp_path)
    compare_outputs(dict(zip(want, got)), want, integer, f"on {target}")
