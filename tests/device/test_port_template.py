"""`kiln firmware` for a board QEMU does not emulate: the port template, filled in, built, run.

A user's board gets `kiln_port_template.c` and a README saying what to fill in. Here the
filling is done as a user would for a board with a CMSDK UART and no DWT, with the QEMU
port's code, keeping the template's shape; the folder's own Makefile and CMake file build it,
the Makefile's `make run` runs it under QEMU, and `kiln validate` over the socket passes.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import serial

from app import cli
from compiler.device import runner_firmware
from compiler.device.emulated_board import free_port
from tests.conftest import SAMPLE_MODEL, require_tools

BOARD, TARGET = "stm32f746g-disco", "cortex-m7"
PORT_FILE = "my_port.c"
FUNCTION = re.compile(r"^[a-z][\w ]*?\b(kiln_port_\w+)\(([^)]*)\)\n\{\n(.*?)^\}\n",
                      re.MULTILINE | re.DOTALL)


def _bodies(source: str) -> dict[str, str]:
    """Each port function's body (the lines between its braces), by name."""
    return {m[1]: m[3] for m in FUNCTION.finditer(source)}


def _filled_in(template: str, qemu: str) -> str:
    """The template with the QEMU port's code where a board with a CMSDK UART needs it.

    Every function's body becomes the QEMU port's; the cycle counter's registers give way to
    the UART's and SysTick's (QEMU has no DWT), and the tick unit says so.
    """
    hardware = qemu[qemu.index('#include "kiln_port.h"\n') + 23:qemu.index("const char")]
    wraps = qemu[qemu.index("static volatile uint32_t systick_wraps;"):
                 qemu.index("void kiln_port_init")]
    dwt = template[template.index("#define DEMCR"):template.index("void kiln_port_init")]
    port = template.replace(dwt, hardware.strip() + "\n\n" + wraps)
    port = port.replace('kiln_port_tick_unit[] = "cycles"',
                        'kiln_port_tick_unit[] = "SysTick ticks"')
    port = re.sub(r"/\* TODO: your core clock[^\n]*\*/",
                  "/* The core clock in Hz: PORT_FLAGS gives SysTick's. */", port)
    new = _bodies(qemu)
    return FUNCTION.sub(lambda m: m[0].replace(m[3], new[m[1]]), port)


def _make(folder: Path, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run(["make", "-C", str(folder), *args], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def _name(url: str, deadline: float) -> list[str]:
    """Connect (QEMU may still be starting), send `name%`; the lines up to its m-ready."""
    while True:
        try:
            port = serial.serial_for_url(url, timeout=0.1)
            break
        except serial.SerialException:
            assert time.monotonic() < deadline, f"nothing listens on {url}"
            time.sleep(0.05)
    with contextlib.closing(port):
        port.write(b"name%")
        text = b""
        while time.monotonic() < deadline:
            text += port.read(256)
            lines = text.decode().replace("\r", "").split("\n")
            if any(line.startswith("m-name-dut-") for line in lines) and \
                    lines[-2:-1] == ["m-ready"]:
                return [line for line in lines if line]
    raise AssertionError(f"no reply to name: {text!r}")


def test_port_template_filled_in_builds_runs_and_validates(tmp_path, capsys):
    require_tools("arm-none-eabi-gcc", "qemu-system-arm", "make", "cmake")
    folder = tmp_path / "fw"
    assert cli.main(["firmware", str(SAMPLE_MODEL), "--target", TARGET, "--board", BOARD,
                     "-o", str(folder)]) == 0
    said = capsys.readouterr().out
    assert f"copy {runner_firmware.TEMPLATE_PORT} to my_port.c" in said
    assert "PORT=my_port.c" in said
    manifest = json.loads((folder / "firmware.json").read_text())
    assert (manifest["port"], manifest["board"], manifest["linked_for"]) == (
        runner_firmware.TEMPLATE_PORT, BOARD, "mps2-an500")

    # The README names the board and every function the template leaves to the user.
    template = (folder / runner_firmware.TEMPLATE_PORT).read_text()
    qemu = (folder / runner_firmware.QEMU_PORT).read_text()
    todo = [name for name, body in _bodies(template).items() if "TODO" in body]
    assert todo == ["kiln_port_init", "kiln_port_read_byte", "kiln_port_write",
                    "kiln_port_microseconds"]
    readme = (folder / "README.md").read_text()
    assert readme.startswith(f"# Kiln runner firmware: net ({SAMPLE_MODEL.name}) on {BOARD}\n")
    assert all(f"- `{name}`:" in readme for name in todo)
    assert f"QEMU does not emulate {BOARD}" in readme and "`board.ld`'s MEMORY" in readme
    assert "make PORT=my_port.c PORT_FLAGS=" in readme

    port = _filled_in(template, qemu)
    assert "TODO" not in port and "DWT_CYCCNT" not in port and "return -1" not in port
    assert port.startswith(template[:template.index("#include")])  # the template's own text
    assert list(_bodies(port)) == list(_bodies(template))
    assert _bodies(port) == {k: v for k, v in _bodies(qemu).items() if k in _bodies(template)}
    (folder / PORT_FILE).write_text(port)

    # The Makefile builds what `kiln firmware` built (the template port as it stands).
    shipped = (folder / "firmware.bin").read_bytes()
    _make(folder)
    assert (folder / "firmware.bin").read_bytes() == shipped

    defines = runner_firmware.port_defines(runner_firmware.linked_board(TARGET, None))
    flags = [f"PORT={PORT_FILE}", f"PORT_FLAGS={' '.join(defines)}"]
    built = _make(folder, *flags).stdout
    assert "arm-none-eabi-gcc" in built and "-DKILN_UART_BASE=0x40004000u" in built
    linked = (folder / "firmware.map").read_text()
    assert ".bss.systick_wraps" in linked and "last_cycles" not in linked  # ours, not the DWT's
    assert "arm-none-eabi-gcc" not in _make(folder, *flags).stdout  # nothing changed

    # CMake, with no toolchain argument (the file picks the folder's own): the same image.
    cmake = tmp_path / "cmake"
    for argv in (["cmake", "-S", str(folder), "-B", str(cmake), f"-DKILN_PORT={PORT_FILE}",
                  f"-DKILN_PORT_DEFINES={';'.join(d[2:] for d in defines)}"],
                 ["cmake", "--build", str(cmake)]):
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout[-1500:] + done.stderr[-1500:]
    assert (cmake / "firmware.bin").read_bytes() == (folder / "firmware.bin").read_bytes()

    tcp = free_port()
    url = f"socket://127.0.0.1:{tcp}"
    run = subprocess.Popen(["make", "-C", str(folder), "run", f"TCP_PORT={tcp}", *flags],
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, start_new_session=True)
    try:
        reply = _name(url, time.monotonic() + 20)
        assert "m-name-dut-[kiln]" in reply
        capsys.readouterr()
        code = cli.main(["validate", str(SAMPLE_MODEL), "--target", TARGET, "--board", BOARD,
                         "--port", url, "--inputs", "digits", "-n", "3", "--json"])
        result = json.loads(capsys.readouterr().out)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGTERM)
        out = run.communicate(timeout=10)[0].decode()
    assert code == 0 and result["passed"], result["problems"]
    assert result["board"] == BOARD and result["tick_unit"] == "SysTick ticks"
    assert result["float_close"] == result["float_elements"] == 30
    assert all(us > 0 for us in result["latency_us"]) and result["total_ticks"] > 0
    assert "qemu-system-arm -M mps2-an500" in out and "arm-none-eabi-gcc" not in out
