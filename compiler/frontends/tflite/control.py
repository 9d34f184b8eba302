"""IF and WHILE: control flow between subgraphs, made static for an ahead-of-time plan.

Kiln plans one static schedule and arena, so a subgraph is inlined where it is called: its
operators become nodes of the graph, its inputs the caller's values. IF computes both branches
and selects each output with Where on the condition (TFLite Micro runs only the taken one: the
outputs are the same, the cost is both branches'); a condition known when the model is read
inlines only its branch. WHILE is unrolled: the condition subgraph is inlined on the loop's
values and must be known when the model is read (a loop counted by constants, the common case
of converted `for` loops); a loop whose number of runs depends on the input has no static
schedule and is refused, naming the condition. A branch or loop body that keeps state between
inferences (assigns a variable, holds an LSTM's or SVDF's state) is refused: computing it
unconditionally would change what the next inference sees.
"""

from __future__ import annotations

import numpy as np

from compiler.errors import ModelError
from compiler.frontends.tflite.builder import Builder
from compiler.frontends.tflite.checks import check_operator, check_version
from compiler.frontends.tflite.flatbuffer import Operator
from compiler.ir.graph import Value

MAX_UNROLLED = 1024  # loop runs a WHILE may be unrolled into
_STATEFUL = ("ASSIGN_VARIABLE", "UNIDIRECTIONAL_SEQUENCE_LSTM", "SVDF", "CALL_ONCE")


def _subgraph(b: Builder, index: int, what: str):
    if not 1 <= index <= len(b.model.subgraphs):
        raise ModelError(f"its {what} is subgraph {index}; the file has "
                         f"{len(b.model.subgraphs) + 1}")
    return b.model.subgraphs[index - 1]


def inline(b: Builder, index: int, args: list[Value], what: str) -> list[Value]:
    """The outputs of subgraph `index` run on `args`, its operators added to b's graph."""
    model = _subgraph(b, index, what)
    if len(model.inputs) != len(args):
        raise ModelError(f"its {what} (subgraph {index}) takes {len(model.inputs)} inputs, "
                         f"given {len(args)}")
    sub = Builder(model, b.graph)
    sub.known, sub.sources, sub.convert = b.known, b.sources, b.convert
    for tensor, value in zip(model.inputs, args):
        t = model.tensors[tensor]
        size = int(np.prod(t.shape, dtype=np.int64))
        if size != value.type.numel or t.dtype != value.type.dtype:
            raise ModelError(f"its {what} (subgraph {index}) takes {t.name} as "
                             f"{t.dtype}{list(t.shape)}, given {value.type}")
        if tuple(t.shape) != tuple(value.type.shape):  # a scalar given as [1], say
            value = b.add("Reshape", [value, b.constant("shape", np.array(t.shape, np.int64))])
        sub.values[tensor] = value
    for op in model.operators:
        if op.builtin in _STATEFUL:
            raise ModelError(f"its {what} (subgraph {index}) holds {op.label}, which keeps state "
                             "between inferences: Kiln computes subgraphs unconditionally")
        sub.op = op
        try:
            check_version(op)
            check_operator(model, op)
            b.convert(sub, op)
        except ModelError as exc:
            raise ModelError(f"in its {what} (subgraph {index}), {op.label}: {exc.reason}"
                             ) from None
    missing = [model.tensors[i].name for i in model.outputs if i not in sub.values]
    if missing:
        raise ModelError(f"its {what} (subgraph {index}) produces no {missing[0]}")
    return [sub.values[i] for i in model.outputs]


def _bind(b: Builder, op: Operator, values: list[Value]) -> None:
    if len(values) != len(op.outputs):
        raise ModelError(f"it has {len(op.outputs)} outputs but its subgraphs give "
                         f"{len(values)}")
    for index, value in zip(op.outputs, values):
        want = b.tensor(index)
        if tuple(want.shape) != tuple(value.type.shape) or want.dtype != value.type.dtype:
            raise ModelError(f"its output {want.name} is {want.dtype}{list(want.shape)} but "
                             f"the subgraph gives {value.type}")
        b.values[index] = value


def _known_truth(b: Builder, value: Value) -> bool | None:
    data = b.known.get(id(value))
    if data is None:
        return None
    if data.size != 1:
        raise ModelError(f"its condition {value.name} holds {data.size} values, not one")
    return bool(data.reshape(-1)[0])


def if_(b: Builder, op: Operator) -> None:
    """IF(condition, inputs...): both branches, each output selected by the condition."""
    o = op.options
    then_index = int(o.ThenSubgraphIndex()) if o is not None else 0
    else_index = int(o.ElseSubgraphIndex()) if o is not None else 0
    condition = b.value(op.inputs[0])
    if condition.type.dtype != "bool" or condition.type.numel != 1:
        raise ModelError(f"its condition {condition.name} is {condition.type}, not one bool")
    args = [b.value(i) for i in op.inputs[1:]]
    known = _known_truth(b, condition)
    if known is not None:
        _bind(b, op, inline(b, then_index if known else else_index, args,
                            "then branch" if known else "else branch"))
        return
    taken = inline(b, then_index, args, "then branch")
    other = inline(b, else_index, args, "else branch")
    if len(taken) != len(other):
        raise ModelError(f"its branches give {len(taken)} and {len(other)} outputs")
    for t, e in zip(taken, other):
        if t.type != e.type:
            raise ModelError(f"its branches give {t.type} and {e.type} for one output")
    flag = b.add("Reshape", [condition, b.constant("shape", np.array([], np.int64))])
    _bind(b, op, [b.add("Where", [flag, t, e]) for t, e in zip(taken, other)])


def while_(b: Builder, op: Operator) -> None:
    """WHILE(values...): the body inlined as many times as the condition, known, allows."""
    o = op.options
    cond_index = int(o.CondSubgraphIndex()) if o is not None else 0
    body_index = int(o.BodySubgraphIndex()) if o is not None else 0
    values = [b.value(i) for i in op.inputs]
    for _ in range(MAX_UNROLLED + 1):
        results = inline(b, cond_index, values, "condition")
        if len(results) != 1:
            raise ModelError(f"its condition subgraph gives {len(results)} outputs, not one")
        condition = results[0]
        truth = _known_truth(b, condition)
        if truth is None:
            raise ModelError(f"its condition {condition.name} depends on the model's input: a "
                             "loop must run a number of times known when the model is read to "
                             "have a static schedule")
        if not truth:
            _bind(b, op, values)
            return
        values = inline(b, body_index, values, "body")
    raise ModelError(f"its loop runs more than {MAX_UNROLLED} times; Kiln unrolls at most "
                     f"{MAX_UNROLLED}")


CONTROL = {"IF": if_, "WHILE": while_}
