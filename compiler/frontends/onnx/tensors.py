"""ONNX tensors to numpy arrays, every size checked before anything is allocated or read.

Shared by the loader (initializers) and the attribute decoder (tensor attributes).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from compiler.errors import ModelError, ShapeError
from compiler.ir.types import DTYPE_OF_ONNX, MAX_ELEMENTS
from compiler.limits import check_tensor_bytes


def elem_type_name(elem_type: int) -> str:
    """The ONNX name of an element type enum (or #N for an unknown one)."""
    try:
        return onnx.TensorProto.DataType.Name(elem_type)
    except ValueError:
        return f"#{elem_type}"


def check_size(shape, what: str) -> None:
    """Refuse a shape over the element limit or, with its element size, over the byte limit."""
    numel = 1
    for d in shape:
        numel *= int(d)
    if numel > MAX_ELEMENTS:
        raise ModelError(f"{what} has {numel} elements, more than the limit of 2**31")


@functools.lru_cache(maxsize=32)
def _numpy_dtype(dtype: str) -> np.dtype:
    return np.dtype(dtype)


@functools.lru_cache(maxsize=32)
def _little_endian(dtype: str) -> np.dtype:
    """ONNX stores raw data little-endian, whatever the machine."""
    return np.dtype(dtype).newbyteorder("<")


def tensor_to_array(tensor: onnx.TensorProto, base_dir: Path | None) -> np.ndarray:
    """Convert a TensorProto to a read-only numpy array, checking size and external data first."""
    name = tensor.name or "<unnamed>"
    if any(d < 0 for d in tensor.dims):
        raise ModelError(f"tensor {name!r} has a negative dimension {list(tensor.dims)}")
    check_size(tensor.dims, f"tensor {name!r}")
    dtype = DTYPE_OF_ONNX.get(tensor.data_type)
    if dtype is None:
        raise ModelError(f"tensor {name!r} has element type {elem_type_name(tensor.data_type)}, "
                         "which Kiln does not support")
    shape = tuple(tensor.dims)
    numel = 1
    for d in shape:  # plain Python: one per initializer, and numpy's prod costs more
        numel *= d
    itemsize = _numpy_dtype(dtype).itemsize
    try:
        check_tensor_bytes(numel * itemsize, f"tensor {name!r}")
    except ShapeError as exc:
        raise ModelError(str(exc)) from None
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        array = _read_external(tensor, base_dir, dtype, numel).reshape(shape)
    elif tensor.HasField("raw_data"):
        expected = numel * itemsize
        raw = tensor.raw_data
        if len(raw) != expected:
            raise ModelError(f"tensor {name!r} holds {len(raw)} bytes of data, its "
                             f"shape {list(shape)} needs {expected}")
        array = np.frombuffer(raw, dtype=_little_endian(dtype)).astype(dtype).reshape(shape)
    else:
        field_len = _typed_field_length(tensor)
        if field_len != numel:
            raise ModelError(f"tensor {name!r} holds {field_len} values, its shape "
                             f"{list(shape)} needs {numel}")
        array = numpy_helper.to_array(tensor)
    array = np.require(array, requirements="C")  # keeps 0-d scalars 0-d
    if array.flags.writeable:
        array = array.view()
        array.flags.writeable = False
    return array


def _typed_field_length(tensor: onnx.TensorProto) -> int:
    for field_name in ("float_data", "int32_data", "int64_data", "double_data", "uint64_data",
                       "string_data"):
        count = len(getattr(tensor, field_name))
        if count:
            return count
    return 0


def _read_external(tensor: onnx.TensorProto, base_dir: Path | None, dtype: str,
                   numel: int) -> np.ndarray:
    """Map external tensor data, only from inside the model's folder, after every size check.

    The declared length, the file's size and the tensor's byte budget are all checked before a
    byte is touched, and the data is memory-mapped, not read: a small model pointing at a huge
    (even sparse) file costs nothing until its values are used.
    """
    name = tensor.name or "<unnamed>"
    if base_dir is None:
        raise ModelError(f"tensor {name!r} stores its data in an external file, which needs the "
                         "model to be loaded from a path")
    info = {entry.key: entry.value for entry in tensor.external_data}
    location = info.get("location", "")
    if not location:
        raise ModelError(f"tensor {name!r} has external data without a location")
    target = (base_dir / location).resolve()
    if os.path.isabs(location) or not target.is_relative_to(base_dir):
        raise ModelError(f"tensor {name!r} refers to external data {location!r} outside the "
                         "model's folder; Kiln refuses to read it")
    if not target.is_file():
        raise ModelError(f"tensor {name!r} refers to external data file {location!r}, which "
                         "does not exist")
    expected = numel * np.dtype(dtype).itemsize
    try:
        offset = int(info.get("offset", 0))
        length = int(info.get("length", expected))
    except ValueError:
        raise ModelError(f"tensor {name!r} has a malformed external data offset or length") \
            from None
    if length != expected or offset < 0 or offset + length > target.stat().st_size:
        raise ModelError(f"tensor {name!r}: external data {location!r} does not hold the "
                         f"{expected} bytes its shape needs at offset {offset}")
    if expected == 0:
        return np.zeros(numel, dtype)
    little = np.dtype(dtype).newbyteorder("<")
    mapped = np.memmap(target, dtype=little, mode="r", offset=offset, shape=(numel,))
    return mapped if little == np.dtype(dtype) else mapped.astype(dtype)
