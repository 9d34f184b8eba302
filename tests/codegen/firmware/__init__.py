"""Build a compiled network into a bare-metal firmware image and run it on QEMU's MPS2 boards.

The image is the network's object, a generated `main.c` that embeds the inputs, calls the entry
point and prints every output element over semihosting, and the start-up code and linker scripts
of this folder. Python parses what it printed, so the outputs can be compared with the reference
interpreter like a host run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from elftools.elf.elffile import ELFFile

from compiler.codegen.build import CompiledNet

HERE = Path(__file__).resolve().parent
GCC = "arm-none-eabi-gcc"
QEMU = "qemu-system-arm"
PACKAGES = "gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm"
TIMEOUT = 120.0  # seconds of emulation before a run counts as hung


@dataclass(frozen=True)
class QemuBoard:
    """One QEMU machine: the Kiln target whose objects it runs and how to build for it."""

    machine: str
    target: str
    cflags: tuple[str, ...]
    script: str


# Kiln marks its Arm objects Tag_ABI_VFP_args "compatible" (they pass no floats across calls and
# inline their math), so the firmware is built the way a user's would be: hard float.
FLOAT_ABI = "hard"
BOARDS = {b.machine: b for b in (
    QemuBoard("mps2-an385", "cortex-m3", ("-mcpu=cortex-m3", "-mthumb", "-mfloat-abi=soft"),
              "mps2-an500.ld"),
    QemuBoard("mps2-an500", "cortex-m7", ("-mcpu=cortex-m7", "-mthumb",
                                          f"-mfloat-abi={FLOAT_ABI}", "-mfpu=fpv5-sp-d16"),
              "mps2-an500.ld"),
    QemuBoard("mps2-an505", "cortex-m33", ("-mcpu=cortex-m33", "-mthumb",
                                           f"-mfloat-abi={FLOAT_ABI}", "-mfpu=fpv5-sp-d16"),
              "mps2-an505.ld"),
)}

_C_TYPES = {"float32": ("float", "%.9g", "(double)"), "int8": ("int8_t", "%d", "(int)"),
            "uint8": ("uint8_t", "%d", "(int)"), "int32": ("int32_t", "%ld", "(long)"),
            "int64": ("int64_t", "%lld", "(long long)")}


def require_tools() -> None:
    """Skip when the cross compiler or QEMU is missing; under CI=true that is a failure."""
    missing = [tool for tool in (GCC, QEMU) if shutil.which(tool) is None]
    if missing:
        message = (f"{' and '.join(missing)} not found (Debian packages: {PACKAGES}; "
                   "`make test` installs them when run as root)")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message + "; CI must have them")
        pytest.skip(message)


def _c_literal(value, dtype: str) -> str:
    if dtype == "float32":
        if np.isnan(value):
            return "NAN"
        return f"{float(value):.9e}f" if np.isfinite(value) else f"{'-' * (value < 0)}INFINITY"
    return str(int(value))


def main_c(net: CompiledNet, feeds: dict[str, np.ndarray]) -> str:
    """A `main.c` that copies `feeds` into the regions, runs `net` once and prints its outputs.

    Each output element is one line `<output index> <element index> <value>`; main returns the
    entry point's status.
    """
    plan = net.plan
    lines = ["#include <math.h>", "#include <stdint.h>", "#include <stdio.h>",
             "#include <string.h>", "",
             f"int {net.name}(const uint8_t *, uint8_t *, uint8_t *);", "",
             f"static uint8_t mutable_region[{max(plan.mutable, 1)}] "
             f"__attribute__((aligned({plan.alignment})));",
             f"static uint8_t activations[{max(plan.arena.size, 1)}] "
             f"__attribute__((aligned({plan.alignment})));"]
    for i, tensor in enumerate(net.inputs):
        ctype = _C_TYPES[tensor.dtype][0]
        data = np.asarray(feeds[tensor.name], tensor.dtype).reshape(-1)
        body = ",\n".join(", ".join(_c_literal(v, tensor.dtype) for v in data[j:j + 8])
                          for j in range(0, len(data), 8))
        lines += [f"static const {ctype} input{i}[{len(data)}] = {{", body, "};"]
    region = {"mutable": "mutable_region", "activations": "activations"}
    lines += ["", "int main(void)", "{"]
    for i, tensor in enumerate(net.inputs):
        lines.append(f"    memcpy({region[tensor.region]} + {tensor.offset}, input{i}, "
                     f"sizeof input{i});")
    lines.append(f"    int status = {net.name}(NULL, mutable_region, activations);")
    for i, tensor in enumerate(net.outputs):
        ctype, fmt, cast = _C_TYPES[tensor.dtype]
        count = int(np.prod(tensor.shape, dtype=np.int64))
        lines += [f"    const {ctype} *output{i} = (const {ctype} *)({region[tensor.region]} + "
                  f"{tensor.offset});",
                  f"    for (int k = 0; k < {count}; k++)",
                  f'        printf("{i} %d {fmt}\\n", k, {cast}output{i}[k]);']
    lines += ["    return status;", "}", ""]
    return "\n".join(lines)


def build(net: CompiledNet, main: str, machine: str, folder: Path) -> Path:
    """Link `net` with the C source `main` and the start-up code into `folder/fw.elf`."""
    board = BOARDS[machine]
    assert net.target.name == board.target, f"{machine} runs {board.target} objects"
    (folder / f"{net.name}.o").write_bytes(net.object)
    (folder / "main.c").write_text(main)
    elf = folder / "fw.elf"
    command = [GCC, *board.cflags, "-O2", "-nostartfiles", "--specs=rdimon.specs",
               f"-L{HERE}", "-T", board.script, str(HERE / "startup.c"), str(folder / "main.c"),
               str(folder / f"{net.name}.o"), "-lm", "-o", str(elf)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        pytest.fail(f"building the {machine} firmware failed (exit {done.returncode}):\n"
                    f"{done.stderr.strip()}")
    return elf


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


def run(elf: Path, machine: str, timeout: float = TIMEOUT) -> tuple[str, float]:
    """QEMU's stdout for `elf` on `machine` and the seconds it took; fails on a non-zero exit."""
    command = [QEMU, "-M", machine, "-nographic", "-monitor", "none", "-serial", "none",
               "-semihosting-config", "enable=on,target=native", "-kernel", str(elf)]
    start = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout
        pytest.fail(f"{elf.name} on {machine} did not finish within {timeout:.0f} s; "
                    f"stdout so far: {(out or '')[-500:]!r}")
    seconds = time.perf_counter() - start
    if done.returncode:
        pytest.fail(f"{elf.name} on {machine} exited with {done.returncode} (99: CPU fault); "
                    f"stderr: {done.stderr.strip()[-2000:]!r}; stdout: {done.stdout[-500:]!r}")
    return done.stdout, seconds


def parse_outputs(net: CompiledNet, stdout: str) -> dict[str, np.ndarray]:
    """The outputs printed by the generated main, by name, with their shapes and types."""
    values: list[dict[int, str]] = [{} for _ in net.outputs]
    for line in stdout.splitlines():
        match = re.fullmatch(r"(\d+) (\d+) (\S+)", line.strip())
        if match:
            values[int(match[1])][int(match[2])] = match[3]
    results = {}
    for tensor, got in zip(net.outputs, values):
        count = int(np.prod(tensor.shape, dtype=np.int64))
        assert sorted(got) == list(range(count)), (
            f"output {tensor.name}: printed {len(got)} of {count} elements; stdout: "
            f"{stdout[-500:]!r}")
        results[tensor.name] = np.array([got[k] for k in range(count)]).astype(
            tensor.dtype).reshape(tensor.shape)
    return results
