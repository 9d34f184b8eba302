"""LLVM plumbing: initialization, target machines, O3 optimization and object emission."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from functools import cache

import llvmlite.binding as llvm
from llvmlite import ir

from compiler.cache import cached_object
from compiler.codegen.armattrs import NEUTRAL_CALLS, mark_vfp_args_compatible
from compiler.codegen.helium_fence import fence_fixed_point_products
from compiler.codegen.targets import Target

# llvmlite works in LLVM's one global context, which is not thread-safe: the GUI compiles in
# worker threads (export, code views) that may overlap, so every use of LLVM holds this lock.
LLVM_LOCK = threading.RLock()


@cache
def _init() -> None:
    """Register every backend once (llvmlite >= 0.45 has no `initialize()` any more)."""
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()


def target_machine(target: Target, opt: int = 3) -> llvm.TargetMachine:
    """A target machine for `target`: static relocation for MCUs, PIC elsewhere (shared libs)."""
    with LLVM_LOCK:
        _init()
        reloc = "static" if target.mcu else "pic"
        return llvm.Target.from_triple(target.triple).create_target_machine(
            cpu=target.cpu, features=target.features, opt=opt, reloc=reloc,
            codemodel="default")


def new_module(name: str, target: Target) -> ir.Module:
    """An empty IR module carrying the target's triple and data layout."""
    module = ir.Module(name=name)
    module.triple = target.triple
    module.data_layout = str(target_machine(target).target_data)
    return module


def optimize(module: ir.Module | str, target: Target, level: int = 3) -> llvm.ModuleRef:
    """Parse, verify and optimize with the new pass manager (loop and SLP vectorizers on)."""
    with LLVM_LOCK:
        return _optimize(module, target, level)


def _optimize(module: ir.Module | str, target: Target, level: int) -> llvm.ModuleRef:
    machine = target_machine(target)
    ref = llvm.parse_assembly(str(module))
    ref.triple = target.triple
    ref.data_layout = str(machine.target_data)
    ref.verify()
    options = llvm.create_pipeline_tuning_options(speed_level=level)
    options.loop_vectorization = True
    options.slp_vectorization = True
    # Kernels unroll what pays themselves (tiles of pixels and channels); LLVM's unroller on
    # top mostly grows the code: measured, it cost a third of the optimization time and
    # changed no benchmark beyond noise.
    options.loop_unrolling = False
    builder = llvm.create_pass_builder(machine, options)
    builder.getModulePassManager().run(ref, builder)
    ref.verify()
    return ref


def emit_object(module: ir.Module | str, target: Target, level: int = 3,
                fast: bool = False) -> bytes:
    """An ELF object for `target`; the same module always gives the same bytes.

    So a module compiled before comes from the object cache. `fast` compiles without two
    induction-variable rewrites (loop strength reduction, widening 32-bit indices to 64 bits)
    that cost a fifth of LLVM's time and, on Kiln's kernels, whose addressing is already
    strength-reduced, save nothing measurable on a host.
    """
    text = str(module)
    eabihf = target.triple.endswith("eabihf")  # marked after emission (armattrs)
    key = (f"{'.'.join(map(str, llvm.llvm_version_info))}|{target.triple}|{target.cpu}|"
           f"{target.features}|O{level}{'|fast' if fast else ''}"
           f"{'|fenced' if '+mve' in target.features else ''}"
           f"{'|vfp-compatible:' + ','.join(NEUTRAL_CALLS) if eabihf else ''}")
    return cached_object(key, text, lambda: _emit_object(text, target, level, fast))


# LLVM's only switches for these passes are command-line options, global to the process: set
# for one object and put back, under the lock every use of LLVM holds.
_FAST_OPTIONS = {"disable-lsr": ("true", "false"), "indvars-widen-indvars": ("false", "true")}


@contextmanager
def _options(fast: bool):
    if not fast:
        yield
        return
    try:
        for name, (on, _) in _FAST_OPTIONS.items():
            llvm.set_option("kiln", f"-{name}={on}")
        yield
    finally:
        for name, (_, default) in _FAST_OPTIONS.items():
            llvm.set_option("kiln", f"-{name}={default}")


def _emit_object(text: str, target: Target, level: int, fast: bool) -> bytes:
    with LLVM_LOCK, _options(fast):
        ref = optimize(text, target, level)
        if "+mve" in target.features:  # see helium_fence: LLVM would abort on some products
            fenced = fence_fixed_point_products(str(ref))
            del ref
            ref = llvm.parse_assembly(fenced)
            ref.verify()
        obj = target_machine(target).emit_object(ref)
        del ref
    if target.triple.endswith("eabihf"):
        obj = mark_vfp_args_compatible(obj)  # links into hard-float firmware too
    return obj


def emit_assembly(module: ir.Module | str, target: Target, level: int = 3) -> str:
    """The target assembly, for reports and for reading what the kernels became."""
    with LLVM_LOCK:
        ref = optimize(module, target, level)
        return target_machine(target).emit_assembly(ref)
