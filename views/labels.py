"""Qt-free text of the graph canvas's boxes: what a node shows, and how big its box must be."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from html import escape

import numpy as np

from compiler import ops
from compiler.ir.graph import Constant, Node, Value
from compiler.ir.types import DTYPE_OF_ONNX, TensorType

# Box metrics in scene units (pixels at zoom 1). The canvas draws with fonts of these pixel
# sizes, and shrinks a font only if a string still overflows (fonts differ between machines).
TITLE_PX = 12
BODY_PX = 11
TITLE_CHAR_W = 7.6  # average advance of a bold title character
CHAR_W = 6.5  # average advance of a body character (digits and brackets dominate)
TITLE_H = 22.0
LINE_H = 15.0
PAD_X = 10.0
PAD_BOTTOM = 5.0
MIN_W = 64.0
MAX_CHARS = 34  # longer strings are elided: a box is a summary, the properties panel has it all

# Attributes shown first, in this order; others follow when they differ from their default.
_PRIORITY = ("kernel_shape", "strides", "pads", "dilations", "group", "perm", "axis", "axes",
             "to", "mode")
_NEVER = {"momentum", "training_mode", "seed", "mask_version", "saturate",
          "output_shape"}
_SHORT = {"kernel_shape": "kernel", "strides": "stride", "dilations": "dilation"}
MAX_ATTR_LINES = 4

# Line kinds, so the canvas can style them: attribute, constant input, output type.
ATTR, CONST, SHAPE, SOURCE = "attr", "const", "shape", "source"


@dataclass(frozen=True)
class NodeLabel:
    """What a box shows: a bold title and lines of `key value` text, each with a kind."""

    title: str
    lines: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()

    def size(self) -> tuple[float, float]:
        """Width and height of the box that holds this label, from fixed character widths."""
        # Capitals are wider than the average character: a source line (CONV_2D) gets room.
        kinds = self.kinds or ("",) * len(self.lines)
        chars = max((len(line) * (1.35 if kind == SOURCE else 1.0)
                     for line, kind in zip(self.lines, kinds)), default=0)
        w = max(MIN_W, len(self.title) * TITLE_CHAR_W + 2 * PAD_X, chars * CHAR_W + 2 * PAD_X)
        h = TITLE_H + len(self.lines) * LINE_H + (PAD_BOTTOM if self.lines else 0.0)
        return float(round(w)), float(h)


def elide(text: str, limit: int = MAX_CHARS) -> str:
    """Shorten `text` to `limit` characters with an ellipsis in the middle (ends say most)."""
    if len(text) <= limit:
        return text
    keep = limit - 1
    return text[: (keep + 1) // 2] + "…" + text[len(text) - keep // 2:]


def type_text(t: TensorType) -> str:
    """A tensor type as `float32[1,8,8,8]` (the IR's own spelling, quantization left out)."""
    return f"{t.dtype}[{','.join(str(d) for d in t.shape)}]"


@lru_cache(maxsize=512)
def input_names(op: str) -> tuple[str, ...]:
    """ONNX's names of an operator's inputs (`X`, `W`, `B`), or () for unknown operators."""
    import onnx  # only for its operator schemas; already loaded with any model

    try:
        schema = onnx.defs.get_schema(op)
    except onnx.defs.SchemaError:
        return ()
    return tuple(i.name for i in schema.inputs)


def input_name(op: str, index: int) -> str:
    """The short name of input `index` of `op` (variadic inputs repeat the last name)."""
    names = input_names(op)
    if not names:
        return f"in{index}"
    return names[min(index, len(names) - 1)]


def _ints(values, name: str) -> str:
    values = [int(v) for v in values]
    if name in ("strides", "pads", "dilations") and len(set(values)) == 1:
        return str(values[0])
    sep = "×" if name in ("kernel_shape", "strides", "dilations") else ","
    return sep.join(str(v) for v in values)


def attr_text(name: str, value) -> str:
    """One attribute as `key value` for a box (short key names, compact lists)."""
    key = _SHORT.get(name, name)
    if isinstance(value, np.ndarray):
        if value.size == 1:
            return f"{key} {value.reshape(-1)[0]:g}" if value.dtype.kind == "f" else \
                f"{key} {value.reshape(-1)[0]}"
        return f"{key} {value.dtype.name}[{','.join(str(d) for d in value.shape)}]"
    if isinstance(value, (tuple, list)):
        if value and isinstance(value[0], (int, np.integer)):
            return f"{key} {_ints(value, name)}"
        return f"{key} " + ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value)
    if name == "to" and isinstance(value, int):
        return f"{key} {DTYPE_OF_ONNX.get(value, value)}"
    if isinstance(value, float):
        return f"{key} {value:g}"
    return f"{key} {value}"


def _shown(name: str, value, default) -> bool:
    if name in _NEVER or value is None:
        return False
    if name == "kernel_shape":
        return True
    if isinstance(value, (tuple, list)) and name in ("strides", "dilations"):
        return any(int(v) != 1 for v in value)
    if isinstance(value, (tuple, list)) and name == "pads":
        return any(int(v) != 0 for v in value)
    if default is ops.registry.REQUIRED:
        return True
    if isinstance(value, float) and isinstance(default, float):  # float32 round trips
        return abs(value - default) > 1e-6 * max(1.0, abs(default))
    try:
        return bool(value != default)
    except ValueError:  # arrays compare element-wise
        return True


def attribute_lines(node: Node) -> list[str]:
    """The attributes worth a line in the box: key ones first, then those off their default."""
    opdef = ops.get(node.op)
    schema = opdef.attrs if opdef else {}
    names = [n for n in _PRIORITY if n in node.attrs]
    names += [n for n in node.attrs if n not in _PRIORITY]
    lines = []
    for name in names:
        value = node.attrs[name]
        default = schema[name].default if name in schema else ops.registry.REQUIRED
        if _shown(name, value, default):
            lines.append(elide(attr_text(name, value)))
    return lines[:MAX_ATTR_LINES]


def node_label(node: Node, *, inline_constants: bool = True, source: str | None = None
               ) -> NodeLabel:
    """The label of a node box: op type, key attributes, constant inputs, output type(s).

    Constant inputs appear as `W float32[8,1,3,3]` lines when they are drawn inside their
    consumer (the default); with constants shown as boxes of their own they are left out.
    `source` (the operator of the model file it comes from, e.g. `CONV_2D #3 +RELU6`) comes
    first.
    """
    lines: list[str] = [elide(source)] if source else []
    kinds: list[str] = [SOURCE] if source else []
    for line in attribute_lines(node):
        lines.append(line)
        kinds.append(ATTR)
    if inline_constants:
        for i, value in enumerate(node.inputs):
            if isinstance(value, Constant):
                lines.append(elide(f"{input_name(node.op, i)} {type_text(value.type)}"))
                kinds.append(CONST)
    for out in node.outputs[:3]:
        lines.append(elide(type_text(out.type)))
        kinds.append(SHAPE)
    if len(node.outputs) > 3:
        lines.append(f"+{len(node.outputs) - 3} more outputs")
        kinds.append(SHAPE)
    return NodeLabel(node.op, tuple(lines), tuple(kinds))


def value_label(value: Value) -> NodeLabel:
    """The label of a graph input, graph output or constant box: its name and its type."""
    return NodeLabel(elide(value.name, 28), (elide(type_text(value.type)),), (SHAPE,))


def edge_tip(value: Value | None, name: str) -> str:
    """Tensor name, element type and shape (and quantization) of an edge."""
    if value is None:
        return f"<b>{escape(name)}</b>"
    t = value.type
    shape = "×".join(str(d) for d in t.shape) or "scalar"
    lines = [f"<b>{escape(name)}</b>", f"{t.dtype} [{shape}]"]
    if t.quant is not None:
        lines.append(escape(str(t.quant)))
    return "<br>".join(lines)
