"""Constant weights as one aligned blob: packing, embedding into an object, external files.

Every array a kernel reads at compile-time-known contents goes into one blob, each at a
`WEIGHT_ALIGNMENT`-aligned offset, identical arrays once. The same layout serves both modes:
embedded, the object holds the blob as read-only data (flash on an MCU); external, the caller
places the blob and passes its address as `constant_weights`.

Embedding goes around the LLVM IR text on purpose: escaping hundreds of megabytes into a
`c"..."` literal and having LLVM parse it back costs about 5 s per 100 MB. The IR declares a
zero-filled placeholder instead and `embed` writes the blob over it in the finished ELF object.
"""

from __future__ import annotations

import hashlib
import io

import numpy as np
from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from compiler.errors import KilnError
from compiler.ir.graph import Constant

WEIGHT_ALIGNMENT = 64
_PER_LINE = 16
_CHUNK_LINES = 1 << 14


def _align(n: int, alignment: int = WEIGHT_ALIGNMENT) -> int:
    return -(-n // alignment) * alignment


def array_bytes(array: np.ndarray) -> np.ndarray:
    """The little-endian bytes of `array` (every target Kiln emits for is little-endian)."""
    data = np.ascontiguousarray(array, dtype=np.dtype(str(array.dtype)).newbyteorder("<"))
    return data.reshape(-1).view(np.uint8)


class WeightTable:
    """The constant arrays of one network packed into one blob.

    Arrays with identical bytes share one slot; only arrays of a size already seen are hashed,
    so a network without repeats pays nothing for deduplication.
    """

    def __init__(self) -> None:
        self._chunks: list[tuple[int, np.ndarray]] = []  # (offset, bytes) in offset order
        self._by_id: dict[int, tuple[np.ndarray, int]] = {}
        self._unhashed: dict[int, int] = {}  # nbytes -> the one chunk of that size so far
        self._hashed: dict[tuple[int, bytes], list[int]] = {}  # (nbytes, digest) -> chunks
        self._hashed_sizes: set[int] = set()
        self.size = 0

    @staticmethod
    def distinct_bytes(placed) -> int:
        """Bytes of the blob slots that `(array, offset)` pairs name, each slot once.

        A row-streamed chain asks its emitters for a layer's arrays once per part (its top rows,
        its middle and its bottom rows, say): they land in one slot and count once.
        """
        sizes = {}
        for array, offset in placed:
            sizes[offset] = max(sizes.get(offset, 0), array.nbytes)
        return sum(sizes.values())

    @staticmethod
    def _digest(data: np.ndarray) -> bytes:
        return hashlib.blake2b(data, digest_size=16).digest()

    def _place(self, data: np.ndarray) -> tuple[int, int]:
        """(chunk index, offset) of `data` appended to the blob."""
        offset = _align(self.size)
        self._chunks.append((offset, data))
        self.size = offset + data.size
        return len(self._chunks) - 1, offset

    def add(self, array: np.ndarray) -> int:
        """The blob offset of `array`, placing it if no identical array is there yet."""
        if id(array) in self._by_id:
            return self._by_id[id(array)][1]
        data = array_bytes(array)
        size = data.size
        if size in self._unhashed:  # a second array of this size: from now on, hash them
            first = self._unhashed.pop(size)
            self._hashed.setdefault((size, self._digest(self._chunks[first][1])), []).append(
                first)
            self._hashed_sizes.add(size)
        if size in self._hashed_sizes:
            same = self._hashed.setdefault((size, self._digest(data)), [])
            offset = next((self._chunks[i][0] for i in same
                           if np.array_equal(self._chunks[i][1], data)), None)
            if offset is None:
                index, offset = self._place(data)
                same.append(index)
        else:
            index, offset = self._place(data)
            self._unhashed[size] = index
        # The array is kept so its id stays unique while the table is alive.
        self._by_id[id(array)] = (array, offset)
        return offset

    def blob(self) -> bytes:
        """Every array at its offset, zero padding between, the total rounded up to 64 bytes."""
        out = np.zeros(_align(self.size), np.uint8)
        for offset, data in self._chunks:
            out[offset:offset + data.size] = data
        return out.tobytes()


def embed(obj: bytes, symbol: str, blob: bytes) -> bytes:
    """`obj` with `blob` written over the zero-filled placeholder global named `symbol`.

    A missing symbol means LLVM deleted the global as unused, so there is nothing to write.
    """
    if not blob:
        return obj
    try:
        elf = ELFFile(io.BytesIO(obj))
        symtab = elf.get_section_by_name(".symtab")
        if symtab is None:
            raise KilnError("cannot place the weights: the object has no symbol table")
        found = symtab.get_symbol_by_name(symbol)
        if not found:
            return obj  # the optimizer dropped the global: no code reads the weights
        sym = found[0]
        section = elf.get_section(sym["st_shndx"])
        if section["sh_type"] == "SHT_NOBITS" or sym["st_size"] != len(blob):
            raise KilnError(f"the weights symbol {symbol} has no room for {len(blob)} bytes")
        start = section["sh_offset"] + sym["st_value"]
    except (ELFError, TypeError) as e:
        raise KilnError(f"cannot place the weights in the object: {e}") from None
    view = memoryview(obj)
    return b"".join([view[:start], blob, view[start + len(blob):]])


def _hex_digit(nibbles: np.ndarray) -> np.ndarray:
    """ASCII hex digits of 0..15 (arithmetic: about 3x faster than a numpy table lookup)."""
    return nibbles + np.uint8(ord("0")) + (nibbles > 9).view(np.uint8) * np.uint8(39)


def _hex_lines(data: np.ndarray) -> np.ndarray:
    """The hex text of `data`, `_PER_LINE` bytes a line, as one uint8 array."""
    lines, rest = divmod(data.size, _PER_LINE)
    width = 2 + 5 * _PER_LINE  # " " + "0xhh," per byte + "\n"
    out = np.empty(lines * width + (2 + 5 * rest if rest else 0), np.uint8)
    parts = [(lines, 0, _PER_LINE, 0), (int(rest > 0), lines * width, rest, lines * _PER_LINE)]
    for count, offset, per_line, start in parts:
        if not count:
            continue
        line_width = 2 + 5 * per_line
        rows = np.ndarray((count, line_width), np.uint8, out, offset, (line_width, 1))
        rows[:] = np.frombuffer(b" " + b"0x??," * per_line + b"\n", np.uint8)
        cells = np.ndarray((count, per_line, 5), np.uint8, out, offset + 1, (line_width, 5, 1))
        digits = data[start:start + count * per_line].reshape(count, per_line)
        for i in range(0, count, _CHUNK_LINES):  # chunks keep the temporaries in cache
            chunk = digits[i:i + _CHUNK_LINES]
            cells[i:i + _CHUNK_LINES, :, 2] = _hex_digit(chunk >> 4)
            cells[i:i + _CHUNK_LINES, :, 3] = _hex_digit(chunk & 15)
    return out


def c_array(name: str, blob: bytes) -> bytes:
    """A C99 include defining the blob as an aligned `static const uint8_t` array."""
    up = name.upper()
    size = f"{up}_CONSTANT_SIZE" if blob else "1"
    head = "\n".join([
        f"/* {name}.weights.h: generated by Kiln. The constant weights of {name}, byte for byte",
        f"   {name}.weights.bin; pass {name}_weights as constant_weights. */",
        f"#ifndef {up}_WEIGHTS_H", f"#define {up}_WEIGHTS_H", "", "#include <stdint.h>", "",
        f"#ifndef {up}_CONSTANT_SIZE", f"#define {up}_CONSTANT_SIZE {len(blob)}", "#endif", "",
        f"static const uint8_t {name}_weights[{size}] "
        f"__attribute__((aligned({WEIGHT_ALIGNMENT}))) = {{", ""])
    body = _hex_lines(np.frombuffer(blob, np.uint8)) if blob else b" 0\n"
    return b"".join([head.encode(), body, f"}};\n\n#endif /* {up}_WEIGHTS_H */\n".encode()])


def weights_files(net) -> dict[str, bytes]:
    """NET.weights.bin and NET.weights.h for external weights; nothing when they are embedded."""
    if net.weights != "external":
        return {}
    return {f"{net.name}.weights.bin": net.constant,
            f"{net.name}.weights.h": c_array(net.name, net.constant)}


def weight_precision(graph) -> str:
    """The precision of the layers' weights: "float32", "int8", "int8 and float32", or "none".

    A weight is a constant of at least two dimensions that a node reads; a quantized model
    whose every weighted layer is integer reads "int8" (its biases are int32 vectors), one
    with a layer left float reads "int8 and float32".
    """
    kinds = {v.type.dtype for node in graph.nodes for v in node.inputs
             if isinstance(v, Constant) and len(v.type.shape) >= 2
             and v.type.dtype in ("float32", "int8", "uint8")}
    integer = "int8" if kinds & {"int8", "uint8"} else ""
    floating = "float32" if "float32" in kinds else ""
    return " and ".join(k for k in (integer, floating) if k) or "none"


def int8_weight_bytes(graph) -> int:
    """Bytes of the int8 weights of the graph's convolutions and fully connected layers.

    What the automatic weight layout (`targets.auto_lean_weights`) weighs: these are the
    weights DSP kernels would store widened.
    """
    seen, total = set(), 0
    for node in graph.nodes:
        if node.op in ("QLinearConv", "QGemm") and len(node.inputs) > 3:
            w = node.inputs[3]
            if isinstance(w, Constant) and w.type.dtype == "int8" and id(w) not in seen:
                seen.add(id(w))
                total += w.type.nbytes
    return total
