"""Load a host object file into this process with LLVM's own linker (ORC with JITLink).

Running a compiled network on the host then needs no C compiler and no shared library on disk:
the standalone app runs calibrations and evaluations on machines without `cc`, and loading
takes milliseconds instead of a linker run. JITLink places an object's sections in one block,
so the 32-bit PC-relative references of the default code model reach the weights even for a
500 MB object (MCJIT's loader places them apart and aborts). Objects that are not for this host
or that need symbols the process lacks are refused first (pyelftools reads them), with a
sentence instead of LLVM's message.
"""

from __future__ import annotations

import ctypes
import io
import itertools
import weakref
from functools import cache

import llvmlite.binding as llvm
from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from compiler.codegen.llvm import LLVM_LOCK, target_machine
from compiler.codegen.targets import get_target
from compiler.errors import KilnError

_MACHINES = {"x86_64": "EM_X86_64", "aarch64": "EM_AARCH64"}
# Every load is a library of its own in one JIT; ORC never reuses a library's name.
_LIBRARY_NUMBERS = itertools.count()
# The C library's memory functions, which LLVM may call from any kernel (a loop that fills or
# copies bytes becomes memset or memcpy); memmove serves as memcpy, being right for any ranges.
_MEMORY_FUNCTIONS = {"memset": ctypes.memset, "memcpy": ctypes.memmove,
                     "memmove": ctypes.memmove}

@cache
def _jit() -> llvm.LLJIT:
    with LLVM_LOCK:
        return llvm.create_lljit_compiler(target_machine(get_target("host")), use_jit_link=True)


@cache
def _provide_memory_functions() -> None:
    """Put the memory functions in LLVM's table of this process's symbols, once.

    A linked program takes them from its C library; an object loaded here takes the ones
    ctypes already holds, so no library is opened by name (which differs by system).
    """
    for name, function in _MEMORY_FUNCTIONS.items():
        llvm.add_symbol(name, ctypes.cast(function, ctypes.c_void_p).value)


class LoadedObject:
    """An object file linked into this process; its code lives as long as this object."""

    def __init__(self, data: bytes, label: str, exports: list[str]):
        """Check and link `data` (the bytes of `label`, named in errors), keeping `exports`."""
        _provide_memory_functions()
        _check_object(data, label)
        library = llvm.JITLibraryBuilder().add_object_img(data).add_current_process()
        for symbol in exports:
            library.export_symbol(symbol)
        with LLVM_LOCK:
            try:
                tracker = library.link(_jit(), f"kiln{next(_LIBRARY_NUMBERS)}")
            except RuntimeError as exc:
                raise KilnError(f"LLVM cannot load {label}: {exc}") from None
        self._addresses = {symbol: tracker[symbol] for symbol in exports}
        # The code is unloaded when this object goes (under the lock: LLVM is not thread-safe).
        weakref.finalize(self, _unload, tracker)

    def address(self, symbol: str) -> int:
        """The address of one of the exported functions."""
        return self._addresses[symbol]


def _unload(tracker) -> None:
    with LLVM_LOCK:
        tracker.close()


def _check_object(data: bytes, label: str) -> None:
    """A relocatable ELF object for this machine whose every undefined symbol this process has."""
    try:
        elf = ELFFile(io.BytesIO(data))
        kind, machine = elf["e_type"], elf["e_machine"]
        symbols = elf.get_section_by_name(".symtab")
        undefined = [] if symbols is None else [
            s.name for s in symbols.iter_symbols()
            if s.name and s["st_shndx"] == "SHN_UNDEF"]
    except (ELFError, ValueError, KeyError, AttributeError, OSError) as exc:
        raise KilnError(f"{label} is not a readable ELF object file ({exc})") from None
    host = _MACHINES.get(get_target("host").triple.split("-")[0])
    if kind != "ET_REL" or machine != host:
        raise KilnError(f"{label} is a {kind} file for {machine}, not an object for this host "
                        f"({host})")
    missing = [name for name in undefined if not llvm.address_of_symbol(name)]
    if missing:
        raise KilnError(f"{label} needs {', '.join(sorted(missing))}, which this process does "
                        "not provide")
