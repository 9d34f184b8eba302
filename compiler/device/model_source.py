"""The runner firmware's view of one compiled network: `kiln_model.h` and `kiln_model.c`.

The runner (`kiln_runner.c`) knows a network only through these two files: the identity it
answers `kiln-id` with, each input's and output's description, the regions, how the loaded
bytes reach the inputs, how an output element reads as a float for `results`, and the
network's per-call tick counters. The host builds the same descriptions (`describe`) and
compares them with what the board says, so a firmware built from another network is caught.
"""

from __future__ import annotations

import hashlib

import numpy as np

from compiler.codegen.build import CompiledNet, Tensor
from compiler.codegen.bundle import io_macros, tensor_bytes
from compiler.codegen.example import GENERATED_MARK
from compiler.ir.types import QuantParams
from compiler.version import kiln_version

_C_TYPES = {"float32": "float", "int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t",
            "int32": "int32_t", "int64": "int64_t", "bool": "uint8_t"}
_REGIONS = {"mutable": "kiln_mutable", "activations": "kiln_activations"}


def network_hash(net: CompiledNet) -> str:
    """What identifies the code on the board: a digest of the object and its weight blob."""
    digest = hashlib.sha256(net.object)
    digest.update(net.constant)
    return digest.hexdigest()[:32]


def _quant(net: CompiledNet, tensor: Tensor) -> QuantParams | None:
    values = {v.name: v for v in (*net.graph.inputs, *net.graph.outputs)}
    value = values.get(tensor.name)
    quant = value.type.quant if value is not None else None
    return quant if quant is not None and len(quant.scale) == 1 else None


def _clean(text: str) -> str:
    """A name as the protocol can carry it: no brackets, separators, '%' or line breaks."""
    return "".join("_" if c in "[];%\r\n" or not c.isprintable() else c for c in text)


def describe(net: CompiledNet, tensor: Tensor) -> str:
    """One input's or output's description, as `kiln-id` prints it and the host expects it."""
    parts = [_clean(tensor.name), tensor.dtype, "x".join(map(str, tensor.shape)) or "scalar"]
    quant = _quant(net, tensor)
    if quant is not None:
        parts += [f"scale={float(np.float32(quant.scale[0])):.9g}",
                  f"zero_point={quant.zero_point[0]}"]
    return ";".join(parts)


def input_bytes(net: CompiledNet) -> int:
    """Bytes of every data input back to back: what `db load` takes."""
    return sum(tensor_bytes(t) for t in net.data_inputs)


def layer_slots(net: CompiledNet) -> int:
    """Tick counters the runner prints.

    One per kernel call of the entry point, the whole entry point, then one per kernel of
    each row chain (`CompiledNet.chain_timed`).
    """
    return len(net.timed) + 1 + sum(len(slots) for _, slots in net.chain_timed)


def slot_kernels(net: CompiledNet) -> list[int | None]:
    """The kernel (index into `net.kernels`) of each printed slot; None for the whole."""
    return [*net.timed, None, *(k for _, slots in net.chain_timed for k in slots)]


def _string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def header(net: CompiledNet, target: str, board: str, model_id: str) -> str:
    """kiln_model.h: the network's identity and sizes, and the functions the runner calls."""
    return "\n".join([
        f"/* kiln_model.h: {GENERATED_MARK}. The network the runner firmware serves. */",
        "#ifndef KILN_MODEL_H", "#define KILN_MODEL_H", "", "#include <stdint.h>", "",
        f"#define KILN_MODEL_HASH {_string(network_hash(net))}",
        f"#define KILN_VERSION {_string(_clean(kiln_version()))}",
        f"#define KILN_NET_NAME {_string(net.name)}",
        f"#define KILN_TARGET {_string(target)}",
        f"#define KILN_BOARD {_string(board)}",
        f"#define KILN_MODEL_ID {_string(_clean(model_id))}",
        f"#define KILN_INPUT_BYTES {input_bytes(net)}u",
        f"#define KILN_INPUT_COUNT {len(net.data_inputs)}u",
        f"#define KILN_OUTPUT_COUNT {len(net.outputs)}u",
        f"#define KILN_LAYER_SLOTS {layer_slots(net)}u", "",
        "struct kiln_input { const char *description; };",
        "struct kiln_output {", "    const char *description;", "    const uint8_t *address;",
        "    uint32_t bytes;", "    uint32_t count;", "};",
        "extern const struct kiln_input kiln_inputs[];",
        "extern const struct kiln_output kiln_outputs[];", "",
        "void kiln_model_reset(void);",
        "void kiln_model_load(const uint8_t *bytes); /* the inputs, back to back */",
        "int kiln_model_run(void);",
        "float kiln_model_output_value(unsigned output, uint32_t element);",
        "void kiln_model_clear_ticks(void);", "uint64_t kiln_model_ticks(unsigned slot);", "",
        "#endif", ""])


def _float_literal(value: float) -> str:
    return f"{float(np.float32(value)):.9g}f"


def source(net: CompiledNet) -> str:
    """kiln_model.c: the regions, the I/O tables and the calls into the network's object."""
    n, up = net.name, net.name.upper()
    macros = {t.name: m for _, t, m in io_macros(net)}
    lines = [f"/* kiln_model.c: {GENERATED_MARK}. Regions, I/O and calls of {n}. */",
             "#include <stdint.h>", "#include <string.h>", "", '#include "kiln_model.h"',
             f'#include "{n}.h"', "",
             "#define NONZERO(n) ((n) > 0 ? (n) : 1) /* C forbids empty arrays */",
             f"static uint8_t kiln_mutable[NONZERO({up}_MUTABLE_SIZE)] "
             f"__attribute__((aligned({up}_ALIGNMENT)));",
             f"static uint8_t kiln_activations[NONZERO({up}_ACTIVATIONS_SIZE)] "
             f"__attribute__((aligned({up}_ALIGNMENT)));",
             f"extern uint64_t {net.ticks_symbol}[{len(net.timed) + 1}];",
             *(f"extern uint64_t {name}[{len(slots)}];" for name, slots in net.chain_timed)]
    if net.state:
        lines.append(f"void {net.reset_symbol}(uint8_t *);")
    lines += ["", "const struct kiln_input kiln_inputs[] = {"]
    lines += [f"    {{{_string(describe(net, t))}}}," for t in net.data_inputs] or ["    {0},"]
    lines += ["};", "const struct kiln_output kiln_outputs[] = {"]
    for t in net.outputs:
        count = int(np.prod(t.shape, dtype=np.int64))
        lines.append(f"    {{{_string(describe(net, t))}, {_REGIONS[t.region]} + "
                     f"{macros[t.name]}_OFFSET, {macros[t.name]}_BYTES, {count}u}},")
    lines += ["};", "", "void kiln_model_reset(void)", "{"]
    if net.state:
        lines.append(f"    {net.reset_symbol}(kiln_mutable);")
    lines += ["}", "", "void kiln_model_load(const uint8_t *bytes)", "{"]
    for t in net.data_inputs:
        m = macros[t.name]
        lines += [f"    memcpy({_REGIONS[t.region]} + {m}_OFFSET, bytes, {m}_BYTES);",
                  f"    bytes += {m}_BYTES;"]
    lines += ["    (void)bytes;", "}", "", "int kiln_model_run(void)", "{",
              f"    return {n}(0, kiln_mutable, kiln_activations);", "}", "",
              "float kiln_model_output_value(unsigned output, uint32_t element)", "{",
              "    switch (output) {"]
    for o, t in enumerate(net.outputs):
        ctype = _C_TYPES[t.dtype]
        read = f"((const {ctype} *)kiln_outputs[{o}].address)[element]"
        quant = _quant(net, t)
        if quant is not None and t.dtype != "float32":
            value = (f"((float)((int32_t){read} - ({quant.zero_point[0]})) * "
                     f"{_float_literal(quant.scale[0])})")
        else:
            value = f"(float){read}"
        lines.append(f"    case {o}: return {value};")
    lines += ["    default: return 0.0f;", "    }", "}", "",
              "void kiln_model_clear_ticks(void)", "{",
              *(f"    memset({name}, 0, sizeof {name});"
                for name in (net.ticks_symbol, *(c for c, _ in net.chain_timed))), "}", "",
              "uint64_t kiln_model_ticks(unsigned slot)", "{"]
    start = 0
    for name, count in ((net.ticks_symbol, len(net.timed) + 1),
                        *((c, len(slots)) for c, slots in net.chain_timed)):
        lines += [f"    if (slot < {start + count}u)", f"        return {name}[slot - {start}u];"]
        start += count
    lines += ["    return 0;", "}", ""]
    return "\n".join(lines)
