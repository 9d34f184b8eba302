"""The runner firmware: a compiled network, Kiln's protocol runner and a board's port, built.

`write_sources` lays out a folder a firmware developer can build alone (Makefile, CMake file,
README, sources, the network's object and header); `build` compiles it with
arm-none-eabi-gcc into `firmware.elf`, `firmware.bin` and `firmware.map`. The network is the
timed build (`Options.timed_kernels`): kernels kept apart, each call's advance of the port's
counter added to `NET_layer_ticks`, the split `kiln bench --target` counts per layer.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from compiler.codegen.build import CompiledNet
from compiler.codegen.bundle import header as net_header
from compiler.codegen.targets import Board
from compiler.device import model_source
from compiler.errors import KilnError
from compiler.fileio import atomic_write_bytes, atomic_write_text
from compiler.mcu import firmware
from compiler.mcu.firmware import MACHINES, PACKAGES, linker_script

HERE = Path(__file__).resolve().parent
RUNNER = ("kiln_runner.c", "kiln_port.h", "kiln_startup.c", "kiln_port_template.c")
QEMU_PORT = "kiln_port_qemu.c"
TEMPLATE_PORT = "kiln_port_template.c"
ELF, BIN, MAP, MANIFEST = "firmware.elf", "firmware.bin", "firmware.map", "firmware.json"
OBJCOPY = "arm-none-eabi-objcopy"


@dataclass(frozen=True)
class Firmware:
    """A built runner firmware: where its files are and what it serves."""

    folder: Path
    net: CompiledNet
    board: Board
    port: str

    @property
    def elf(self) -> Path:
        """The image QEMU or a flasher loads."""
        return self.folder / ELF


def linked_board(target: str, board: Board | None) -> Board:
    """The board the firmware's memory map is for.

    The chosen one when QEMU emulates it, else QEMU's board of the same core (a user board
    without a memory map in the table gets that map, to edit, and the port template).
    """
    if board is not None and board.qemu_machine and board.target == target:
        return board
    emulated = next((b for b in MACHINES.values() if b.target == target), None)
    if emulated is None:
        raise KilnError(f"no QEMU board runs {target}; the runner firmware is built for "
                        f"{', '.join(sorted({b.target for b in MACHINES.values()}))}")
    return emulated


def port_defines(board: Board) -> list[str]:
    """The QEMU port's -D flags: the UART's address and clock, the core clock."""
    if board.uart is None:
        return []
    return [f"-DKILN_UART_BASE={board.uart:#x}u", f"-DKILN_UART_CLOCK={board.uart_clock}u",
            f"-DKILN_CPU_HZ={board.cpu_hz}u"]


def sources(net: CompiledNet, port: str) -> list[str]:
    """The C files the firmware is compiled from, the port last."""
    return ["kiln_runner.c", "kiln_model.c", "kiln_startup.c", port]


def gcc_command(net: CompiledNet, board: Board, port: str) -> list[str]:
    """The one arm-none-eabi-gcc line that builds the ELF (the Makefile holds the same)."""
    defines = port_defines(board) if port == QEMU_PORT else []
    return [firmware.GCC, *board.cflags, "-O2", "-ffunction-sections", "-fdata-sections",
            "-Wall", *defines, "-nostartfiles", "--specs=nano.specs", "--specs=nosys.specs",
            "-T", "board.ld", "-Wl,--gc-sections", f"-Wl,-Map={MAP}",
            *sources(net, port), f"{net.name}.o", "-o", ELF]


def qemu_command(board: Board, port: int | str = "PORT") -> list[str]:
    """QEMU running the firmware with its UART on a loopback TCP port, instructions as time."""
    return [firmware.QEMU, "-M", board.qemu_machine, "-nographic", "-monitor", "none",
            "-icount", "shift=0", "-serial", f"tcp:127.0.0.1:{port},server=on,wait=on",
            "-kernel", ELF]


def makefile(net: CompiledNet, board: Board, port: str) -> str:
    """The Makefile: `make` builds the ELF, BIN and map; `make run` starts QEMU."""
    command = gcc_command(net, board, port)
    cc_flags = command[1:command.index("-T")]
    lines = [f"# Kiln's runner firmware for {net.name} on {board.name} ({net.target.name}).",
             "# make: firmware.elf, firmware.bin and firmware.map; make PORT=your_port.c for "
             "your board;", "# make run: the firmware under QEMU, its UART on TCP port "
             "$(TCP_PORT) of 127.0.0.1.",
             "CC ?= arm-none-eabi-gcc", "OBJCOPY ?= arm-none-eabi-objcopy",
             f"PORT ?= {port}", "TCP_PORT ?= 5555",
             f"CFLAGS ?= {shlex.join(c for c in cc_flags if not c.startswith('-DKILN_'))}",
             f"PORT_FLAGS ?= {shlex.join(port_defines(board))}",
             f"SOURCES = {' '.join(sources(net, '$(PORT)'))}", "",
             ".PHONY: all run clean", f"all: {ELF} {BIN}", "",
             f"{ELF}: $(SOURCES) {net.name}.o kiln_model.h kiln_port.h {net.name}.h board.ld "
             "sections.ld",
             "\t$(CC) $(CFLAGS) $(if $(filter kiln_port_qemu.c,$(PORT)),$(PORT_FLAGS)) "
             f"-T board.ld -Wl,--gc-sections -Wl,-Map={MAP} $(SOURCES) {net.name}.o -o $@", "",
             f"{BIN}: {ELF}", "\t$(OBJCOPY) -O binary $< $@", ""]
    if board.qemu_machine:
        run = shlex.join(qemu_command(board, "TCP_PORT")).replace("TCP_PORT", "$(TCP_PORT)")
        lines += [f"run: {ELF}", f"\t{run}", ""]
    lines += ["clean:", f"\trm -f {ELF} {BIN} {MAP}", ""]
    return "\n".join(lines)


def cmake_file(net: CompiledNet, board: Board, port: str) -> str:
    """CMakeLists.txt building the same ELF with CMake and the Arm GNU toolchain."""
    command = gcc_command(net, board, port)
    flags = [c for c in command[1:command.index("-T")] if not c.startswith("-DKILN_")]
    link = [c for c in flags if c.startswith(("-m", "--specs", "-nostartfiles"))]
    return "\n".join([
        f"# Kiln's runner firmware for {net.name} on {board.name} ({net.target.name}).",
        "# cmake -B build -DCMAKE_TOOLCHAIN_FILE=arm-none-eabi.cmake && cmake --build build",
        "cmake_minimum_required(VERSION 3.16)",
        "project(kiln_runner C)",
        f'set(KILN_PORT "{port}" CACHE STRING "the porting layer\'s C file")',
        f"add_executable({ELF} {' '.join(sources(net, '${KILN_PORT}'))})",
        f"target_compile_options({ELF} PRIVATE {' '.join(flags)})",
        f'if(KILN_PORT STREQUAL "{QEMU_PORT}")',
        f"  target_compile_definitions({ELF} PRIVATE "
        f"{' '.join(d[2:] for d in port_defines(board))})", "endif()",
        f"target_link_options({ELF} PRIVATE {' '.join(link)} "
        f"-T${{CMAKE_CURRENT_SOURCE_DIR}}/board.ld -L${{CMAKE_CURRENT_SOURCE_DIR}} "
        f"-Wl,--gc-sections -Wl,-Map=${{CMAKE_CURRENT_BINARY_DIR}}/{MAP})",
        f"target_link_libraries({ELF} PRIVATE ${{CMAKE_CURRENT_SOURCE_DIR}}/{net.name}.o)",
        f"add_custom_command(TARGET {ELF} POST_BUILD COMMAND ${{CMAKE_OBJCOPY}} -O binary "
        f"{ELF} {BIN})", ""])


def toolchain_file() -> str:
    """arm-none-eabi.cmake: CMake's cross toolchain for the Arm GNU compiler."""
    return "\n".join([
        "# CMake toolchain for arm-none-eabi-gcc (Debian: gcc-arm-none-eabi).",
        "set(CMAKE_SYSTEM_NAME Generic)", "set(CMAKE_SYSTEM_PROCESSOR arm)",
        "set(CMAKE_C_COMPILER arm-none-eabi-gcc)", "set(CMAKE_OBJCOPY arm-none-eabi-objcopy)",
        "set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)", ""])


def readme(net: CompiledNet, board: Board, port: str, model: str) -> str:
    """README.md: what the folder is and the exact commands to build, run and validate it."""
    emulated = board.qemu_machine is not None and port == QEMU_PORT
    lines = [f"# Kiln runner firmware: {net.name} ({model}) on {board.name}", "",
             f"Kiln's compiled network for {net.target.name}, the runner `kiln_runner.c` "
             "(MLPerf Tiny's benchmark protocol and Kiln's own commands over a serial link) "
             f"and the porting layer `{port}`.", "",
             "## Build", "", "```", "make            # firmware.elf, firmware.bin, "
             "firmware.map", "```", "",
             "or with CMake:", "", "```",
             "cmake -B build -DCMAKE_TOOLCHAIN_FILE=arm-none-eabi.cmake && cmake --build build",
             "```", "",
             f"Needs arm-none-eabi-gcc (Debian: {PACKAGES.split(' qemu')[0]}).", ""]
    if emulated:
        lines += ["## Run under QEMU", "", "```", "make run TCP_PORT=5555", "```", "",
                  "QEMU waits for a client on 127.0.0.1:5555; then:", "", "```",
                  f"kiln validate {model} --target {net.target.name} "
                  "--port socket://127.0.0.1:5555", "```", "",
                  "`kiln validate MODEL --target T --port qemu` starts QEMU itself.", ""]
    lines += ["## Your own board", "",
              f"Copy `{TEMPLATE_PORT}`, fill in its six functions with your vendor HAL's "
              "calls (clock and UART set-up, read a byte, write bytes, a microsecond timer, "
              "a cycle counter), put your board's memory in `board.ld`, and build with "
              f"`make PORT=your_port.c`. Flash `{BIN}` and run `kiln validate {model} --target "
              f"{net.target.name} --port /dev/ttyACM0` (the port your board's UART appears "
              "as; `--baud` if not 115200).", "",
              "## Protocol", "",
              "Commands end with `%`; every reply ends with `m-ready`. MLPerf Tiny's: `name`, "
              "`profile`, `timestamp`, `db load N`, `db HEX`, `db print`, `infer N W`, "
              "`results`. Kiln's: `kiln-id` (the network's hash, Kiln's version, every input "
              "and output with type, shape and quantization, the tick unit), `kiln-out` "
              "(each output's raw bytes as hex), `kiln-layers` (one run, then "
              "`m-kiln-layer-K-TICKS` per kernel call and the whole).", ""]
    return "\n".join(lines)


def write_sources(net: CompiledNet, board: Board, folder: Path, model: str,
                  model_id: str, port: str | None = None) -> str:
    """Write every file the firmware is built from into `folder`; the port's file name.

    `port` defaults to the QEMU port on an emulated board, else the template.
    """
    board_row = linked_board(net.target.name, board)
    port = port or (QEMU_PORT if board_row.uart is not None else TEMPLATE_PORT)
    folder.mkdir(parents=True, exist_ok=True)
    for name in (*RUNNER, QEMU_PORT):
        atomic_write_bytes(folder / name, (HERE / name).read_bytes())
    atomic_write_bytes(folder / "sections.ld", (firmware.HERE / "sections.ld").read_bytes())
    atomic_write_text(folder / "board.ld", linker_script(board_row))
    atomic_write_bytes(folder / f"{net.name}.o", net.object)
    atomic_write_text(folder / f"{net.name}.h", net_header(net))
    atomic_write_text(folder / "kiln_model.h",
                      model_source.header(net, net.target.name, board.name, model_id))
    atomic_write_text(folder / "kiln_model.c", model_source.source(net))
    atomic_write_text(folder / "Makefile", makefile(net, board_row, port))
    atomic_write_text(folder / "CMakeLists.txt", cmake_file(net, board_row, port))
    atomic_write_text(folder / "arm-none-eabi.cmake", toolchain_file())
    atomic_write_text(folder / "README.md", readme(net, board_row, port, model))
    return port


def build(net: CompiledNet, board: Board, folder: Path, model: str, model_id: str = "",
          port: str | None = None) -> Firmware:
    """Write the sources and build the ELF, BIN and map in `folder`."""
    if net.weights != "embedded":
        raise KilnError("the runner firmware embeds the weights; compile with embedded "
                        "weights")
    if not net.timed:
        raise KilnError("the runner firmware needs the timed build (Options.timed_kernels)")
    missing = [tool for tool in (firmware.GCC, OBJCOPY) if shutil.which(tool) is None]
    if missing:
        raise KilnError(f"building the firmware needs {' and '.join(missing)} (Debian "
                        f"packages: {PACKAGES})")
    row = linked_board(net.target.name, board)
    port = write_sources(net, board, folder, model, model_id or Path(model).stem, port)
    done = subprocess.run(gcc_command(net, row, port), cwd=folder, capture_output=True,
                          text=True)
    if done.returncode:
        raise KilnError(f"building the firmware for {row.name} failed (exit "
                        f"{done.returncode}): {done.stderr.strip()[-2000:]}")
    done = subprocess.run([OBJCOPY, "-O", "binary", ELF, BIN], cwd=folder,
                          capture_output=True, text=True)
    if done.returncode:
        raise KilnError(f"{OBJCOPY} failed: {done.stderr.strip()[-1000:]}")
    flash, ram = firmware.placement(folder / ELF)
    atomic_write_text(folder / MANIFEST, json.dumps({
        "network_hash": model_source.network_hash(net), "net": net.name,
        "target": net.target.name, "board": board.name, "linked_for": row.name,
        "qemu_machine": row.qemu_machine, "port": port, "model": Path(model).name,
        "flash_bytes": flash, "ram_bytes": ram,
        "kernels": [net.kernels[k].symbol for k in net.timed]}, indent=2) + "\n")
    return Firmware(folder, net, row, port)
