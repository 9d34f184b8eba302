"""What an object compiled for a target must be: an ELF of its architecture, and int8 kernels
that use that core's dot-product instructions and no other core's."""

from __future__ import annotations

import io

from elftools.elf.elffile import ELFFile

from compiler.codegen.targets import Target

# LLVM triple architecture -> (ELF e_machine, ELF class).
ELF_MACHINES = {"x86_64": ("EM_X86_64", 64), "aarch64": ("EM_AARCH64", 64),
                "riscv32": ("EM_RISCV", 32), "thumbv6m": ("EM_ARM", 32),
                "thumbv7m": ("EM_ARM", 32), "thumbv7em": ("EM_ARM", 32),
                "thumbv8m.main": ("EM_ARM", 32), "thumbv8.1m.main": ("EM_ARM", 32)}
# A target's dot-product kind -> the intrinsics its int8 kernels call (one of them).
DOT_INTRINSICS = {"dsp": ("llvm.arm.smlad",), "mve": ("llvm.arm.mve.vmldava",),
                  "vnni": ("llvm.x86.avx512.vpdpbusd",),
                  "pmaddwd": ("llvm.x86.avx2.pmadd.wd", "llvm.x86.avx512.pmaddw.d.512"),
                  "sdot": ("llvm.aarch64.neon.sdot",)}


def check_object(net, target: Target, entry: str) -> ELFFile:
    """The object is a relocatable ELF of `target`'s architecture exporting `entry` alone."""
    elf = ELFFile(io.BytesIO(net.object))
    machine, bits = ELF_MACHINES[target.triple.split("-")[0]]
    assert (elf["e_type"], elf["e_machine"], elf.elfclass) == ("ET_REL", machine, bits), \
        target.name
    if machine == "EM_ARM":
        assert elf.little_endian
    exported = {s.name for s in elf.get_section_by_name(".symtab").iter_symbols()
                if s["st_info"]["bind"] in ("STB_GLOBAL", "STB_WEAK")
                and s["st_shndx"] != "SHN_UNDEF"}
    assert exported == {entry}, f"{target.name} exports {sorted(exported)}"
    return elf


def dot_kinds(net) -> set[str]:
    """The dot-product kinds whose instructions the net's code calls."""
    return {kind for kind, names in DOT_INTRINSICS.items()
            if any(name in net.llvm_ir for name in names)}


def check_int8_object(net, target: Target, entry: str = "net", *, dot_used: bool = True) -> None:
    """`check_object`, and the int8 kernels use the target's dot product (when `dot_used`,
    exactly it; else at most it) and never another core's."""
    check_object(net, target, entry)
    # Scalar cores' kernels use plain multiply-accumulates: no instruction of their own shows.
    own = {target.int8_dot.value} & set(DOT_INTRINSICS)
    used = dot_kinds(net)
    assert used <= own, f"{target.name} calls {sorted(used - own)} instructions"
    if dot_used:
        assert used == own, f"{target.name}: its {target.int8_dot} kernels are not used"
