"""Oracles for .tflite files written in tests: TFLite Micro for int8, LiteRT for float."""

import numpy as np

from compiler.driver import compilation
from compiler.frontends.load import load_model
from compiler.interpreter import run
from tests.conftest import require_module
from tests.helpers import assert_close
from tests.tflite.writer import Model, T, write

SEEDS = range(8)
SAME, VALID = 0, 1
NONE, RELU, RELU_N1_TO_1, RELU6 = 0, 1, 2, 3


def tflm(data: bytes):
    runtime = require_module("tflite_micro.python.tflite_micro.runtime",
                             "the tflite-micro wheel exists for Linux x86-64 only")
    return runtime.Interpreter.from_bytes(data, arena_size=1 << 20)


def litert(data: bytes):
    litert = require_module("ai_edge_litert.interpreter", "LiteRT ships for Linux x86-64 here")
    interpreter = litert.Interpreter(model_content=data, num_threads=1)
    interpreter.allocate_tensors()
    return interpreter


def check_int8(model: Model, shapes: dict):
    """Kiln's loaded graph and final stage against TFLite Micro, every element equal."""
    data = write(model)
    oracle = tflm(data)
    graph = load_model(data)
    final = compilation(load_model(data)).final
    names = [model.tensors[i].name for i in model.inputs]
    total = 0
    for seed in SEEDS:
        rng = np.random.default_rng(seed)
        feeds = {n: rng.integers(-128, 128, shapes[n]).astype(np.int8) for n in names}
        for i, n in enumerate(names):
            oracle.set_input(feeds[n], i)
        oracle.invoke()
        want = oracle.get_output(0)
        for g in (graph, final):
            ours = run(g, feeds)[g.outputs[0].name]
            assert ours.dtype == want.dtype and ours.shape == want.shape
            total += int(np.count_nonzero(ours.astype(np.int64) != want.astype(np.int64)))
    assert total == 0, f"{total} elements differ from TFLite Micro"


def check_float(model: Model, shapes: dict):
    data = write(model)
    oracle = litert(data)
    final = compilation(load_model(data)).final
    details = oracle.get_input_details()
    for seed in SEEDS[:3]:
        rng = np.random.default_rng(seed)
        feeds = {d["name"]: rng.standard_normal(shapes[d["name"]]).astype(np.float32)
                 for d in details}
        for d in details:
            oracle.set_tensor(d["index"], feeds[d["name"]])
        oracle.invoke()
        want = oracle.get_tensor(oracle.get_output_details()[0]["index"])
        ours = run(final, feeds)[final.outputs[0].name]
        assert_close(ours, want, rtol=1e-4, atol=1e-5)


def quantized(name, shape, scale, zp, dtype="int8"):
    return T(name, shape, dtype, scale=[scale], zero_point=[zp])


def feeds_for(model: Model, shapes: dict, integer: bool, seed: int,
              cases: dict | None = None) -> dict[str, np.ndarray]:
    """Random inputs by each input tensor's type, inside the domain of its case when given
    (`cases`: input name -> the Case it belongs to)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for index in model.inputs:
        t = model.tensors[index]
        n, case = t.name, (cases or {}).get(t.name)
        domain = case.domain if case is not None else None
        if t.dtype == "bool":
            feeds[n] = rng.integers(0, 2, shapes[n]).astype(bool)
        elif t.dtype == "int32":
            feeds[n] = (domain(rng, shapes[n]) if domain else
                        rng.integers(-300, 300, shapes[n]).astype(np.int32))
        elif t.dtype == "int8" and case is not None and case.int8_domain is not None:
            feeds[n] = case.int8_domain(rng, shapes[n])
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


def compare_outputs(ours: dict, want: dict, integer: bool, where: str) -> None:
    """Integer (and bool) outputs equal element for element, float ones within 1e-5."""
    for name, expected in want.items():
        got = ours[name]
        assert got.shape == expected.shape, f"{name} {where}: {got.shape} vs {expected.shape}"
        if integer or expected.dtype.kind in "biu":
            differ = int(np.count_nonzero(got.astype(np.int64) != expected.astype(np.int64)))
            assert differ == 0, f"{name} {where}: {differ} elements differ from TFLite Micro"
        else:
            assert_close(got, expected, rtol=1e-5, atol=1e-5, what=f"{name} {where}")


def compiled_outputs(final, feeds: dict, target: str, folder=None) -> list[np.ndarray]:
    """The final graph compiled for `target` and run, outputs in the graph's order.

    The host runs it in this process; Cortex-M7 on its QEMU board, firmware built in `folder`.
    """
    from compiler.codegen.host import HostNet
    from compiler.driver import compile_graph
    from tests.codegen import firmware

    net = compile_graph(final, target, name="net")
    if target == "host":
        runner = HostNet(net)
        try:
            got = runner.run(feeds)
        finally:
            runner.close()
    else:
        firmware.require_tools()
        machine = firmware.board_for(target).qemu_machine
        elf = firmware.build(net, firmware.main_c(net, feeds), machine, folder)
        stdout, _ = firmware.run(elf, machine)
        got = firmware.parse_outputs(net, stdout)
    return [got[v.name] for v in final.outputs]
