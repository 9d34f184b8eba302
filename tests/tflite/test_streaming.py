"""State kept between inferences: a streaming model, inference after inference, as TFLite Micro.

The model (breadth_cases.streaming_model) joins each frame to a history held in a resource
variable. Six inferences in a row must give TFLite Micro's outputs in the interpreter (the
loaded and the final graph, state carried by `Stream`), compiled for the host (the network
keeps its state in the mutable region) and on Cortex-M7 under QEMU; a reset starts over.
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
from tests.tflite.breadth_cases import streaming_model
from tests.tflite.oracles import compare_outputs, tflm
from tests.tflite.writer import write

STEPS = 6


def _frames(integer: bool) -> list[dict]:
    rng = np.random.default_rng(3)
    if integer:
        return [{"x": rng.integers(-128, 128, (1, 4)).astype(np.int8)} for _ in range(STEPS)]
    return [{"x": rng.standard_normal((1, 4)).astype(np.float32)} for _ in range(STEPS)]


def _oracle(data: bytes, frames: list[dict]) -> list[np.ndarray]:
    runtime = tflm(data)
    outputs = []
    for feeds in frames:
        runtime.set_input(feeds["x"], 0)
        runtime.invoke()
        outputs.append(runtime.get_output(0).copy())
    return outputs


@pytest.fixture(params=[False, True], ids=["float32", "int8"])
def streaming(request):
    integer = request.param
    model, _ = streaming_model(integer)
    data = write(model)
    frames = _frames(integer)
    return data, frames, _oracle(data, frames), integer


def test_the_model_reads_as_one_state_variable(streaming):
    data, _, _, _ = streaming
    graph = load_model(data)
    (var,) = variables(graph)
    assert var.name == "frames" and var.output in {v.name for v in graph.outputs}
    assert [p.name for p in data_inputs(graph)] == ["x"]
    assert var.initial.shape == (1, 12)


def test_the_interpreter_carries_state_like_tflite_micro(streaming):
    data, frames, want, integer = streaming
    for graph in (load_model(data), compilation(load_model(data)).final):
        stream = Stream(graph)
        for step, (feeds, expected) in enumerate(zip(frames, want)):
            got = stream.run(feeds, lambda f, g=graph: run(g, f))[graph.outputs[0].name]
            compare_outputs({"y": got}, {"y": expected}, integer, f"inference {step}")


def test_a_compiled_network_keeps_its_state_on_the_host(streaming):
    data, frames, want, integer = streaming
    final = compilation(load_model(data)).final
    for io_in_arena in (False, True):
        net = compile_graph(final, "host", name="stream", io_in_arena=io_in_arena)
        (slot,) = net.state
        assert slot.input.region == "mutable"
        assert slot.nbytes == 12 * np.dtype(slot.input.dtype).itemsize
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


def test_a_compiled_network_keeps_its_state_on_cortex_m7(streaming, tmp_path):
    firmware.require_tools()
    data, frames, want, integer = streaming
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
