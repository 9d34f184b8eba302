"""Host objects load into the process with LLVM's loader: no C compiler, same results as cc."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from llvmlite import ir

from compiler.codegen.bundle import write_bundle
from compiler.codegen.host import HostNet
from compiler.codegen.inprocess import LoadedObject
from compiler.codegen.llvm import emit_object, new_module
from compiler.codegen.targets import get_target
from compiler.driver import compile_graph
from compiler.errors import KilnError
from compiler.frontends.onnx import load_onnx
from compiler.passes.runner import run_pipeline
from tests.conftest import SAMPLE_MODEL
from tests.helpers import assert_close, ort_run


@pytest.fixture(scope="module")
def digits():
    model = onnx.load(SAMPLE_MODEL)
    graph = run_pipeline(load_onnx(model), snapshots=False).graph
    feeds = {v.name: np.random.default_rng(3).standard_normal(v.type.shape).astype(np.float32)
             for v in graph.inputs}
    return compile_graph(graph, get_target("host"), name="digits"), feeds, ort_run(model, feeds)


def test_without_any_c_compiler(digits, tmp_path, monkeypatch):
    """With nothing on PATH the loader still runs a written bundle, and cc gives equal bits."""
    net, feeds, want = digits
    write_bundle(net, tmp_path / "b")
    linked = HostNet.from_bundle(tmp_path / "b", cc="cc").run(feeds)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    loaded = HostNet.from_bundle(tmp_path / "b").run(feeds)
    for name, w in zip(loaded, want):
        np.testing.assert_array_equal(loaded[name], linked[name])
        assert_close(loaded[name], w, what="in-process vs onnxruntime")
    with pytest.raises(KilnError, match="the C compiler cc is not installed"):
        HostNet(net, cc="cc")


def test_many_loads_free_their_code(digits):
    """Each HostNet's code goes with it; a hundred loads in a row stay correct."""
    net, feeds, _ = digits
    first = HostNet(net).run(feeds)
    for _ in range(100):
        again = HostNet(net).run(feeds)
    for name in first:
        np.testing.assert_array_equal(again[name], first[name])


def test_not_an_object():
    with pytest.raises(KilnError, match="junk.o is not a readable ELF object file"):
        LoadedObject(b"not an ELF file at all", "junk.o", [])


def test_object_for_another_machine(digits):
    arm = compile_graph(run_pipeline(load_onnx(onnx.load(SAMPLE_MODEL)), snapshots=False).graph,
                        get_target("cortex-m4"), name="digits")
    with pytest.raises(KilnError, match="digits.o is a ET_REL file for EM_ARM, not an object"):
        LoadedObject(arm.object, "digits.o", ["digits"])


def test_undefined_symbol_is_named():
    """LLVM would abort the process on a symbol it cannot resolve: it is reported instead."""
    target = get_target("host")
    module = new_module("m", target)
    i32 = ir.IntType(32)
    callee = ir.Function(module, ir.FunctionType(i32, []), "kiln_no_such_function")
    entry = ir.Function(module, ir.FunctionType(i32, []), "entry")
    builder = ir.IRBuilder(entry.append_basic_block())
    builder.ret(builder.call(callee, []))
    with pytest.raises(KilnError, match="m.o needs kiln_no_such_function, which this process"):
        LoadedObject(emit_object(module, target), "m.o", ["entry"])


def test_unknown_entry_point(digits):
    with pytest.raises(KilnError, match="LLVM cannot load digits.o"):
        LoadedObject(digits[0].object, "digits.o", ["nope"])
