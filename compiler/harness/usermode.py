"""Run a compiled network for AArch64 or RISC-V 32 as a static Linux program under qemu-user.

There is no cross C compiler: the program around the network is written in LLVM IR here and
compiled by the same llvmlite. Its `_start` copies the embedded inputs into the regions,
calls the entry point, writes every output's bytes to stdout with the `write` system call and
exits with the entry point's status. The system call is six instructions of machine code
placed in a .text section (llvmlite has no assembler for inline assembly); memcpy and memset,
which generated code may call, are plain loops. `ld.lld` links it statically and
`qemu-aarch64` / `qemu-riscv32` run it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
from llvmlite import ir

from compiler.codegen.build import CompiledNet
from compiler.codegen.llvm import emit_object, new_module
from compiler.errors import KilnError

LINKERS = ("ld.lld", "ld.lld-14")
# Per target: the emulator, and syscall(number, a, b, c) as machine code: move the number to
# the system call register and the arguments down, trap, return.
EMULATORS = {
    "aarch64": ("qemu-aarch64", [0xAA0003E8, 0xAA0103E0, 0xAA0203E1, 0xAA0303E2,  # mov x8..x2
                                 0xD4000001, 0xD65F03C0]),  # svc #0; ret
    "riscv32": ("qemu-riscv32", [0x00050893, 0x00058513, 0x00060593, 0x00068613,  # mv a7..a2
                                 0x00000073, 0x00008067]),  # ecall; ret
}
WRITE, EXIT = 64, 93  # the generic Linux system call numbers both use
PACKAGES = "lld-14 qemu-user"
TIMEOUT = 120.0  # seconds of emulation before a run counts as hung
I8, I32 = ir.IntType(8), ir.IntType(32)


def tools(target: str) -> tuple[str | None, str | None]:
    """The linker and the emulator for `target`, each None when missing."""
    linker = next((shutil.which(n) for n in LINKERS if shutil.which(n)), None)
    return linker, shutil.which(_emulator(target)[0])


def missing_tools(target: str) -> list[str]:
    """The programs running `target`'s objects needs that are not on PATH."""
    linker, emulator = tools(target)
    return [name for name, path in (("ld.lld", linker), (_emulator(target)[0], emulator))
            if path is None]


def _emulator(target: str) -> tuple[str, list[int]]:
    if target not in EMULATORS:
        raise KilnError(f"no user-mode emulator runs {target}; targets with one: "
                        f"{', '.join(EMULATORS)}")
    return EMULATORS[target]


def _syscall_stub(module: ir.Module, target: str) -> ir.Value:
    """The machine-code system call as a global in .text: word f(number, a, b, c)."""
    code = _emulator(target)[1]
    stub = ir.GlobalVariable(module, ir.ArrayType(I32, len(code)), "kiln_syscall")
    stub.initializer = ir.Constant(stub.type.pointee, code)
    stub.global_constant = True
    stub.section = ".text.kiln_syscall"
    stub.align = 4
    return stub


def _syscall(b: ir.IRBuilder, stub: ir.Value, word: ir.Type, number: int,
             *args: ir.Value) -> ir.Value:
    fnty = ir.FunctionType(word, [word] * 4)
    values = [word(number)] + [b.ptrtoint(a, word) if isinstance(a.type, ir.PointerType)
                               else a for a in args]
    values += [word(0)] * (4 - len(values))
    return b.call(b.bitcast(stub, fnty.as_pointer()), values)


def _byte_loop(fn: ir.Function, body) -> None:
    """fn(dst, src_or_value, n): for i < n: body(b, i); returns dst."""
    entry, loop, done = (fn.append_basic_block(n) for n in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    size = fn.args[2]
    b.cbranch(b.icmp_unsigned("==", size, size.type(0)), done, loop)
    b.position_at_end(loop)
    i = b.phi(size.type)
    i.add_incoming(size.type(0), entry)
    body(b, i)
    nxt = b.add(i, size.type(1))
    i.add_incoming(nxt, loop)
    b.cbranch(b.icmp_unsigned("<", nxt, size), loop, done)
    b.position_at_end(done)
    b.ret(fn.args[0])


def driver_object(net: CompiledNet, feeds: dict[str, np.ndarray]) -> bytes:
    """The program around `net`, as an object for its target."""
    target = net.target
    module = new_module("driver", target)
    arch = target.triple.split("-")[0]
    word = ir.IntType(64) if arch == "aarch64" else I32
    p8 = I8.as_pointer()
    for name in ("memcpy", "memmove"):
        fn = ir.Function(module, ir.FunctionType(p8, [p8, p8, word]), name)
        fn.attributes.add("nobuiltin")
        _byte_loop(fn, lambda b, i, fn=fn: b.store(b.load(b.gep(fn.args[1], [i])),
                                                   b.gep(fn.args[0], [i])))
    memset = ir.Function(module, ir.FunctionType(p8, [p8, I32, word]), "memset")
    memset.attributes.add("nobuiltin")
    _byte_loop(memset, lambda b, i: b.store(b.trunc(memset.args[1], I8),
                                            b.gep(memset.args[0], [i])))
    plan = net.plan
    regions = {}
    for region, size in (("mutable", plan.mutable), ("activations", plan.arena.size)):
        var = ir.GlobalVariable(module, ir.ArrayType(I8, max(size, 1)), region)
        var.initializer = ir.Constant(var.type.pointee, None)
        var.align = plan.alignment
        regions[region] = var
    entry_point = ir.Function(module, ir.FunctionType(I32, [p8, p8, p8]), net.name)
    stub = _syscall_stub(module, arch)
    start = ir.Function(module, ir.FunctionType(ir.VoidType(), []), "_start")
    b = ir.IRBuilder(start.append_basic_block("entry"))

    def at(region: str, offset: int) -> ir.Value:
        return b.gep(regions[region], [I32(0), I32(offset)], inbounds=True)

    initial = {slot.input.name: slot.initial for slot in net.state}  # one inference from reset
    for k, tensor in enumerate(net.inputs):
        data = (initial[tensor.name] if tensor.name in initial and tensor.name not in feeds
                else np.ascontiguousarray(feeds[tensor.name], tensor.dtype).tobytes())
        blob = ir.GlobalVariable(module, ir.ArrayType(I8, len(data)), f"input{k}")
        blob.initializer = ir.Constant(blob.type.pointee, bytearray(data))
        blob.global_constant = True
        b.call(module.get_global("memcpy"), [at(tensor.region, tensor.offset),
                                             b.gep(blob, [I32(0), I32(0)]), word(len(data))])
    status = b.call(entry_point, [ir.Constant(p8, None), at("mutable", 0),
                                  at("activations", 0)])
    for tensor in net.outputs:
        size = int(np.prod(tensor.shape, dtype=np.int64)) * np.dtype(tensor.dtype).itemsize
        _syscall(b, stub, word, WRITE, word(1), at(tensor.region, tensor.offset), word(size))
    _syscall(b, stub, word, EXIT, b.zext(status, word) if word.width > 32 else status)
    b.unreachable()
    return emit_object(str(module), target, level=0)


def run(net: CompiledNet, feeds: dict[str, np.ndarray], folder: Path,
        timeout: float = TIMEOUT) -> dict[str, np.ndarray]:
    """Link `net` with its driver, run it under qemu-user, and parse the outputs it wrote.

    Missing tools, a failed link, a non-zero exit, a run past `timeout` and output of the
    wrong length are each a KilnError that says which.
    """
    arch = net.target.triple.split("-")[0]
    missing = missing_tools(arch)
    if missing:
        raise KilnError(f"running {net.target.name} objects needs {' and '.join(missing)} "
                        f"(Debian packages: {PACKAGES})")
    linker, emulator = tools(arch)
    where = f"{net.name} under {_emulator(arch)[0]}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "net.o").write_bytes(net.object)
    (folder / "driver.o").write_bytes(driver_object(net, feeds))
    program = folder / "program"
    done = subprocess.run([linker, "-static", "-e", "_start", "-o", str(program),
                           str(folder / "driver.o"), str(folder / "net.o")],
                          capture_output=True, text=True)
    if done.returncode:
        raise KilnError(f"linking the {net.target.name} program failed (exit "
                        f"{done.returncode}): {done.stderr.strip()[-2000:]}")
    try:
        # QEMU's "max" CPU has every extension it emulates (AArch64: the dot product, I8MM).
        cpu = ["-cpu", "max"] if arch == "aarch64" else []
        done = subprocess.run([emulator, *cpu, str(program)], capture_output=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        raise KilnError(f"{where} did not finish within {timeout:.0f} s") from None
    if done.returncode:
        raise KilnError(f"{where} exited with {done.returncode}; stderr: "
                        f"{done.stderr[-500:]!r}")
    out, results = done.stdout, {}
    for tensor in net.outputs:
        size = int(np.prod(tensor.shape, dtype=np.int64)) * np.dtype(tensor.dtype).itemsize
        if len(out) < size:
            raise KilnError(f"output {tensor.name}: the program wrote {len(out)} of {size} "
                            "bytes")
        results[tensor.name] = np.frombuffer(out[:size], tensor.dtype).reshape(tensor.shape)
        out = out[size:]
    if out:
        raise KilnError(f"the program wrote {len(out)} bytes more than the outputs")
    return results
