"""Kiln-only operators that the passes produce: FullyConnected, FusedElementwise, fused activations.

None of them exists in ONNX, so the exporter refuses them (a compiled graph is not saved as ONNX).
Their references reuse the registered references of the operators they replace, so a fusion
changes no bit of the result. This module imports nothing from the other operator modules at load
time: Conv and Add import its activation helpers.
"""

from __future__ import annotations

import numpy as np

from compiler.ir.graph import Node
from compiler.ir.types import TensorType, is_float
from compiler.ops.registry import REQUIRED, Attr, OpDef, fail, lookup, register

# -- fused activations (attributes of Conv, Add and FullyConnected) ----------------------------

# Activation name -> number of `activation_params` it takes.
ACTIVATIONS = {"": 0, "Relu": 0, "Clip": 2, "LeakyRelu": 1}

ACTIVATION_ATTRS = {
    "activation": Attr("string", "", "Kiln only: activation fused into the node by a pass "
                                     "(Relu, Clip or LeakyRelu; empty for none)", onnx=False),
    "activation_params": Attr("floats", None, "Kiln only: Clip's min and max, or LeakyRelu's "
                                              "alpha", onnx=False),
}


def step_node(op: str, attrs: dict | None = None) -> Node:
    """A detached node of `op` with its schema defaults, to call that operator's functions."""
    full = {k: a.default for k, a in lookup(op).attrs.items() if a.default is not REQUIRED}
    full.update(attrs or {})
    return Node(-1, op, op, [], [], full, ())


def check_activation(node: Node, dtype: str) -> None:
    """Reject an unknown fused activation, a wrong parameter count, or a non-float result."""
    name = node.attrs.get("activation") or ""
    if name not in ACTIVATIONS:
        fail(f"fused activation {name!r} is not one of {', '.join(a for a in ACTIVATIONS if a)}")
    params = node.attrs.get("activation_params") or ()
    if len(params) != ACTIVATIONS[name]:
        fail(f"fused activation {name or 'none'} takes {ACTIVATIONS[name]} parameters, got "
             f"{len(params)}")
    if name and not is_float(dtype):
        fail(f"fused activations apply to float results, not {dtype}")


def apply_activation(node: Node, y: np.ndarray) -> np.ndarray:
    """The node's fused activation applied to its result, by the unfused operator's reference."""
    name = node.attrs.get("activation") or ""
    params = node.attrs.get("activation_params") or ()
    if name == "Relu":
        return lookup("Relu").reference(step_node("Relu"), y)
    if name == "LeakyRelu":
        return lookup("LeakyRelu").reference(step_node("LeakyRelu", {"alpha": params[0]}), y)
    if name == "Clip":
        low, high = (np.array(p, y.dtype) for p in params)
        return lookup("Clip").reference(step_node("Clip"), y, low, high)
    return y


# -- FullyConnected -----------------------------------------------------------------------------

def _fc_infer(node, ins, values):
    x, w = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 else None
    if not is_float(x.dtype) or w.dtype != x.dtype:
        fail(f"input and weights must have the same float element type, got {x.dtype} and "
             f"{w.dtype}")
    if x.rank < 1 or w.rank != 2 or w.shape[1] != x.shape[-1]:
        fail(f"weights must be [outputs, {x.shape[-1] if x.rank else '?'}] for an input of "
             f"shape {list(x.shape)}, got {list(w.shape)}")
    if b is not None and (b.shape != (w.shape[0],) or b.dtype != x.dtype):
        fail(f"bias must be {x.dtype}[{w.shape[0]}] (one per output), got {b}")
    check_activation(node, x.dtype)
    return [TensorType((*x.shape[:-1], w.shape[0]), x.dtype)]


def _fc(node, x, w, b=None):
    work = np.float32 if x.dtype == np.float16 else x.dtype
    y = np.matmul(x.astype(work, copy=False), w.astype(work, copy=False).T)
    if b is not None:
        y = y + b.astype(work, copy=False)
    return apply_activation(node, np.asarray(y).astype(x.dtype, copy=False))


def _fc_macs(node) -> int:
    out = node.outputs[0].type
    return out.numel * node.inputs[1].type.shape[1]


register(OpDef("FullyConnected", "matmul", _fc_infer, _fc, attrs=dict(ACTIVATION_ATTRS),
               inputs=(2, 3), macs=_fc_macs, onnx=False,
               doc="Kiln only: x @ W.T + b over the last axis, W stored [outputs, inputs] as "
                   "CMSIS-NN wants it; optional fused activation"))


# -- FusedElementwise ---------------------------------------------------------------------------

# Operators a fused element-wise node may chain: one loop computes them all per element.
FUSABLE = ("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "PRelu", "Relu", "LeakyRelu",
           "Clip", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "Neg", "Abs", "Sqrt", "Exp",
           "Log", "Erf")


def parse_step(text: str) -> tuple[str, list[str], dict[str, float]]:
    """Split a step like `Mul x $1` or `LeakyRelu x alpha=0.1` into op, operands and attributes.

    Operands are `x` (the previous step's result), `$k` (input k of the fused node) or `_` (an
    omitted optional input); attributes are floats.
    """
    words = text.split()
    if not words:
        fail("a fused element-wise step is empty")
    operands, attrs = [], {}
    for word in words[1:]:
        key, sep, value = word.partition("=")
        if sep:
            try:
                attrs[key] = float(value)
            except ValueError:
                fail(f"step {text!r}: attribute {key} must be a number, got {value!r}")
        elif word in ("x", "_") or (word.startswith("$") and word[1:].isdigit()):
            operands.append(word)
        else:
            fail(f"step {text!r}: operand {word!r} is not x, _ or $<input index>")
    return words[0], operands, attrs


def _walk(node, inputs, evaluate):
    """Run the steps, giving `evaluate(op node, operands)` each step's operands."""
    steps = node.attrs["steps"]
    if not steps:
        fail("FusedElementwise needs at least one step")
    current = None
    for index, text in enumerate(steps):
        op, refs, attrs = parse_step(text)
        if op not in FUSABLE:
            fail(f"step {index} ({text!r}): {op} is not an element-wise operator Kiln fuses")
        low, high = lookup(op).inputs
        if not low <= len(refs) <= (high if high >= 0 else len(refs)):
            fail(f"step {index} ({text!r}): {op} takes {low} to "
                 f"{high if high >= 0 else 'any number of'} operands, not {len(refs)}")
        operands = []
        for ref in refs:
            if ref == "x":
                if index == 0:
                    fail("the first step has no previous result to read as x")
                operands.append(current)
            elif ref == "_":
                operands.append(None)
            else:
                k = int(ref[1:])
                if k >= len(inputs):
                    fail(f"step {index} ({text!r}) reads input {k}; the node has {len(inputs)}")
                operands.append(inputs[k])
        current = evaluate(step_node(op, attrs), operands)
    return current


def _fused_infer(node, ins, values):
    out = _walk(node, ins, lambda step, types: lookup(step.op).infer(step, types,
                                                                     [None] * len(types))[0])
    return [out]


def _fused(node, *arrays):
    return _walk(node, arrays, lambda step, xs: np.asarray(lookup(step.op).reference(step, *xs)))


register(OpDef("FusedElementwise", "elementwise", _fused_infer, _fused,
               attrs={"steps": Attr("strings", doc="Kiln only: the chained operations, e.g. "
                                                   "['Mul $0 $1', 'Add x $2', 'Relu x']")},
               inputs=(1, -1), onnx=False,
               doc="Kiln only: a chain of element-wise operations computed in one loop"))
