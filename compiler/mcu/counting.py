"""Executed-instruction counts of a compiled network on an emulated Cortex-M, per layer.

QEMU runs the firmware with the project's TCG plugin (`insn_count.c`, built here with the host
C compiler and cached by the hash of its source). The plugin counts between the markers that
`main.c` calls around the entry point. The total comes from the network as it ships (every
kernel inlined into the entry point); the per-layer split from a second build that keeps each
kernel a function of its own, whose address ranges the plugin attributes instructions to.
Counts are instructions, not cycles, and repeat exactly from run to run.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from elftools.elf.elffile import ELFFile

from compiler.cache import cache_dir
from compiler.codegen.build import CompiledNet, KernelInfo
from compiler.errors import KilnError
from compiler.lowir.ir import Fusion
from compiler.mcu import firmware

PLUGIN_SOURCE = firmware.HERE / "insn_count.c"


@dataclass(frozen=True)
class Counts:
    """What the plugin printed: the counted total, per marker segment and per address range."""

    total: int
    segments: list[int] = field(default_factory=list)
    regions: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class LayerCount:
    """One kernel's executed instructions and the graph nodes it runs."""

    symbol: str
    op: str
    nodes: tuple[str, ...]
    instructions: int


@dataclass(frozen=True)
class NetCount:
    """A network's instructions on one core: the shipped total and the per-kernel split.

    Attributes:
        total: Instructions of one inference as shipped (kernels inlined), marker to marker.
        layers: Per kernel, from the build with separate kernels, in schedule order.
        separate_total: That build's total (calls between kernels make it slightly larger).
        code_bytes: The shipped object's code (.text) bytes; weights are not code.
    """

    machine: str
    target: str
    total: int
    layers: list[LayerCount]
    separate_total: int
    code_bytes: int


def plugin() -> Path:
    """The instruction-counting plugin, compiled once per version of its source."""
    source = PLUGIN_SOURCE.read_bytes()
    path = cache_dir() / f"insn_count-{hashlib.sha256(source).hexdigest()[:16]}.so"
    if path.is_file():
        return path
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise KilnError("building the QEMU counting plugin needs a host C compiler (cc); "
                        "Debian package: gcc")
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    done = subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", str(partial),
                           str(PLUGIN_SOURCE)], capture_output=True, text=True)
    if done.returncode:
        raise KilnError(f"building the QEMU counting plugin failed: {done.stderr.strip()}")
    os.replace(partial, path)
    return path


def functions(elf: Path) -> dict[str, tuple[int, int]]:
    """Function symbols of `elf`: name -> (start address with the Thumb bit cleared, size)."""
    with elf.open("rb") as f:
        table = ELFFile(f).get_section_by_name(".symtab")
        return {s.name: (s["st_value"] & ~1, s["st_size"]) for s in table.iter_symbols()
                if s["st_info"]["type"] == "STT_FUNC" and s.name}


def count(elf: Path, machine: str, regions: list[tuple[int, int]] = (),
          folder: Path | None = None) -> tuple[Counts, str]:
    """Run `elf` under the counting plugin; the counts and the firmware's stdout."""
    symbols = functions(elf)
    missing = [m for m in firmware.MARKERS if m not in symbols]
    if missing:
        raise KilnError(f"{elf.name} has no counting markers ({', '.join(missing)})")
    with tempfile.TemporaryDirectory(prefix="kiln-count-") as scratch:
        where = Path(folder or scratch)
        ranges, log = where / "regions.txt", where / "plugin.log"
        ranges.write_text("".join(f"{a:x} {b:x}\n" for a, b in regions))
        begin, end = (symbols[m][0] for m in firmware.MARKERS)
        options = f"{plugin()},begin={begin:#x},end={end:#x},regions={ranges}"
        stdout, _ = firmware.run(elf, machine, extra=("-plugin", options, "-d", "plugin",
                                                      "-D", str(log)))
        return parse_log(log.read_text()), stdout


def parse_log(text: str) -> Counts:
    """The counts in the plugin's log."""
    total, segments, regions = None, {}, {}
    for line in text.splitlines():
        words = line.split()
        if words[:1] == ["total"]:
            total = int(words[1])
        elif words[:1] == ["segment"]:
            segments[int(words[1])] = int(words[2])
        elif words[:1] == ["region"]:
            regions[int(words[1])] = int(words[2])
    if total is None:
        raise KilnError(f"the QEMU counting plugin printed no total: {text[-500:]!r}")
    return Counts(total, [segments[i] for i in sorted(segments)],
                  [regions[i] for i in sorted(regions)])


def code_bytes(obj: bytes) -> int:
    """Bytes of executable sections in an ELF object."""
    import io

    elf = ELFFile(io.BytesIO(obj))
    return sum(s["sh_size"] for s in elf.iter_sections()
               if s["sh_flags"] & 0x4 and s["sh_type"] == "SHT_PROGBITS")


def count_net(shipped: CompiledNet, separate: CompiledNet, feeds: dict[str, np.ndarray],
              folder: Path) -> NetCount:
    """Both builds of one network run on the board of their target; their counts.

    The two runs must print the same outputs (the split build computes what ships).
    """
    board = firmware.board_for(shipped.target.name)
    results = []
    for build, net in (("shipped", shipped), ("separate", separate)):
        where = folder / build
        elf = firmware.build(net, firmware.main_c(net, feeds), board.qemu_machine, where)
        symbols = functions(elf)
        kernels = [k for k in net.kernels if k.symbol in symbols]
        regions = [(symbols[k.symbol][0], symbols[k.symbol][0] + symbols[k.symbol][1])
                   for k in kernels]
        counts, stdout = count(elf, board.qemu_machine, regions, where)
        results.append((counts, kernels, firmware.parse_outputs(net, stdout)))
    (shipped_counts, _, shipped_out), (split_counts, kernels, split_out) = results
    for name, value in shipped_out.items():
        if not np.array_equal(value, split_out[name]):
            raise KilnError(f"output {name} differs between the shipped and the per-layer build")
    layers = layer_counts(kernels, split_counts.regions)
    return NetCount(board.qemu_machine, shipped.target.name, shipped_counts.total, layers,
                    split_counts.total, code_bytes(shipped.object))


def inference_instructions(net: CompiledNet, seed: int = 0) -> int:
    """Instructions of one inference of `net` on its target's emulated board, as shipped.

    On inputs drawn from `seed` (as `kiln bench --target` draws them), marker to marker.
    """
    from compiler.inputs import random_inputs

    missing = firmware.missing_tools()
    if missing:
        raise KilnError(f"counting instructions needs {' and '.join(missing)} (Debian "
                        f"packages: {firmware.PACKAGES})")
    board = firmware.board_for(net.target.name)
    feeds = random_inputs(net.graph, seed)
    with tempfile.TemporaryDirectory(prefix="kiln-count-") as folder:
        elf = firmware.build(net, firmware.main_c(net, feeds), board.qemu_machine,
                             Path(folder))
        counts, _ = count(elf, board.qemu_machine)
    return counts.total


def layer_counts(kernels: list[KernelInfo], counts: list[int]) -> list[LayerCount]:
    """Per-kernel counts (`counts[i]` for `kernels[i]`) as the bench's layer rows.

    A kernel shared by several calls appears once (its count covers every call); a row
    chain's driver is a row of its own, and the one-row kernels of one layer add up.
    """
    seen: set[str] = set()
    layers: list[LayerCount] = []
    rows: dict[tuple[str, tuple[str, ...]], int] = {}  # a chain's layer -> index in `layers`
    for kernel, instructions in zip(kernels, counts):
        if kernel.symbol in seen:  # a shared kernel: its count covers every call
            continue
        seen.add(kernel.symbol)
        if kernel.fusion is Fusion.ROW_CHAIN and not kernel.part_of:
            # A chain's driver: its own instructions walk the schedule; its layers follow.
            layers.append(LayerCount(kernel.symbol, kernel.op, (), instructions))
            continue
        key = (kernel.part_of, kernel.nodes)
        if kernel.part_of and key in rows:  # another one-row kernel of the same layer
            known = layers[rows[key]]
            layers[rows[key]] = replace(known, instructions=known.instructions + instructions)
            continue
        if kernel.part_of:
            rows[key] = len(layers)
        layers.append(LayerCount(kernel.symbol, kernel.op, kernel.nodes, instructions))
    return layers
