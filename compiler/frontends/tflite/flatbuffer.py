"""Read a .tflite flatbuffer into plain, checked records: tensors, operators, inputs, outputs.

The `tflite` package parses lazily and trusts the file: an offset out of range surfaces as an
IndexError or struct.error deep in a read. Everything is therefore read once, here, with every
index and size checked, so the loader works on records that are known to be consistent.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import tflite
from tflite.utils import BUILTIN_OPCODE2NAME

from compiler.errors import ModelError
from compiler.limits import check_tensor_bytes
from compiler.qmath.scales import SCALE_RULE, bad_scales

IDENTIFIER = b"TFL3"

# TensorType enum of schema.fbs -> numpy dtype name (None: Kiln cannot hold it).
_DTYPES = {0: "float32", 1: "float16", 2: "int32", 3: "uint8", 4: "int64", 5: None, 6: "bool",
           7: "int16", 8: None, 9: "int8", 10: "float64", 15: "uint32", 16: "uint16"}
_TYPE_NAMES = {5: "STRING", 8: "COMPLEX64", 11: "COMPLEX128", 12: "UINT64", 13: "RESOURCE",
               14: "VARIANT", 17: "INT4"}
RESOURCE = 13  # a resource variable's handle: no data of its own (VAR_HANDLE's output)


@dataclass
class Tensor:
    """One tensor: shape, element type, constant data (None for activations), quantization."""

    index: int
    name: str
    shape: tuple[int, ...]
    dtype: str
    data: np.ndarray | None = None
    scale: np.ndarray | None = None
    zero_point: np.ndarray | None = None
    axis: int = 0
    variable: bool = False  # kept by the runtime between inferences (an LSTM's state)

    @property
    def quantized(self) -> bool:
        """Whether the tensor carries a scale (8-bit activations and weights, int32 biases)."""
        return self.scale is not None


@dataclass
class Operator:
    """One operator: its builtin name, tensor indices (-1: an omitted input) and options."""

    index: int
    builtin: str
    inputs: list[int]
    outputs: list[int]
    options: object | None = None
    version: int = 1  # the operator code's version (what the builtin's kernel must support)

    @property
    def label(self) -> str:
        """How messages name it: `CONV_2D #3`."""
        return f"{self.builtin} #{self.index}"

    def option_values(self) -> dict[str, object]:
        """The builtin options as the file holds them (enums by name), for display."""
        if self.options is None:
            return {}
        values = {}
        for name in sorted(dir(self.options)):
            if not name[:1].isupper() or name in _NOT_OPTIONS or name.endswith(("AsNumpy",
                                                                                  "Length",
                                                                                  "IsNone")):
                continue
            try:
                value = getattr(self.options, name)()
            except TypeError:
                continue  # a vector element getter: it takes an index
            if isinstance(value, (int, float)):
                values[name] = _ENUMS.get(name, {}).get(int(value), value) if name in _ENUMS \
                    else value
        return values


@dataclass
class Model:
    """The main subgraph of a .tflite file, read and checked, with the others it may call."""

    tensors: list[Tensor]
    operators: list[Operator]
    inputs: list[int]
    outputs: list[int]
    description: str = ""
    version: int = 0
    unsupported: list[str] = field(default_factory=list)
    # Subgraphs 1, 2, ... (a CALL_ONCE's initialization, IF's branches), each read the same way.
    subgraphs: list[Model] = field(default_factory=list)


_NOT_OPTIONS = {"Init", "GetRootAs"}
_ENUMS = {"Padding": {0: "SAME", 1: "VALID"},
          "FusedActivationFunction": {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6",
                                      4: "TANH", 5: "SIGN_BIT"}}


def read_model(data: bytes) -> Model:
    """Parse and check `data`; a ModelError (without the file, the caller adds it) otherwise."""
    if not data:
        raise ModelError("the file is empty, not a TFLite model")
    if len(data) < 8 or data[4:8] != IDENTIFIER:
        raise ModelError("not a TFLite model (the flatbuffer identifier TFL3 is missing; the "
                         "file may be truncated or of another format)")
    model = tflite.Model.GetRootAs(data, 0)
    if model.SubgraphsLength() < 1:
        raise ModelError("the TFLite model has 0 subgraphs; it needs one to run")
    limit = len(data) // 4  # a table vector holds 4-byte offsets: more cannot fit in the file
    codes = [(_opcode_name(model.OperatorCodes(i)), int(model.OperatorCodes(i).Version()))
             for i in range(_count(model.OperatorCodesLength(), "operator codes", limit))]
    buffers = [model.Buffers(i) for i in range(_count(model.BuffersLength(), "buffers", limit))]
    graphs = [_subgraph(model.Subgraphs(i), i, codes, buffers, limit)
              for i in range(_count(model.SubgraphsLength(), "subgraphs", limit))]
    main = graphs[0]
    if not main.outputs:
        raise ModelError("the subgraph has no outputs")
    main.description = (model.Description() or b"").decode("utf-8", "replace")
    main.version = int(model.Version())
    main.subgraphs = graphs[1:]
    return main


def _subgraph(graph, number: int, codes, buffers, limit: int) -> Model:
    """Subgraph `number` as a Model of its own (messages name it when it is not the main one)."""
    try:
        tensors = [_tensor(graph.Tensors(i), i, buffers)
                   for i in range(_count(graph.TensorsLength(), "tensors", limit))]
        operators = [_operator(graph.Operators(i), i, codes, len(tensors))
                     for i in range(_count(graph.OperatorsLength(), "operators", limit))]
        inputs = [_index(int(i), len(tensors), "graph input")
                  for i in _ints(graph.InputsAsNumpy())]
        outputs = [_index(int(i), len(tensors), "graph output")
                   for i in _ints(graph.OutputsAsNumpy())]
    except ModelError as exc:
        if number == 0:
            raise
        raise ModelError(f"subgraph {number}: {exc.reason}") from None
    return Model(tensors, operators, inputs, outputs)


def _count(n: int, what: str, limit: int) -> int:
    """A vector's length, refused when the file is too short to hold it (a corrupt length)."""
    if not 0 <= n <= limit:
        raise ModelError(f"the file claims {n} {what}, more than its size can hold")
    return n


def _opcode_name(code) -> str:
    """The builtin's name; newer builtins sit in builtin_code, older ones in the deprecated byte."""
    number = max(int(code.BuiltinCode()), int(code.DeprecatedBuiltinCode()))
    name = BUILTIN_OPCODE2NAME.get(number, f"BUILTIN_{number}")
    if name == "CUSTOM":
        custom = (code.CustomCode() or b"?").decode("utf-8", "replace")
        return f"CUSTOM({custom})"
    return name


def _ints(array) -> np.ndarray:
    """A flatbuffer int vector (the package returns 0 for an absent one)."""
    return np.asarray(array if not isinstance(array, int) else [], np.int64).reshape(-1)


def _index(i: int, count: int, what: str, optional: bool = False) -> int:
    if optional and i == -1:
        return -1
    if not 0 <= i < count:
        raise ModelError(f"{what} refers to tensor {i}; the subgraph has {count} tensors")
    return i


def _tensor(t, index: int, buffers) -> Tensor:
    # Converters name a tensor after every op fused into it, joined by ';': the last is enough.
    name = (t.Name() or b"").decode("utf-8", "replace").split(";")[-1] or f"tensor_{index}"
    where = f"tensor {index} ({name})"
    type_code = int(t.Type())
    if type_code == RESOURCE:
        return Tensor(index, name, (), "resource")
    dtype = _DTYPES.get(type_code)
    if dtype is None:
        kind = _TYPE_NAMES.get(type_code, f"type {type_code}")
        raise ModelError(f"{where} is of element type {kind}, which Kiln does not support")
    shape = tuple(int(d) for d in _ints(t.ShapeAsNumpy()))
    if any(d < 0 for d in shape):
        raise ModelError(f"{where} has a dimension {min(shape)}; Kiln needs static shapes")
    count = 1
    for d in shape:
        count *= d
    check_tensor_bytes(count * np.dtype(dtype).itemsize, where)
    data = _buffer_data(t, buffers, shape, dtype, where)
    tensor = Tensor(index, name, shape, dtype, data, variable=bool(t.IsVariable()))
    q = t.Quantization()
    if q is not None and q.ScaleLength():
        scale = np.asarray(q.ScaleAsNumpy(), np.float32).reshape(-1)
        if scale.size:
            zp = _ints(q.ZeroPointAsNumpy()) if q.ZeroPointLength() else np.zeros(scale.size)
            if zp.size not in (1, scale.size):
                raise ModelError(f"{where} has {scale.size} scales and {zp.size} zero points")
            tensor.scale = scale
            tensor.zero_point = np.broadcast_to(zp, scale.shape).astype(np.int64)
            _check_params(tensor, where)
            tensor.axis = int(q.QuantizedDimension())
            if scale.size > 1 and not 0 <= tensor.axis < max(len(shape), 1):
                raise ModelError(f"{where} is quantized along axis {tensor.axis} of a rank-"
                                 f"{len(shape)} tensor")
            if scale.size > 1 and shape[tensor.axis] != scale.size:
                raise ModelError(f"{where} has {scale.size} scales for {shape[tensor.axis]} "
                                 f"entries of axis {tensor.axis}")
    return tensor


def _check_params(t: Tensor, where: str) -> None:
    """8-bit quantization: scales as `SCALE_RULE` says, zero points within the type."""
    if t.dtype not in ("int8", "uint8"):
        return
    bad = bad_scales(t.scale)
    if bad:
        raise ModelError(f"{where} has scale {bad[0]}; {SCALE_RULE}")
    low, high = (-128, 127) if t.dtype == "int8" else (0, 255)
    outside = [int(v) for v in t.zero_point if not low <= v <= high]
    if outside:
        raise ModelError(f"{where} has zero point {outside[0]}, outside {t.dtype}'s "
                         f"[{low}, {high}]")


def _buffer_data(t, buffers, shape, dtype: str, where: str) -> np.ndarray | None:
    index = int(t.Buffer())
    if index == 0:
        return None  # buffer 0 is the empty sentinel: an activation
    if not 0 <= index < len(buffers):
        raise ModelError(f"{where} refers to buffer {index}; the file has {len(buffers)}")
    buffer = buffers[index]
    if buffer.Offset() > 1:
        raise ModelError(f"{where} keeps its data outside the flatbuffer (a model over 2 GB), "
                         "which Kiln does not read")
    raw = buffer.DataAsNumpy()
    if isinstance(raw, int) or raw.size == 0:
        return None  # an empty buffer: an activation, as TFLite treats it
    count = int(np.prod(shape, dtype=np.int64))
    need = count * np.dtype(dtype).itemsize
    if raw.size != need:
        raise ModelError(f"{where} needs {need} bytes of data; its buffer {index} holds "
                         f"{raw.size}")
    return np.frombuffer(raw.tobytes(), dtype=np.dtype(dtype).newbyteorder("<")).astype(
        dtype).reshape(shape)


# Builtin -> the options table the loader reads (everything else needs none).
_OPTIONS = {
    "CONV_2D": tflite.Conv2DOptions, "DEPTHWISE_CONV_2D": tflite.DepthwiseConv2DOptions,
    "FULLY_CONNECTED": tflite.FullyConnectedOptions, "AVERAGE_POOL_2D": tflite.Pool2DOptions,
    "MAX_POOL_2D": tflite.Pool2DOptions, "ADD": tflite.AddOptions, "SUB": tflite.SubOptions,
    "MUL": tflite.MulOptions, "SOFTMAX": tflite.SoftmaxOptions,
    "RESHAPE": tflite.ReshapeOptions,
    "MEAN": tflite.ReducerOptions, "LEAKY_RELU": tflite.LeakyReluOptions,
    "SQUEEZE": tflite.SqueezeOptions, "STRIDED_SLICE": tflite.StridedSliceOptions,
    "PACK": tflite.PackOptions, "CONCATENATION": tflite.ConcatenationOptions,
    "SPLIT": tflite.SplitOptions, "SPLIT_V": tflite.SplitVOptions,
    "UNPACK": tflite.UnpackOptions, "GATHER": tflite.GatherOptions,
    "DEPTH_TO_SPACE": tflite.DepthToSpaceOptions, "SPACE_TO_DEPTH": tflite.SpaceToDepthOptions,
    "MIRROR_PAD": tflite.MirrorPadOptions,
    "RESIZE_NEAREST_NEIGHBOR": tflite.ResizeNearestNeighborOptions,
    "REDUCE_MAX": tflite.ReducerOptions, "REDUCE_MIN": tflite.ReducerOptions,
    "SUM": tflite.ReducerOptions, "DIV": tflite.DivOptions,
    "L2_NORMALIZATION": tflite.L2NormOptions, "L2_POOL_2D": tflite.Pool2DOptions,
    "CUMSUM": tflite.CumsumOptions, "TRANSPOSE_CONV": tflite.TransposeConvOptions,
    "RESIZE_BILINEAR": tflite.ResizeBilinearOptions, "BATCH_MATMUL": tflite.BatchMatMulOptions,
    "REDUCE_ALL": tflite.ReducerOptions,
    "UNIDIRECTIONAL_SEQUENCE_LSTM": tflite.UnidirectionalSequenceLSTMOptions,
    "VAR_HANDLE": tflite.VarHandleOptions, "CALL_ONCE": tflite.CallOnceOptions,
    "SVDF": tflite.SVDFOptions, "IF": tflite.IfOptions, "WHILE": tflite.WhileOptions,
}


def _operator(op, index: int, codes: list[tuple[str, int]], tensor_count: int) -> Operator:
    code = int(op.OpcodeIndex())
    if not 0 <= code < len(codes):
        raise ModelError(f"operator {index} uses opcode {code}; the file declares {len(codes)}")
    builtin, version = codes[code]
    where = f"{builtin} #{index}"
    inputs = [_index(int(i), tensor_count, f"{where}'s input", optional=True)
              for i in _ints(op.InputsAsNumpy())]
    outputs = [_index(int(i), tensor_count, f"{where}'s output")
               for i in _ints(op.OutputsAsNumpy())]
    options = None
    table = op.BuiltinOptions()
    kind = _OPTIONS.get(builtin)
    if table is not None and kind is not None:
        options = kind()
        options.Init(table.Bytes, table.Pos)
    return Operator(index, builtin, inputs, outputs, options, version)
