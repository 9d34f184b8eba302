"""Write small .tflite files in tests, with the flatbuffer builders of the `tflite` package.

A model is a list of tensors (constants carry data) and a list of operators; options are given
as (table name, {field: value}), e.g. ("Conv2DOptions", {"Padding": 0, "StrideW": 2}).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import flatbuffers
import numpy as np
import tflite

TYPES = {"float32": 0, "int32": 2, "uint8": 3, "int64": 4, "bool": 6, "int8": 9, "int16": 7,
         "resource": 13}


@dataclass
class T:
    """A tensor: name, shape, element type; data for constants; quantization when scaled."""

    name: str
    shape: tuple
    dtype: str = "float32"
    data: np.ndarray | None = None
    scale: list | None = None
    zero_point: list | None = None
    axis: int = 0
    variable: bool = False  # a state tensor the runtime keeps between invocations


@dataclass
class Op:
    """An operator: builtin name, tensor indices (-1 for an omitted input), options."""

    builtin: str
    inputs: list
    outputs: list
    options: tuple | None = None


@dataclass
class Model:
    tensors: list
    ops: list
    inputs: list
    outputs: list
    subgraphs: int = 1
    extra_codes: list = field(default_factory=list)
    # Further subgraphs after this one (a CALL_ONCE's initialization, say), each a Model whose
    # own fields other than tensors, ops, inputs and outputs are ignored.
    more: list = field(default_factory=list)
    versions: dict = field(default_factory=dict)  # builtin name -> operator version (1)


def _vector(b, start, values, dtype):
    arr = np.asarray(values, dtype)
    start(b, len(arr))
    for v in reversed(arr.tolist()):
        {"int32": b.PrependInt32, "int64": b.PrependInt64, "float32": b.PrependFloat32,
         "uint8": b.PrependUint8}[dtype](v)
    return b.EndVector()


def _bytes(b, data: bytes):
    """A ubyte vector aligned to 16, as TFLite aligns buffers."""
    b.StartVector(1, len(data), 16)
    b.head = b.head - len(data)
    b.Bytes[b.head:b.head + len(data)] = data
    b.vectorNumElems = len(data)
    return b.EndVector()


def _options(b, options):
    name, fields = options
    start = getattr(tflite, f"{name}Start")
    adders = {k: getattr(tflite, f"{name}Add{k}") for k in fields}
    # Strings (a VAR_HANDLE's shared name) are written before the table that refers to them.
    fields = {k: b.CreateString(v) if isinstance(v, str) else v for k, v in fields.items()}
    start(b)
    for k, v in fields.items():
        adders[k](b, v)
    return getattr(tflite, f"{name}End")(b), getattr(tflite.BuiltinOptions, name)


def write(model: Model) -> bytes:
    """The .tflite bytes of `model`."""
    b = flatbuffers.Builder(1024)
    graphs = [model] * model.subgraphs + list(model.more)
    buffers = [None]
    buffer_of: dict[int, list[int]] = {}  # per distinct subgraph, per tensor
    for graph in graphs:
        if id(graph) in buffer_of:
            continue  # the main subgraph repeated (a malformed file in tests) shares its data
        own = buffer_of[id(graph)] = []
        for t in graph.tensors:
            if t.data is None:
                own.append(0)
            else:
                own.append(len(buffers))
                buffers.append(np.ascontiguousarray(np.asarray(t.data, t.dtype)).tobytes())
    buffer_offsets = []
    for data in buffers:
        vec = _bytes(b, data) if data else None
        tflite.BufferStart(b)
        if vec is not None:
            tflite.BufferAddData(b, vec)
        buffer_offsets.append(tflite.BufferEnd(b))
    names = list(dict.fromkeys([op.builtin for g in graphs for op in g.ops] + model.extra_codes))

    def table_vector(start, offsets):
        start(b, len(offsets))
        for o in reversed(offsets):
            b.PrependUOffsetTRelative(o)
        return b.EndVector()

    subgraphs = []
    for graph in graphs:
        tensor_offsets = [_tensor(b, t, buf) for t, buf in zip(graph.tensors,
                                                                buffer_of[id(graph)])]
        op_offsets = [_operator(b, op, names) for op in graph.ops]
        tensors = table_vector(tflite.SubGraphStartTensorsVector, tensor_offsets)
        ops = table_vector(tflite.SubGraphStartOperatorsVector, op_offsets)
        inputs = _vector(b, tflite.SubGraphStartInputsVector, graph.inputs, "int32")
        outputs = _vector(b, tflite.SubGraphStartOutputsVector, graph.outputs, "int32")
        tflite.SubGraphStart(b)
        tflite.SubGraphAddTensors(b, tensors)
        tflite.SubGraphAddOperators(b, ops)
        tflite.SubGraphAddInputs(b, inputs)
        tflite.SubGraphAddOutputs(b, outputs)
        subgraphs.append(tflite.SubGraphEnd(b))
    code_offsets = []
    for name in names:
        code = getattr(tflite.BuiltinOperator, name)
        tflite.OperatorCodeStart(b)
        tflite.OperatorCodeAddBuiltinCode(b, code)
        tflite.OperatorCodeAddDeprecatedBuiltinCode(b, min(code, 127))
        tflite.OperatorCodeAddVersion(b, model.versions.get(name, 1))
        code_offsets.append(tflite.OperatorCodeEnd(b))
    subgraph_vec = table_vector(tflite.ModelStartSubgraphsVector, subgraphs)
    codes = table_vector(tflite.ModelStartOperatorCodesVector, code_offsets)
    buffer_vec = table_vector(tflite.ModelStartBuffersVector, buffer_offsets)
    description = b.CreateString("written by Kiln's tests")
    tflite.ModelStart(b)
    tflite.ModelAddVersion(b, 3)
    tflite.ModelAddOperatorCodes(b, codes)
    tflite.ModelAddSubgraphs(b, subgraph_vec)
    tflite.ModelAddDescription(b, description)
    tflite.ModelAddBuffers(b, buffer_vec)
    b.Finish(tflite.ModelEnd(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def _tensor(b, t: T, buf: int):
    name = b.CreateString(t.name)
    shape = _vector(b, tflite.TensorStartShapeVector, t.shape, "int32")
    quant = None
    if t.scale is not None:
        scale = _vector(b, tflite.QuantizationParametersStartScaleVector, t.scale, "float32")
        zps = t.zero_point if t.zero_point is not None else [0] * len(t.scale)
        zp = _vector(b, tflite.QuantizationParametersStartZeroPointVector, zps, "int64")
        tflite.QuantizationParametersStart(b)
        tflite.QuantizationParametersAddScale(b, scale)
        tflite.QuantizationParametersAddZeroPoint(b, zp)
        tflite.QuantizationParametersAddQuantizedDimension(b, t.axis)
        quant = tflite.QuantizationParametersEnd(b)
    tflite.TensorStart(b)
    tflite.TensorAddShape(b, shape)
    tflite.TensorAddType(b, TYPES[t.dtype])
    tflite.TensorAddBuffer(b, buf)
    tflite.TensorAddName(b, name)
    if quant is not None:
        tflite.TensorAddQuantization(b, quant)
    if t.variable:
        tflite.TensorAddIsVariable(b, True)
    return tflite.TensorEnd(b)


def _operator(b, op: Op, names: list[str]):
    ins = _vector(b, tflite.OperatorStartInputsVector, op.inputs, "int32")
    outs = _vector(b, tflite.OperatorStartOutputsVector, op.outputs, "int32")
    opts = _options(b, op.options) if op.options else None
    tflite.OperatorStart(b)
    tflite.OperatorAddOpcodeIndex(b, names.index(op.builtin))
    tflite.OperatorAddInputs(b, ins)
    tflite.OperatorAddOutputs(b, outs)
    if opts is not None:
        tflite.OperatorAddBuiltinOptionsType(b, opts[1])
        tflite.OperatorAddBuiltinOptions(b, opts[0])
    return tflite.OperatorEnd(b)
