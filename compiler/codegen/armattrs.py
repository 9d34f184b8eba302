"""Make an Arm object linkable into hard-float firmware.

llvmlite's target machines always use the base (soft-float) procedure call standard, even for
`eabihf` triples, and say so in the object's build attributes; GNU ld then refuses to link the
object with hard-float code ("uses VFP register arguments, net.o does not"). Kiln's objects pass
no floats across calls: the entry point and the kernels take only pointers, and the math they
need is written inline (`mathfn.py`). For such an object the EABI has a value that says exactly
this, Tag_ABI_VFP_args = 3 ("compatible with both the base and the VFP variant"), and with it the
object links into soft-float and hard-float firmware alike. This module adds that attribute to
the object's `.ARM.attributes` section, after checking the object calls nothing that could take
a float argument.
"""

from __future__ import annotations

import io
import struct

from elftools.elf.elffile import ELFFile

SHT_ARM_ATTRIBUTES = 0x70000003
TAG_FILE = 1
TAG_ABI_VFP_ARGS = 28
VFP_ARGS_COMPATIBLE = 3
# Calls that take no floating-point arguments, whatever the float ABI: the run-time helpers
# (which the RTABI defines on the base standard), the memory functions, and the runner
# firmware's counter a timed build reads (`uint64_t kiln_port_ticks(void)`).
NEUTRAL_CALLS = ("memcpy", "memset", "memmove", "kiln_port_ticks")


def float_calls(obj: bytes) -> list[str]:
    """Undefined symbols of `obj` that may take or return floats (library math, say)."""
    elf = ELFFile(io.BytesIO(obj))
    symtab = elf.get_section_by_name(".symtab")
    names = [s.name for s in symtab.iter_symbols()
             if s["st_shndx"] == "SHN_UNDEF" and s.name] if symtab else []
    return sorted(n for n in names if n not in NEUTRAL_CALLS and not n.startswith("__aeabi_"))


def _uleb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def mark_vfp_args_compatible(obj: bytes) -> bytes:
    """`obj` with Tag_ABI_VFP_args = 3 appended to its file attributes.

    Returns `obj` unchanged when it has no Arm attributes, already states the tag, or calls a
    function that may pass floats (then the base standard it was built for is the truth).
    """
    if obj[:4] != b"\x7fELF" or obj[4] != 1 or obj[5] != 1 or float_calls(obj):
        return obj  # not a little-endian ELF32 object, or it calls float functions
    shoff, = struct.unpack_from("<I", obj, 0x20)
    shentsize, shnum = struct.unpack_from("<HH", obj, 0x2E)
    headers = [list(struct.unpack_from("<10I", obj, shoff + i * shentsize)) for i in range(shnum)]
    attrs = [h for h in headers if h[1] == SHT_ARM_ATTRIBUTES]
    if len(attrs) != 1:
        return obj
    offset, size = attrs[0][4], attrs[0][5]
    data = obj[offset:offset + size]
    # 'A', then one vendor subsection: length, "aeabi\0", then one File sub-subsection.
    if data[:1] != b"A" or data[5:11] != b"aeabi\0" or data[11] != TAG_FILE:
        return obj
    vendor_length, = struct.unpack_from("<I", data, 1)
    file_length, = struct.unpack_from("<I", data, 12)
    if vendor_length != size - 1 or file_length != vendor_length - 10:
        return obj  # more subsections than the one LLVM writes: leave it alone
    if _has_tag(data[16:], TAG_ABI_VFP_ARGS):
        return obj
    extra = _uleb(TAG_ABI_VFP_ARGS) + _uleb(VFP_ARGS_COMPATIBLE)
    insert_at = offset + size
    # Later file contents move by a multiple of the largest alignment any of them needs.
    shift = max([16] + [h[8] for h in headers if h[4] >= insert_at])
    shift = -(-len(extra) // shift) * shift
    new = bytearray(obj[:insert_at] + extra + bytes(shift - len(extra)) + obj[insert_at:])
    struct.pack_into("<I", new, offset + 1, vendor_length + len(extra))
    struct.pack_into("<I", new, offset + 12, file_length + len(extra))
    for h in headers:
        if h is attrs[0]:
            h[5] += len(extra)
        elif h[4] >= insert_at and h[1] != 0:
            h[4] += shift
    new_shoff = shoff + shift if shoff >= insert_at else shoff
    struct.pack_into("<I", new, 0x20, new_shoff)
    for i, h in enumerate(headers):
        struct.pack_into("<10I", new, new_shoff + i * shentsize, *h)
    return bytes(new)


def _has_tag(attributes: bytes, tag: int) -> bool:
    """Whether the attribute list (after a File tag and size) sets `tag`.

    Tags 4, 5, 32 and 67 carry NUL-terminated strings, the odd tags above 32 follow the
    EABI's parity rule (odd: string), the rest ULEB128 integers.
    """
    i = 0
    while i < len(attributes):
        t, i = _read_uleb(attributes, i)
        if t == tag:
            return True
        if t in (4, 5, 67) or (t > 32 and t % 2 == 1 and t != 65):
            i = attributes.index(b"\0", i) + 1
        elif t == 32:  # Tag_compatibility: an integer, then a string
            _, i = _read_uleb(attributes, i)
            i = attributes.index(b"\0", i) + 1
        else:
            _, i = _read_uleb(attributes, i)
    return False


def _read_uleb(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, i
