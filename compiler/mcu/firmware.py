"""Build a compiled network into a bare-metal firmware image and run it on QEMU's boards.

The image is the network's object, a generated `main.c` that embeds the inputs, calls the entry
point between two marker functions (where instruction counting starts and stops) and prints
every output element over semihosting, and the start-up code and shared linker sections of
this folder; the board's memory map comes from its row of the board table
(`compiler.codegen.targets.BOARDS`). The printed outputs are parsed back, so they can be
compared with the interpreter.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from elftools.elf.elffile import ELFFile

from compiler.codegen.build import CompiledNet, Tensor
from compiler.codegen.targets import BOARDS, Board
from compiler.errors import KilnError

HERE = Path(__file__).resolve().parent
GCC = "arm-none-eabi-gcc"
QEMU = "qemu-system-arm"
PACKAGES = "gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm"
TIMEOUT = 300.0  # seconds of emulation before a run counts as hung
FAULT_STATUS = 99  # the start-up code's exit status on a CPU fault
MARKERS = ("kiln_count_begin", "kiln_count_end")
# The emulated rows of the one board table, by QEMU machine name (what `link`, `build` and
# `run` are given).
MACHINES = {b.qemu_machine: b for b in BOARDS.values() if b.qemu_machine}

_C_TYPES = {"float32": ("float", "%.9g", "(double)"), "int8": ("int8_t", "%d", "(int)"),
            "uint8": ("uint8_t", "%d", "(int)"), "int16": ("int16_t", "%d", "(int)"),
            "int32": ("int32_t", "%ld", "(long)"),
            "int64": ("int64_t", "%lld", "(long long)"), "bool": ("uint8_t", "%d", "(int)")}


def missing_tools() -> list[str]:
    """The cross compiler and emulator programs not on PATH."""
    return [tool for tool in (GCC, QEMU) if shutil.which(tool) is None]


def emulated_targets() -> list[str]:
    """The targets some emulated board runs, sorted (what `board_for` accepts)."""
    return sorted({b.target for b in MACHINES.values()})


def board_for(target: str) -> Board:
    """The first emulated board that runs `target`'s objects.

    A target no board runs is a KilnError naming the targets that have one.
    """
    board = next((b for b in MACHINES.values() if b.target == target), None)
    if board is None:
        raise KilnError(f"no QEMU board runs {target}; targets with one: "
                        f"{', '.join(emulated_targets())}")
    return board


def _machine(machine: str) -> Board:
    if machine not in MACHINES:
        raise KilnError(f"{machine!r} is not a QEMU machine of the board table (known: "
                        f"{', '.join(MACHINES)})")
    return MACHINES[machine]


def linker_script(board: Board) -> str:
    """The board's MEMORY block, from its row, then the sections every board shares.

    Written from the table rather than kept as a file per board, so the memory a firmware is
    linked into is the budget `--board` checks.
    """
    return "\n".join([
        f"/* {board.name}: memory from Kiln's board table, then the shared sections. */",
        "MEMORY", "{",
        f"    FLASH (rx)  : ORIGIN = {board.flash_origin:#010x}, LENGTH = {board.flash}",
        f"    RAM   (rwx) : ORIGIN = {board.ram_origin:#010x}, LENGTH = {board.ram}",
        "}", "INCLUDE sections.ld", ""])


def _c_literal(value, dtype: str) -> str:
    if dtype == "float32":
        if np.isnan(value):
            return "NAN"
        return f"{float(value):.9e}f" if np.isfinite(value) else f"{'-' * (value < 0)}INFINITY"
    return str(int(value))


def marker_functions() -> list[str]:
    """C definitions of the two empty functions instruction counting starts and stops at."""
    return [f'__attribute__((noinline, used)) void {name}(void) {{ __asm volatile(""); }}'
            for name in MARKERS]


def main_c(net: CompiledNet, feeds: dict[str, np.ndarray] | list[dict[str, np.ndarray]]
           ) -> str:
    """A `main.c` that copies `feeds` into the regions, runs `net` and prints its outputs.

    Each output element is one line `<output index> <element index> <value>`; main returns the
    entry point's status. The call is bracketed by the counting markers. Given a list of feeds,
    main runs one inference per entry in turn (state carried from one to the next) and prefixes
    each line with `@<inference index> `. A network with state starts from its reset.
    """
    plan = net.plan
    steps = feeds if isinstance(feeds, list) else [feeds]
    lines = ["#include <math.h>", "#include <stdint.h>", "#include <stdio.h>",
             "#include <string.h>", "",
             f"int {net.name}(const uint8_t *, uint8_t *, uint8_t *);", *marker_functions(), "",
             f"static uint8_t mutable_region[{max(plan.mutable, 1)}] "
             f"__attribute__((aligned({plan.alignment})));",
             f"static uint8_t activations[{max(plan.arena.size, 1)}] "
             f"__attribute__((aligned({plan.alignment})));"]
    if net.state:
        lines.insert(6, f"void {net.reset_symbol}(uint8_t *);")
    for s, step in enumerate(steps):
        for i, tensor in enumerate(net.data_inputs):
            ctype = _C_TYPES[tensor.dtype][0]
            data = np.asarray(step[tensor.name], tensor.dtype).reshape(-1)
            body = ",\n".join(", ".join(_c_literal(v, tensor.dtype) for v in data[j:j + 8])
                               for j in range(0, len(data), 8))
            lines += [f"static const {ctype} input{s}_{i}[{len(data)}] = {{", body, "};"]
    region = {"mutable": "mutable_region", "activations": "activations"}
    lines += ["", "int main(void)", "{", "    int status = 0;"]
    if net.state:
        lines.append(f"    {net.reset_symbol}(mutable_region);")
    for s in range(len(steps)):
        prefix = f"@{s} " if isinstance(feeds, list) else ""
        for i, tensor in enumerate(net.data_inputs):
            lines.append(f"    memcpy({region[tensor.region]} + {tensor.offset}, input{s}_{i}, "
                         f"sizeof input{s}_{i});")
        lines += [f"    {MARKERS[0]}();",
                  f"    status |= {net.name}(NULL, mutable_region, activations);",
                  f"    {MARKERS[1]}();"]
        lines += output_prints(net, lambda tensor: f"{region[tensor.region]} + {tensor.offset}",
                               prefix)
    lines += ["    return status;", "}", ""]
    return "\n".join(lines)


def output_prints(net: CompiledNet, address: Callable[[Tensor], str], prefix: str = ""
                  ) -> list[str]:
    """C lines printing every output element as `<output index> <element index> <value>`.

    `address(tensor)` is the C expression of the output's first byte. The QEMU tests' main and
    a bundle's firmware print alike, so `parse_outputs` reads both.
    """
    lines = []
    for i, tensor in enumerate(net.outputs):
        ctype, fmt, cast = _C_TYPES[tensor.dtype]
        count = int(np.prod(tensor.shape, dtype=np.int64))
        lines += [f"    for (int k = 0; k < {count}; k++)",
                  f'        printf("{prefix}{i} %d {fmt}\\n", k, {cast}((const {ctype} *)'
                  f"({address(tensor)}))[k]);"]
    return lines


def gcc_flags(board: Board) -> list[str]:
    """The flags every firmware for `board` is compiled and linked with (tests and bundles).

    Semihosting's C library (rdimon) carries printf to the emulator's stdout; the start-up
    code is this folder's, so none of the toolchain's.
    """
    return [*board.cflags, "-O2", "-nostartfiles", "--specs=rdimon.specs"]


def qemu_command(machine: str, elf: str | Path, extra: tuple[str, ...] = ()) -> list[str]:
    """The qemu-system-arm command that runs `elf` on `machine`, printing over semihosting."""
    return [QEMU, "-M", machine, "-nographic", "-monitor", "none", "-serial", "none",
            "-semihosting-config", "enable=on,target=native", *extra, "-kernel", str(elf)]


def link(sources: list[Path], machine: str, folder: Path, extra: tuple[str, ...] = ()) -> Path:
    """Compile and link C sources and objects with the start-up code into `folder/fw.elf`."""
    board = _machine(machine)
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "board.ld"
    script.write_text(linker_script(board))
    elf = folder / "fw.elf"
    command = [GCC, *gcc_flags(board), f"-L{HERE}", "-T", str(script), *extra,
               str(HERE / "startup.c"), *map(str, sources), "-lm", "-o", str(elf)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise KilnError(f"building the {machine} firmware failed (exit {done.returncode}): "
                        f"{done.stderr.strip()[-2000:]}")
    return elf


def build(net: CompiledNet, main: str, machine: str, folder: Path) -> Path:
    """Link `net` with the C source `main` and the start-up code into `folder/fw.elf`."""
    board = _machine(machine)
    if net.target.name != board.target:
        raise KilnError(f"{machine} runs {board.target} objects, not {net.target.name}")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{net.name}.o").write_bytes(net.object)
    (folder / "main.c").write_text(main)
    return link([folder / "main.c", folder / f"{net.name}.o"], machine, folder)


def placement(elf: Path) -> tuple[int, int]:
    """Bytes the image puts in its board's flash (loaded sections) and in RAM (data and bss)."""
    flash = ram = 0
    with elf.open("rb") as f:
        for section in ELFFile(f).iter_sections():
            if not section["sh_flags"] & 0x2:  # SHF_ALLOC
                continue
            if section["sh_flags"] & 0x1:  # SHF_WRITE: .data (its image is in flash too) and .bss
                ram += section["sh_size"]
            else:
                flash += section["sh_size"]
    return flash, ram


def run(elf: Path, machine: str, timeout: float = TIMEOUT,
        extra: tuple[str, ...] = ()) -> tuple[str, float]:
    """QEMU's stdout for `elf` on `machine` and the seconds it took.

    A non-zero exit or a run past `timeout` is a KilnError that says which and shows the end
    of the output. `extra` holds more QEMU arguments (a plugin).
    """
    command = qemu_command(machine, elf, extra)
    start = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout
        raise KilnError(f"{elf.name} on {machine} did not finish within {timeout:.0f} s; "
                        f"stdout so far: {(out or '')[-500:]!r}") from None
    seconds = time.perf_counter() - start
    if done.returncode:
        raise KilnError(f"{elf.name} on {machine} exited with {done.returncode} "
                        f"({FAULT_STATUS}: CPU fault); stderr: {done.stderr.strip()[-2000:]!r}; "
                        f"stdout: {done.stdout[-500:]!r}")
    return done.stdout, seconds


def parse_outputs(net: CompiledNet, stdout: str, inference: int | None = None
                  ) -> dict[str, np.ndarray]:
    """The outputs printed by the generated main, by name, with their shapes and types.

    `inference`: which of a list of feeds' inferences (lines prefixed `@<index> `).
    """
    values: list[dict[int, str]] = [{} for _ in net.outputs]
    prefix = "" if inference is None else f"@{inference} "
    for line in stdout.splitlines():
        line = line.strip()
        if prefix and not line.startswith(prefix):
            continue
        match = re.fullmatch(r"(\d+) (\d+) (\S+)", line[len(prefix):])
        if match:
            values[int(match[1])][int(match[2])] = match[3]
    results = {}
    for tensor, got in zip(net.outputs, values):
        count = int(np.prod(tensor.shape, dtype=np.int64))
        if sorted(got) != list(range(count)):
            raise KilnError(f"output {tensor.name}: the firmware printed {len(got)} of {count} "
                            f"elements; stdout: {stdout[-500:]!r}")
        numbers = np.array([got[k] for k in range(count)])
        if tensor.dtype == "bool":  # printed as 0 and 1; a string of "0" would read as true
            numbers = numbers.astype(np.int64)
        results[tensor.name] = numbers.astype(tensor.dtype).reshape(tensor.shape)
    return results
