"""ARM's CMSIS-NN as the peer of Kiln's Cortex-M int8 kernels, layer for layer.

The library is built from its sources (not part of Kiln: found beside the project or named by
the caller) with `arm-none-eabi-gcc -O3` for the core, archived once per core and source tree.
For each layer of a network under TFLite Micro's arithmetic that CMSIS-NN has a kernel for,
a generated `main.c` calls that kernel with the layer's shapes, weights and requantization
parameters (computed as TFLite Micro computes them), each call between the counting markers,
so every call is one counted segment. Set-up work TFLite Micro does before inference (scratch
sizes, the M55 fully connected kernel sums) stays outside the segments. Layers CMSIS-NN has no
kernel for (TFLite Micro runs its reference code) are listed, not counted.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from compiler.cache import cache_dir
from compiler.codegen.qfully_connected import weight_rows
from compiler.codegen.targets import Board
from compiler.errors import KilnError
from compiler.ir.graph import Constant, Graph, Node
from compiler.mcu import firmware
from compiler.mcu.counting import count
from compiler.ops.geometry import spatial
from compiler.qmath.requant import RANGES, quantize_multiplier, tflite_multiplier
from compiler.qmath.tflite_softmax import softmax_params

AR = "arm-none-eabi-ar"
SCRATCH_BYTES = 64 * 1024
# Where the project's shared folder keeps the vendored sources, beside the checkout.
DEFAULT_ROOT = Path(__file__).resolve().parents[3] / "shared" / "third_party" / "CMSIS-NN"


@dataclass(frozen=True)
class PeerLayer:
    """One layer CMSIS-NN ran: the graph node, the function called and its instructions."""

    node: str
    function: str
    instructions: int


@dataclass(frozen=True)
class PeerCount:
    """CMSIS-NN's counts for a network's layers, and the layers it has no kernel for."""

    layers: list[PeerLayer]
    uncovered: list[str]
    code_bytes: int

    @property
    def total(self) -> int:
        """Instructions inside every counted CMSIS-NN call."""
        return sum(layer.instructions for layer in self.layers)


def find_root(root: str | Path | None = None) -> Path:
    """The CMSIS-NN source tree: `root`, else $KILN_CMSIS_NN, else the shared folder's copy."""
    path = Path(root or os.environ.get("KILN_CMSIS_NN") or DEFAULT_ROOT)
    if not (path / "Include" / "arm_nnfunctions.h").is_file():
        raise KilnError(f"{path}: not a CMSIS-NN source tree (no Include/arm_nnfunctions.h); "
                        "pass --cmsis-nn DIR or set KILN_CMSIS_NN")
    return path


def _sources(root: Path) -> list[Path]:
    skip = ("_f16.c", "_f32.c", "_flt.c")
    return sorted(p for p in (root / "Source").rglob("*.c") if not p.name.endswith(skip))


def _flags(root: Path, board: Board) -> list[str]:
    return [*board.cflags, "-O3", "-ffunction-sections", "-fdata-sections",
            f"-I{root / 'Include'}"]


def library(root: Path, board: Board) -> Path:
    """CMSIS-NN's int8 kernels built for `board`'s core at -O3, as a static library (cached)."""
    sources = _sources(root)
    digest = hashlib.sha256()
    for source in sources:
        digest.update(str(source.relative_to(root)).encode() + source.read_bytes())
    digest.update(" ".join(_flags(Path("."), board)).encode())
    path = cache_dir() / f"cmsis-nn-{board.target}-{digest.hexdigest()[:16]}.a"
    if path.is_file():
        return path
    build = path.with_suffix(f".{os.getpid()}.d")
    build.mkdir(parents=True, exist_ok=True)

    def compile_one(source: Path) -> Path:
        obj = build / (source.stem + ".o")
        done = subprocess.run([firmware.GCC, *_flags(root, board), "-c", str(source), "-o",
                               str(obj)], capture_output=True, text=True)
        if done.returncode:
            raise KilnError(f"building CMSIS-NN's {source.name} for {board.target} failed: "
                            f"{done.stderr.strip()[-1000:]}")
        return obj

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        objects = list(pool.map(compile_one, sources))
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    done = subprocess.run([AR, "rcs", str(partial), *map(str, objects)], capture_output=True,
                          text=True)
    if done.returncode:
        raise KilnError(f"archiving CMSIS-NN failed: {done.stderr.strip()}")
    os.replace(partial, path)
    for obj in objects:
        obj.unlink()
    build.rmdir()
    return path


# -- one C block per layer --------------------------------------------------------------------

def _data(node: Node, slot: int):
    value = node.inputs[slot] if len(node.inputs) > slot else None
    return value.data if isinstance(value, Constant) else None


def _first(node: Node, slot: int, default=0):
    data = _data(node, slot)
    return default if data is None else np.asarray(data).reshape(-1)[0]


def _array(ctype: str, name: str, values, const: bool = True) -> str:
    flat = np.asarray(values).reshape(-1)
    body = ",".join(str(int(v)) for v in flat) or "0"
    return f"static {'const ' if const else ''}{ctype} {name}[{max(flat.size, 1)}] = {{{body}}};"


def _dims(shape) -> str:
    """A cmsis_nn_dims initializer: NHWC as it is, [N, C] as N x 1 x 1 x C."""
    n, h, w, c = shape if len(shape) == 4 else (shape[0], 1, 1, shape[-1])
    return f"{{{n}, {h}, {w}, {c}}}"


def _activation(node: Node) -> tuple[int, int]:
    return tuple(node.attrs.get("output_range") or RANGES[node.output.type.dtype])


class _Program:
    """The C source of the layer calls, built node by node."""

    def __init__(self):
        self.globals: list[str] = []
        self.body: list[str] = []
        self.layers: list[tuple[str, str]] = []  # (node, function), one per segment
        self.largest = 1

    def call(self, node: Node, function: str, setup: list[str], call: str,
             sizes: tuple[int, ...]) -> None:
        self.largest = max(self.largest, *sizes)
        k = len(self.layers)
        self.layers.append((node.name, function))
        self.body += ["    {", *[f"        {line}" for line in setup],
                      f"        fill(in_a, {sizes[0]}, {k}u); fill(in_b, {sizes[0]}, {k}u + 7u);",
                      f"        {firmware.MARKERS[0]}();", f"        {call};",
                      f"        {firmware.MARKERS[1]}();", "    }"]

    def constants(self, k: int, **arrays) -> None:
        ctypes = {"w": "int8_t", "b": "int32_t", "m": "int32_t", "s": "int32_t"}
        for key, values in arrays.items():
            self.globals.append(_array(ctypes[key], f"{key}{k}", values, const=key in "wb"))


def _conv(program: _Program, node: Node) -> bool:
    x, w = node.inputs[0].type, np.asarray(node.inputs[3].data)
    y = node.output.type
    out_c, per_group, kh, kw = w.shape
    groups = int(node.attrs.get("group") or 1)
    _, strides, dilations, pads = spatial(node)
    xs, ys = float(_first(node, 1)), float(_first(node, 6))
    multiplier, shift = tflite_multiplier(xs, np.asarray(node.inputs[4].data, np.float32)
                                          .reshape(-1), ys)
    multiplier = np.broadcast_to(multiplier, (out_c,))
    shift = np.broadcast_to(shift, (out_c,))
    bias = _data(node, 8)
    bias = np.zeros(out_c, np.int64) if bias is None else bias
    k = len(program.layers)
    low, high = _activation(node)
    tiles = (f"{{{strides[1]}, {strides[0]}}}, {{{pads[1]}, {pads[0]}}}, "
             f"{{{dilations[1]}, {dilations[0]}}}, {{{low}, {high}}}")
    offsets = f"{-int(_first(node, 2))}, {int(_first(node, 7))}"
    quant = f"cmsis_nn_per_channel_quant_params q = {{m{k}, s{k}}};"
    dims = [f"cmsis_nn_dims in = {_dims(x.shape)}, out = {_dims(y.shape)};",
            f"cmsis_nn_dims bd = {{1, 1, 1, {out_c}}};"]
    if groups == 1:
        program.constants(k, w=w.transpose(0, 2, 3, 1), b=bias, m=multiplier, s=shift)
        setup = [f"cmsis_nn_conv_params p = {{{offsets}, {tiles}}};", quant, *dims,
                 f"cmsis_nn_dims f = {{{out_c}, {kh}, {kw}, {per_group}}};",
                 "cmsis_nn_context ctx = {scratch, "
                 "arm_convolve_wrapper_s8_get_buffer_size(&p, &in, &f, &out)};",
                 "check(ctx.size);"]
        call = (f"arm_convolve_wrapper_s8(&ctx, &p, &q, &in, in_a, &f, w{k}, &bd, b{k}, &out, "
                "out_y)")
        function = "arm_convolve_wrapper_s8"
    elif groups == x.shape[3] and per_group == 1:
        program.constants(k, w=w.reshape(out_c, kh, kw).transpose(1, 2, 0), b=bias,
                          m=multiplier, s=shift)
        setup = [f"cmsis_nn_dw_conv_params p = {{{offsets}, {out_c // groups}, {tiles}}};",
                 quant, *dims, f"cmsis_nn_dims f = {{1, {kh}, {kw}, {out_c}}};",
                 "cmsis_nn_context ctx = {scratch, "
                 "arm_depthwise_conv_wrapper_s8_get_buffer_size(&p, &in, &f, &out)};",
                 "check(ctx.size);"]
        call = (f"arm_depthwise_conv_wrapper_s8(&ctx, &p, &q, &in, in_a, &f, w{k}, &bd, "
                f"b{k}, &out, out_y)")
        function = "arm_depthwise_conv_wrapper_s8"
    else:
        return False
    program.call(node, function, setup, call, (x.numel, y.numel))
    return True


def _fully_connected(program: _Program, node: Node) -> bool:
    if node.op != "QGemm" or np.asarray(node.inputs[4].data).size != 1:
        return False
    w = weight_rows(node)  # [N, K]
    units, depth = w.shape
    batch = node.output.type.numel // units
    multiplier, shift = (int(v) for v in np.asarray(tflite_multiplier(
        float(_first(node, 1)), np.asarray(node.inputs[4].data, np.float32).reshape(-1),
        float(_first(node, 7)), product_in_float=True)).reshape(2, -1)[:, 0])
    bias = _data(node, 6)
    bias = np.zeros(units, np.int64) if bias is None else bias
    k = len(program.layers)
    program.constants(k, w=w, b=bias)
    low, high = _activation(node)
    x_offset = -int(_first(node, 2))
    setup = [f"cmsis_nn_fc_params p = {{{x_offset}, {-int(_first(node, 5))}, "
             f"{int(_first(node, 8))}, {{{low}, {high}}}}};",
             f"cmsis_nn_per_tensor_quant_params q = {{{multiplier}, {shift}}};",
             f"cmsis_nn_dims in = {{{batch}, 1, 1, {depth}}}, f = {{{depth}, 1, 1, {units}}};",
             f"cmsis_nn_dims bd = {{1, 1, 1, {units}}}, out = {{{batch}, 1, 1, {units}}};",
             "cmsis_nn_context ctx = {scratch, arm_fully_connected_s8_get_buffer_size(&f)};",
             "check(ctx.size);",
             f"if (ctx.size > 0) arm_vector_sum_s8(ctx.buf, {depth}, {units}, w{k}, "
             f"{x_offset}, 0, b{k});"]
    call = f"arm_fully_connected_s8(&ctx, &p, &q, &in, in_a, &f, w{k}, &bd, b{k}, &out, out_y)"
    program.call(node, "arm_fully_connected_s8", setup, call,
                 (node.inputs[0].type.numel, node.output.type.numel))
    return True


def _pool(program: _Program, node: Node) -> bool:
    x, y = node.inputs[0].type, node.output.type
    if x.rank != 4:
        return False
    if node.op == "QLinearGlobalAveragePool":
        if (np.float32(_first(node, 1)) != np.float32(_first(node, 3))
                or int(_first(node, 2)) != int(_first(node, 4))):
            return False  # TFLite Micro's MEAN: reference code, no CMSIS-NN kernel
        kernel, strides, pads = list(x.shape[1:3]), [1, 1], [0, 0, 0, 0]
    else:
        kernel, strides, _, pads = spatial(node)
    low, high = _activation(node)
    params = (f"cmsis_nn_pool_params p = {{{{{strides[1]}, {strides[0]}}}, "
              f"{{{pads[1]}, {pads[0]}}}, {{{low}, {high}}}}};")
    dims = [f"cmsis_nn_dims in = {_dims(x.shape)}, out = {_dims(y.shape)};",
            f"cmsis_nn_dims f = {{1, {kernel[0]}, {kernel[1]}, 1}};"]
    if node.op == "MaxPool":
        setup = [params, *dims, "cmsis_nn_context ctx = {scratch, 0};"]
        function = "arm_max_pool_s8"
    else:
        setup = [params, *dims, "cmsis_nn_context ctx = {scratch, "
                 f"arm_avgpool_s8_get_buffer_size({y.shape[2]}, {x.shape[3]})}};",
                 "check(ctx.size);"]
        function = "arm_avgpool_s8"
    program.call(node, function, setup, f"{function}(&ctx, &p, &in, in_a, &f, &out, out_y)",
                 (x.numel, y.numel))
    return True


def _add(program: _Program, node: Node) -> bool:
    a, b = node.inputs[0].type, node.inputs[3].type
    if a.shape != b.shape:
        return False
    sa, sb, sc = (float(np.float32(_first(node, i))) for i in (1, 4, 6))
    twice_max = 2.0 * max(sa, sb)
    (ma, shift_a), (mb, shift_b), (mc, shift_c) = (
        (int(m), int(s)) for m, s in (quantize_multiplier(v) for v in
                                      (sa / twice_max, sb / twice_max,
                                       twice_max / ((1 << 20) * sc))))
    low, high = _activation(node)
    call = (f"arm_elementwise_add_s8(in_a, in_b, {-int(_first(node, 2))}, {ma}, {shift_a}, "
            f"{-int(_first(node, 5))}, {mb}, {shift_b}, 20, out_y, {int(_first(node, 7))}, "
            f"{mc}, {shift_c}, {low}, {high}, {a.numel})")
    program.call(node, "arm_elementwise_add_s8", [], call, (a.numel, node.output.type.numel))
    return True


def _softmax(program: _Program, node: Node) -> bool:
    x = node.inputs[0].type
    multiplier, shift, diff_min = softmax_params(float(node.attrs.get("beta", 1.0)),
                                                 float(np.float32(_first(node, 1))))
    rows, length = x.numel // x.shape[-1], x.shape[-1]
    call = f"arm_softmax_s8(in_a, {rows}, {length}, {multiplier}, {shift}, {diff_min}, out_y)"
    program.call(node, "arm_softmax_s8", [], call, (x.numel, x.numel))
    return True


_LAYERS = {"QLinearConv": _conv, "QGemm": _fully_connected, "QLinearAveragePool": _pool,
           "QLinearGlobalAveragePool": _pool, "MaxPool": _pool, "QLinearAdd": _add,
           "QLinearSoftmax": _softmax}
# Operators TFLite Micro runs without arithmetic of their own (views and copies).
_FREE = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"}


def program(graph: Graph) -> tuple[str, list[tuple[str, str]], list[str]]:
    """The `main.c` calling CMSIS-NN for each layer it has a kernel for.

    Returns the source, the (node, function) of each counted segment and the nodes with
    arithmetic that CMSIS-NN has no kernel for.
    """
    built, uncovered = _Program(), []
    for node in graph.nodes:
        if node.op in _FREE:
            continue
        if node.attrs.get("requant") != "tflite" or node.output.type.dtype != "int8":
            uncovered.append(node.name)
            continue
        emit = _LAYERS.get(node.op)
        if emit is None or not emit(built, node):
            uncovered.append(node.name)
    size = built.largest
    source = "\n".join([
        "#include <stdint.h>", "#include <stdlib.h>", '#include "arm_nnfunctions.h"',
        *firmware.marker_functions(), *built.globals,
        f"static int8_t in_a[{size}], in_b[{size}], out_y[{size}];",
        f"static int8_t scratch[{SCRATCH_BYTES}] __attribute__((aligned(16)));",
        f"static void check(int32_t size) {{ if (size > {SCRATCH_BYTES}) exit(3); }}",
        "static void fill(int8_t *p, int n, uint32_t seed)",
        "{", "    for (int i = 0; i < n; i++) {",
        "        seed = seed * 1664525u + 1013904223u;", "        p[i] = (int8_t)(seed >> 24);",
        "    }", "}", "", "int main(void)", "{", *built.body, "    return 0;", "}", ""])
    return source, built.layers, uncovered


def count_peer(graph: Graph, target: str, folder: Path, root: str | Path | None = None
               ) -> PeerCount | None:
    """CMSIS-NN's instructions per layer of `graph` on `target`'s QEMU board.

    None when CMSIS-NN computes none of its layers (a QDQ ONNX model follows onnxruntime's
    requantization rule, CMSIS-NN TFLite's): there is nothing to compare.
    """
    text, layers, uncovered = program(graph)
    if not layers:
        return None
    source_root = find_root(root)
    board = firmware.board_for(target)
    archive = library(source_root, board)
    folder.mkdir(parents=True, exist_ok=True)
    main = folder / "cmsis_main.c"
    main.write_text(text)
    elf = firmware.link([main, archive], board.qemu_machine, folder,
                        extra=(f"-I{source_root / 'Include'}", "-O3",
                               "-Wl,--gc-sections", "-ffunction-sections"))
    counts, _ = count(elf, board.qemu_machine)
    if len(counts.segments) != len(layers):
        raise KilnError(f"CMSIS-NN firmware counted {len(counts.segments)} calls, expected "
                        f"{len(layers)}")
    return PeerCount([PeerLayer(node, function, n) for (node, function), n
                      in zip(layers, counts.segments)], uncovered,
                     _library_code(elf, {function for _, function in layers}))


def _library_code(elf: Path, functions: set[str]) -> int:
    """Bytes of CMSIS-NN code linked into the image (every function from the archive)."""
    from elftools.elf.elffile import ELFFile

    with elf.open("rb") as f:
        table = ELFFile(f).get_section_by_name(".symtab")
        names = {s.name: s["st_size"] for s in table.iter_symbols()
                 if s["st_info"]["type"] == "STT_FUNC"}
    return sum(size for name, size in names.items() if name.startswith("arm_"))
