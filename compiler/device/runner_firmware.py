"""The runner firmware: a compiled network, Kiln's protocol runner and a board's port, built.

`write_sources` lays out a folder a firmware developer can build alone (Makefile, CMake file,
README, sources, the network's object and header); `build` compiles it with
arm-none-eabi-gcc into `firmware.elf`, `firmware.bin` and `firmware.map`. The network is the
timed build (`Options.timed_kernels`): kernels kept apart, each call's advance of the port's
counter added to `NET_layer_ticks`, the split `kiln bench --target` counts per layer.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import shutil
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path

from compiler.codegen.build import CompiledNet
from compiler.codegen.bundle import header as net_header
from compiler.codegen.targets import Board
from compiler.device import model_source
from compiler.device.emulated_board import command
from compiler.errors import KilnError
from compiler.fileio import atomic_write_bytes, atomic_write_text
from compiler.mcu import firmware
from compiler.mcu.firmware import MACHINES, PACKAGES, linker_script
from compiler.mcu.firmware_folder import firmware_board

HERE = Path(__file__).resolve().parent
RUNNER = ("kiln_runner.c", "kiln_port.h", "kiln_startup.c", "kiln_port_template.c")
QEMU_PORT = "kiln_port_qemu.c"
TEMPLATE_PORT = "kiln_port_template.c"
ELF, BIN, MAP, MANIFEST = "firmware.elf", "firmware.bin", "firmware.map", "firmware.json"
FLAGS_FILE = "firmware.flags"  # the Makefile's record of the last build's port and flags
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
    """The board the firmware's memory map is for (`firmware_folder.firmware_board`'s rule).

    The chosen one when QEMU emulates it, else QEMU's board of the same core (a user board
    without a memory map in the table gets that map, to edit, and the port template).
    """
    emulated = firmware_board(target, board)
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
    """`make run`'s QEMU: the one `emulated_board.command` Kiln itself starts, on the ELF."""
    return command(Path(ELF), board.qemu_machine, port)


def _for_board(net: CompiledNet, board: Board, chosen: Board | None) -> str:
    """The first line of the build files: whose firmware this is, and what it is linked for."""
    user = chosen is not None and chosen.name != board.name
    where = f"{chosen.name}, linked for {board.name}'s memory" if user else board.name
    return f"# Kiln's runner firmware for {net.name} on {where} ({net.target.name})."


def makefile(net: CompiledNet, board: Board, port: str, chosen: Board | None = None) -> str:
    """The Makefile: `make` builds the ELF, BIN and map; `make run` starts QEMU.

    Plain `=` everywhere: make's built-in CC (`cc`) would win over `CC ?=`, and an exported
    PORT or CFLAGS from the user's shell would replace the cross build's; the command line
    still overrides any of them.
    """
    command = gcc_command(net, board, port)
    cc_flags = [c for c in command[1:command.index("-T")] if not c.startswith("-DKILN_")]
    lines = [_for_board(net, board, chosen),
             "# make: firmware.elf, firmware.bin and firmware.map.",
             "# make PORT=my_port.c PORT_FLAGS='-DNAME=VALUE ...': with your port and its "
             "defines.",
             "# make run: the firmware under QEMU, its UART on TCP port $(TCP_PORT) of "
             "127.0.0.1.",
             f"CC = {firmware.GCC}", f"OBJCOPY = {OBJCOPY}", f"PORT = {port}", "PORT_FLAGS =",
             "TCP_PORT = 5555", f"CFLAGS = {shlex.join(cc_flags)}",
             "# kiln_port_qemu.c's board: the UART's address and clock, the core clock.",
             f"QEMU_PORT_FLAGS = {shlex.join(port_defines(board))}",
             f"SOURCES = {' '.join(sources(net, '$(PORT)'))}",
             f"FLAGS = $(CFLAGS) $(if $(filter {QEMU_PORT},$(PORT)),$(QEMU_PORT_FLAGS)) "
             "$(PORT_FLAGS)", "",
             ".PHONY: all run clean FORCE", f"all: {ELF} {BIN}", "",
             "# The port and flags of the last build: another PORT or PORT_FLAGS rebuilds, "
             "as a changed file does.",
             f"{FLAGS_FILE}: FORCE",
             "\t@if [ \"$$(cat $@ 2>/dev/null)\" != '$(PORT) $(FLAGS)' ]; then "
             "echo '$(PORT) $(FLAGS)' > $@; fi", "",
             f"{ELF}: $(SOURCES) {net.name}.o kiln_model.h kiln_port.h {net.name}.h board.ld "
             f"sections.ld {FLAGS_FILE}",
             f"\t$(CC) $(FLAGS) -T board.ld -Wl,--gc-sections -Wl,-Map={MAP} $(SOURCES) "
             f"{net.name}.o -o $@", "",
             f"{BIN}: {ELF}", "\t$(OBJCOPY) -O binary $< $@", ""]
    if board.qemu_machine:
        run = shlex.join(qemu_command(board, "TCP_PORT")).replace("TCP_PORT", "$(TCP_PORT)")
        lines += [f"run: {ELF}", f"\t{run}", ""]
    lines += ["clean:", f"\trm -f {ELF} {BIN} {MAP} {FLAGS_FILE}", ""]
    return "\n".join(lines)


def cmake_file(net: CompiledNet, board: Board, port: str, chosen: Board | None = None) -> str:
    """CMakeLists.txt building the same ELF with CMake and the Arm GNU toolchain."""
    command = gcc_command(net, board, port)
    flags = [c for c in command[1:command.index("-T")] if not c.startswith("-DKILN_")]
    link = [c for c in flags if c.startswith(("-m", "--specs", "-nostartfiles"))]
    return "\n".join([
        _for_board(net, board, chosen),
        "# cmake -B build && cmake --build build  (-DKILN_PORT=my_port.c "
        "-DKILN_PORT_DEFINES='NAME=VALUE;...' for your port)",
        "cmake_minimum_required(VERSION 3.16)",
        "# The Arm GNU toolchain unless another is given: the host's compiler cannot build it.",
        "if(NOT CMAKE_TOOLCHAIN_FILE)",
        "  set(CMAKE_TOOLCHAIN_FILE ${CMAKE_CURRENT_SOURCE_DIR}/arm-none-eabi.cmake)",
        "endif()",
        "project(kiln_runner C)",
        f'set(KILN_PORT "{port}" CACHE STRING "the porting layer\'s C file")',
        'set(KILN_PORT_DEFINES "" CACHE STRING "the port\'s definitions, NAME=VALUE;...")',
        f"add_executable({ELF} {' '.join(sources(net, '${KILN_PORT}'))})",
        f"target_compile_options({ELF} PRIVATE {' '.join(flags)})",
        f'if(KILN_PORT STREQUAL "{QEMU_PORT}")',
        f"  target_compile_definitions({ELF} PRIVATE "
        f"{' '.join(d[2:] for d in port_defines(board))})", "endif()",
        f"target_compile_definitions({ELF} PRIVATE ${{KILN_PORT_DEFINES}})",
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
        f"set(CMAKE_C_COMPILER {firmware.GCC})", f"set(CMAKE_OBJCOPY {OBJCOPY})",
        "set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)", ""])


def _your_board(net: CompiledNet, board: Board, chosen: Board | None, model: str) -> list[str]:
    """The README's steps from the template port to a firmware on the user's own board."""
    user = chosen is not None and chosen.name != board.name
    name = chosen.name if user else "your board"
    memory = (f"it holds {chosen.name}'s {chosen.flash // 1024:,} KiB of flash and "
              f"{chosen.ram // 1024:,} KiB of RAM (Kiln's board table) at {board.name}'s "
              "addresses: check the addresses in its reference manual" if user else
              "put your board's flash and RAM there")
    return [
        f"## Your own board{f': {chosen.name}' if user else ''}", "",
        f"`{TEMPLATE_PORT}` is the porting layer to fill in (`kiln_port.h` states the "
        f"contract; `{QEMU_PORT}` is a complete port to compare with). Copy it to "
        "`my_port.c` and replace each `TODO` with your vendor HAL's calls:", "",
        "- `kiln_port_init`: the clocks (STM32Cube's `HAL_Init` and `SystemClock_Config`, "
        "Nordic's nrfx clock driver, NXP's `BOARD_InitBootClocks`...), then the UART the host "
        "is cabled to, 8N1 at 115200 baud, receiver and transmitter on;",
        "- `kiln_port_read_byte`: wait for one received byte and return it;",
        "- `kiln_port_write`: send the bytes;",
        "- `kiln_port_microseconds`: a microsecond timer (the cycle counter serves);",
        "- `KILN_CPU_HZ`: the core clock (pass `-DKILN_CPU_HZ=...` in `PORT_FLAGS`).", "",
        "`kiln_port_ticks` reads the DWT cycle counter; a core without one (Cortex-M0/M0+, "
        "QEMU) counts a timer instead and names it in `kiln_port_tick_unit`.", "",
        f"`board.ld`'s MEMORY block is {board.name}'s (flash at {board.flash_origin:#x}, "
        f"RAM at {board.ram_origin:#x}): {memory}. `kiln_startup.c` sets up the C "
        "runtime and its vector table has the core's 16 entries; a HAL that counts time "
        "with SysTick needs `SysTick_Handler` defined in your port (STM32Cube's calls "
        "`HAL_IncTick()`). Then, with your core clock in Hz (HZ below: 64000000u for a "
        "64 MHz core):", "", "```",
        "make PORT=my_port.c PORT_FLAGS='-DKILN_CPU_HZ=HZ'",
        "# or: cmake -B build -DKILN_PORT=my_port.c "
        "-DKILN_PORT_DEFINES='KILN_CPU_HZ=HZ' && cmake --build build", "```", "",
        f"Flash `{BIN}` on {name} and run `kiln validate {model} --target "
        f"{net.target.name} --port /dev/ttyACM0` (the device your board's UART appears as; "
        "`--baud` if not 115200).", ""]


def readme(net: CompiledNet, board: Board, port: str, model: str,
           chosen: Board | None = None) -> str:
    """README.md: what the folder is and the exact commands to build, run and validate it.

    `chosen` is the user's board when QEMU does not emulate it and `board` only lends its
    memory map: then the README leads with what to fill in.
    """
    user = chosen is not None and chosen.name != board.name
    lines = [f"# Kiln runner firmware: {net.name} ({Path(model).name}) on "
             f"{chosen.name if user else board.name}", "",
             f"Kiln's compiled network for {net.target.name}, the runner `kiln_runner.c` "
             "(MLPerf Tiny's benchmark protocol and Kiln's own commands over a serial link) "
             f"and the porting layer `{port}`.", ""]
    if user:
        lines += [f"QEMU does not emulate {chosen.name}: the firmware is linked for "
                  f"{board.name}'s memory map (the same core) and built with the port "
                  f"template, whose UART functions do nothing until you fill them in (see "
                  f"*Your own board*).", ""]
    lines += ["## Build", "", "```", "make            # firmware.elf, firmware.bin, "
              "firmware.map", "```", "", "or with CMake:", "", "```",
              "cmake -B build && cmake --build build", "```", "",
              f"Needs {firmware.GCC} (Debian: {PACKAGES.split(' qemu')[0]}).", ""]
    if board.qemu_machine:
        qemu = "" if port == QEMU_PORT else f" PORT={QEMU_PORT}"
        lines += ["## Run under QEMU", "", "```", f"make run{qemu} TCP_PORT=5555", "```", "",
                  f"`make run` starts `{firmware.QEMU} -M {board.qemu_machine}` on "
                  f"`{ELF}`{' built with the QEMU port' if qemu else ''}; it waits for a "
                  "client on 127.0.0.1:5555. Then:", "", "```",
                  f"kiln validate {model} --target {net.target.name} "
                  "--port socket://127.0.0.1:5555", "```", "",
                  "`kiln validate MODEL --target T --port qemu` starts QEMU itself.", ""]
    lines += _your_board(net, board, chosen, model)
    lines += ["## Protocol", "",
              "Commands end with `%`; every reply ends with `m-ready`. MLPerf Tiny's: `name`, "
              "`profile`, `timestamp`, `db load N`, `db HEX`, `db print`, `infer N W`, "
              "`results`. Kiln's: `kiln-id` (the network's hash, Kiln's version, every input "
              "and output with type, shape and quantization, the tick unit), `kiln-out` "
              "(each output's raw bytes as hex), `kiln-layers` (one run, then "
              "`m-kiln-layer-K-TICKS` per kernel call and the whole).", ""]
    return "\n".join(lines)


def _recorded_files(folder: Path) -> dict[str, str]:
    """The SHA-256 of each file the last build wrote, from its manifest ({} when none)."""
    try:
        return dict(json.loads((folder / MANIFEST).read_text()).get("files", {}))
    except (OSError, ValueError, AttributeError):
        return {}


def changed_files(folder: Path, files: dict[str, bytes]) -> list[str]:
    """The files of `files` already in `folder` that Kiln did not write as they are now.

    A port the user filled in, a Makefile they edited: overwriting them loses work.
    """
    recorded = _recorded_files(folder)
    changed = []
    for name, data in files.items():
        path = folder / name
        if not path.is_file():
            continue
        now = path.read_bytes()
        if now != data and recorded.get(name) != hashlib.sha256(now).hexdigest():
            changed.append(name)
    return changed


def source_files(net: CompiledNet, board: Board, model: str, model_id: str, port: str
                 ) -> dict[str, bytes]:
    """Every file the firmware is built from, by name."""
    row = linked_board(net.target.name, board)
    memory = row if board is row or board.qemu_machine else replace(
        row, name=board.name, flash=board.flash, ram=board.ram)  # the user board's sizes
    files = {name: (HERE / name).read_bytes() for name in (*RUNNER, QEMU_PORT)}
    texts = {"board.ld": linker_script(memory), f"{net.name}.h": net_header(net),
             "kiln_model.h": model_source.header(net, net.target.name, board.name, model_id),
             "kiln_model.c": model_source.source(net),
             "Makefile": makefile(net, row, port, board),
             "CMakeLists.txt": cmake_file(net, row, port, board),
             "arm-none-eabi.cmake": toolchain_file(),
             "README.md": readme(net, row, port, str(Path(model).resolve()), board)}
    files |= {name: text.encode() for name, text in texts.items()}
    files["sections.ld"] = (firmware.HERE / "sections.ld").read_bytes()
    files[f"{net.name}.o"] = net.object
    return files


def write_sources(net: CompiledNet, board: Board, folder: Path, model: str,
                  model_id: str, port: str | None = None, force: bool = False
                  ) -> tuple[str, dict[str, str]]:
    """Write every file the firmware is built from into `folder`; the port and the hashes.

    Returns the port's file name and each file's SHA-256. `port` defaults to the QEMU port
    on an emulated board, else the template. A file there that Kiln did not write as it is
    (a port filled in, an edited Makefile) is refused unless `force`.
    """
    board_row = linked_board(net.target.name, board)
    port = port or (QEMU_PORT if board_row.uart is not None else TEMPLATE_PORT)
    files = source_files(net, board, model, model_id, port)
    folder.mkdir(parents=True, exist_ok=True)
    changed = [] if force else changed_files(folder, files)
    if changed:
        raise KilnError(f"{folder}: {', '.join(changed)} changed since Kiln wrote "
                        f"{'it' if len(changed) == 1 else 'them'}; keep your port under "
                        "another name (make PORT=my_port.c), write to another folder, or "
                        "pass --force to overwrite")
    for name, data in files.items():
        atomic_write_bytes(folder / name, data)
    return port, {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}


def build(net: CompiledNet, board: Board, folder: Path, model: str, model_id: str = "",
          port: str | None = None, force: bool = False) -> Firmware:
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
    port, hashes = write_sources(net, board, folder, model, model_id or Path(model).stem,
                                 port, force)
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
        "kernels": [net.kernels[k].symbol for k in net.timed],
        "files": hashes}, indent=2) + "\n")
    return Firmware(folder, net, row, port)
