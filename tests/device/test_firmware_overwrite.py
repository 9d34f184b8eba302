"""`kiln firmware` into a folder it wrote before: its own files are refreshed, the user's kept.

A user fills in the port template in place, or edits the Makefile; rebuilding after a retrain
must not silently replace that work. And a firmware validated with the wrong `--target` says
which core it was built for, instead of sending the user to reflash it.
"""

from __future__ import annotations

import time

from app import cli
from tests.conftest import SAMPLE_MODEL, require_tools

MODEL = str(SAMPLE_MODEL)


def _firmware(folder, *extra):
    return cli.main(["firmware", MODEL, "--target", "cortex-m4", "--board", "nrf52840-dk",
                     "-o", str(folder), *extra])


def test_a_port_filled_in_is_kept_unless_forced(tmp_path, capsys):
    require_tools("arm-none-eabi-gcc")
    folder = tmp_path / "nrf"
    assert _firmware(folder) == 0
    out = capsys.readouterr().out
    assert "copy kiln_port_template.c to my_port.c" in out
    assert _firmware(folder) == 0, "an untouched folder is rebuilt in place"
    capsys.readouterr()
    port = folder / "kiln_port_template.c"
    port.write_text(port.read_text() + "\n/* my UART */\n")
    assert _firmware(folder) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "kiln_port_template.c changed since Kiln wrote it" in err
    assert "my UART" in port.read_text()
    assert _firmware(folder, "--force") == 0
    assert "my UART" not in port.read_text()


def test_the_linker_script_has_the_user_boards_memory(tmp_path, capsys):
    require_tools("arm-none-eabi-gcc")
    assert _firmware(tmp_path / "nrf") == 0
    script = (tmp_path / "nrf" / "board.ld").read_text()
    assert "LENGTH = 1048576" in script and "LENGTH = 262144" in script, script
    readme = (tmp_path / "nrf" / "README.md").read_text()
    assert "216" not in readme and str(SAMPLE_MODEL.resolve()) in readme


def test_validating_with_another_core_names_the_firmwares(tmp_path, capsys):
    require_tools("arm-none-eabi-gcc", "qemu-system-arm")
    from compiler.codegen.targets import BOARDS
    from compiler.device import runner_firmware
    from compiler.device.emulated_board import emulated_board
    from compiler.device.validate import runner_net
    from compiler.driver import compilation
    from compiler.frontends.load import load_model

    net = runner_net(compilation(load_model(MODEL)), "cortex-m33")
    fw = runner_firmware.build(net, BOARDS["mps2-an505"], tmp_path / "m33", MODEL)
    with emulated_board(fw.elf, "mps2-an505") as board:
        start = time.monotonic()
        code = cli.main(["validate", MODEL, "--target", "cortex-m55", "--port", board.url,
                         "-n", "1"])
        seconds = time.monotonic() - start
    err = capsys.readouterr().err
    assert code == 2 and seconds < 10
    assert "built for cortex-m33 (board mps2-an505), not cortex-m55" in err, err
    assert "--target cortex-m33" in err
