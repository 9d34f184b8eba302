"""The firmware a Cortex-M bundle carries, so that its folder builds and runs as it is.

Beside NET.o and NET.h, an export for a core that an emulated board runs writes a `main.c` that
runs the network once on the input in NET.input.bin (or any file given as `make INPUT=...`,
embedded at build time) and prints every output element over semihosting, the board's linker
script, the start-up code and shared sections of the QEMU firmware (`compiler.mcu.firmware`,
the one home of all three, and of the compiler flags and the QEMU command), a Makefile and a
README that gives the exact commands. A board the user chose that QEMU does not emulate keeps
its budget check; the firmware is then linked for the emulated board with the same core, and
the README says what to change for the real one.
"""

from __future__ import annotations

import shlex

import numpy as np

from compiler.codegen.build import CompiledNet, Tensor
from compiler.codegen.bundle import footprint, io_macros
from compiler.codegen.example import GENERATED_MARK, c_comment
from compiler.codegen.sizes import object_sizes
from compiler.codegen.targets import Board
from compiler.mcu import firmware
from compiler.mcu.firmware import MACHINES, PACKAGES, linker_script, output_prints, qemu_command

# Every file of the folder besides the bundle's own (NET.input.bin and NET.elf are named after
# the network: `bundle_folder.bundle_entries`).
FILES = ("main.c", "Makefile", "README.md", "board.ld", "sections.ld", "startup.c")
_REGIONS = {"mutable": "mutable_region", "activations": "activations"}
_C_TYPES = {"float32": "float", "int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t",
            "int32": "int32_t", "int64": "int64_t", "bool": "uint8_t"}


def firmware_board(target: str, board: Board | None = None) -> Board | None:
    """The emulated board the folder's firmware is linked for, or None when QEMU runs none.

    The chosen board when QEMU emulates it, else the first emulated board of the same core.
    """
    if board is not None and board.qemu_machine and board.target == target:
        return board
    return next((b for b in MACHINES.values() if b.target == target), None)


def input_file(net: CompiledNet) -> str:
    """NET.input.bin: the input the firmware runs on when `make` is given none."""
    return f"{net.name}.input.bin"


def elf_file(net: CompiledNet) -> str:
    """NET.elf: what `make` builds (`run_command` runs it)."""
    return f"{net.name}.elf"


def pattern(tensor: Tensor) -> np.ndarray:
    """The fixed input pattern of the hosted example's main.c, as an array of `tensor`'s type.

    Floats (i*7 mod 17)/17 - 0.5, signed integers i*7 mod 17 - 8, unsigned i*7 mod 17, bools
    alternating: every value in range, never all alike.
    """
    i = np.arange(int(np.prod(tensor.shape, dtype=np.int64)), dtype=np.int64)
    if tensor.dtype.startswith("float"):
        values = ((i * 7) % 17).astype(np.float32) / np.float32(17) - np.float32(0.5)
    elif tensor.dtype == "bool":
        values = i % 2
    elif tensor.dtype.startswith("uint"):
        values = (i * 7) % 17
    else:
        values = (i * 7) % 17 - 8
    return np.asarray(values, tensor.dtype).reshape(tensor.shape)


def run_command(board: Board, name: str) -> str:
    """The shell line that runs the built firmware of the network `name` under QEMU."""
    return shlex.join(qemu_command(board.qemu_machine, f"{name}.elf"))


def main_c(net: CompiledNet, board: Board) -> str:
    """The firmware's main: copy the embedded input in, run the network once, print outputs."""
    n, up = net.name, net.name.upper()
    inputs = [(t, m) for kind, t, m in io_macros(net) if kind == "input"]
    total = " + ".join(f"{m}_BYTES" for _, m in inputs) or "0"
    external = net.weights == "external"
    lines = [f"/* main.c: {GENERATED_MARK} for {board.name} ({net.target.name}). Runs {n} once",
             f" * on the bytes of KILN_INPUT (default {input_file(net)}: every input's raw "
             f"bytes back to back, in the order of {n}.h), embedded at build time, and prints",
             " * every output element over semihosting as `<output> <element> <value>`. */",
             "#include <stddef.h>", "#include <stdint.h>", "#include <stdio.h>",
             "#include <string.h>", f'#include "{n}.h"',
             *([f'#include "{n}.weights.h"'] if external else []), "",
             "#ifndef KILN_INPUT", f'#define KILN_INPUT "{input_file(net)}"', "#endif",
             "/* The input file, placed in flash by the assembler (make INPUT=FILE picks it). */",
             '__asm__(".pushsection .rodata.kiln_input, \\"a\\"\\n"',
             '        ".balign 16\\n.global kiln_input\\nkiln_input:\\n"',
             '        ".incbin \\"" KILN_INPUT "\\"\\n"',
             '        ".global kiln_input_end\\nkiln_input_end:\\n.popsection\\n");',
             "extern const uint8_t kiln_input[], kiln_input_end[];", "",
             "#define NONZERO(n) ((n) > 0 ? (n) : 1) /* C forbids empty arrays */",
             f"static uint8_t mutable_region[NONZERO({up}_MUTABLE_SIZE)] "
             f"__attribute__((aligned({up}_ALIGNMENT)));",
             f"static uint8_t activations[NONZERO({up}_ACTIVATIONS_SIZE)] "
             f"__attribute__((aligned({up}_ALIGNMENT)));", "",
             "int main(void)", "{",
             "    size_t given = (size_t)(kiln_input_end - kiln_input);",
             f"    if (given != (size_t)({total})) {{",
             f'        printf("{n}: the input file " KILN_INPUT " holds %lu bytes; '
             f'{n}.h\'s inputs take %lu\\n", (unsigned long)given, '
             f"(unsigned long)({total}));",
             "        return 1;", "    }",
             "    const uint8_t *next = kiln_input;"]
    for tensor, macro in inputs:
        lines += [f"    memcpy({_REGIONS[tensor.region]} + {macro}_OFFSET, next, {macro}_BYTES);"
                  f" /* {c_comment(tensor.name)} */",
                  f"    next += {macro}_BYTES;"]
    if net.state:  # one inference from the state's initial values
        lines.append(f"    {net.reset_symbol}(mutable_region);")
    weights = f"{n}_weights" if external else "NULL"
    lines += [f"    int status = {n}({weights}, mutable_region, activations);",
              "    if (status != 0) {",
              f'        printf("{n} returned %d\\n", status);',
              "        return 2;", "    }"]
    macros = {t.name: m for kind, t, m in io_macros(net) if kind == "output"}
    lines += output_prints(net, lambda t: f"{_REGIONS[t.region]} + {macros[t.name]}_OFFSET")
    lines += ["    return 0;", "}", ""]
    return "\n".join(lines)


def makefile(net: CompiledNet, board: Board) -> str:
    """`make` builds NET.elf with the QEMU tests' flags; `make run` runs it under QEMU."""
    n, elf = net.name, elf_file(net)
    return "\n".join([
        f"# Makefile: {GENERATED_MARK}. `make` builds {elf} for {board.name}, `make run` runs "
        "it under QEMU",
        f"# (INPUT=file.bin: the inputs' raw bytes; without it {input_file(net)}).",
        f"CC = {firmware.GCC}",
        f"CFLAGS = {' '.join(firmware.gcc_flags(board))}",
        f"INPUT ?= {input_file(net)}",
        "",
        f"{elf}: main.c startup.c {n}.o {n}.h board.ld sections.ld $(INPUT)"
        + (f" {n}.weights.h" if net.weights == "external" else ""),
        f"\t$(CC) $(CFLAGS) -DKILN_INPUT='\"$(INPUT)\"' -L. -T board.ld startup.c main.c "
        f"{n}.o -lm -o $@",
        "",
        f"run: {elf}",
        f"\t{run_command(board, net.name)}",
        "",
        "clean:",
        f"\trm -f {elf}",
        "",
        ".PHONY: run clean",
        ""])


def readme(net: CompiledNet, board: Board, chosen: Board | None) -> str:
    """README.md: what the folder holds and the exact commands that build and run it."""
    n, up = net.name, net.name.upper()
    flash, ram = footprint(net, object_sizes(net.object))
    inputs = [(t, m) for kind, t, m in io_macros(net) if kind == "input"]
    outputs = [(t, m) for kind, t, m in io_macros(net) if kind == "output"]

    def listed(items) -> list[str]:
        return [f"- `{t.name}`: {t.dtype}[{','.join(map(str, t.shape))}], "
                f"`{m}_BYTES` bytes" for t, m in items]

    lines = [f"<!-- README.md: {GENERATED_MARK}; exporting again rewrites it. -->",
             f"# {n}: a Kiln bundle for {net.target.name}, with firmware for {board.name}", ""]
    if chosen is not None and chosen.name != board.name:
        lines += [f"The export was checked against {chosen.name}'s budget. QEMU does not "
                  f"emulate that board, so this firmware is linked for {board.name} "
                  f"(`{firmware.QEMU} -M {board.qemu_machine}`), which has the same core; see "
                  "*Your board* below.",
                  ""]
    lines += [f"`{n}.o` and `{n}.h` are the network (link them into any firmware); "
              f"`main.c`, `startup.c`, `board.ld` (the board's memory, then `sections.ld`) "
              f"and the `Makefile` make a firmware that runs it once on `{input_file(net)}` "
              "and prints every output element over semihosting.", "",
              f"Needs `{firmware.GCC}` with newlib and `{firmware.QEMU}` (Debian packages: "
              f"{PACKAGES}).", "",
              "## Build and run", "", "```sh", "make", run_command(board, net.name), "```", "",
              f"`make run` does both. Each line printed is `<output> <element> <value>`: the "
              f"output's index in {n}.h's order, the element's index, its value.", "",
              "Inputs, back to back in this order:", *listed(inputs), "",
              "Outputs:", *listed(outputs), "",
              "## Your own input", "",
              f"Put the raw bytes of every input, back to back in the order above "
              f"(`{up}_INPUT_..._BYTES` each, nothing else), in a file and build with it:", "",
              "```sh", "make INPUT=my_input.bin", run_command(board, net.name), "```", "",
              f"`{input_file(net)}` holds a fixed pattern (exporting again rewrites it, so keep "
              "your inputs in files of your own). A file of another size is refused when the "
              "firmware starts.", "",
              "## Your board", "",
              f"`board.ld`'s MEMORY block is {board.name}'s; put your board's flash and RAM "
              "there. `startup.c` is a minimal start-up for QEMU (semihosting, faults exit): "
              "use your vendor's, and retarget `printf` to a UART, which needs no debugger. "
              f"The network itself takes {flash:,} B of flash (code, read-only data, weights) "
              f"and {ram:,} B of RAM (its data, mutable and activation regions); "
              f"`{n}.report.json` has every figure.", ""]
    return "\n".join(lines)


def _marked(text: str, name: str, what: str) -> bytes:
    """A file of the QEMU firmware, its first line saying Kiln wrote it (so it is Kiln's)."""
    return f"/* {name}: {GENERATED_MARK}, {what}. */\n{text}".encode()


def firmware_files(net: CompiledNet, board: Board, chosen: Board | None = None
                   ) -> dict[str, bytes]:
    """The folder's firmware files for the emulated `board` (`chosen`: the user's board)."""
    shared = firmware.HERE
    inputs = b"".join(np.ascontiguousarray(pattern(t)).tobytes() for t in net.data_inputs)
    return {"main.c": main_c(net, board).encode(),
            "Makefile": makefile(net, board).encode(),
            "README.md": readme(net, board, chosen).encode(),
            "board.ld": _marked(linker_script(board), "board.ld", "the board's memory"),
            "sections.ld": _marked((shared / "sections.ld").read_text(), "sections.ld",
                                   "the sections of every board"),
            "startup.c": _marked((shared / "startup.c").read_text(), "startup.c",
                                 "the QEMU firmware's start-up"),
            input_file(net): inputs}
