"""A Cortex-M bundle's firmware folder: which board it is linked for, what its README and
Makefile run, and that a float bundle with external weights and its inputs in the arena
builds and runs from it under QEMU as the interpreter computes."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from app.export.controller import build_command
from compiler.codegen.targets import BOARDS, get_target, target_names
from compiler.driver import BuildRequest, Options, compilation
from compiler.frontends.load import load_model
from compiler.interpreter import run
from compiler.mcu.firmware import parse_outputs
from compiler.mcu.firmware_folder import FILES, firmware_board, pattern, run_command
from tests.codegen import firmware as firmware_tests
from tests.codegen.firmware import readme_commands, run_as_a_user
from tests.conftest import SAMPLE_MODEL, require_tools


@pytest.fixture(scope="module")
def sample_graph():
    return load_model(SAMPLE_MODEL)


def test_each_core_is_linked_for_a_board_that_qemu_runs_with_that_core():
    emulated = {b.target: b for b in reversed(BOARDS.values()) if b.qemu_machine}
    for name in target_names():
        target = get_target(name)
        board = firmware_board(target.name)
        if not target.mcu or target.name not in emulated:
            assert board is None or not target.mcu, name
            continue
        assert board.qemu_machine and board.target == target.name, name
        # A chosen board QEMU emulates is the one; a real board gives way to its core's.
        for chosen in BOARDS.values():
            if chosen.target == target.name:
                got = firmware_board(target.name, chosen)
                assert got is (chosen if chosen.qemu_machine else board), chosen.name
    assert firmware_board("cortex-m7").name == "mps2-an500"
    assert firmware_board("cortex-m0plus") is None and firmware_board("riscv32") is None


def test_the_build_line_is_the_readme_commands_or_names_what_the_user_writes():
    m7 = get_target("cortex-m7")
    line = build_command(m7, "net", "my bundle", BOARDS["mps2-an500"])
    assert line == ("cd 'my bundle' && make && qemu-system-arm -M mps2-an500 -nographic "
                    "-monitor none -serial none -semihosting-config enable=on,target=native "
                    "-kernel net.elf")
    assert line.endswith(run_command(BOARDS["mps2-an500"], "net"))
    m0 = get_target("cortex-m0plus")  # no emulated board: no main.c of Kiln's to build
    line = build_command(m0, "net", "out")
    assert "YOUR_MAIN.c" in line and "YOUR_BOARD.ld" in line and "main.c " not in line
    assert line.startswith(f"{m0.c_compiler} {' '.join(m0.c_flags)} ")


def test_a_float_bundle_with_external_weights_runs_from_its_folder(tmp_path, sample_graph):
    firmware_tests.require_tools()
    require_tools("make")
    folder = tmp_path / "m4"
    options = Options("cortex-m4", io_in_arena=True, weights="external")
    compiled = compilation(sample_graph)
    files, _, note = compiled.export(folder, BuildRequest(options, BOARDS["nrf52840-dk"]))
    assert note == "" and set(FILES) <= {p.name for p in files}
    readme = (folder / "README.md").read_text()
    # nrf52840-dk is checked for budget; QEMU has no such board, so the README says so.
    assert "checked against nrf52840-dk's budget" in readme and "mps2-an386" in readme
    assert "MEMORY" in (folder / "board.ld").read_text()
    net = compiled.net(options)
    (image,) = net.data_inputs
    assert image.region == "activations"  # io in the arena: main.c copies it there
    x = pattern(image)
    assert np.array_equal(np.fromfile(folder / "net.input.bin", np.float32), x.reshape(-1))
    assert len(np.unique(x)) == 17  # the pattern, not zeros
    printed = parse_outputs(net, run_as_a_user(readme_commands(readme, "Build and run"),
                                               folder))
    for name, value in run(compiled.final, {image.name: x}).items():
        np.testing.assert_allclose(printed[name], value, rtol=1e-5, atol=1e-5)

    # An input file of the wrong size is refused when the firmware starts, in one line.
    (folder / "short.bin").write_bytes(b"\0" * 10)
    done = subprocess.run(["make", "-s", "run", "INPUT=short.bin"], cwd=folder,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert done.stdout.strip() == (f"net: the input file short.bin holds 10 bytes; net.h's "
                                   f"inputs take {x.nbytes}")


def test_the_users_own_readme_keeps_the_folder_free_of_firmware(tmp_path, sample_graph):
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "README.md").write_text("# my firmware\n")
    files, _, note = compilation(sample_graph).export(
        folder, BuildRequest(Options("cortex-m7")), force=True)
    assert "the folder holds README.md of your own" in note
    assert sorted(p.name for p in files) == ["net.build.json", "net.h", "net.o",
                                             "net.report.json"]
    assert (folder / "README.md").read_text() == "# my firmware\n"
    # Kiln's own firmware files are Kiln's: exporting again into its folder replaces them.
    again = tmp_path / "again"
    for _ in range(2):
        files, _, note = compilation(sample_graph).export(again, BuildRequest(
            Options("cortex-m7")))
        assert note == "" and "README.md" in {p.name for p in files}
