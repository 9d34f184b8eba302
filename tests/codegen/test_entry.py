"""The entry point folds repeated runs of kernel calls into loops over offset tables."""

import numpy as np
import onnx
import pytest
from llvmlite import ir

from compiler.codegen.entry import MIN_REPEATS, Call, runs
from compiler.codegen.host import HostNet
from compiler.driver import compilation
from compiler.frontends.onnx import load_onnx
from tests.deep_models import conv_relu_chain, residual_chain
from tests.helpers import assert_close, ort_run


def _fns(count):
    module = ir.Module()
    fnty = ir.FunctionType(ir.VoidType(), [])
    return [ir.Function(module, fnty, f"k{i}") for i in range(count)]


def _covered(calls):
    """The runs, checked to cover every call once and in order."""
    found = list(runs(calls))
    position = 0
    for start, period, repeats in found:
        assert start == position
        position += period * repeats
    assert position == len(calls)
    return found


def test_a_repeated_group_becomes_one_run_and_the_rest_stays_spelled_out():
    a, b, c = _fns(3)
    head = [Call(c, (0,), (0,))]
    body = [Call(f, (1, 3), (step * 64, step * 8)) for step in range(20) for f in (a, b)]
    tail = [Call(a, (1,), (5,))]
    found = _covered(head + body + tail)
    assert found == [(0, 1, 1), (1, 2, 20), (41, 1, 1)]


def test_short_runs_and_other_bases_are_not_folded():
    (a,) = _fns(1)
    short = [Call(a, (1,), (i,)) for i in range(MIN_REPEATS - 1)]
    assert all(r == 1 for _, _, r in _covered(short))
    # Same kernel, but an argument moves from the arena to the weights blob: not one loop.
    # No group of up to four calls repeats eight times in a row in this one.
    pattern = [1, 3, 3, 1, 1, 1, 3, 3, 3, 3, 1, 3, 1, 1, 3, 1, 3, 3, 1, 1, 3]
    mixed = [Call(a, (base,), (i,)) for i, base in enumerate(pattern)]
    assert all(r == 1 for _, _, r in _covered(mixed))


@pytest.mark.parametrize("model", [conv_relu_chain(40), residual_chain(12)],
                         ids=["chain", "residual"])
def test_a_looped_entry_point_computes_what_onnxruntime_does(model, tmp_path):
    path = tmp_path / "deep.onnx"
    onnx.save(model, path)
    compiled = compilation(load_onnx(path))
    compiled.bundle(tmp_path / "bundle")
    assert '@"steps' in compiled.net().llvm_ir, "the repeated blocks were spelled out, not looped"
    x = np.random.default_rng(1).standard_normal((1, 4, 8, 8)).astype(np.float32)
    net = HostNet.from_bundle(tmp_path / "bundle")
    try:
        assert_close(net.run({"x": x})["y"], ort_run(model, {"x": x})[0], what="looped entry")
    finally:
        net.close()
