"""Keep LLVM's Helium back end from a fixed-point conversion it cannot encode.

LLVM folds float(int32 vector) * 2**-n into MVE's fixed-point VCVT (`vcvt.f32.s32 q, q, #n`)
while selecting instructions, then fails an assertion encoding it ("This is not an
immediate"), which aborts the whole process: any power-of-two scale (the pow2 schemas, an
average over 64 values) on Cortex-M55 killed the compile, and the GUI with it. Run on the
optimized module, just before code generation, this puts an arithmetic fence on the constant
of every such product, so instruction selection sees a plain multiply (one instruction more
per vector of four). Nothing runs after it that could fold the fence away.
"""

from __future__ import annotations

import math
import re
import struct

_CONVERT = re.compile(r"^\s*(%[\w.\"-]+) = (?:sitofp|uitofp) ")
_FMUL = re.compile(r"^(\s*)(%[\w.\"-]+) = fmul((?: [a-z]+)*) (<(\d+) x float>|float) (.+)$")
_SPLAT = re.compile(r"^splat \(float ([^)]+)\)$")


def _float(text: str) -> float | None:
    """An LLVM float literal (decimal, or the hexadecimal of its double), None otherwise."""
    text = text.strip()
    try:
        if text.lower().startswith("0x"):
            return struct.unpack(">d", bytes.fromhex(text[2:].rjust(16, "0")))[0]
        return float(text)
    except ValueError:
        return None


def _power_of_two(value: float | None) -> bool:
    return value is not None and value != 0 and math.isfinite(value) and \
        math.frexp(abs(value))[0] == 0.5


def _constant(text: str) -> float | None:
    """The value of a constant operand that is a power of two everywhere, else None."""
    text = text.strip()
    splat = _SPLAT.match(text)
    if splat:
        value = _float(splat.group(1))
    elif text.startswith("<") and text.endswith(">"):
        values = {_float(part.strip().removeprefix("float")) for part in
                  text[1:-1].split(",")}
        value = values.pop() if len(values) == 1 else None
    else:
        value = _float(text)
    return value if _power_of_two(value) else None


def _operands(rest: str) -> tuple[str, str] | None:
    """The two operands of an fmul's text (a vector constant holds commas of its own)."""
    depth = 0
    for i, ch in enumerate(rest):
        depth += ch in "<(" and 1 or (ch in ">)" and -1 or 0)
        if ch == "," and depth == 0:
            return rest[:i].strip(), rest[i + 1:].split(", !", 1)[0].strip()
    return None


def fence_fixed_point_products(text: str) -> str:
    """`text` (an LLVM module) with the constant of every float(int) x 2**k product fenced."""
    converted: set[str] = set()
    out, declared, count = [], set(), 0
    for line in text.split("\n"):
        convert = _CONVERT.match(line)
        if convert:
            converted.add(convert.group(1))
        product = _FMUL.match(line)
        operands = _operands(product.group(6)) if product else None
        if operands:
            indent, name, flags, ty, lanes, _ = product.groups()
            a, b = operands
            for value, constant in ((a, b), (b, a)):
                if value in converted and _constant(constant) is not None:
                    suffix = f"v{lanes}f32" if lanes else "f32"
                    fence = f"%kiln.fence.{count}"
                    count += 1
                    declared.add((suffix, ty))
                    out.append(f"{indent}{fence} = call {ty} @llvm.arithmetic.fence.{suffix}"
                               f"({ty} {constant})")
                    line = f"{indent}{name} = fmul{flags} {ty} {value}, {fence}"
                    break
        out.append(line)
    for suffix, ty in sorted(declared):
        declaration = f"declare {ty} @llvm.arithmetic.fence.{suffix}({ty})"
        if declaration not in text:
            out.append(declaration)
    return "\n".join(out)
