"""State kept between inferences: a streaming model, inference after inference, as TFLite Micro.

The streaming model (breadth_cases.streaming_model) joins each frame to a history held in a
resource variable; an LSTM keeps its hidden and cell state in variable tensors. Six inferences
in a row must give TFLite Micro's outputs in the interpreter (the loaded and the final graph,
state carried by `Stream`), compiled for the host (the network keeps its state in the mutable
region) and on Cortex-M7 under QEMU; a reset starts over.
"""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from compiler.codegen.bundle import header, report, write_bundle
from compiler.codegen.host import HostNet
from compiler.driver import compilation, compile_graph
from compiler.frontends.load import load_model
from compiler.interpreter import run
from compiler.ir.state import Stream, data_inputs, variables
from tests.codegen import firmware
from tests.tflite.oracles import compare_outputs, tflm
from tests.tflite.stateful_cases import (
    lstm_int8_model,
    lstm_model,
    streaming_model,
    svdf_model,
)
from tests.tflite.writer import write

STEPS = 6


MODELS = {"stream": streaming_model, "svdf": svdf_model,
          "lstm": lambda integer: (lstm_int8_model if integer else lstm_model)(
              (2, 3, 3), 4, False, 0.0)}


def _frames(shapes: dict, integer: bool) -> list[dict]:
    rng = np.random.default_rng(3)
    return [{name: (rng.integers(-128, 128, shape).astype(np.int8) if integer
                    else rng.standard_normal(shape).astype(np.float32))
             for name, shape in shapes.items()} for _ in range(STEPS)]


def _oracle(data: bytes, frames: list[dict]) -> list[np.ndarray]:
    """TFLite Micro's outputs, one interpreter for every inference (its state carried over)."""
    runtime = tflm(data)
    outputs = []
    for feeds in frames:
        runtime.set_input(feeds["x"], 0)
        runtime.invoke()
        outputs.append(runtime.get_output(0).copy())
    return outputs


def _prepared(kind: str, integer: bool):
    model, shapes = MODELS[kind](integer)
    data = write(model)
    frames = _frames(shapes, integer)
    return data, frames, _oracle(data, frames), integer


@pytest.fixture(params=[False, True], ids=["float32", "int8"])
def streaming(request):
    return _prepared("stream", request.param)


@pytest.fixture(params=[(k, i) for k in MODELS for i in (False, True)],
                ids=[f"{k}-{'int8' if i else 'float32'}" for k in MODELS for i in (False, True)])
def stateful(request):
    """Every model with state: the resource variable stream, an LSTM's variable tensors."""
    return _prepared(*request.param)


def test_the_model_reads_as_one_state_variable(streaming):
    data, _, _, _ = streaming
    graph = load_model(data)
    (var,) = variables(graph)
    assert var.name == "frames" and var.output in {v.name for v in graph.outputs}
    assert [p.name for p in data_inputs(graph)] == ["x"]
    assert var.initial.shape == (1, 12)


def test_the_interpreter_carries_state_like_tflite_micro(stateful):
    data, frames, want, integer = stateful
    for graph in (load_model(data), compilation(load_model(data)).final):
        stream = Stream(graph)
        for step, (feeds, expected) in enumerate(zip(frames, want)):
            got = stream.run(feeds, lambda f, g=graph: run(g, f))[graph.outputs[0].name]
            compare_outputs({"y": got}, {"y": expected}, integer, f"inference {step}")


def test_a_compiled_network_keeps_its_state_on_the_host(stateful):
    data, frames, want, integer = stateful
    final = compilation(load_model(data)).final
    for io_in_arena in (False, True):
        net = compile_graph(final, "host", name="stream", io_in_arena=io_in_arena)
        assert net.state and all(slot.input.region == "mutable" for slot in net.state)
        runner = HostNet(net)
        for round_ in range(2):  # the second round after a reset starts over
            for step, (feeds, expected) in enumerate(zip(frames, want)):
                got = runner.run(feeds)[final.outputs[0].name]
                compare_outputs({"y": got}, {"y": expected}, integer,
                                f"round {round_}, inference {step}")
            runner.reset_state()
        runner.close()


def test_the_bundle_names_its_state_region(streaming):
    data, _, _, _ = streaming
    net = compile_graph(compilation(load_model(data)).final, "host", name="stream")
    text = header(net)
    assert "void stream_reset_state(uint8_t *mutable_region);" in text
    assert "#define STREAM_STATE_BYTES" in text and "#define STREAM_STATE_FRAMES_OFFSET" in text
    doc = report(net)
    (entry,) = doc["state"]
    assert entry["name"] == "frames" and entry["bytes"] == net.state[0].nbytes
    assert doc["regions"]["state"] == net.state[0].nbytes


def test_a_compiled_network_keeps_its_state_on_cortex_m7(stateful, tmp_path):
    firmware.require_tools()
    data, frames, want, integer = stateful
    net = compile_graph(compilation(load_model(data)).final, "cortex-m7", name="stream")
    machine = firmware.board_for("cortex-m7").qemu_machine
    elf = firmware.build(net, firmware.main_c(net, frames), machine, tmp_path)
    stdout, _ = firmware.run(elf, machine)
    for step, expected in enumerate(want):
        got = firmware.parse_outputs(net, stdout, step)[net.outputs[0].name]
        compare_outputs({"y": got}, {"y": expected}, integer, f"inference {step} on Cortex-M7")


@pytest.mark.usefixtures("c_compiler")
def test_a_written_bundle_streams_from_its_header_and_from_python(streaming, tmp_path):
    """A C program written against stream.h alone resets the state, then runs the frames; the
    bundle loaded back by HostNet.from_bundle gives the same, and both are TFLite Micro's."""
    data, frames, want, integer = streaming
    net = compile_graph(compilation(load_model(data)).final, "host", name="stream")
    write_bundle(net, tmp_path / "bundle")
    ctype, fmt = ("int8_t", "%d") if integer else ("float", "%.9g")
    values = ", ".join(str(v) for f in frames for v in f["x"].ravel().tolist())
    main = f"""#include <stdio.h>
#include <string.h>
#include "stream.h"
static uint8_t mutable_region[STREAM_MUTABLE_SIZE] __attribute__((aligned(STREAM_ALIGNMENT)));
static uint8_t activations[STREAM_ACTIVATIONS_SIZE + 1]
    __attribute__((aligned(STREAM_ALIGNMENT)));
static const {ctype} frames[] = {{{values}}};
int main(void) {{
    stream_reset_state(mutable_region);
    for (int s = 0; s < {STEPS}; s++) {{
        memcpy(mutable_region + STREAM_INPUT_X_OFFSET, frames + s * 4, STREAM_INPUT_X_BYTES);
        if (stream(NULL, mutable_region, activations)) return 1;
        const {ctype} *y = (const {ctype} *)(mutable_region + STREAM_OUTPUT_Y_OFFSET);
        for (unsigned k = 0; k < STREAM_OUTPUT_Y_BYTES / sizeof *y; k++)
            printf("{fmt}\\n", y[k]);
    }}
    return 0;
}}
"""
    (tmp_path / "main.c").write_text(main)
    exe = tmp_path / "main"
    subprocess.run(["cc", "-std=c99", "-Wall", "-Werror", "-I", str(tmp_path / "bundle"),
                    str(tmp_path / "main.c"), str(tmp_path / "bundle" / "stream.o"), "-lm",
                    "-o", str(exe)], check=True)
    printed = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    got = np.array([float(v) for v in printed.split()]).reshape(STEPS, *want[0].shape)
    runner = HostNet.from_bundle(tmp_path / "bundle")
    for step, expected in enumerate(want):
        compare_outputs({"y": got[step].astype(expected.dtype)}, {"y": expected}, integer,
                        f"inference {step} of the C program")
        loaded = runner.run(frames[step])["y"]
        compare_outputs({"y": loaded}, {"y": expected}, integer, f"inference {step} reloaded")
    runner.close()
