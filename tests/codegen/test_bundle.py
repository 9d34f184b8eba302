"""A written bundle links into a C program through its header and computes the right outputs."""

from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import onnx
import pytest

from compiler.codegen.build import compile_graph
from compiler.codegen.bundle import write_bundle
from compiler.codegen.targets import get_target
from compiler.frontends.onnx import load_onnx
from compiler.interpreter import run
from compiler.passes.runner import run_pipeline
from tests.conftest import SAMPLE_MODEL

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


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_bundle_links_and_runs(tmp_path):
    graph = run_pipeline(load_onnx(onnx.load(SAMPLE_MODEL)), snapshots=False).graph
    net = compile_graph(graph, get_target("host"), name="digits")
    paths = write_bundle(net, tmp_path / "out")
    assert sorted(p.name for p in paths) == ["digits.h", "digits.o", "digits.report.json"]
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
    want = run(graph, {"image": x})["logits"].ravel()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
