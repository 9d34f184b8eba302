"""Every target builds an LLVM target machine and emits a deterministic object."""

from __future__ import annotations

import pytest
from llvmlite import ir

from compiler.codegen.llvm import emit_assembly, emit_object, new_module
from compiler.codegen.targets import BOARDS, get_target, target_names
from compiler.errors import KilnError


def axpy_module(target) -> ir.Module:
    """y[i] += 2 * x[i] over 64 floats: small, but enough for the vectorizer to act."""
    module = new_module("axpy", target)
    f32p = ir.PointerType(ir.FloatType())
    fn = ir.Function(module, ir.FunctionType(ir.IntType(32), [f32p, f32p]), "axpy")
    x, y = fn.args
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    for i in range(64):
        idx = ir.Constant(ir.IntType(32), i)
        xv = builder.load(builder.gep(x, [idx]))
        yp = builder.gep(y, [idx])
        builder.store(builder.fadd(builder.load(yp), builder.fmul(xv, ir.Constant(xv.type, 2.0))),
                      yp)
    builder.ret(ir.Constant(ir.IntType(32), 0))
    return module


@pytest.mark.parametrize("name", target_names())
def test_every_target_emits_an_object(name):
    target = get_target(name)
    obj = emit_object(axpy_module(target), target)
    assert obj[:4] == b"\x7fELF"
    assert "axpy" in emit_assembly(axpy_module(target), target)


@pytest.mark.parametrize("name", ["host", "cortex-m7"])
def test_objects_are_deterministic(name, monkeypatch):
    monkeypatch.setenv("KILN_NO_CACHE", "1")  # LLVM itself, twice, not the object cache
    target = get_target(name)
    assert emit_object(axpy_module(target), target) == emit_object(axpy_module(target), target)


def test_boards_resolve_to_targets():
    for board in BOARDS.values():
        assert get_target(board.name) == get_target(board.target)
        assert board.flash > 0 and board.ram > 0


def test_unknown_target_is_a_clear_error():
    with pytest.raises(KilnError, match="unknown target 'z80'"):
        get_target("z80")
