"""The example program of a host bundle builds with `make`, runs, and prints the right outputs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

from compiler.codegen.bundle import write_bundle
from compiler.codegen.targets import get_target
from compiler.driver import compile_graph
from compiler.frontends.onnx import load_onnx
from compiler.passes.runner import run_pipeline
from tests.conftest import SAMPLE_MODEL
from tests.helpers import make_model, ort_run

DIGIT = Path(SAMPLE_MODEL).parent / "digit_2.npy"

pytestmark = pytest.mark.usefixtures("c_compiler")


def _printed_outputs(stdout: str) -> dict[str, np.ndarray]:
    """Outputs printed as 'output NAME DTYPE[SHAPE]' followed by one line of values."""
    lines = stdout.splitlines()
    found = {}
    for k, line in enumerate(lines):
        if line.startswith("output "):
            name, spec = line[len("output "):].rsplit(" ", 1)
            shape = [int(d) for d in spec[spec.index("[") + 1:-1].split(",")]
            found[name] = np.array(lines[k + 1].split(), np.float32).reshape(shape)
    return found


@pytest.fixture(scope="module")
def sample_graph():
    return run_pipeline(load_onnx(onnx.load(SAMPLE_MODEL)), snapshots=False).graph


@pytest.mark.parametrize("weights", ["embedded", "external"])
def test_make_run_matches_onnxruntime(tmp_path, sample_graph, weights):
    net = compile_graph(sample_graph, get_target("host"), name="digits", weights=weights)
    folder = tmp_path / "bundle"
    write_bundle(net, folder)
    image = np.load(DIGIT).astype(np.float32)
    image.tofile(tmp_path / "digit.bin")
    done = subprocess.run(["make", "-s", "-C", str(folder), "run", f"INPUT={tmp_path}/digit.bin"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    got = _printed_outputs(done.stdout)
    (want,) = ort_run(onnx.load(SAMPLE_MODEL), {"image": image})
    assert list(got) == ["logits"]
    assert int(np.argmax(got["logits"])) == int(np.argmax(want)) == 2
    np.testing.assert_allclose(got["logits"], want, rtol=1e-4, atol=1e-4)


def test_pattern_input_and_io_in_arena(tmp_path, sample_graph):
    """Without an input file the program uses its documented pattern, wherever the I/O lives."""
    net = compile_graph(sample_graph, get_target("host"), io_in_arena=True)
    assert net.inputs[0].region == "activations"
    write_bundle(net, tmp_path)
    done = subprocess.run(["make", "-s", "-C", str(tmp_path), "run",
                           "CFLAGS=-O2 -std=c99 -Wall -Wextra -Werror"], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    i = np.arange(64)
    pattern = (((i * 7) % 17).astype(np.float32) / np.float32(17) - np.float32(0.5))
    (want,) = ort_run(onnx.load(SAMPLE_MODEL), {"image": pattern.reshape(1, 1, 8, 8)})
    np.testing.assert_allclose(_printed_outputs(done.stdout)["logits"], want, rtol=1e-4,
                               atol=1e-4)


def test_wrong_input_size_is_one_clear_line(tmp_path, sample_graph):
    write_bundle(compile_graph(sample_graph, get_target("host")), tmp_path)
    (tmp_path / "short.bin").write_bytes(b"\0" * 10)
    done = subprocess.run(["make", "-s", "-C", str(tmp_path), "run",
                           f"INPUT={tmp_path}/short.bin"], capture_output=True, text=True)
    assert done.returncode != 0
    assert "must hold exactly 256 bytes" in done.stderr


def test_several_inputs_and_outputs_with_awkward_names(tmp_path):
    """Inputs are read back to back in header order; names that are not C-safe stay harmless."""
    odd = "out */ 0:\\\"x\""
    model = make_model([helper.make_node("Add", ["x", "y"], ["z"]),
                        helper.make_node("Relu", ["x"], [odd])],
                       [("x", "float32", [2, 3]), ("y", "float32", [2, 3])],
                       [("z", "float32", [2, 3]), (odd, "float32", [2, 3])])
    graph = run_pipeline(load_onnx(model), snapshots=False).graph
    write_bundle(compile_graph(graph, get_target("host"), io_in_arena=True), tmp_path)
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    y = np.full((2, 3), 0.25, np.float32)
    np.concatenate([x.ravel(), y.ravel()]).tofile(tmp_path / "in.bin")
    done = subprocess.run(["make", "-s", "-C", str(tmp_path), "run", "INPUT=in.bin",
                           "CFLAGS=-std=c99 -Wall -Wextra -Werror"], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    got = _printed_outputs(done.stdout)
    want = ort_run(model, {"x": x, "y": y})
    assert list(got) == ["z", odd]
    for name, expected in zip(got, want):
        np.testing.assert_allclose(got[name], expected, rtol=1e-6)
