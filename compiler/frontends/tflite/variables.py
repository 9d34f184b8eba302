"""Resource variables: CALL_ONCE, VAR_HANDLE, READ_VARIABLE and ASSIGN_VARIABLE as state.

Streaming models keep values between inferences in resource variables: an initialization
subgraph, run once by CALL_ONCE, assigns each its first value; the main subgraph reads and
assigns them. Kiln turns each variable the model reads into a state input (its value when the
inference starts) and the value it last assigns into a state output, declared as a pair with
the initial value (compiler.ir.state): reads after an assignment see the assigned value, as in
TFLite Micro, and nothing of it is a node of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.errors import ModelError
from compiler.frontends.tflite.builder import Builder, tensor_type
from compiler.frontends.tflite.flatbuffer import Model, Operator
from compiler.ir import state
from compiler.ir.graph import Constant, Placeholder, Value

_INIT_OPS = ("VAR_HANDLE", "ASSIGN_VARIABLE")


@dataclass
class Variable:
    """A variable while the model is read: its first value, state input and latest value."""

    name: str
    initial: np.ndarray | None = None
    input: Placeholder | None = None
    current: Value | None = None


def _key(op: Operator) -> str:
    o = op.options
    shared = (o.SharedName() or b"").decode("utf-8", "replace") if o is not None else ""
    container = (o.Container() or b"").decode("utf-8", "replace") if o is not None else ""
    if not shared:
        raise ModelError("its variable has no shared name")
    return f"{container}/{shared}" if container else shared


def _variable(b: Builder, handle: int) -> Variable:
    if handle not in b.handles:
        raise ModelError(f"its resource {b.tensor(handle).name} comes from no VAR_HANDLE")
    return b.variables[b.handles[handle]]


def var_handle(b: Builder, op: Operator) -> None:
    """VAR_HANDLE: names the variable its output refers to."""
    key = _key(op)
    b.variables.setdefault(key, Variable(key))
    b.handles[op.outputs[0]] = key


def read_variable(b: Builder, op: Operator) -> None:
    """READ_VARIABLE: the variable's latest value, its state input when not yet assigned."""
    var = _variable(b, op.inputs[0])
    out = b.tensor(op.outputs[0])
    if var.current is None:
        if var.initial is None:
            raise ModelError(f"it reads variable {var.name} before any value is assigned to it "
                             "(no CALL_ONCE initializes it)")
        want = tensor_type(out)
        if (tuple(var.initial.shape) != want.shape and var.initial.size != want.numel) \
                or var.initial.dtype.name != want.dtype:
            raise ModelError(f"it reads variable {var.name} as {want.dtype}{list(want.shape)}, "
                             f"but it holds {var.initial.dtype.name}{list(var.initial.shape)}")
        var.initial = var.initial.reshape(want.shape)
        var.input = b.graph.add_input(b.graph.unique_name(f"state_{var.name}"), want)
        var.current = var.input
    if tuple(var.current.type.shape) != tuple(out.shape):
        raise ModelError(f"it reads variable {var.name} as {list(out.shape)}, but its value is "
                         f"{list(var.current.type.shape)}")
    b.values[op.outputs[0]] = var.current


def assign_variable(b: Builder, op: Operator) -> None:
    """ASSIGN_VARIABLE: later reads, and the next inference, see this value."""
    var = _variable(b, op.inputs[0])
    value = b.value(op.inputs[1])
    if var.current is not None and (var.current.type.shape != value.type.shape
                                    or var.current.type.dtype != value.type.dtype):
        raise ModelError(f"it assigns {value.type} to variable {var.name}, which holds "
                         f"{var.current.type}")
    var.current = value


def call_once(b: Builder, op: Operator) -> None:
    """CALL_ONCE: the initialization subgraph's assignments become the variables' first values."""
    index = int(op.options.InitSubgraphIndex()) if op.options is not None else 0
    if not 1 <= index <= len(b.model.subgraphs):
        raise ModelError(f"it calls subgraph {index}; the file has {len(b.model.subgraphs) + 1}")
    init = b.model.subgraphs[index - 1]
    handles: dict[int, str] = {}
    for inner in init.operators:
        where = f"its initialization (subgraph {index}, {inner.label})"
        if inner.builtin not in _INIT_OPS:
            raise ModelError(f"{where} is not a variable's assignment: Kiln reads initialization "
                             "subgraphs of VAR_HANDLE and ASSIGN_VARIABLE with constant values")
        if inner.builtin == "VAR_HANDLE":
            handles[inner.outputs[0]] = _key(inner)
            continue
        value = _constant(init, inner, where)
        key = handles.get(inner.inputs[0])
        if key is None:
            raise ModelError(f"{where} assigns to a resource no VAR_HANDLE gives")
        b.variables.setdefault(key, Variable(key)).initial = value


def _constant(init: Model, op: Operator, where: str) -> np.ndarray:
    if len(op.inputs) < 2 or not 0 <= op.inputs[1] < len(init.tensors):
        raise ModelError(f"{where} has no value to assign")
    t = init.tensors[op.inputs[1]]
    if t.data is None:
        raise ModelError(f"{where} assigns {t.name}, which is computed: Kiln reads initial "
                         "values given as constants")
    return np.array(t.data)


def tensor_state(b: Builder, index: int, what: str) -> Value:
    """A variable tensor's value as the inference starts: a state input, from TFLite Micro's reset.

    TFLite Micro keeps variable tensors (an LSTM's hidden and cell state) from one inference to
    the next and resets them to 0 (int8: the zero point) when the interpreter starts.
    """
    t = b.tensor(index)
    if not t.variable:
        raise ModelError(f"its {what} {t.name} is not a variable tensor, as TFLite Micro "
                         "requires of state it keeps between inferences")
    key = f"tensor {index}"
    var = b.variables.get(key)
    if var is None:
        zero = int(t.zero_point[0]) if t.dtype == "int8" and t.quantized else 0
        want = tensor_type(t)
        var = b.variables[key] = Variable(t.name, np.full(want.shape, zero, want.dtype))
        var.input = b.graph.add_input(b.graph.unique_name(f"state_{t.name}"), want)
        var.current = var.input
    return var.current


def set_tensor_state(b: Builder, index: int, value: Value) -> None:
    """What a variable tensor holds when the inference ends (the next one starts from it)."""
    var = b.variables[f"tensor {index}"]
    if tuple(value.type.shape) != tuple(var.input.type.shape):
        value = b.add("Reshape", [value, b.constant("shape", np.array(var.input.type.shape))])
    var.current = value


def finish(b: Builder) -> None:
    """Declare each variable the model reads, its last assigned value a graph output."""
    for var in b.variables.values():
        if var.input is None:
            continue  # never read: nothing of it reaches an output
        output = None
        if var.current is not var.input:
            value = var.current
            if isinstance(value, (Constant, Placeholder)) or value in b.graph.outputs:
                value = b.add("Identity", [value])  # a value of its own to write back
            b.graph.outputs.append(value)
            output = value.name
        state.declare(b.graph, var.name, var.input.name, output, var.initial)


VARIABLES = {"VAR_HANDLE": var_handle, "READ_VARIABLE": read_variable,
             "ASSIGN_VARIABLE": assign_variable, "CALL_ONCE": call_once}
