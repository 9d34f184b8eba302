"""A written bundle: its header, report and files agree with the object and with each other."""

from __future__ import annotations

import json
import re
import subprocess

import llvmlite.binding as llvm
import numpy as np
import onnx
import pytest
from onnx import helper

from compiler.codegen import bundle
from compiler.codegen.bundle import report, write_bundle
from compiler.codegen.targets import BOARDS, get_target
from compiler.driver import compile_graph
from compiler.errors import KilnError
from compiler.frontends.onnx import load_onnx
from compiler.interpreter import run
from compiler.passes.runner import run_pipeline
from compiler.stats import compute_stats
from tests.conftest import SAMPLE_MODEL
from tests.helpers import make_model

MAIN = """
#include <stdio.h>
#include "digits.h"
static uint8_t mut[DIGITS_MUTABLE_SIZE] __attribute__((aligned(DIGITS_ALIGNMENT)));
static uint8_t act[DIGITS_ACTIVATIONS_SIZE] __attribute__((aligned(DIGITS_ALIGNMENT)));
int main(void) {
    float *x = (float *)(mut + DIGITS_INPUT_IMAGE_OFFSET);
    for (int i = 0; i < 64; i++) x[i] = (float)i / 64.0f - 0.5f;
    if (digits(NULL, mut, act) != 0) return 1;
    const float *y = (const float *)(mut + DIGITS_OUTPUT_LOGITS_OFFSET);
    for (int i = 0; i < 10; i++) printf("%.9g\\n", y[i]);
    return 0;
}
"""


@pytest.fixture(scope="module")
def sample_graph():
    return run_pipeline(load_onnx(onnx.load(SAMPLE_MODEL)), snapshots=False).graph


def _macros(text: str) -> dict[str, int]:
    return {m[1]: int(m[2]) for m in re.finditer(r"^#define (\w+) (-?\d+)$", text, re.M)}


@pytest.mark.usefixtures("c_compiler")
def test_bundle_links_and_runs(tmp_path, sample_graph):
    net = compile_graph(sample_graph, get_target("host"), name="digits")
    paths = write_bundle(net, tmp_path / "out")
    assert sorted(p.name for p in paths) == ["Makefile", "digits.h", "digits.o",
                                             "digits.report.json", "main.c"]
    doc = json.loads((tmp_path / "out" / "digits.report.json").read_text())
    assert doc["memory"]["activations"] == net.plan.arena.size
    (tmp_path / "main.c").write_text(MAIN)
    exe = tmp_path / "main"
    subprocess.run(["cc", "-std=c99", "-Wall", "-Werror", "-I", str(tmp_path / "out"),
                    str(tmp_path / "main.c"), str(tmp_path / "out" / "digits.o"), "-lm", "-o",
                    str(exe)], check=True)
    printed = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    got = np.array([float(v) for v in printed.split()], np.float32)
    x = (np.arange(64, dtype=np.float32) / 64 - 0.5).reshape(1, 1, 8, 8)
    want = run(sample_graph, {"image": x})["logits"].ravel()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("target", ["host", "cortex-m4"])
def test_report_sizes_come_from_the_object(sample_graph, target):
    net = compile_graph(sample_graph, get_target(target))
    doc = json.loads(json.dumps(report(net)))  # the report is plain JSON
    assert {"name", "target", "triple", "weights", "io_in_arena", "sections", "symbols",
            "regions", "inputs", "outputs", "layers", "memory"} <= set(doc)
    # LLVM's own object reader, independent of pyelftools, sees the same allocated sections.
    seen = {s.name().decode(): s.size() for s in
            llvm.ObjectFileRef.from_data(net.object).sections() if s.name()}
    named = {k: v for k, v in doc["sections"].items() if k.startswith(".")}
    assert named and all(seen[k] == v for k, v in named.items())
    assert doc["sections"]["text"] == sum(v for k, v in seen.items() if k.startswith(".text"))
    assert doc["sections"]["rodata"] == sum(v for k, v in seen.items()
                                            if k.startswith(".rodata"))
    sizes = [s["bytes"] for s in doc["symbols"]]
    assert sizes == sorted(sizes, reverse=True) and all(b > 0 for b in sizes)
    names = [s["name"] for s in doc["symbols"]]
    assert "net" in names and "net.weights" in names  # the entry and the embedded weights
    weights = next(s["bytes"] for s in doc["symbols"] if s["name"] == "net.weights")
    assert weights >= sum(c.data.nbytes for c in sample_graph.used_constants())
    assert doc["regions"] == {"constant": 0, "mutable": net.plan.mutable,
                              "activations": net.plan.arena.size,
                              "alignment": net.plan.alignment, "state": 0}
    assert doc["weights"] == "embedded" and doc["io_in_arena"] is False


def test_layers_count_every_mac(sample_graph):
    net = compile_graph(sample_graph, get_target("host"))
    layers = report(net)["layers"]
    assert len(layers) == len(net.kernels)
    assert sum(layer["macs"] for layer in layers) == compute_stats(sample_graph).macs > 0
    assert sum(layer["weight_bytes"] for layer in layers) > 0
    assert all(layer["weight_bytes"] == 0 for layer in layers if layer["op"] == "MaxPool")
    assert {layer["op"] for layer in layers} >= {"Conv", "FullyConnected"}


@pytest.mark.parametrize("io_in_arena", [False, True])
def test_header_macros_match_the_report(tmp_path, sample_graph, io_in_arena):
    net = compile_graph(sample_graph, get_target("host"), io_in_arena=io_in_arena)
    write_bundle(net, tmp_path)
    doc = json.loads((tmp_path / "net.report.json").read_text())
    text = (tmp_path / "net.h").read_text()
    macros = _macros(text)
    assert macros["NET_CONSTANT_SIZE"] == doc["regions"]["constant"] == 0
    assert macros["NET_MUTABLE_SIZE"] == doc["regions"]["mutable"]
    assert macros["NET_ACTIVATIONS_SIZE"] == doc["regions"]["activations"]
    assert macros["NET_ALIGNMENT"] == doc["regions"]["alignment"]
    for kind, key in (("INPUT", "inputs"), ("OUTPUT", "outputs")):
        for t in doc[key]:
            prefix = f"NET_{kind}_{t['name'].upper()}"
            assert macros[f"{prefix}_OFFSET"] == t["offset"]
            assert macros[f"{prefix}_BYTES"] == t["bytes"] == 4 * int(np.prod(t["shape"]))
            assert t["region"] == ("activations" if io_in_arena else "mutable")
            assert f"{t['name']}: float[{','.join(map(str, t['shape']))}], in the " \
                   f"{t['region']} region" in text
    assert doc["io_in_arena"] is io_in_arena
    assert "int net(const uint8_t *constant_weights, uint8_t *mutable_weights, uint8_t " \
           "*activations);" in text


@pytest.mark.parametrize("weights", ["embedded", "external"])
def test_constant_size_is_the_weights_blob(tmp_path, sample_graph, weights):
    net = compile_graph(sample_graph, get_target("host"), weights=weights)
    paths = {p.name for p in write_bundle(net, tmp_path)}
    macros = _macros((tmp_path / "net.h").read_text())
    doc = json.loads((tmp_path / "net.report.json").read_text())
    assert doc["weights"] == weights
    if weights == "external":
        blob = (tmp_path / "net.weights.bin").read_bytes()
        assert {"net.weights.bin", "net.weights.h"} <= paths
        assert macros["NET_CONSTANT_SIZE"] == len(blob) == doc["regions"]["constant"] > 0
        assert macros["NET_WEIGHTS_EXTERNAL"] == 1
        assert macros["NET_CONSTANT_ALIGNMENT"] % 16 == 0
    else:
        assert macros["NET_CONSTANT_SIZE"] == 0 and macros["NET_WEIGHTS_EXTERNAL"] == 0
        assert not any(name.startswith("net.weights") for name in paths)


def test_switching_to_embedded_removes_old_weights(tmp_path, sample_graph):
    write_bundle(compile_graph(sample_graph, get_target("host"), weights="external"), tmp_path)
    assert (tmp_path / "net.weights.bin").exists()
    write_bundle(compile_graph(sample_graph, get_target("host")), tmp_path)
    assert not (tmp_path / "net.weights.bin").exists()
    assert not (tmp_path / "net.weights.h").exists()


def big_fc_graph(inputs: int = 1024, outputs: int = 512):
    """One FullyConnected whose float weights (2 MiB by default) overflow a 1 MiB flash."""
    w = np.random.default_rng(0).standard_normal((inputs, outputs)).astype(np.float32) * 0.01
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])],
                       [("x", "float32", [1, inputs])], [("y", "float32", [1, outputs])],
                       {"w": w})
    return run_pipeline(load_onnx(model), snapshots=False).graph


def test_board_budget_reports_overflow(sample_graph):
    board = BOARDS["nrf52840-dk"]
    small = report(compile_graph(sample_graph, get_target(board.target)), board)["board"]
    assert small["fits"] is True and small["name"] == "nrf52840-dk"
    assert (small["flash"], small["ram"]) == (board.flash, board.ram)
    net = compile_graph(big_fc_graph(), get_target(board.target))
    doc = report(net, board)
    usage = doc["board"]
    assert usage["fits"] is False and usage["flash_used"] > board.flash
    s = doc["sections"]
    assert usage["flash_used"] == s["text"] + s["rodata"] + doc["regions"]["constant"]
    assert usage["ram_used"] == (s["data"] + s["bss"] + doc["regions"]["mutable"]
                                 + doc["regions"]["activations"]) < board.ram


def test_mcu_bundle_has_no_host_example(tmp_path, sample_graph):
    paths = write_bundle(compile_graph(sample_graph, get_target("cortex-m7")), tmp_path)
    assert sorted(p.name for p in paths) == ["net.h", "net.o", "net.report.json"]


def test_failed_write_leaves_the_old_bundle(tmp_path, sample_graph, monkeypatch):
    folder = tmp_path / "out"
    write_bundle(compile_graph(sample_graph, get_target("host")), folder)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    calls = []

    def failing(path, data):
        calls.append(path)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        original(path, data)

    original = bundle._write_file
    monkeypatch.setattr(bundle, "_write_file", failing)
    net = compile_graph(sample_graph, get_target("host"), io_in_arena=True)
    with pytest.raises(OSError):
        write_bundle(net, folder)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no temporary folder left behind
    calls.clear()
    with pytest.raises(OSError):
        write_bundle(net, tmp_path / "new")
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_user_files_are_never_overwritten(tmp_path, sample_graph):
    (tmp_path / "Makefile").write_text("all:\n\techo mine\n")
    with pytest.raises(KilnError, match="not written by Kiln"):
        write_bundle(compile_graph(sample_graph, get_target("host")), tmp_path)
    assert (tmp_path / "Makefile").read_text() == "all:\n\techo mine\n"
    assert [p.name for p in tmp_path.iterdir()] == ["Makefile"]
