"""Every builtin of breadth_cases against its oracle, then all of them compiled at once.

Each case runs through Kiln's loaded graph and its final (passed) graph in the reference
interpreter: int8 bit for bit with TFLite Micro, float within 1e-5 of LiteRT. The cases of one
element type, joined into one model, are then compiled for the host (run in this process) and
for Cortex-M7 (run under QEMU), and checked the same way, every output element.
"""

from __future__ import annotations

import pytest

from compiler.driver import compilation
from compiler.frontends.load import load_model
from compiler.interpreter import run
from tests.tflite.breadth_cases import CASES, cases_of, merged
from tests.tflite.oracles import compare_outputs, compiled_outputs, feeds_for, oracle_outputs
from tests.tflite.writer import write

SEEDS = range(3)


@pytest.mark.parametrize("case,dtype", [pytest.param(c, d, id=f"{c.id}-{d}")
                                        for c in CASES for d in c.dtypes])
def test_builtin_matches_its_oracle(case, dtype):
    integer = dtype != "float32"
    model, shapes = case.build(integer)
    data = write(model)
    graph = load_model(data)
    final = compilation(load_model(data)).final
    for seed in SEEDS:
        feeds = feeds_for(model, shapes, integer, seed, dict.fromkeys(shapes, case))
        want = oracle_outputs(data, model, feeds, integer)
        for g, stage in ((graph, "loaded"), (final, "final")):
            got = run(g, feeds)
            compare_outputs(dict(zip(want, (got[v.name] for v in g.outputs))), want, integer, stage)


def _merged(dtype: str):
    integer = dtype == "int8"
    model, shapes, domains = merged(cases_of(dtype), integer)
    data = write(model)
    final = compilation(load_model(data)).final
    feeds = feeds_for(model, shapes, integer, 11, domains)
    want = oracle_outputs(data, model, feeds, integer)
    return final, feeds, want, integer


@pytest.mark.parametrize("dtype", ["int8", "float32"])
def test_every_builtin_compiled_for_the_host(dtype):
    final, feeds, want, integer = _merged(dtype)
    got = compiled_outputs(final, feeds, "host")
    compare_outputs(dict(zip(want, got)), want, integer, "on the host")


@pytest.mark.parametrize("dtype", ["int8", "float32"])
def test_every_builtin_on_cortex_m7_under_qemu(dtype, tmp_path):
    final, feeds, want, integer = _merged(dtype)
    got = compiled_outputs(final, feeds, "cortex-m7", tmp_path)
    compare_outputs(dict(zip(want, got)), want, integer, "on Cortex-M7")
