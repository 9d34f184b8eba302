"""Every builtin of breadth_cases against its oracle, then all of them compiled at once.

Each case runs through Kiln's loaded graph and its final (passed) graph in the reference
interpreter: int8 bit for bit with TFLite Micro, float within 1e-5 of LiteRT. The cases of one
element type, joined into one model, are then compiled for the host (run in this process) and
for Cortex-M7 (run under QEMU), and checked the same way, every output element.
"""

from __future__ import annotations

import numpy as np
import pytest

from compiler.codegen.host import HostNet
from compiler.driver import compilation, compile_graph
from compiler.frontends.load import load_model
from compiler.interpreter import run
from tests.codegen import firmware
from tests.helpers import assert_close
from tests.tflite.breadth_cases import CASES, cases_of, merged
from tests.tflite.oracles import litert, tflm
from tests.tflite.writer import Model, write

SEEDS = range(3)


def _feeds(model: Model, shapes: dict, integer: bool, seed: int,
           domains: dict | None = None) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for index in model.inputs:
        t = model.tensors[index]
        n, domain = t.name, (domains or {}).get(t.name)
        if t.dtype == "bool":
            feeds[n] = rng.integers(0, 2, shapes[n]).astype(bool)
        elif t.dtype == "int32":
            feeds[n] = (domain(rng, shapes[n]) if domain else
                        rng.integers(-300, 300, shapes[n]).astype(np.int32))
        elif t.dtype == "int8":
            # Few distinct codes, so that comparisons also meet equal values.
            feeds[n] = rng.integers(-128, 128, shapes[n]).astype(np.int8)
            if rng.random() < 0.5:
                feeds[n] = (feeds[n] // 32 * 32).astype(np.int8)
        else:
            feeds[n] = (domain(rng, shapes[n]) if domain else
                        rng.standard_normal(shapes[n]).astype(np.float32))
    return feeds


def oracle_outputs(data: bytes, model: Model, feeds: dict, integer: bool) -> dict:
    """Every output of the model by name, as TFLite Micro (int8) or LiteRT (float) gives it."""
    names = [model.tensors[i].name for i in model.outputs]
    if integer:
        runtime = tflm(data)
        for i, index in enumerate(model.inputs):
            runtime.set_input(feeds[model.tensors[index].name], i)
        runtime.invoke()
        return {n: runtime.get_output(i) for i, n in enumerate(names)}
    runtime = litert(data)
    for d in runtime.get_input_details():
        runtime.set_tensor(d["index"], feeds[d["name"]])
    runtime.invoke()
    return {d["name"]: runtime.get_tensor(d["index"]) for d in runtime.get_output_details()}


def compare(ours: dict, want: dict, integer: bool, where: str) -> None:
    for name, expected in want.items():
        got = ours[name]
        assert got.shape == expected.shape, f"{name} {where}: {got.shape} vs {expected.shape}"
        if integer or expected.dtype.kind in "biu":
            differ = int(np.count_nonzero(got.astype(np.int64) != expected.astype(np.int64)))
            assert differ == 0, f"{name} {where}: {differ} elements differ from TFLite Micro"
        else:
            assert_close(got, expected, rtol=1e-5, atol=1e-5, what=f"{name} {where}")


def _by_name(graph, values: dict) -> dict:
    return {v.name: values[v.name] for v in graph.outputs}


@pytest.mark.parametrize("case,dtype", [pytest.param(c, d, id=f"{c.id}-{d}")
                                        for c in CASES for d in c.dtypes])
def test_builtin_matches_its_oracle(case, dtype):
    integer = dtype != "float32"
    model, shapes = case.build(integer)
    data = write(model)
    graph = load_model(data)
    final = compilation(load_model(data)).final
    for seed in SEEDS:
        feeds = _feeds(model, shapes, integer, seed, dict.fromkeys(shapes, case.domain))
        want = oracle_outputs(data, model, feeds, integer)
        for g, stage in ((graph, "loaded"), (final, "final")):
            got = run(g, feeds)
            compare(dict(zip(want, (got[v.name] for v in g.outputs))), want, integer, stage)


def _merged(dtype: str):
    integer = dtype == "int8"
    model, shapes, domains = merged(cases_of(dtype), integer)
    data = write(model)
    final = compilation(load_model(data)).final
    feeds = _feeds(model, shapes, integer, 11, domains)
    want = oracle_outputs(data, model, feeds, integer)
    return final, feeds, want, integer


@pytest.mark.parametrize("dtype", ["int8", "float32"])
def test_every_builtin_compiled_for_the_host(dtype):
    final, feeds, want, integer = _merged(dtype)
    runner = HostNet(compile_graph(final, "host", name="net"))
    try:
        got = runner.run(feeds)
    finally:
        runner.close()
    compare(dict(zip(want, (got[v.name] for v in final.outputs))), want, integer, "on the host")


@pytest.mark.parametrize("dtype", ["int8", "float32"])
def test_every_builtin_on_cortex_m7_under_qemu(dtype, tmp_path):
    firmware.require_tools()
    final, feeds, want, integer = _merged(dtype)
    net = compile_graph(final, "cortex-m7", name="net")
    elf = firmware.build(net, firmware.main_c(net, feeds), "mps2-an500", tmp_path)
    stdout, _ = firmware.run(elf, "mps2-an500")
    got = firmware.parse_outputs(net, stdout)
    compare(dict(zip(want, (got[v.name] for v in final.outputs))), want, integer,
            "on Cortex-M7")
