"""A node against its operator's schema at the model's opset, as onnxruntime checks it.

Kiln's operators accept the union of every opset (their canonical form), so what a particular
opset forbids is checked here, on the file's node: an attribute the opset does not define yet
(QuantizeLinear's block_size before opset 21), a required input left out (QLinearConv's
x_zero_point), inputs bound to one type variable with different element types, and a type
declared in the file (graph output or value_info) that differs from what the node computes.
onnxruntime refuses all of these before running anything; a model that Kiln ran anyway would
compute something else than the file says.
"""

from __future__ import annotations

import functools

import onnx

from compiler.errors import ModelError
from compiler.frontends.onnx.tensors import elem_type_name
from compiler.ir.graph import Value
from compiler.ir.types import DTYPE_OF_ONNX

# onnxruntime's com.microsoft schemas of the contrib operators Kiln reads: their inputs in
# order, "?" marking an optional one and "*" a variadic tail. tests/test_invalid_quantized.py
# checks this table against onnxruntime's own schemas.
CONTRIB_INPUTS: dict[str, tuple[str, ...]] = {
    "QGemm": ("A", "a_scale", "a_zero_point", "B", "b_scale", "b_zero_point", "C?",
              "y_scale?", "y_zero_point?"),
    "QLinearAdd": ("A", "A_scale", "A_zero_point?", "B", "B_scale", "B_zero_point?", "C_scale",
                   "C_zero_point?"),
    "QLinearMul": ("A", "A_scale", "A_zero_point?", "B", "B_scale", "B_zero_point?", "C_scale",
                   "C_zero_point?"),
    "QLinearAveragePool": ("X", "x_scale", "x_zero_point?", "y_scale", "y_zero_point?"),
    "QLinearGlobalAveragePool": ("X", "x_scale", "x_zero_point", "y_scale", "y_zero_point"),
    "QLinearConcat": ("Y_scale", "Y_zero_point", "inputs*"),
    "QLinearLeakyRelu": ("X", "X_scale", "X_zero_point?", "Y_scale", "Y_zero_point?"),
    "QLinearSigmoid": ("X", "X_scale", "X_zero_point?", "Y_scale", "Y_zero_point?"),
    "QLinearSoftmax": ("X", "X_scale", "x_zero_point?", "y_scale", "y_zero_point"),
}

_SINGLE = onnx.defs.OpSchema.FormalParameterOption.Single
_VARIADIC = onnx.defs.OpSchema.FormalParameterOption.Variadic
# A schema's fixed element types ("tensor(float)") by Kiln's dtype names.
_TENSOR_TYPES = {f"tensor({onnx_name})": dtype for onnx_name, dtype in (
    ("float", "float32"), ("double", "float64"), ("float16", "float16"), ("bool", "bool"),
    *((name, name) for name in ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
                                "uint64")))}


@functools.cache
def default_schema(op_type: str, opset: int) -> onnx.defs.OpSchema | None:
    """The schema of a default-domain operator at `opset` (None when the opset lacks it)."""
    try:
        return onnx.defs.get_schema(op_type, opset, "")
    except onnx.defs.SchemaError:
        return None


def _arrival(op_type: str, name: str, opset: int) -> int | None:
    """The first opset after `opset` whose schema of `op_type` has the attribute `name`."""
    for version in range(opset + 1, onnx.defs.onnx_opset_version() + 1):
        schema = default_schema(op_type, version)
        if schema is not None and name in schema.attributes:
            return version
    return None


def check_node(proto: onnx.NodeProto, opset: int) -> None:
    """The node's attributes and required inputs, checked against its schema at `opset`.

    Raises:
        ModelError: naming the attribute or input and the reason (the caller adds the node).
    """
    if proto.domain not in ("", "ai.onnx"):
        _check_inputs(proto, [(name.rstrip("?*"), "?" not in name, name.endswith("*"))
                              for name in CONTRIB_INPUTS.get(proto.op_type, ())])
        return
    schema = default_schema(proto.op_type, opset)
    if schema is None:
        raise ModelError(f"operator {proto.op_type} does not exist at opset {opset}, the "
                         "model's")
    for attr in proto.attribute:
        # Attributes of earlier opsets (legacy hints old exporters leave in) are for the
        # operator's from_onnx hook to translate or refuse; one of a later opset has a meaning
        # the model's opset does not define.
        since = None if attr.name in schema.attributes else _arrival(proto.op_type, attr.name,
                                                                        opset)
        if since is not None:
            raise ModelError(f"attribute {attr.name!r} is not defined for {proto.op_type} at "
                             f"opset {opset}, the model's (it arrived at opset {since})")
    _check_inputs(proto, [(p.name, p.option == _SINGLE, p.option == _VARIADIC)
                          for p in schema.inputs])


def _check_inputs(proto: onnx.NodeProto, formals: list[tuple[str, bool, bool]]) -> None:
    """Every required (not optional, not variadic) formal input names a tensor."""
    for index, (name, required, variadic) in enumerate(formals):
        if variadic:
            return
        if required and (index >= len(proto.input) or not proto.input[index]):
            raise ModelError(f"its required input {index} ({name}) is missing: "
                             f"{proto.op_type} has no default for it")


def check_types(proto: onnx.NodeProto, opset: int, inputs: list[Value | None]) -> None:
    """Inputs bound to one type variable share an element type; fixed types are respected.

    Runs after Kiln's inference, whose messages are more specific where it checks the same.
    """
    schema = default_schema(proto.op_type, opset) if proto.domain in ("", "ai.onnx") else None
    if schema is None or not schema.inputs:
        return
    variables = {c.type_param_str for c in schema.type_constraints}
    bound: dict[str, tuple[str, str]] = {}  # type variable -> (dtype, input name)
    formals = list(schema.inputs)
    for index, value in enumerate(inputs):
        if value is None:
            continue
        formal = formals[min(index, len(formals) - 1)]
        if index >= len(formals) and formal.option != _VARIADIC:
            return  # more inputs than the schema has: the arity check reports it
        dtype, type_str = value.type.dtype, formal.type_str
        if type_str in variables:
            if formal.option == _VARIADIC and not formal.is_homogeneous:
                continue
            first = bound.setdefault(type_str, (dtype, formal.name))
            if first[0] != dtype:
                raise ModelError(f"its inputs {first[1]} ({first[0]}) and {formal.name} "
                                 f"({dtype}) must have one element type: {proto.op_type}'s "
                                 f"schema binds both to {type_str}")
        elif _TENSOR_TYPES.get(type_str, dtype) != dtype:
            raise ModelError(f"its input {formal.name} is {dtype}, but {proto.op_type} at opset "
                             f"{opset} takes {type_str}")


def check_declared(proto: onnx.NodeProto, opset: int, outputs: list[Value],
                   declared: dict[str, int]) -> None:
    """An output the file declares (graph output or value_info) has the type computed for it.

    `declared` maps tensor names to the ONNX element type the file states (0: unstated).
    """
    schema = default_schema(proto.op_type, opset) if proto.domain in ("", "ai.onnx") else None
    for index, value in enumerate(outputs):
        name = proto.output[index] if index < len(proto.output) else ""
        code = declared.get(name, 0) if name else 0
        if not code or DTYPE_OF_ONNX.get(code) == value.type.dtype:
            continue
        reason = f"{proto.op_type} computes {value.type.dtype}"
        tie = _tied_input(schema, proto, index) if schema is not None else None
        if tie is not None:
            reason += f", the type of its input {tie} (the schema binds them together)"
        raise ModelError(f"its output {name!r} is declared {_type_name(code)} in the file, but "
                         f"{reason}")


def _tied_input(schema: onnx.defs.OpSchema, proto: onnx.NodeProto, output: int) -> str | None:
    """The name of the present input sharing the output's type variable, if any."""
    if output >= len(schema.outputs):
        return None
    type_str = schema.outputs[output].type_str
    for index, formal in enumerate(schema.inputs):
        if formal.type_str == type_str and index < len(proto.input) and proto.input[index]:
            return formal.name
    return None


def _type_name(code: int) -> str:
    return DTYPE_OF_ONNX.get(code) or elem_type_name(code)
