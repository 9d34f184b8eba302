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


