"""Section and symbol sizes read from a real ELF object, so reports never guess from the IR."""

from __future__ import annotations

import io
from dataclasses import dataclass

from elftools.common.exceptions import ELFError
from elftools.elf.constants import SH_FLAGS
from elftools.elf.elffile import ELFFile

from compiler.errors import KilnError

KINDS = ("text", "rodata", "data", "bss")


@dataclass(frozen=True)
class ObjectSizes:
    """Bytes an object file will occupy once linked.

    Attributes:
        sections: Allocated sections by ELF name (".text", ".rodata.cst16", ...).
        kinds: The same bytes summed by kind: text, rodata, data, bss.
        symbols: (name, bytes) of every sized function and data symbol, largest first.
    """

    sections: dict[str, int]
    kinds: dict[str, int]
    symbols: list[tuple[str, int]]


def section_kind(name: str) -> str | None:
    """text, rodata, data or bss for an allocated section name; None for anything else.

    LLVM splits read-only data into .rodata.cst*, and x86-64's large data into .lrodata/.ldata.
    """
    for kind, prefixes in (("text", (".text",)), ("rodata", (".rodata", ".lrodata")),
                           ("data", (".data", ".ldata", ".sdata")),
                           ("bss", (".bss", ".lbss", ".sbss"))):
        if any(name == p or name.startswith(p + ".") for p in prefixes):
            return kind
    return None


def object_sizes(data: bytes) -> ObjectSizes:
    """Sizes of the allocated sections and sized symbols of the ELF object `data`."""
    try:
        elf = ELFFile(io.BytesIO(data))
        sections: dict[str, int] = {}
        kinds = dict.fromkeys(KINDS, 0)
        for section in elf.iter_sections():
            kind = section_kind(section.name)
            if kind is None or not section["sh_flags"] & SH_FLAGS.SHF_ALLOC:
                continue
            sections[section.name] = sections.get(section.name, 0) + section["sh_size"]
            kinds[kind] += section["sh_size"]
        symbols = []
        table = elf.get_section_by_name(".symtab")
        for sym in table.iter_symbols() if table is not None else ():
            if sym["st_info"]["type"] in ("STT_FUNC", "STT_OBJECT") and sym["st_size"] > 0:
                symbols.append((sym.name, sym["st_size"]))
    except (ELFError, ValueError, KeyError) as exc:
        raise KilnError(f"cannot read sizes from the object file: {exc}") from None
    symbols.sort(key=lambda s: (-s[1], s[0]))
    return ObjectSizes(sections, kinds, symbols)
