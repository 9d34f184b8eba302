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


def test_firmware_reads_its_boards_from_the_one_table():
    """QEMU's machines are rows of the board table, linked into the memory `--board` checks."""
    from compiler.mcu import firmware

    assert set(firmware.MACHINES) == {"mps2-an385", "mps2-an386", "mps2-an500", "mps2-an505",
                                      "mps3-an547"}
    for machine, board in firmware.MACHINES.items():
        assert BOARDS[board.name] is board and board.qemu_machine == machine
        script = firmware.linker_script(board)
        assert f"ORIGIN = {board.flash_origin:#010x}, LENGTH = {board.flash}" in script
        assert f"ORIGIN = {board.ram_origin:#010x}, LENGTH = {board.ram}" in script
    assert firmware.board_for("cortex-m55").name == "mps3-an547"
    assert firmware.emulated_targets() == ["cortex-m3", "cortex-m33", "cortex-m4", "cortex-m55",
                                           "cortex-m7"]
    assert firmware.board_for("cortex-m4").name == "mps2-an386"
    with pytest.raises(KilnError, match="no QEMU board runs cortex-m0plus; targets with one: "
                                        "cortex-m3, cortex-m33"):
        firmware.board_for("cortex-m0plus")


def test_an_emulated_board_needs_its_memory_map():
    from compiler.codegen.targets import Board

    with pytest.raises(ValueError, match="needs flash_origin, ram_origin and cflags"):
        Board("half", "cortex-m7", 1024, 1024, qemu_machine="mps2-an500", flash_origin=0)


def test_unknown_target_is_a_clear_error():
    with pytest.raises(KilnError, match="unknown target 'z80'"):
        get_target("z80")


def test_x86_levels_run_only_where_the_cpu_has_their_features(monkeypatch, tmp_path):
    """On a CPU without AVX-512 (features as an AVX2-only AMD EPYC reports them), an object
    for icelake-server is refused in one sentence naming what is missing, before any of its
    code runs, from memory and from a written bundle; the AVX2 level's object runs there."""
    import numpy as np

    from compiler.codegen import targets
    from compiler.codegen.bundle import write_bundle
    from compiler.codegen.host import HostNet
    from compiler.driver import compilation, compile_graph
    from compiler.frontends.load import load_model
    from tests.conftest import SAMPLE_MODEL

    real_missing = targets.missing_on_this_cpu(get_target("x86-64-v3"))
    avx2_only = frozenset({"sse4.2", "avx", "avx2", "fma", "bmi2", "f16c"})
    monkeypatch.setattr(targets, "host_cpu_features", lambda: avx2_only)
    prepared = compilation(load_model(SAMPLE_MODEL)).prepared
    assert targets.missing_on_this_cpu(get_target("icelake-server")) == [
        "avx512bw", "avx512dq", "avx512f", "avx512vl", "avx512vnni"]
    net = compile_graph(prepared, get_target("icelake-server"))
    with pytest.raises(KilnError, match="compiled for icelake-server, which needs avx512bw"):
        HostNet(net)
    write_bundle(net, tmp_path / "b")
    with pytest.raises(KilnError, match="lacks them"):
        HostNet.from_bundle(tmp_path / "b")
    assert not real_missing, f"this x86 CPU lacks {real_missing}: below the AVX2 level"
    runner = HostNet(compile_graph(prepared, get_target("x86-64-v3")))
    x = prepared.inputs[0]
    out = runner.run({x.name: np.zeros(x.type.shape, np.float32)})
    assert all(np.isfinite(v).all() for v in out.values())


def test_every_microcontroller_says_how_a_c_program_is_built_around_its_objects():
    """The export's build line comes from the target's row, not from a table of its own."""
    from app.export.controller import build_command

    for name in target_names():
        target = get_target(name)
        if not target.mcu:
            continue
        command = build_command(target, "net", "bundle")
        assert command.startswith(f"{target.c_compiler} {' '.join(target.c_flags)} "), name
        if target.triple.startswith("thumb"):
            assert target.c_flags[0] == f"-mcpu={target.cpu}", name
            assert ("-mfloat-abi=soft" in target.c_flags) == (target.float_abi == "soft"), name
