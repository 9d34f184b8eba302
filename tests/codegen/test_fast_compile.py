"""Fast compilation: compact kernels and two LLVM passes off, for code run once over a data set.

It must give the same answers from less code, keep objects of its own in the cache, and leave
LLVM as it found it: its switches are process-wide command-line options, put back after each
object.
"""

from __future__ import annotations

import numpy as np
import onnx

from compiler.codegen import llvm
from compiler.codegen.host import HostNet
from compiler.codegen.targets import get_target
from compiler.driver import compile_graph
from compiler.frontends.onnx import load_onnx
from compiler.passes.runner import run_pipeline
from tests.codegen.test_conv_tiles import _conv
from tests.conftest import SAMPLE_MODEL
from tests.helpers import assert_close, make_model, ort_run


def _sample_ir() -> str:
    graph = run_pipeline(load_onnx(onnx.load(SAMPLE_MODEL)), snapshots=False).graph
    return compile_graph(graph, "host").llvm_ir


def test_fast_compile_leaves_llvm_as_it_was(monkeypatch):
    monkeypatch.setenv("KILN_NO_CACHE", "1")
    target, text = get_target("host"), _sample_ir()
    before = llvm.emit_object(text, target)
    fast = llvm.emit_object(text, target, fast=True)
    assert fast != before  # the switches reached LLVM
    assert llvm.emit_object(text, target) == before  # and were put back


def test_fast_objects_have_cache_entries_of_their_own(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("KILN_NO_CACHE", raising=False)
    target, text = get_target("host"), _sample_ir()
    assert llvm.emit_object(text, target) != llvm.emit_object(text, target, fast=True)
    assert len(list((tmp_path / "kiln" / "objects").glob("*.o"))) == 2


def test_compact_convolutions_are_a_fraction_of_the_code_and_agree():
    """ResNet-8's first block shape: 16 channels of 32 x 32, 3 x 3 with padding."""
    nodes, inputs, inits = _conv(c_in=16, c_out=16, size=(32, 32))
    model = make_model(nodes, inputs, [("y", np.float32, None)], inits)
    graph = run_pipeline(load_onnx(model), snapshots=False).graph
    usual, compact = (compile_graph(graph, "host", fast_compile=fast) for fast in (False, True))
    assert len(compact.llvm_ir) < 0.5 * len(usual.llvm_ir)
    feeds = {"x": np.random.default_rng(3).standard_normal((1, 16, 32, 32)).astype(np.float32)}
    (want,) = ort_run(model, feeds)
    for net in (usual, compact):
        runner = HostNet(net)
        assert_close(runner.run(feeds)["y"], want, what=f"fast_compile={net is compact}")
        runner.close()
